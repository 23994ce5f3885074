/* .npz archives: NumPy's savez writes a zip of .npy entries (stored, or deflated by
 * savez_compressed), each with zip64 fields (numpy forces them). The whole file is read, the
 * central directory walked from the end-of-directory record, and each entry's bytes handed to
 * the .npy parser; deflated entries go through zlib. Every offset and size is checked against the
 * file before it is used, so a corrupt archive is an error, never a read out of bounds. */
#include "api/api.h"
#include "core/core.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static uint32_t le16(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

static uint32_t le32(const unsigned char *p) {
    return le16(p) | le16(p + 2) << 16;
}

static uint64_t le64(const unsigned char *p) {
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static anvil_status bad(const char *path, const char *what) {
    return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                    "'%s': not a readable .npz archive: %s; write it again with numpy.savez", path,
                    what);
}

void npz_free(char **names, anvil_tensor **arrays, size_t count) {
    for (size_t i = 0; i < count; i++) {
        if (names) free(names[i]);
        if (arrays) anvil_tensor_free(arrays[i]);
    }
    free(names);
    free(arrays);
}

/* One entry's .npy bytes: the stored ones in place, or inflated into *owned. */
static anvil_status entry_data(const char *path, const unsigned char *z, size_t size, int method,
                               uint64_t local, uint64_t csize, uint64_t usize,
                               const unsigned char **data, unsigned char **owned) {
    *owned = NULL;
    if (local > size || size - local < 30 || le32(z + local) != 0x04034b50)
        return bad(path, "an entry's local header is missing");
    const uint64_t start = local + 30 + le16(z + local + 26) + le16(z + local + 28);
    if (start > size || csize > size - start) return bad(path, "an entry runs past the file");
    if (method == 0) {
        if (csize != usize) return bad(path, "a stored entry's sizes disagree");
        *data = z + start;
        return ANVIL_OK;
    }
    if (method != 8) return bad(path, "an entry uses a compression other than deflate");
    /* deflate expands at most 1032 times: a larger claim is a lie that would allocate it */
    if (usize / 1032 > csize) return bad(path, "an entry claims more than its deflated bytes hold");
    unsigned char *out = malloc(usize ? (size_t)usize : 1);
    if (!out) return ANVIL_ERR_OUT_OF_MEMORY;
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) {
        free(out);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    uint64_t in_done = 0, out_done = 0;
    int rc = Z_OK;
    while (rc == Z_OK) {
        const uint64_t in_left = csize - in_done, out_left = usize - out_done;
        zs.next_in = (unsigned char *)z + start + in_done;
        zs.avail_in = (uInt)(in_left > 1u << 30 ? 1u << 30 : in_left);
        zs.next_out = out + out_done;
        zs.avail_out = (uInt)(out_left > 1u << 30 ? 1u << 30 : out_left);
        const uInt ai = zs.avail_in, ao = zs.avail_out;
        rc = inflate(&zs, Z_NO_FLUSH);
        in_done += ai - zs.avail_in;
        out_done += ao - zs.avail_out;
        if (rc == Z_OK && ai == zs.avail_in && ao == zs.avail_out) rc = Z_DATA_ERROR;
    }
    inflateEnd(&zs);
    if (rc != Z_STREAM_END || out_done != usize) {
        free(out);
        return bad(path, "a deflated entry does not inflate to its size");
    }
    *data = out;
    *owned = out;
    return ANVIL_OK;
}

static anvil_status read_all(const char *path, unsigned char **buf, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return core_err(ANVIL_ERR_IO, "cannot open '%s': %s; check the path", path,
                        strerror(errno));
    anvil_status st = ANVIL_OK;
    long len = -1;
    if (fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0)
        st = core_err(ANVIL_ERR_IO, "'%s': cannot tell its size", path);
    *buf = st == ANVIL_OK ? malloc((size_t)len + 1) : NULL;
    if (st == ANVIL_OK && !*buf) st = ANVIL_ERR_OUT_OF_MEMORY;
    if (st == ANVIL_OK && fread(*buf, 1, (size_t)len, f) != (size_t)len)
        st = core_err(ANVIL_ERR_IO, "'%s': read error", path);
    fclose(f);
    if (st != ANVIL_OK) {
        free(*buf);
        *buf = NULL;
    }
    *n = (size_t)(len > 0 ? len : 0);
    return st;
}

anvil_status npz_read_mem(const void *buf, size_t size, const char *path, char ***names_out,
                          anvil_tensor ***arrays_out, size_t *count) {
    *names_out = NULL;
    *arrays_out = NULL;
    *count = 0;
    const unsigned char *z = buf;
    /* the end-of-central-directory record: within the last 64 KiB + 22 bytes */
    int64_t eocd = -1;
    for (int64_t at = (int64_t)size - 22; at >= 0 && at >= (int64_t)size - 22 - 65535; at--)
        if (le32(z + at) == 0x06054b50) {
            eocd = at;
            break;
        }
    anvil_status st = eocd < 0 ? bad(path, "no end-of-directory record") : ANVIL_OK;
    uint64_t entries = 0, dir = 0;
    if (st == ANVIL_OK) {
        entries = le16(z + eocd + 10);
        dir = le32(z + eocd + 16);
        /* zip64: the locator right before points at the zip64 record */
        if ((entries == 0xffff || dir == 0xffffffffu) && eocd >= 20 &&
            le32(z + eocd - 20) == 0x07064b50) {
            const uint64_t rec = le64(z + eocd - 12);
            if (rec > size || size - rec < 56 || le32(z + rec) != 0x06064b50)
                st = bad(path, "a broken zip64 directory record");
            else {
                entries = le64(z + rec + 32);
                dir = le64(z + rec + 48);
            }
        }
    }
    if (st == ANVIL_OK && (dir > size || entries > size / 46))
        st = bad(path, "the directory lies outside the file");
    char **names = st == ANVIL_OK ? core_calloc((size_t)entries + 1, sizeof *names) : NULL;
    anvil_tensor **arrays =
        st == ANVIL_OK ? core_calloc((size_t)entries + 1, sizeof *arrays) : NULL;
    if (st == ANVIL_OK && (!names || !arrays)) st = ANVIL_ERR_OUT_OF_MEMORY;
    size_t n = 0;
    uint64_t at = dir;
    /* What all entries may hold together: entries that do not overlap hold at most 1032 times
     * the file (deflate's largest ratio). Entries sharing their bytes could otherwise make a
     * small file allocate without bound. */
    uint64_t budget = size > UINT64_MAX / 1032 ? UINT64_MAX : (uint64_t)size * 1032;
    for (uint64_t e = 0; st == ANVIL_OK && e < entries; e++) {
        if (at > size || size - at < 46 || le32(z + at) != 0x02014b50) {
            st = bad(path, "a directory entry is broken");
            break;
        }
        const unsigned char *h = z + at;
        const int method = (int)le16(h + 10);
        uint64_t csize = le32(h + 20), usize = le32(h + 24), local = le32(h + 42);
        const size_t name_len = le16(h + 28), extra_len = le16(h + 30), comment_len = le16(h + 32);
        if (46 + name_len + extra_len + comment_len > size - at) {
            st = bad(path, "a directory entry runs past the file");
            break;
        }
        /* zip64 extra field: the 64-bit sizes and offset, those that are all ones above */
        const unsigned char *x = h + 46 + name_len, *xe = x + extra_len;
        while (x + 4 <= xe) {
            const size_t id = le16(x), len = le16(x + 2);
            const unsigned char *f = x + 4;
            if (f + len > xe) break;
            if (id == 1) {
                const unsigned char *fe = f + len;
                if (usize == 0xffffffffu && f + 8 <= fe) usize = le64(f), f += 8;
                if (csize == 0xffffffffu && f + 8 <= fe) csize = le64(f), f += 8;
                if (local == 0xffffffffu && f + 8 <= fe) local = le64(f);
            }
            x = f + len;
        }
        char name[512];
        const size_t nl = name_len < sizeof name - 1 ? name_len : sizeof name - 1;
        memcpy(name, h + 46, nl);
        name[nl] = '\0';
        if (nl > 4 && !strcmp(name + nl - 4, ".npy")) name[nl - 4] = '\0';
        if (usize > budget) {
            st = bad(path, "its entries claim more than the archive can hold (they overlap)");
            break;
        }
        budget -= usize;
        const unsigned char *data = NULL;
        unsigned char *owned = NULL;
        st = entry_data(path, z, size, method, local, csize, usize, &data, &owned);
        if (st == ANVIL_OK) {
            char what[700];
            snprintf(what, sizeof what, "%s:%s", path, name);
            st = npy_read_mem(data, (size_t)usize, what, &arrays[n]);
        }
        free(owned);
        if (st == ANVIL_OK && !(names[n++] = core_strdup(name))) st = ANVIL_ERR_OUT_OF_MEMORY;
        at += 46 + name_len + extra_len + comment_len;
    }
    if (st != ANVIL_OK) {
        npz_free(names, arrays, n + 1);
        return st;
    }
    *names_out = names;
    *arrays_out = arrays;
    *count = n;
    return ANVIL_OK;
}

anvil_status npz_read(const char *path, char ***names_out, anvil_tensor ***arrays_out,
                      size_t *count) {
    *names_out = NULL;
    *arrays_out = NULL;
    *count = 0;
    unsigned char *z = NULL;
    size_t size = 0;
    CORE_TRY(read_all(path, &z, &size));
    anvil_status st = npz_read_mem(z, size, path, names_out, arrays_out, count);
    free(z);
    return st;
}
