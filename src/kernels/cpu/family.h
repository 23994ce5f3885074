/* Small helpers shared by the CPU kernel families that take float32 nodes with static shapes
 * (eltwise, math, reduce): the checks every supports() makes and the broadcast strides that the
 * binary / n-ary folding starts from, and the variant table of a family whose variants differ only
 * by ISA. Everything is static inline or a macro; pointers are borrowed for the call. */
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

/* The variants of a family whose (op, ISA) variants differ only in the ISA table their prepare
 * records: v_<ID>_avx512 and v_<ID>_avx2, named "<ID>_avx512" / "<ID>_avx2", each with a
 * prep_<ID>_<ISA> calling prepare_common(kn, &<TABLE><ISA>, state). The file defines
 * supports_common, workspace_common, prepare_common, release_common and run_common; BF16IO is
 * the variants' kern_variant.bf16_io (NULL: fp32 only). */
#define KFAM_ISA_VARIANT(ID, OP, ISA, NEEDS, TABLE, EMITTER, BF16IO)                               \
    static anvil_status prep_##ID##_##ISA(const kern_node *kn, void **state) {                     \
        return prepare_common(kn, &TABLE##ISA, state);                                             \
    }                                                                                              \
    static const kern_variant v_##ID##_##ISA = {.name = #ID "_" #ISA,                              \
                                                .op = OP,                                          \
                                                .needs = NEEDS,                                    \
                                                .supports = supports_common,                       \
                                                .workspace_size = workspace_common,                \
                                                .prepare = prep_##ID##_##ISA,                      \
                                                .release = release_common,                         \
                                                .run = run_common,                                 \
                                                .emit = EMITTER,                                   \
                                                .bf16_io = BF16IO};

#define KFAM_ISA_VARIANTS(ID, OP, TABLE, EMITTER, BF16IO)                                          \
    KFAM_ISA_VARIANT(ID, OP, avx512, KERN_NEEDS_AVX512, TABLE, EMITTER, BF16IO)                    \
    KFAM_ISA_VARIANT(ID, OP, avx2, KERN_NEEDS_AVX2, TABLE, EMITTER, BF16IO)

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
