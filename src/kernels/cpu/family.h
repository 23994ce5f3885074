/* Small helpers shared by the CPU kernel families that take float32 nodes with static shapes
 * (eltwise, math, reduce): the checks every supports() makes and the broadcast strides that the
 * binary / n-ary folding starts from. Everything is static inline; pointers are borrowed for the
 * call. */
#ifndef ANVIL_KERNELS_CPU_FAMILY_H
#define ANVIL_KERNELS_CPU_FAMILY_H

#include "kernels/kernels.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether t is float32 with a static shape. */
static inline bool kfam_f32_static(const op_tinfo *t) {
    return t->dtype == ANVIL_DTYPE_FLOAT32 && ir_shape_is_static(&t->shape);
}

/* Elements of a static shape (sizes were checked at plan time). */
static inline size_t kfam_numel(const ir_shape *s) {
    size_t n = 1;
    for (int i = 0; i < s->rank; i++) n *= (size_t)s->d[i];
    return n;
}

/* Whether input i of kn exists (was given and not omitted). */
static inline bool kfam_has_input(const kern_node *kn, int i) {
    return i < kn->n_in && i < kn->node->n_inputs && kn->node->inputs[i] != IR_NONE;
}

/* st[0..o's rank): t's element stride along each dim of o when t broadcasts onto o numpy-style
 * (0 along a dim t lacks or has as 1); false when t does not broadcast to o. */
static inline bool kfam_bcast_strides(const op_tinfo *t, const op_tinfo *o, int64_t *st) {
    const int r = o->shape.rank, pad = r - t->shape.rank;
    if (pad < 0) return false;
    int64_t stride = 1;
    for (int d = r - 1; d >= 0; d--) {
        int64_t td = d >= pad ? t->shape.d[d - pad] : 1;
        if (td != 1 && td != o->shape.d[d]) return false;
        st[d] = td == 1 ? 0 : stride;
        stride *= td;
    }
    return true;
}

#endif
