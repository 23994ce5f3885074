/* Back-to-back fusion's plan and its run (pair.c makes the plan from a node; pair_run.c runs
 * it). This header and pair_run.c see only the GEMM and conv layout headers, so `anvil compile`
 * copies them into the libraries it emits and calls the same pair_exec that the runtime does.
 * Pointers in pair_state are owned by whoever made it (pair.c's prepare: the packed weights). */
#ifndef ANVIL_KERNELS_PAIR_H
#define ANVIL_KERNELS_PAIR_H

#include "kernels/cpu/conv/conv_layout.h"

typedef struct pair_state {
    bool conv;
    conv_shape s;         /* conv: the first conv */
    int64_t m, k, n0, n1; /* gemm: rows, depth, and the two widths; conv: n0 = M1, n1 = M2 */
    int64_t block;        /* rows (gemm) or pixels (conv) per block */
    int threads;
    const gemm_kernel *k1, *k2;
    gemm_blocking b1, b2;
    gemm_packed w1, w2;
    size_t gemm_ws, t_ws, col_ws; /* per thread, 64-aligned */
    gemm_epilogue ep1, ep2;       /* without their data pointers */
    int residual;                 /* input index of the second's fused residual, or -1 */
} pair_state;

/* Runs the pair on x (image batch for a conv pair, rows for a GEMM pair) into y, splitting the
 * blocks over p->threads indices of ctx's pool. b1, b2: the two biases, res: the second's fused
 * residual (each NULL when absent). ws: p->threads * (gemm_ws + t_ws + col_ws) bytes, 64-byte
 * aligned. All borrowed for the call. */
void pair_exec(const pair_state *p, const float *x, const float *b1, const float *b2,
               const float *res, float *y, void *ws, op_ctx *ctx);

#endif
