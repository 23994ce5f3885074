/* anvil.Sdpa's operand indices and the geometry of one concrete problem (sdpa_common.h describes
 * the node): apart from sdpa_common.h, which needs the IR, so that the attention kernels
 * (kernels/cpu/attn), which `anvil compile` copies into the libraries it emits, can name them
 * without anvil's headers. */
#ifndef ANVIL_OPS_SDPA_GEOM_H
#define ANVIL_OPS_SDPA_GEOM_H

#include <stdbool.h>
#include <stdint.h>

enum { SDPA_Q, SDPA_K, SDPA_V, SDPA_O, SDPA_MASK = 3, SDPA_KEEP = 4 };

/* One concrete problem: sizes, and element strides of every operand along its logical dims
 * (0 where it broadcasts). Strides along the head-size dim are strides[3]. */
typedef struct sdpa_geom {
    int64_t batch, heads, sq, sk, d, dv;
    int64_t off[3]; /* element offset of q, k, v's first element in their tensors (views) */
    int64_t group;  /* q heads per k/v head (grouped-query attention; 1 otherwise): head h
                     * reads k and v head h / group */
    int64_t q[4], k[4], v[4], o[4];
    int64_t mask[4], keep[4]; /* over [batch, heads, q sequence, k sequence] */
    bool has_mask, has_keep;
} sdpa_geom;

#endif
