/* core: status and thread-local error messages, dtypes, overflow-checked arithmetic, a bump
 * arena, hardware detection, logging, a monotonic clock and the thread pool. Every other layer
 * builds on this. */
#ifndef ANVIL_CORE_H
#define ANVIL_CORE_H

#include "anvil.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- errors -------------------------------------------------------------------------------- */

/* Records `fmt` as this thread's last error and returns s, so callers can write
 *   return core_err(ANVIL_ERR_SHAPE, "node '%s' (Conv): ...", ...);
 * Messages name what was wrong, where, expected vs got, and what to do. */
anvil_status core_err(anvil_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prepends "prefix: " to the current last error (used to add context on the way up). */
anvil_status core_err_prefix(anvil_status s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void core_err_clear(void);
/* This thread's message buffer; owned by core. */
const char *core_err_message(void);
/* "ANVIL_ERR_SHAPE" for ANVIL_ERR_SHAPE (anvil_status_name is this). Static storage. */
const char *core_status_name(anvil_status s);

#define CORE_TRY(expr)                                                                             \
    do {                                                                                           \
        anvil_status core_try_s_ = (expr);                                                         \
        if (core_try_s_ != ANVIL_OK) return core_try_s_;                                           \
    } while (0)

/* ---- logging (stderr only, never stdout) -------------------------------------------------- */

typedef enum {
    CORE_LOG_ERROR = 0,
    CORE_LOG_WARN = 1,
    CORE_LOG_INFO = 2,
    CORE_LOG_DEBUG = 3
} core_log_level;
/* Messages above the level (default warn) are dropped. */
void core_log(core_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Sets the level (the API sets it from ANVIL_LOG, src/api/env.c). */
void core_log_set_level(core_log_level lvl);

/* ---- dtypes -------------------------------------------------------------------------------- */

/* true for dtypes anvil can hold in memory (fixed-size numeric and bool). */
bool core_dtype_supported(anvil_dtype dt);
bool core_dtype_is_float(anvil_dtype dt); /* f16, bf16, f32, f64 */
bool core_dtype_is_int(anvil_dtype dt);   /* signed or unsigned integer, not bool */
/* The smallest and largest value of an integer or bool dtype (UINT64's largest is cut to
 * INT64_MAX); false, leaving *lo and *hi alone, for any other dtype. */
bool core_dtype_int_range(anvil_dtype dt, int64_t *lo, int64_t *hi);
/* Conversions for f16/bf16 storage. */
float core_f16_to_f32(uint16_t h);
uint16_t core_f32_to_f16(float f);
float core_bf16_to_f32(uint16_t h);
uint16_t core_f32_to_bf16(float f);
/* Reads element i of a buffer of dtype dt as double / as int64 (for shape arithmetic, Cast and
 * tests). Only for core_dtype_supported types. */
double core_load_f64(anvil_dtype dt, const void *p, size_t i);
int64_t core_load_i64(anvil_dtype dt, const void *p, size_t i);
void core_store_f64(anvil_dtype dt, void *p, size_t i, double v);
void core_store_i64(anvil_dtype dt, void *p, size_t i, int64_t v);

/* ---- overflow-checked sizes ------------------------------------------------------------- */

/* Each returns false (and leaves *out unspecified) if the result overflows. */
static inline bool core_mul_size(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool core_add_size(size_t a, size_t b, size_t *out) {
    return !__builtin_add_overflow(a, b, out);
}
static inline bool core_mul_i64(int64_t a, int64_t b, int64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool core_add_i64(int64_t a, int64_t b, int64_t *out) {
    return !__builtin_add_overflow(a, b, out);
}
/* Element count of a shape with rank dims (all >= 0); false on negative dims or when the
 * product of the non-zero dims overflows int64 (a zero-size shape included). */
bool core_numel(const int64_t *dims, int rank, size_t *out);
/* Bytes of a tensor: numel * element size, false on overflow or unsupported dtype. */
bool core_tensor_bytes(anvil_dtype dt, const int64_t *dims, int rank, size_t *out);

/* Largest single tensor anvil will allocate (bytes); default 16 GiB. Declared shapes beyond it are
 * refused with ANVIL_ERR_LIMIT before any allocation. */
size_t core_max_tensor_bytes(void);
/* Sets that limit; 0 restores the default (the API sets it from ANVIL_MAX_TENSOR_BYTES). */
void core_max_tensor_bytes_set(size_t bytes);

/* ---- memory -------------------------------------------------------------------------------- */

/* Allocation helpers that set a last error on failure. Sizes are checked by the caller. */
void *core_alloc(size_t bytes);                       /* malloc; NULL + error on failure */
void *core_calloc(size_t n, size_t size);             /* checked calloc */
void *core_aligned_alloc(size_t align, size_t bytes); /* zeroed is not implied; free with free() */
char *core_strdup(const char *s);

/* A bump arena for metadata that lives as long as its owner (a graph, a plan). Allocations are
 * never freed one by one; core_arena_free releases everything. */
typedef struct core_arena core_arena;
core_arena *core_arena_create(void);
void core_arena_free(core_arena *a);
/* Zeroed, aligned to 16 bytes. NULL (with a last error) on overflow or OOM. Owned by the arena. */
void *core_arena_alloc(core_arena *a, size_t bytes);
void *core_arena_array(core_arena *a, size_t n, size_t elem); /* overflow-checked n*elem */
char *core_arena_strdup(core_arena *a, const char *s);
char *core_arena_strndup(core_arena *a, const char *s, size_t n);
char *core_arena_printf(core_arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A growable array of fixed-size elements (for graph building). Owns its buffer (free()). */
typedef struct core_vec {
    void *data;
    size_t len, cap, elem;
} core_vec;
void core_vec_init(core_vec *v, size_t elem);
/* Appends one zeroed element and returns a pointer to it (valid until the next push), or NULL. */
void *core_vec_push(core_vec *v);
void core_vec_free(core_vec *v);

/* ---- hardware ------------------------------------------------------------------------------ */

#include "core/core_hw.h"

/* Detected once on first use (cpuid + sysfs), with the ISA features above the cap
 * (core_hw_set_cap) switched off. Pointer to static data. */
const core_hw *core_hw_get(void);
/* A cap on the ISA features core_hw_get reports, so a machine can be made to take the paths of
 * an older one (the API sets it from ANVIL_ISA, `anvil compile --isa` from its option). */
typedef enum core_isa_cap {
    CORE_ISA_NATIVE = 0, /* no cap */
    CORE_ISA_AVX512,     /* no AMX */
    CORE_ISA_AVX2,       /* no AVX-512, no AMX */
    CORE_ISA_SCALAR,     /* no AVX, AVX2, FMA, F16C either */
} core_isa_cap;
/* Sets the cap; call it before the first plan (kernels chosen earlier keep their ISA). */
void core_hw_set_cap(core_isa_cap cap);
core_isa_cap core_hw_cap(void);
/* The cap's name: "none", "avx512", "avx2", "scalar". Static. */
const char *core_isa_cap_name(core_isa_cap cap);
/* The cap a name ("avx512", "avx2", "scalar") gives; CORE_ISA_NATIVE for anything else. */
core_isa_cap core_isa_cap_parse(const char *name);
/* For tests: replace the hardware description (NULL restores detection). Not thread-safe. */
void core_hw_override(const core_hw *hw);

/* ---- time ---------------------------------------------------------------------------------- */

/* Monotonic clock in nanoseconds. */
uint64_t core_now_ns(void);

/* ---- thread pool (pool.c) ------------------------------------------------------------------ */

/* A fork-join pool: the calling thread is one of its threads, workers spin briefly between jobs
 * and then sleep. Every layer above reaches it through op_parallel_for (ops/ops.h). */
typedef struct core_pool core_pool;
typedef void (*core_range_fn)(void *arg, size_t begin, size_t end);
/* threads >= 1 (the calling thread counts as one). *out owned by the caller (core_pool_free). */
anvil_status core_pool_create(int threads, core_pool **out);
void core_pool_free(core_pool *p);
/* 1 for a NULL pool. */
int core_pool_threads(const core_pool *p);
/* Runs fn(arg, begin, end) over [0, n) split into at most core_pool_threads(p) contiguous chunks;
 * the caller takes the first. Returns when all are done. p NULL: fn(arg, 0, n) on this thread.
 * fn must not call core_pool_run on the same pool. */
void core_pool_run(core_pool *p, size_t n, core_range_fn fn, void *arg);
/* The same on at most max_threads of p's threads (<= 0: all of them); the others stay idle. The
 * tuner times a node on fewer threads than the session has this way (small nodes often run
 * faster on one thread than split across two). */
void core_pool_run_upto(core_pool *p, int max_threads, size_t n, core_range_fn fn, void *arg);

#endif
