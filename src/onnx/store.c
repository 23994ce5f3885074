/* The model's storage: the mapping of the model file, one read-only mapping per external data
 * file, and the few buffers the importer had to allocate (tensors stored in typed protobuf
 * fields). Weights are otherwise never copied, so freeing a model is mostly munmap. */
#include "onnx_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

anvil_status onnx_store_keep(onnx_store *s, void *p) {
    if (s->n_owned == s->cap_owned) {
        size_t cap = s->cap_owned ? s->cap_owned * 2 : 16;
        void **o = realloc(s->owned, cap * sizeof *o);
        if (!o) {
            free(p);
            return core_err(ANVIL_ERR_OUT_OF_MEMORY, "out of memory keeping tensor storage");
        }
        s->owned = o;
        s->cap_owned = cap;
    }
    s->owned[s->n_owned++] = p;
    return ANVIL_OK;
}

anvil_status onnx_store_map(onnx_store *s, const char *real, const char *what,
                            const onnx_mapping **out) {
    for (size_t i = 0; i < s->n_ext; i++) {
        if (!strcmp(s->ext[i].path, real)) {
            *out = &s->ext[i];
            return ANVIL_OK;
        }
    }
    if (s->n_ext == s->cap_ext) {
        size_t cap = s->cap_ext ? s->cap_ext * 2 : 8;
        onnx_mapping *e = realloc(s->ext, cap * sizeof *e);
        if (!e) return core_err(ANVIL_ERR_OUT_OF_MEMORY, "out of memory mapping external data");
        s->ext = e;
        s->cap_ext = cap;
    }
    /* real has no symbolic links (realpath); O_NOFOLLOW keeps its last component from being
     * swapped for one between the check and the open */
    int fd = open(real, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return core_err(ANVIL_ERR_IO, "cannot open external data file '%s' of %s: %s", real, what,
                        strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return core_err(ANVIL_ERR_IO, "external data file '%s' of %s is not a regular file", real,
                        what);
    }
    onnx_mapping m = {.path = core_strdup(real), .size = (size_t)st.st_size};
    if (!m.path) {
        close(fd);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    if (m.size) {
        /* read-only and private: nothing anvil does can write back to the file */
        void *a = mmap(NULL, m.size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (a == MAP_FAILED) {
            int e = errno;
            close(fd);
            free(m.path);
            return core_err(ANVIL_ERR_IO, "cannot map external data file '%s' of %s: %s", real,
                            what, strerror(e));
        }
        m.addr = a;
    }
    close(fd);
    s->ext[s->n_ext] = m;
    *out = &s->ext[s->n_ext++];
    return ANVIL_OK;
}

void onnx_store_free(onnx_store *s) {
    if (!s) return;
    for (size_t i = 0; i < s->n_ext; i++) {
        if (s->ext[i].addr) munmap(s->ext[i].addr, s->ext[i].size);
        free(s->ext[i].path);
    }
    free(s->ext);
    for (size_t i = 0; i < s->n_owned; i++) free(s->owned[i]);
    free(s->owned);
    if (s->map) munmap(s->map, s->map_size);
    free(s->path);
    free(s->dir);
    free(s);
}

/* The mappings are private, read-only and file-backed, so MADV_DONTNEED only drops clean pages:
 * nothing is lost, a later read faults them back in from the file. */
static void release_in(const void *base, size_t size, const unsigned char *p, size_t n) {
    const unsigned char *b = base;
    if (!b || p < b || n > size || (size_t)(p - b) > size - n) return;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)p + page - 1) & ~(page - 1);
    uintptr_t hi = ((uintptr_t)p + n) & ~(page - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

void onnx_model_release_pages(const onnx_model *m, const void *p, size_t n) {
    const onnx_store *s = m->store;
    release_in(s->map, s->map_size, p, n);
    for (size_t i = 0; i < s->n_ext; i++) release_in(s->ext[i].addr, s->ext[i].size, p, n);
}
