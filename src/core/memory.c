/* Allocation helpers, the metadata arena and the growable vector. The arena exists so that graph
 * and plan metadata (names, attribute arrays, shapes) are freed in one call and never leak on an
 * error path halfway through a load. */
#include "core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *core_alloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) core_err(ANVIL_ERR_OUT_OF_MEMORY, "out of memory allocating %zu bytes", bytes);
    return p;
}

void *core_calloc(size_t n, size_t size) {
    size_t total;
    if (!core_mul_size(n, size, &total)) {
        core_err(ANVIL_ERR_LIMIT, "allocation of %zu x %zu bytes overflows", n, size);
        return NULL;
    }
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) core_err(ANVIL_ERR_OUT_OF_MEMORY, "out of memory allocating %zu bytes", total);
    return p;
}

void *core_aligned_alloc(size_t align, size_t bytes) {
    void *p = NULL;
    if (posix_memalign(&p, align, bytes ? bytes : align) != 0) {
        core_err(ANVIL_ERR_OUT_OF_MEMORY, "out of memory allocating %zu bytes", bytes);
        return NULL;
    }
    return p;
}

char *core_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = core_alloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

/* Chunks are chained; a request larger than the default chunk gets a chunk of its own. */
typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char mem[];
} arena_chunk;

struct core_arena {
    arena_chunk *head;
};

#define ARENA_CHUNK 65536

core_arena *core_arena_create(void) {
    return core_calloc(1, sizeof(core_arena));
}

void core_arena_free(core_arena *a) {
    if (!a) return;
    arena_chunk *c = a->head;
    while (c) {
        arena_chunk *n = c->next;
        free(c);
        c = n;
    }
    free(a);
}

void *core_arena_alloc(core_arena *a, size_t bytes) {
    size_t need;
    if (!core_add_size(bytes, 15, &need)) goto overflow;
    need &= ~(size_t)15;
    if (need == 0) need = 16;
    if (!a->head || a->head->cap - a->head->used < need) {
        size_t cap = need > ARENA_CHUNK ? need : ARENA_CHUNK;
        size_t total;
        if (!core_add_size(cap, sizeof(arena_chunk), &total)) goto overflow;
        arena_chunk *c = malloc(total);
        if (!c) {
            core_err(ANVIL_ERR_OUT_OF_MEMORY, "out of memory allocating %zu bytes of metadata",
                     bytes);
            return NULL;
        }
        c->used = 0;
        c->cap = cap;
        c->next = a->head;
        a->head = c;
    }
    void *p = a->head->mem + a->head->used;
    a->head->used += need;
    memset(p, 0, need);
    return p;
overflow:
    core_err(ANVIL_ERR_LIMIT, "metadata allocation of %zu bytes overflows", bytes);
    return NULL;
}

void *core_arena_array(core_arena *a, size_t n, size_t elem) {
    size_t bytes;
    if (!core_mul_size(n, elem, &bytes)) {
        core_err(ANVIL_ERR_LIMIT, "metadata array of %zu x %zu bytes overflows", n, elem);
        return NULL;
    }
    return core_arena_alloc(a, bytes);
}

char *core_arena_strndup(core_arena *a, const char *s, size_t n) {
    char *p = core_arena_alloc(a, n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

char *core_arena_strdup(core_arena *a, const char *s) {
    return core_arena_strndup(a, s, strlen(s));
}

char *core_arena_printf(core_arena *a, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return NULL;
    char *p = core_arena_alloc(a, (size_t)n + 1);
    if (!p) return NULL;
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}

void core_vec_init(core_vec *v, size_t elem) {
    v->data = NULL;
    v->len = v->cap = 0;
    v->elem = elem;
}

void *core_vec_push(core_vec *v) {
    if (v->len == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 8;
        size_t bytes;
        if (!core_mul_size(cap, v->elem, &bytes)) {
            core_err(ANVIL_ERR_LIMIT, "array of %zu elements overflows", cap);
            return NULL;
        }
        void *d = realloc(v->data, bytes);
        if (!d) {
            core_err(ANVIL_ERR_OUT_OF_MEMORY, "out of memory growing an array to %zu bytes", bytes);
            return NULL;
        }
        v->data = d;
        v->cap = cap;
    }
    void *p = (unsigned char *)v->data + v->len * v->elem;
    memset(p, 0, v->elem);
    v->len++;
    return p;
}

void core_vec_free(core_vec *v) {
    free(v->data);
    core_vec_init(v, v->elem);
}
