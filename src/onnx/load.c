/* Entry points: map a model file (or borrow a buffer), check its size, import it, and free it.
 * The file is mapped rather than read so that weights stay in the page cache and are never
 * copied; the mapping lives as long as the model. */
#include "onnx_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Canonical folder of path: realpath of everything before the last '/', or of "." if none. */
static anvil_status folder_of(const char *path, const char *what, char **out) {
    const char *slash = strrchr(path, '/');
    char *parent;
    if (!slash)
        parent = core_strdup(".");
    else if (slash == path)
        parent = core_strdup("/");
    else {
        parent = core_alloc((size_t)(slash - path) + 1);
        if (parent) {
            memcpy(parent, path, (size_t)(slash - path));
            parent[slash - path] = '\0';
        }
    }
    if (!parent) return ANVIL_ERR_OUT_OF_MEMORY;
    *out = realpath(parent, NULL);
    int e = errno;
    free(parent);
    if (!*out)
        return core_err(ANVIL_ERR_IO, "cannot resolve the folder of %s '%s': %s", what, path,
                        strerror(e));
    return ANVIL_OK;
}

anvil_status onnx_map_file(const char *path, const char *what, void **addr, size_t *size,
                           char **dir) {
    *addr = NULL;
    *size = 0;
    *dir = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return core_err(ANVIL_ERR_IO, "cannot open %s '%s': %s", what, path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return core_err(ANVIL_ERR_IO, "%s '%s' is not a regular file", what, path);
    }
    if ((uint64_t)st.st_size > SIZE_MAX) {
        close(fd);
        return core_err(ANVIL_ERR_LIMIT, "%s '%s' is too large to map", what, path);
    }
    size_t n = (size_t)st.st_size;
    void *a = NULL;
    if (n) {
        a = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
        if (a == MAP_FAILED) {
            int e = errno;
            close(fd);
            return core_err(ANVIL_ERR_IO, "cannot map %s '%s': %s", what, path, strerror(e));
        }
    }
    close(fd);
    anvil_status s = folder_of(path, what, dir);
    if (s != ANVIL_OK) {
        if (a) munmap(a, n);
        return s;
    }
    *addr = a;
    *size = n;
    return ANVIL_OK;
}

static anvil_status size_check(size_t size, const char *name) {
    if (size == 0) return core_err(ANVIL_ERR_INVALID_MODEL, "not an ONNX model: %s is empty", name);
    if (size > ONNX_MAX_PROTO_BYTES)
        return core_err(ANVIL_ERR_LIMIT,
                        "%s is %zu bytes, but a protobuf message is limited to 2 GiB; models "
                        "this large keep their weights in external data files "
                        "(onnx.save_model(..., save_as_external_data=True))",
                        name, size);
    return ANVIL_OK;
}

static anvil_status model_new(onnx_model **out) {
    onnx_model *m = core_calloc(1, sizeof *m);
    if (!m) return ANVIL_ERR_OUT_OF_MEMORY;
    m->store = core_calloc(1, sizeof *m->store);
    if (!m->store) {
        free(m);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    m->path = m->dir = "";
    m->producer_name = m->producer_version = m->domain = "";
    *out = m;
    return ANVIL_OK;
}

anvil_status onnx_load_file(const char *path, onnx_model **out) {
    if (!out) return core_err(ANVIL_ERR_INVALID_ARGUMENT, "onnx_load_file: out is NULL");
    *out = NULL;
    if (!path || !*path)
        return core_err(ANVIL_ERR_INVALID_ARGUMENT, "no model path given (NULL or empty)");
    onnx_model *m;
    CORE_TRY(model_new(&m));
    onnx_store *st = m->store;
    anvil_status s = onnx_map_file(path, "model", &st->map, &st->map_size, &st->dir);
    if (s == ANVIL_OK) {
        char name[64 + PATH_MAX];
        snprintf(name, sizeof name, "model '%.*s'", PATH_MAX, path);
        s = size_check(st->map_size, name);
    }
    if (s == ANVIL_OK) {
        st->path = core_strdup(path);
        if (!st->path) s = ANVIL_ERR_OUT_OF_MEMORY;
    }
    if (s == ANVIL_OK) {
        m->path = st->path;
        m->dir = st->dir;
        m->data = st->map;
        m->size = st->map_size;
        s = onnx_import_model(m, m->data, m->size);
        if (s != ANVIL_OK) s = core_err_prefix(s, "%s", path);
    }
    if (s != ANVIL_OK) {
        onnx_model_free(m);
        return s;
    }
    *out = m;
    return ANVIL_OK;
}

anvil_status onnx_load_buffer(const void *data, size_t size, onnx_model **out) {
    if (!out) return core_err(ANVIL_ERR_INVALID_ARGUMENT, "onnx_load_buffer: out is NULL");
    *out = NULL;
    if (!data && size)
        return core_err(ANVIL_ERR_INVALID_ARGUMENT, "onnx_load_buffer: data is NULL");
    CORE_TRY(size_check(size, "the buffer"));
    onnx_model *m;
    CORE_TRY(model_new(&m));
    m->data = data;
    m->size = size;
    anvil_status s = onnx_import_model(m, m->data, m->size);
    if (s != ANVIL_OK) {
        onnx_model_free(m);
        return s;
    }
    *out = m;
    return ANVIL_OK;
}

void onnx_model_free(onnx_model *m) {
    if (!m) return;
    ir_graph_free(m->graph);
    onnx_store_free(m->store);
    free(m);
}
