/* anvil.Sdpa, scaled dot-product attention fused into one node by passes/fuse_attention.c: what
 * its reference kernel (src/ops/nn/sdpa.c) and the attention kernels (kernels/cpu/attn) share.
 *
 * The node computes, for every batch b and head h (the "logical" view of each operand is
 * [batch, heads, sequence, head size]):
 *   s[i, j] = scale * (q[b, h, i, :] . k[b, h, j, :])
 *   s[i, j] += mask[b, h, i, j]                 when input 3 (a float mask) is given
 *   s[i, j] = keep[b, h, i, j] ? s[i, j] : fill when input 4 (a bool mask) is given; with
 *                                               invert = 1, !keep[...] (it marks what to drop)
 *   o[b, h, i, :] = sum_j softmax_j(s[i, :])[j] * v[b, h, j, :]
 * Inputs: 0 q, 1 k, 2 v (float32, rank 4), 3 mask (float32, rank <= 4, optional), 4 keep (bool,
 * rank <= 4, optional). Output 0: o (float32, rank 4).
 *
 * Operands are read and written in the layout the graph already has them in, so the transposes
 * around the attention pattern disappear: operand X's logical dim a is its physical dim
 * perm_X[a] (perm_q, perm_k, perm_v, perm_o: INTS, a permutation of 0..3). E.g. q produced as
 * [batch, sequence, heads, head size] by a Reshape has perm_q = [0, 2, 1, 3]; an output written
 * that way (what a Transpose [0, 2, 1, 3] after the attention asked for) has perm_o = [0, 2, 1, 3].
 *
 * Broadcasting: batch and heads broadcast numpy-style over q, k, v and the masks (a dim of 1
 * repeats); k and v may also have a divisor of q's heads, each k/v head then serving that many
 * consecutive q heads (grouped-query attention); the masks are right-aligned onto [batch, heads, q
 * sequence, k sequence] and may broadcast along any dim; k and v must agree on the key sequence.
 * view_q / view_k / view_v (INTS [offset, heads, head size], optional) read that operand as a
 * column range of a rank-3 [batch, sequence, width] tensor (sdpa_params.view). Attributes: scale
 * (FLOAT), fill (FLOAT, the value a masked-out score takes), invert (INT, 0 or 1), causal (INT:
 * 0 none; 1 upper-left aligned, s[i, j] = -inf for j > i after the masks, as the ONNX Attention
 * op's is_causal; 2 lower-right aligned, s[i, j] = -inf for j > i + sk - sq, the queries being the
 * last sq of sk positions: is_causal with a past cache) and the four perms. */
#ifndef ANVIL_OPS_SDPA_COMMON_H
#define ANVIL_OPS_SDPA_COMMON_H

#include "ops/ops.h"
#include "ops/sdpa_geom.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct sdpa_params {
    float scale, fill;
    bool invert;       /* keep[...] true marks a score to drop */
    int causal;        /* 0 none, 1 upper-left, 2 lower-right aligned (above) */
    float softcap;     /* > 0: s = softcap * tanh(s / softcap) before the masks; 0: none */
    int8_t perm[4][4]; /* [SDPA_Q..SDPA_O][logical dim]: the physical dim */
    /* q, k or v read as a column range of a [batch, sequence, width] tensor (e.g. one
     * projection's share of a fused QKV GEMM): elements [offset, offset + heads * size) of each
     * row, seen as [batch, sequence, heads, size] before perm applies; viewed[x] false: the
     * operand is itself 4-D */
    bool viewed[3];
    int64_t view[3][3]; /* offset, heads, head size */
} sdpa_params;

/* The causal offset of a problem with sq queries and sk keys: where p is causal, key j > query
 * i + offset is dropped (0 upper-left, sk - sq lower-right). */
static inline int64_t sdpa_causal_offset(const sdpa_params *p, int64_t sq, int64_t sk) {
    return p->causal == 2 ? sk - sq : 0;
}

/* The geometry of a node's operands from their static shapes (in[i] NULL for an absent input;
 * n_in may stop before the masks); the output's strides follow from perm_o (its physical shape
 * is sdpa_out_dims). SHAPE error naming the node when the operands do not fit together. */
anvil_status sdpa_geometry(const ir_node *n, const ir_shape *const *in, int n_in, sdpa_geom *g);

/* The output's physical dims for g. */
static inline void sdpa_out_dims(const sdpa_params *p, const sdpa_geom *g, int64_t *dims) {
    const int64_t l[4] = {g->batch, g->heads, g->sq, g->dv};
    for (int a = 0; a < 4; a++) dims[p->perm[SDPA_O][a]] = l[a];
}

#endif
