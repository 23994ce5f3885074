/* An emitted library's src/kernels/kernels.h (anvil compile ships it there; anvil itself never
 * compiles it): what the shipped kernel files see of anvil's kernel interface (kernels.h, ops.h),
 * with the same names. The kernels reach threads only through op_parallel_for, which krt.c runs on
 * the shipped pool; the types of the runtime's planning (kern_node, kern_config, ...) are only
 * named, because the emitted code never plans. */
#ifndef ANVIL_KERNELS_H
#define ANVIL_KERNELS_H

#include "core/core.h"
#include "ir/ir_act.h"
#include "kernels/kern_isa.h"

#include <string.h>

typedef struct op_ctx {
    core_pool *pool; /* borrowed; NULL: serial */
    int threads;     /* at most this many of pool's threads; 0: all */
} op_ctx;
typedef core_range_fn op_range_fn;
/* Runs fn(arg, begin, end) over [0, n) in contiguous chunks across ctx's threads. */
void op_parallel_for(op_ctx *ctx, size_t n, op_range_fn fn, void *arg);
/* ctx's thread count; 1 for NULL. */
int op_ctx_threads(const op_ctx *ctx);

typedef struct kern_node kern_node;
typedef struct kern_config kern_config;
typedef struct kern_space kern_space;
typedef struct kern_emit kern_emit;
typedef struct ir_fusion ir_fusion;

#endif
