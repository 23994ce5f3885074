/* NumPy .npy files: the CLI's and the tests' way to hand tensors in and out.
 *
 * The format is a 6-byte magic, a version, a little-endian header length and a header that is a
 * Python dict literal such as {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 * followed by the raw C-order data. The header comes from an untrusted file, so it is parsed by a
 * small hand-written scanner that accepts exactly that dict grammar (no eval-like generality),
 * bounds the header length before reading it, and checks the data length against the file size
 * before allocating, so a corrupt file can never make us allocate more than the file holds. */
#include "api/api.h"
#include "core/core.h"
#include "onnx/onnx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "npy.c reads and writes little-endian data in place; add byte swapping for this host"
#endif

static const char npy_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

/* numpy itself refuses headers above 10000 bytes by default; version 2/3 files may be larger in
 * principle, but no shape of rank <= ANVIL_MAX_RANK needs more than a few hundred bytes, so a
 * generous fixed cap keeps a hostile length field from forcing a large allocation. */
#define NPY_MAX_HEADER 65536u

/* Header alignment numpy uses since 1.x so that the data starts on a 64-byte boundary. */
#define NPY_ALIGN 64u

typedef struct npy_descr {
    const char *code; /* the part after the byte-order character */
    anvil_dtype dtype;
} npy_descr;

/* Type codes numpy writes for the dtypes anvil holds. bfloat16 has no native numpy code. */
static const npy_descr npy_descrs[] = {
    {"f4", ANVIL_DTYPE_FLOAT32}, {"f8", ANVIL_DTYPE_FLOAT64}, {"f2", ANVIL_DTYPE_FLOAT16},
    {"i1", ANVIL_DTYPE_INT8},    {"u1", ANVIL_DTYPE_UINT8},   {"i2", ANVIL_DTYPE_INT16},
    {"u2", ANVIL_DTYPE_UINT16},  {"i4", ANVIL_DTYPE_INT32},   {"u4", ANVIL_DTYPE_UINT32},
    {"i8", ANVIL_DTYPE_INT64},   {"u8", ANVIL_DTYPE_UINT64},  {"b1", ANVIL_DTYPE_BOOL},
};

/* ---- header scanner ------------------------------------------------------------------------ */

typedef struct npy_scan {
    const char *path; /* for messages */
    const char *p, *end;
} npy_scan;

typedef struct npy_header {
    anvil_dtype dtype;
    int rank;
    int64_t dims[ANVIL_MAX_RANK];
} npy_header;

static anvil_status npy_bad(const npy_scan *s, const char *what) {
    return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                    "'%s': not a valid .npy file: %s; write it with numpy.save (C order, "
                    "little-endian)",
                    s->path, what);
}

static void npy_skip_space(npy_scan *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

/* Consumes c (after optional whitespace); false if the next character is something else. */
static bool npy_accept(npy_scan *s, char c) {
    npy_skip_space(s);
    if (s->p < s->end && *s->p == c) {
        s->p++;
        return true;
    }
    return false;
}

/* A quoted Python string without escapes (numpy never writes any in these headers). The result
 * points into the header and is not NUL-terminated. */
static anvil_status npy_string(npy_scan *s, const char **str, size_t *len) {
    npy_skip_space(s);
    if (s->p >= s->end || (*s->p != '\'' && *s->p != '"'))
        return npy_bad(s, "header: expected a quoted string");
    char q = *s->p++;
    const char *start = s->p;
    while (s->p < s->end && *s->p != q) {
        if (*s->p == '\\') return npy_bad(s, "header: escapes in strings are not supported");
        s->p++;
    }
    if (s->p >= s->end) return npy_bad(s, "header: unterminated string");
    *str = start;
    *len = (size_t)(s->p - start);
    s->p++;
    return ANVIL_OK;
}

static bool npy_word(npy_scan *s, const char *w) {
    size_t n = strlen(w);
    npy_skip_space(s);
    if ((size_t)(s->end - s->p) >= n && memcmp(s->p, w, n) == 0) {
        s->p += n;
        return true;
    }
    return false;
}

static anvil_status npy_parse_descr(npy_scan *s, npy_header *h) {
    const char *str;
    size_t len;
    CORE_TRY(npy_string(s, &str, &len));
    char buf[16];
    if (len == 0 || len >= sizeof buf) return npy_bad(s, "'descr' is not a simple type code");
    memcpy(buf, str, len);
    buf[len] = '\0';
    char order = buf[0];
    const char *code = buf + 1;
    if (order != '<' && order != '|' && order != '=') {
        if (order == '>')
            return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                            "'%s': big-endian data ('descr' '%s') is not supported; convert with "
                            "arr.astype(arr.dtype.newbyteorder('<')) before saving",
                            s->path, buf);
        return npy_bad(s, "'descr' must start with a byte-order character (<, | or =)");
    }
    for (size_t i = 0; i < sizeof npy_descrs / sizeof npy_descrs[0]; i++) {
        if (strcmp(code, npy_descrs[i].code) != 0) continue;
        /* '|' (no byte order) is only meaningful for one-byte types; numpy writes '<' for the rest
         * on little-endian hosts, so '|f4' would be a hand-made file we should not guess about. */
        if (order == '|' && anvil_dtype_size(npy_descrs[i].dtype) != 1)
            return npy_bad(s, "'descr' uses '|' for a multi-byte type");
        h->dtype = npy_descrs[i].dtype;
        return ANVIL_OK;
    }
    return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                    "'%s': unsupported .npy dtype '%s'; anvil reads bool, int8..int64, "
                    "uint8..uint64, float16, float32 and float64 (convert with arr.astype)",
                    s->path, buf);
}

static anvil_status npy_parse_shape(npy_scan *s, npy_header *h) {
    if (!npy_accept(s, '(')) return npy_bad(s, "'shape' must be a tuple");
    h->rank = 0;
    for (;;) {
        if (npy_accept(s, ')')) break;
        npy_skip_space(s);
        if (s->p >= s->end || *s->p < '0' || *s->p > '9')
            return npy_bad(s, "'shape' must hold non-negative integers");
        int64_t v = 0;
        while (s->p < s->end && *s->p >= '0' && *s->p <= '9') {
            if (!core_mul_i64(v, 10, &v) || !core_add_i64(v, *s->p - '0', &v))
                return npy_bad(s, "a 'shape' dimension overflows int64");
            s->p++;
        }
        if (h->rank == ANVIL_MAX_RANK)
            return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                            "'%s': array rank exceeds anvil's limit of %d dimensions", s->path,
                            ANVIL_MAX_RANK);
        h->dims[h->rank++] = v;
        if (npy_accept(s, ',')) continue;
        if (npy_accept(s, ')')) break;
        return npy_bad(s, "'shape' tuple is malformed");
    }
    /* "(3)" is accepted as rank 1: numpy always writes "(3,)", and the lenient reading is
     * unambiguous. */
    return ANVIL_OK;
}

static anvil_status npy_parse_header(npy_scan *s, npy_header *h) {
    bool seen_descr = false, seen_order = false, seen_shape = false;
    if (!npy_accept(s, '{')) return npy_bad(s, "header is not a dict");
    for (;;) {
        if (npy_accept(s, '}')) break;
        const char *key;
        size_t klen;
        CORE_TRY(npy_string(s, &key, &klen));
        if (!npy_accept(s, ':')) return npy_bad(s, "header: expected ':' after a key");
        if (klen == 5 && memcmp(key, "descr", 5) == 0 && !seen_descr) {
            CORE_TRY(npy_parse_descr(s, h));
            seen_descr = true;
        } else if (klen == 13 && memcmp(key, "fortran_order", 13) == 0 && !seen_order) {
            if (npy_word(s, "True"))
                return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                                "'%s': Fortran-ordered arrays are not supported; save "
                                "numpy.ascontiguousarray(arr) instead",
                                s->path);
            if (!npy_word(s, "False")) return npy_bad(s, "'fortran_order' must be True or False");
            seen_order = true;
        } else if (klen == 5 && memcmp(key, "shape", 5) == 0 && !seen_shape) {
            CORE_TRY(npy_parse_shape(s, h));
            seen_shape = true;
        } else {
            return npy_bad(s, "header has an unknown or repeated key");
        }
        if (npy_accept(s, ',')) continue;
        if (npy_accept(s, '}')) break;
        return npy_bad(s, "header: expected ',' or '}'");
    }
    if (!seen_descr || !seen_order || !seen_shape)
        return npy_bad(s, "header lacks one of 'descr', 'fortran_order', 'shape'");
    npy_skip_space(s);
    if (s->p != s->end) return npy_bad(s, "header has trailing characters after the dict");
    return ANVIL_OK;
}

/* ---- reading ----------------------------------------------------------------------------- */

static uint32_t npy_le32(const unsigned char *b) {
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static anvil_status npy_read_file(FILE *f, size_t file_size, const char *path, anvil_tensor **out) {
    npy_scan s = {.path = path};

    unsigned char pre[12];
    if (fread(pre, 1, 10, f) != 10) return npy_bad(&s, "file is shorter than the .npy preamble");
    if (memcmp(pre, npy_magic, sizeof npy_magic) != 0)
        return npy_bad(&s, "missing the \\x93NUMPY magic");
    unsigned major = pre[6];
    size_t header_len, pre_len;
    if (major == 1) {
        header_len = (size_t)pre[8] | (size_t)pre[9] << 8;
        pre_len = 10;
    } else if (major == 2 || major == 3) {
        if (fread(pre + 10, 1, 2, f) != 2) return npy_bad(&s, "truncated header length");
        header_len = npy_le32(pre + 8);
        pre_len = 12;
    } else {
        return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                        "'%s': .npy format version %u.%u is not supported (expected 1.0, 2.0 or "
                        "3.0)",
                        path, major, (unsigned)pre[7]);
    }
    if (header_len == 0 || header_len > NPY_MAX_HEADER)
        return npy_bad(&s, "header length is zero or larger than 64 KiB");
    if (header_len > file_size - pre_len) return npy_bad(&s, "file ends inside the header");

    char *header = core_alloc(header_len);
    if (!header) return ANVIL_ERR_OUT_OF_MEMORY;
    if (fread(header, 1, header_len, f) != header_len) {
        free(header);
        return npy_bad(&s, "file ends inside the header");
    }
    s.p = header;
    s.end = header + header_len;
    npy_header h = {0};
    anvil_status st2 = npy_parse_header(&s, &h);
    free(header);
    if (st2 != ANVIL_OK) return st2;

    size_t data_bytes;
    if (!core_tensor_bytes(h.dtype, h.dims, h.rank, &data_bytes))
        return npy_bad(&s, "the shape's byte size overflows");
    size_t data_off = pre_len + header_len;
    if (file_size - data_off != data_bytes)
        return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                        "'%s': the shape and dtype need %zu data bytes but the file holds %zu; "
                        "the file is truncated or corrupt, save it again",
                        path, data_bytes, file_size - data_off);

    anvil_tensor *t;
    CORE_TRY(anvil_tensor_create(h.dtype, h.rank, h.dims, &t));
    if (data_bytes && fread(anvil_tensor_data(t), 1, data_bytes, f) != data_bytes) {
        anvil_tensor_free(t);
        return core_err(ANVIL_ERR_IO, "'%s': read error: %s", path, strerror(errno));
    }
    *out = t;
    return ANVIL_OK;
}

anvil_status npy_read(const char *path, anvil_tensor **out) {
    if (!path || !out) return core_err(ANVIL_ERR_INVALID_ARGUMENT, "npy_read: NULL argument");
    FILE *f = fopen(path, "rb");
    if (!f)
        return core_err(ANVIL_ERR_IO, "cannot open '%s': %s; check the path", path,
                        strerror(errno));
    struct stat st;
    anvil_status s = fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)
                         ? core_err(ANVIL_ERR_IO, "'%s': not a regular file", path)
                         : npy_read_file(f, (size_t)st.st_size, path, out);
    fclose(f);
    return s;
}

anvil_status npy_read_mem(const void *buf, size_t n, const char *what, anvil_tensor **out) {
    if (n == 0) return core_err(ANVIL_ERR_INVALID_ARGUMENT, "'%s': empty .npy data", what);
    FILE *f = fmemopen((void *)buf, n, "rb");
    if (!f) return ANVIL_ERR_OUT_OF_MEMORY;
    anvil_status s = npy_read_file(f, n, what, out);
    fclose(f);
    return s;
}

/* ---- writing ----------------------------------------------------------------------------- */

anvil_status npy_write(const char *path, const anvil_tensor *t) {
    if (!path || !t) return core_err(ANVIL_ERR_INVALID_ARGUMENT, "npy_write: NULL argument");
    anvil_dtype dt = anvil_tensor_dtype(t);
    const char *code = NULL;
    for (size_t i = 0; i < sizeof npy_descrs / sizeof npy_descrs[0]; i++)
        if (npy_descrs[i].dtype == dt) code = npy_descrs[i].code;
    if (!code)
        return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                        "cannot write '%s': dtype %s has no .npy equivalent; cast the output to "
                        "FLOAT first",
                        path, anvil_dtype_name(dt));

    int rank = anvil_tensor_rank(t);
    const int64_t *dims = anvil_tensor_dims(t);
    char shape[ANVIL_MAX_RANK * 22 + 4];
    size_t n = 0;
    shape[n++] = '(';
    for (int i = 0; i < rank; i++)
        n += (size_t)snprintf(shape + n, sizeof shape - n, i ? ", %lld" : "%lld",
                              (long long)dims[i]);
    /* A one-element tuple needs its trailing comma to stay a tuple. */
    n += (size_t)snprintf(shape + n, sizeof shape - n, rank == 1 ? ",)" : ")");

    char header[512];
    int hl =
        snprintf(header, sizeof header, "{'descr': '%c%s', 'fortran_order': False, 'shape': %s, }",
                 anvil_dtype_size(dt) == 1 ? '|' : '<', code, shape);
    if (hl < 0 || (size_t)hl + NPY_ALIGN >= sizeof header)
        return core_err(ANVIL_ERR_INTERNAL, "npy_write: header for '%s' does not fit", path);
    /* Pad with spaces and end with '\n' so that magic + version + length + header is a multiple
     * of 64, as numpy does (it keeps the data aligned when the file is memory-mapped). */
    size_t len = (size_t)hl;
    size_t total = 10 + len + 1;
    size_t pad = (NPY_ALIGN - total % NPY_ALIGN) % NPY_ALIGN;
    memset(header + len, ' ', pad);
    len += pad;
    header[len++] = '\n';

    unsigned char pre[10];
    memcpy(pre, npy_magic, sizeof npy_magic);
    pre[6] = 1;
    pre[7] = 0;
    pre[8] = (unsigned char)(len & 0xff);
    pre[9] = (unsigned char)(len >> 8);

    FILE *f = fopen(path, "wb");
    if (!f)
        return core_err(ANVIL_ERR_IO,
                        "cannot create '%s': %s; check that the folder exists and "
                        "is writable",
                        path, strerror(errno));
    size_t bytes = anvil_tensor_bytes(t);
    /* anvil_tensor_data takes a non-const tensor because callers may fill it; we only read. */
    const void *data = anvil_tensor_data((anvil_tensor *)t);
    bool ok = fwrite(pre, 1, sizeof pre, f) == sizeof pre && fwrite(header, 1, len, f) == len &&
              (bytes == 0 || fwrite(data, 1, bytes, f) == bytes);
    int saved = errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        saved = errno;
    }
    if (!ok) return core_err(ANVIL_ERR_IO, "cannot write '%s': %s", path, strerror(saved));
    return ANVIL_OK;
}

anvil_status api_tensor_read_pb(const char *path, anvil_tensor **out) {
    if (!out) return core_err(ANVIL_ERR_INVALID_ARGUMENT, "api_tensor_read_pb: out is NULL");
    *out = NULL;
    ir_tensor t;
    void *data;
    CORE_TRY(onnx_tensor_read_pb(path, &t, &data));
    anvil_status s = anvil_tensor_create(t.dtype, t.rank, t.dims, out);
    if (s == ANVIL_OK && t.bytes) memcpy(anvil_tensor_data(*out), t.data, t.bytes);
    free(data);
    return s;
}
