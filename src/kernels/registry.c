/* The variant table. Reference variants are generated from the op table so that every op has
 * variant 0 without a line per op; optimized families append theirs to `extra_variants`. */
#include "kernels.h"

#include <string.h>

static anvil_status reference_run(const ir_node *n, void *state, const op_tensor *const *in,
                                  int n_in, op_tensor *const *out, int n_out, void *workspace,
                                  op_ctx *ctx) {
    (void)state;
    (void)workspace;
    return op_get(n->op)->run(n, in, n_in, out, n_out, ctx);
}

static const kern_variant reference_variants[IR_OP_COUNT] = {
#define OP(id, name, impl)                                                                         \
    [IR_OP_##id] = {"reference", IR_OP_##id, 0, NULL, NULL, NULL, NULL, reference_run},
#include "ir/ops.def"
#undef OP
};

/* Per op: reference first, then optimized variants in preference order. Only the reference
 * exists so far; each optimized family adds its rows here. */
static const kern_variant *const variant_lists[IR_OP_COUNT][1] = {
#define OP(id, name, impl) [IR_OP_##id] = {&reference_variants[IR_OP_##id]},
#include "ir/ops.def"
#undef OP
};

const kern_variant *kern_reference(ir_op op) {
    return &reference_variants[(unsigned)op < IR_OP_COUNT ? op : 0];
}

const kern_variant *const *kern_variants(ir_op op, size_t *count) {
    *count = 1;
    return variant_lists[(unsigned)op < IR_OP_COUNT ? op : 0];
}

bool kern_applies(const kern_variant *v, const kern_node *kn, const core_hw *hw) {
    if ((v->needs & KERN_NEEDS_AVX2) && !(hw->avx2 && hw->fma)) return false;
    if ((v->needs & KERN_NEEDS_AVX512) &&
        !(hw->avx512f && hw->avx512bw && hw->avx512vl && hw->avx512dq))
        return false;
    if ((v->needs & KERN_NEEDS_AVX512_FP16) && !hw->avx512_fp16) return false;
    if ((v->needs & KERN_NEEDS_AVX512_BF16) && !hw->avx512_bf16) return false;
    if ((v->needs & KERN_NEEDS_AMX) && !(hw->amx_tile && hw->amx_bf16)) return false;
    return !v->supports || v->supports(kn, hw);
}

anvil_status kern_select(const kern_node *kn, const char *forced, const kern_variant **out) {
    size_t count;
    const kern_variant *const *list = kern_variants(kn->node->op, &count);
    const core_hw *hw = core_hw_get();
    for (size_t i = 0; i < count; i++) {
        const kern_variant *v = list[i];
        if (forced && strcmp(forced, v->name) != 0) continue;
        if (kern_applies(v, kn, hw)) {
            *out = v;
            return ANVIL_OK;
        }
        if (forced)
            return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                            "%s: variant '%s' cannot run this node on this machine",
                            ir_node_label(kn->node), forced);
    }
    if (forced)
        return core_err(ANVIL_ERR_INVALID_ARGUMENT, "%s: there is no variant named '%s'",
                        ir_node_label(kn->node), forced);
    *out = kern_reference(kn->node->op);
    return ANVIL_OK;
}
