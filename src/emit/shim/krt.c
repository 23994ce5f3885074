/* An emitted library's runtime support (anvil compile ships it as src/krt.c): the error record,
 * the allocations and the thread context of core.h and kernels.h here, for the shipped kernels.
 * anvil's own definitions are in src/core/error.c, memory.c and src/ops/registry.c. */
#include "kernels/kernels.h"

#include <stdio.h>
#include <stdlib.h>

static _Thread_local char err_buf[1024];

anvil_status core_err(anvil_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_buf, sizeof err_buf, fmt, ap);
    va_end(ap);
    return s;
}

const char *core_last_error(void) {
    return err_buf;
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

void op_parallel_for(op_ctx *ctx, size_t n, op_range_fn fn, void *arg) {
    if (!ctx) {
        core_pool_run(NULL, n, fn, arg);
        return;
    }
    core_pool_run_upto(ctx->pool, ctx->threads, n, fn, arg);
}

int op_ctx_threads(const op_ctx *ctx) {
    if (!ctx) return 1;
    int t = core_pool_threads(ctx->pool);
    return ctx->threads > 0 && ctx->threads < t ? ctx->threads : t;
}

void krt_env_load(void) {
    const char *isa = getenv("ANVIL_ISA");
    if (isa) core_hw_set_cap(core_isa_cap_parse(isa));
}
