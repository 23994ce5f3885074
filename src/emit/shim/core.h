/* An emitted library's src/core/core.h (anvil compile ships it there; anvil itself never compiles
 * it): the few declarations of anvil's core.h that the shipped files use (core/hw.c, core/pool.c
 * and the kernels), with the same names and meanings, implemented by hw.c, pool.c and krt.c
 * beside it. The status enum comes from anvil_status.h, which the emitter writes from anvil's own.
 */
#ifndef ANVIL_CORE_H
#define ANVIL_CORE_H

#include "anvil_status.h"
#include "core/core_hw.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CORE_TRY(expr)                                                                             \
    do {                                                                                           \
        anvil_status core_try_s_ = (expr);                                                         \
        if (core_try_s_ != ANVIL_OK) return core_try_s_;                                           \
    } while (0)

/* Records the message of a failure (the library's last error, per thread) and returns s. */
anvil_status core_err(anvil_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The calling thread's last recorded message ("" if none). */
const char *core_last_error(void);

static inline bool core_mul_size(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool core_add_size(size_t a, size_t b, size_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

/* calloc / posix_memalign that record an error on failure; free() releases both. */
void *core_calloc(size_t n, size_t size);
void *core_aligned_alloc(size_t align, size_t bytes);

/* The CPU as cpuid reports it, detected once, less what the cap switches off. */
const core_hw *core_hw_get(void);
/* The cap on the ISA features (anvil's core.h; krt_env_load sets it from ANVIL_ISA). */
typedef enum core_isa_cap {
    CORE_ISA_NATIVE = 0,
    CORE_ISA_AVX512,
    CORE_ISA_AVX2,
    CORE_ISA_SCALAR,
} core_isa_cap;
void core_hw_set_cap(core_isa_cap cap);
core_isa_cap core_hw_cap(void);
const char *core_isa_cap_name(core_isa_cap cap);
core_isa_cap core_isa_cap_parse(const char *name);
/* The library's one reading of the environment: ANVIL_ISA=avx512|avx2|scalar caps the ISA as it
 * does in anvil. NET_create calls it first. */
void krt_env_load(void);
/* Monotonic clock in nanoseconds. */
uint64_t core_now_ns(void);

/* The fork-join pool of anvil's runtime (pool.c, shipped verbatim). */
typedef struct core_pool core_pool;
typedef void (*core_range_fn)(void *arg, size_t begin, size_t end);
anvil_status core_pool_create(int threads, core_pool **out);
void core_pool_free(core_pool *p);
int core_pool_threads(const core_pool *p);
void core_pool_run(core_pool *p, size_t n, core_range_fn fn, void *arg);
void core_pool_run_upto(core_pool *p, int max_threads, size_t n, core_range_fn fn, void *arg);

#endif
