/* Training checkpoints. The file, little-endian:
 *   "ANVILCKP" | u32 version (1) | u32 optimizer | u64 updates | u64 steps | u64 micro |
 *   u32 momentum_started | u32 n_params | u32 has_m | u32 has_v | u32 has_acc |
 *   per parameter: u32 name length, the name, u64 numel, then numel floats each of p, m, v, acc
 *   (those present) |
 *   u32 n_state | per statistic (BatchNormalization's running mean and variance): u32 name
 *   length, the name, u64 numel, numel floats |
 *   u32 CRC-32 (zlib's) of every byte before it.
 * It is written whole to PATH.tmp, flushed and renamed over PATH, so a crash mid-save leaves the
 * last checkpoint as it was. Loading parses and checks everything before touching the session. */
#include "train_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define CKPT_MAGIC "ANVILCKP"
#define CKPT_VERSION 2u

struct train_ckpt {
    uint32_t optimizer, momentum_started, n, has[3];
    uint64_t updates, steps, micro;
    char **names;
    uint64_t *numel;
    float **arrays; /* [n * 4]: p, m, v, acc per parameter (NULL where absent) */
    uint32_t n_state;
    char **state_names;
    uint64_t *state_numel;
    float **state;
};

uint64_t train_ckpt_steps(const train_ckpt *c) {
    return c->steps;
}

void train_ckpt_free(train_ckpt *c) {
    if (!c) return;
    for (uint32_t i = 0; i < c->n; i++) {
        if (c->names) free(c->names[i]);
        for (int k = 0; c->arrays && k < 4; k++) free(c->arrays[i * 4 + k]);
    }
    for (uint32_t i = 0; i < c->n_state; i++) {
        if (c->state_names) free(c->state_names[i]);
        if (c->state) free(c->state[i]);
    }
    free(c->names);
    free(c->numel);
    free(c->arrays);
    free(c->state_names);
    free(c->state_numel);
    free(c->state);
    free(c);
}

/* ---- writing --------------------------------------------------------------------------------- */

typedef struct out_buf {
    unsigned char *p;
    size_t n, cap;
    bool oom;
} out_buf;

static void put(out_buf *b, const void *src, size_t n) {
    if (b->oom) return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->n + n) cap *= 2;
        unsigned char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void put32(out_buf *b, uint32_t v) {
    put(b, &v, 4);
}

static void put64(out_buf *b, uint64_t v) {
    put(b, &v, 8);
}

anvil_status train_save(const train_session *ts, const char *path) {
    out_buf b = {0};
    const uint32_t has[3] = {ts->m != NULL, ts->v != NULL, ts->acc != NULL};
    put(&b, CKPT_MAGIC, 8);
    put32(&b, CKPT_VERSION);
    put32(&b, (uint32_t)ts->cfg.optimizer);
    put64(&b, ts->updates);
    put64(&b, ts->steps);
    put64(&b, ts->micro);
    put32(&b, ts->momentum_started);
    put32(&b, (uint32_t)ts->n_params);
    for (int k = 0; k < 3; k++) put32(&b, has[k]);
    for (int i = 0; i < ts->n_params; i++) {
        const size_t len = strlen(ts->names[i]);
        put32(&b, (uint32_t)len);
        put(&b, ts->names[i], len);
        put64(&b, ts->numel[i]);
        const float *arr[4] = {ts->p[i], has[0] ? ts->m[i] : NULL, has[1] ? ts->v[i] : NULL,
                               has[2] ? ts->acc[i] : NULL};
        for (int k = 0; k < 4; k++)
            if (arr[k]) put(&b, arr[k], ts->numel[i] * sizeof(float));
    }
    put32(&b, (uint32_t)ts->n_state);
    for (int i = 0; i < ts->n_state; i++) {
        const size_t len = strlen(ts->state_names[i]);
        put32(&b, (uint32_t)len);
        put(&b, ts->state_names[i], len);
        put64(&b, ts->state_numel[i]);
        put(&b, ts->state[i], ts->state_numel[i] * sizeof(float));
    }
    put32(&b, (uint32_t)crc32(0L, b.p, (uInt)b.n));
    if (b.oom) {
        free(b.p);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp) {
        free(b.p);
        return core_err(ANVIL_ERR_INVALID_ARGUMENT, "checkpoint path too long");
    }
    FILE *f = fopen(tmp, "wb");
    anvil_status st = ANVIL_OK;
    if (!f) st = core_err(ANVIL_ERR_IO, "cannot write checkpoint '%s': %s", tmp, strerror(errno));
    if (st == ANVIL_OK && (fwrite(b.p, 1, b.n, f) != b.n || fflush(f) != 0))
        st = core_err(ANVIL_ERR_IO, "writing checkpoint '%s' failed: %s", tmp, strerror(errno));
    if (f && fclose(f) != 0 && st == ANVIL_OK)
        st = core_err(ANVIL_ERR_IO, "closing checkpoint '%s' failed", tmp);
    if (st == ANVIL_OK && rename(tmp, path) != 0)
        st = core_err(ANVIL_ERR_IO, "cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
    if (st != ANVIL_OK) remove(tmp);
    free(b.p);
    return st;
}

/* ---- reading --------------------------------------------------------------------------------- */

typedef struct in_buf {
    const unsigned char *p;
    size_t n, at;
    bool short_read;
} in_buf;

static void get(in_buf *b, void *dst, size_t n) {
    if (b->short_read || n > b->n - b->at) {
        b->short_read = true;
        memset(dst, 0, n);
        return;
    }
    memcpy(dst, b->p + b->at, n);
    b->at += n;
}

static uint32_t get32(in_buf *b) {
    uint32_t v;
    get(b, &v, 4);
    return v;
}

static uint64_t get64(in_buf *b) {
    uint64_t v;
    get(b, &v, 8);
    return v;
}

static anvil_status corrupt(const char *path, const char *what) {
    return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                    "checkpoint '%s' is unusable: %s; resume from another checkpoint or start "
                    "again",
                    path, what);
}

/* An entry's name and element count (what: "a parameter" / "a statistic", for messages); the
 * count is checked against the bytes left, so nothing is allocated past the file's size. */
static anvil_status get_entry(in_buf *b, const char *path, const char *what, char **name,
                              uint64_t *numel) {
    char msg[96];
    const uint32_t len = get32(b);
    if (b->short_read || len > b->n - b->at || len > 4096) {
        snprintf(msg, sizeof msg, "%s's name runs past the file", what);
        return corrupt(path, msg);
    }
    if (!(*name = malloc((size_t)len + 1))) return ANVIL_ERR_OUT_OF_MEMORY;
    get(b, *name, len);
    (*name)[len] = '\0';
    *numel = get64(b);
    if (b->short_read || *numel > (b->n - b->at) / sizeof(float)) {
        snprintf(msg, sizeof msg, "%s's data runs past the file", what);
        return corrupt(path, msg);
    }
    return ANVIL_OK;
}

/* n floats into a new array *out */
static anvil_status get_floats(in_buf *b, const char *path, const char *what, uint64_t n,
                               float **out) {
    if (!(*out = malloc((size_t)(n ? n : 1) * sizeof(float)))) return ANVIL_ERR_OUT_OF_MEMORY;
    get(b, *out, (size_t)n * sizeof(float));
    if (!b->short_read) return ANVIL_OK;
    char msg[96];
    snprintf(msg, sizeof msg, "%s's data runs past the file", what);
    return corrupt(path, msg);
}

anvil_status train_ckpt_parse(const char *path, const unsigned char *p, size_t n,
                              train_ckpt **out) {
    if (n < 8 + 4 + 4 || memcmp(p, CKPT_MAGIC, 8)) return corrupt(path, "not an anvil checkpoint");
    uint32_t crc;
    memcpy(&crc, p + n - 4, 4);
    if (crc != (uint32_t)crc32(0L, p, (uInt)(n - 4)))
        return corrupt(path, "its checksum does not match (the file is damaged or truncated)");
    in_buf b = {p, n - 4, 8, false};
    if (get32(&b) != CKPT_VERSION) return corrupt(path, "an unknown version");
    train_ckpt *c = core_calloc(1, sizeof *c);
    if (!c) return ANVIL_ERR_OUT_OF_MEMORY;
    c->optimizer = get32(&b);
    c->updates = get64(&b);
    c->steps = get64(&b);
    c->micro = get64(&b);
    c->momentum_started = get32(&b);
    c->n = get32(&b);
    for (int k = 0; k < 3; k++) c->has[k] = get32(&b);
    anvil_status st = ANVIL_OK;
    if (b.short_read || c->n > (n / 16) + 1) {
        c->n = 0; /* nothing allocated: train_ckpt_free must not walk a corrupt count */
        st = corrupt(path, "a broken header");
    }
    if (st == ANVIL_OK) {
        c->names = core_calloc((size_t)c->n + 1, sizeof *c->names);
        c->numel = core_calloc((size_t)c->n + 1, sizeof *c->numel);
        c->arrays = core_calloc((size_t)c->n * 4 + 1, sizeof *c->arrays);
        if (!c->names || !c->numel || !c->arrays) st = ANVIL_ERR_OUT_OF_MEMORY;
    }
    for (uint32_t i = 0; st == ANVIL_OK && i < c->n; i++) {
        st = get_entry(&b, path, "a parameter", &c->names[i], &c->numel[i]);
        for (int k = 0; k < 4 && st == ANVIL_OK; k++)
            if (k == 0 || c->has[k - 1])
                st = get_floats(&b, path, "a parameter", c->numel[i], &c->arrays[i * 4 + k]);
    }
    if (st == ANVIL_OK) {
        c->n_state = get32(&b);
        if (b.short_read || c->n_state > (n / 16) + 1) {
            c->n_state = 0;
            st = corrupt(path, "a broken state count");
        }
    }
    if (st == ANVIL_OK) {
        c->state_names = core_calloc((size_t)c->n_state + 1, sizeof *c->state_names);
        c->state_numel = core_calloc((size_t)c->n_state + 1, sizeof *c->state_numel);
        c->state = core_calloc((size_t)c->n_state + 1, sizeof *c->state);
        if (!c->state_names || !c->state_numel || !c->state) st = ANVIL_ERR_OUT_OF_MEMORY;
    }
    for (uint32_t i = 0; st == ANVIL_OK && i < c->n_state; i++) {
        st = get_entry(&b, path, "a statistic", &c->state_names[i], &c->state_numel[i]);
        if (st == ANVIL_OK)
            st = get_floats(&b, path, "a statistic", c->state_numel[i], &c->state[i]);
    }
    if (st == ANVIL_OK && b.at != b.n) st = corrupt(path, "bytes left over after the parameters");
    if (st != ANVIL_OK) {
        train_ckpt_free(c);
        return st;
    }
    *out = c;
    return ANVIL_OK;
}

anvil_status train_ckpt_apply(train_session *ts, const train_ckpt *c) {
    if (c->n != (uint32_t)ts->n_params || c->optimizer != (uint32_t)ts->cfg.optimizer ||
        c->has[0] != (ts->m != NULL) || c->has[1] != (ts->v != NULL) ||
        c->has[2] != (ts->acc != NULL))
        return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                        "the checkpoint holds %u parameters for optimizer %u; this session trains "
                        "%d with optimizer %d (same model, optimizer, momentum and accumulation "
                        "needed)",
                        c->n, c->optimizer, ts->n_params, (int)ts->cfg.optimizer);
    for (int i = 0; i < ts->n_params; i++)
        if (strcmp(c->names[i], ts->names[i]) || c->numel[i] != ts->numel[i])
            return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                            "checkpoint parameter %d is '%s' of %llu values; the session's is "
                            "'%s' of %zu",
                            i, c->names[i], (unsigned long long)c->numel[i], ts->names[i],
                            ts->numel[i]);
    if (c->n_state != (uint32_t)ts->n_state)
        return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                        "the checkpoint holds %u running statistics; the session has %d",
                        c->n_state, ts->n_state);
    for (int i = 0; i < ts->n_state; i++)
        if (strcmp(c->state_names[i], ts->state_names[i]) ||
            c->state_numel[i] != ts->state_numel[i])
            return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                            "checkpoint statistic %d is '%s'; the session's is '%s'", i,
                            c->state_names[i], ts->state_names[i]);
    for (int i = 0; i < ts->n_state; i++)
        memcpy(ts->state[i], c->state[i], ts->state_numel[i] * sizeof(float));
    for (int i = 0; i < ts->n_params; i++) {
        float *dst[4] = {ts->p[i], ts->m ? ts->m[i] : NULL, ts->v ? ts->v[i] : NULL,
                         ts->acc ? ts->acc[i] : NULL};
        for (int k = 0; k < 4; k++)
            if (dst[k] && c->arrays[i * 4 + k])
                memcpy(dst[k], c->arrays[i * 4 + k], ts->numel[i] * sizeof(float));
    }
    ts->updates = c->updates;
    ts->steps = c->steps;
    ts->micro = c->micro;
    ts->momentum_started = c->momentum_started != 0;
    return ANVIL_OK;
}

anvil_status train_load(train_session *ts, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return core_err(ANVIL_ERR_IO, "cannot open checkpoint '%s': %s", path, strerror(errno));
    unsigned char *p = NULL;
    size_t n = 0, cap = 0;
    anvil_status st = ANVIL_OK;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 1 << 16;
            unsigned char *q = realloc(p, cap);
            if (!q) {
                st = ANVIL_ERR_OUT_OF_MEMORY;
                break;
            }
            p = q;
        }
        const size_t got = fread(p + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    fclose(f);
    train_ckpt *c = NULL;
    if (st == ANVIL_OK) st = train_ckpt_parse(path, p, n, &c);
    free(p);
    if (st != ANVIL_OK) return st;
    if (ts->n_params == 0) {
        train_ckpt_free(ts->pending);
        ts->pending = c;
        return ANVIL_OK;
    }
    st = train_ckpt_apply(ts, c);
    train_ckpt_free(c);
    return st;
}
