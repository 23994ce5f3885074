/* External data: a tensor whose bytes live in another file next to the model
 * (data_location = EXTERNAL, external_data keys "location", "offset", "length", "checksum").
 *
 * The location comes from the model, i.e. from whoever wrote the file, so it is treated as
 * hostile: it must be a relative path without ".." components, and its canonical path (symbolic
 * links resolved) must still lie inside the model's canonical folder; otherwise a model could
 * make anvil read any file the process can read. Offset and length are parsed strictly and
 * checked against the file's size without overflow. Each distinct file is mapped once. The
 * optional checksum is not verified (reading every byte would defeat the mapping). */
#include "onnx_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parses a non-negative decimal integer, digits only; false on anything else or overflow. */
static bool parse_u64(const char *s, uint64_t *out) {
    if (!s || !*s) return false;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return false;
        if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10) return false;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return true;
}

/* true if the path has a ".." component. */
static bool has_dotdot(const char *p) {
    while (*p) {
        const char *e = strchr(p, '/');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == 2 && p[0] == '.' && p[1] == '.') return true;
        if (!e) break;
        p = e + 1;
    }
    return false;
}

/* Valid, never dereferenced address for empty tensors. */
static const uint64_t empty_payload;

anvil_status onnx_external_data(onnx_import *im, const onnx_TensorProto *tp, const char *what,
                                size_t bytes, const void **data) {
    if (!im->dir)
        return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                        "%s keeps its data in an external file, but the model was loaded from "
                        "memory and has no folder; load it from its file instead",
                        what);
    const char *location = NULL, *offset_s = NULL, *length_s = NULL;
    for (pb_size_t i = 0; i < tp->external_data_count; i++) {
        const char *k = tp->external_data[i].key, *v = tp->external_data[i].value;
        if (!k) continue;
        const char **slot = !strcmp(k, "location") ? &location
                            : !strcmp(k, "offset") ? &offset_s
                            : !strcmp(k, "length") ? &length_s
                                                   : NULL;
        if (!slot) continue; /* "checksum" and keys of newer writers */
        if (*slot)
            return core_err(ANVIL_ERR_INVALID_MODEL, "%s: external_data key '%s' is given twice",
                            what, k);
        *slot = v ? v : "";
    }
    if (!location || !*location)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s is marked EXTERNAL but its external_data has no 'location'", what);
    if (location[0] == '/')
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: external data location '%s' is an absolute path; anvil only reads "
                        "external data from files inside the model's folder, named relative to it",
                        what, location);
    if (has_dotdot(location))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: external data location '%s' contains a '..' component; anvil only "
                        "reads external data from files inside the model's folder",
                        what, location);
    uint64_t offset = 0, length = bytes;
    if (offset_s && !parse_u64(offset_s, &offset))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: external data offset '%s' is not a non-negative decimal integer", what,
                        offset_s);
    if (length_s && !parse_u64(length_s, &length))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: external data length '%s' is not a non-negative decimal integer", what,
                        length_s);
    if (length != bytes)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: external data length is %" PRIu64 " bytes but the tensor's shape "
                        "and type need %zu",
                        what, length, bytes);

    char *real;
    size_t dlen = strlen(im->dir), llen = strlen(location), jlen;
    if (!core_add_size(dlen, llen, &jlen) || !core_add_size(jlen, 2, &jlen))
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s: external data location is too long", what);
    char *path = core_alloc(jlen);
    if (!path) return ANVIL_ERR_OUT_OF_MEMORY;
    snprintf(path, jlen, "%s/%s", im->dir, location);
    real = realpath(path, NULL);
    if (!real) {
        int e = errno;
        anvil_status s = core_err(ANVIL_ERR_IO, "%s: cannot open external data file '%s': %s", what,
                                  path, strerror(e));
        free(path);
        return s;
    }
    free(path);
    /* the folder itself is canonical (onnx_load_file), so a plain prefix test suffices */
    bool inside =
        !strncmp(real, im->dir, dlen) && (real[dlen] == '/' || (dlen == 1 && im->dir[0] == '/'));
    if (!inside) {
        anvil_status s = core_err(ANVIL_ERR_INVALID_MODEL,
                                  "%s: external data location '%s' resolves to '%s', outside the "
                                  "model's folder '%s' (through a symbolic link); anvil only "
                                  "reads external data from inside the model's folder",
                                  what, location, real, im->dir);
        free(real);
        return s;
    }
    const onnx_mapping *m;
    anvil_status s = onnx_store_map(im->store, real, what, &m);
    free(real);
    CORE_TRY(s);
    uint64_t end;
    if (__builtin_add_overflow(offset, length, &end) || end > m->size)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: external data at offset %" PRIu64 " with length %" PRIu64
                        " lies past the end of '%s' (%zu bytes); the data file is truncated or "
                        "the model does not belong to it",
                        what, offset, length, location, m->size);
    *data = length ? (const uint8_t *)m->addr + offset : (const void *)&empty_payload;
    return ANVIL_OK;
}
