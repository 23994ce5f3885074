/* The variant table. Reference variants are generated from the op table so that every op has
 * variant 0 without a line per op; optimized families contribute NULL-terminated lists, merged
 * here per op in the order of `cascade`, the data that makes the default choice. */
#include "kernels.h"
#include "kernels/cpu/conv/conv.h"
#include "kernels/cpu/peak/peak.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static anvil_status reference_run(const ir_node *n, void *state, const op_tensor *const *in,
                                  int n_in, op_tensor *const *out, int n_out, void *workspace,
                                  op_ctx *ctx) {
    (void)state;
    (void)workspace;
    return op_get(n->op)->run(n, in, n_in, out, n_out, ctx);
}

static const kern_variant reference_variants[IR_OP_COUNT] = {
#define OP(id, name, impl, file)                                                                   \
    [IR_OP_##id] = {"reference", IR_OP_##id, 0, NULL, NULL, NULL, NULL, reference_run, NULL},
#include "ir/ops.def"
#undef OP
};

/* Preference between families: anvil's own kernels first (they fuse epilogues and pack for the
 * plan), vendor libraries after them. Within a family, its list order. */
static const kern_variant *const *const cascade[] = {
    kern_family_conv, kern_family_gemm,  kern_family_eltwise, kern_family_deconv, kern_family_rnn,
    kern_family_data, kern_family_math,  kern_family_reduce,  kern_family_chain,  kern_family_attn,
    kern_family_pair, kern_family_train, kern_family_quant,   kern_family_vendor,
};

static const kern_variant *lists[IR_OP_COUNT][KERN_MAX_VARIANTS];
static size_t counts[IR_OP_COUNT];
static pthread_once_t lists_once = PTHREAD_ONCE_INIT;

static void lists_build(void) {
    for (int op = 0; op < IR_OP_COUNT; op++) {
        lists[op][0] = &reference_variants[op];
        counts[op] = 1;
    }
    for (size_t f = 0; f < sizeof cascade / sizeof cascade[0]; f++)
        for (const kern_variant *const *v = cascade[f]; *v; v++) {
            ir_op op = (*v)->op;
            /* A family with more variants than the bound is a programming error that the
             * registry test catches; never write past the table. */
            if ((unsigned)op < IR_OP_COUNT && counts[op] < KERN_MAX_VARIANTS)
                lists[op][counts[op]++] = *v;
        }
}

const kern_variant *kern_reference(ir_op op) {
    return &reference_variants[(unsigned)op < IR_OP_COUNT ? op : 0];
}

const kern_variant *const *kern_variants(ir_op op, size_t *count) {
    pthread_once(&lists_once, lists_build);
    unsigned i = (unsigned)op < IR_OP_COUNT ? (unsigned)op : 0;
    *count = counts[i];
    return lists[i];
}

const kern_variant *kern_find(ir_op op, const char *name) {
    size_t count;
    const kern_variant *const *list = kern_variants(op, &count);
    for (size_t i = 0; i < count; i++)
        if (!strcmp(list[i]->name, name)) return list[i];
    return NULL;
}

bool kern_applies(const kern_variant *v, const kern_node *kn, const core_hw *hw) {
    /* a session takes the reduced format it asked for, or either under auto; fp32 neither */
    const int prec = kern_knobs_of(kn)->precision;
    if ((v->needs & KERN_ROUNDS_BF16) && prec != KERN_PREC_BF16 && prec != KERN_PREC_AUTO)
        return false;
    if ((v->needs & KERN_ROUNDS_FP16) && prec != KERN_PREC_FP16 && prec != KERN_PREC_AUTO)
        return false;
    if ((v->needs & KERN_ROUNDS_INT8) && prec != KERN_PREC_INT8) return false;
    return kern_isa_ok(v->needs, hw) && (!v->supports || v->supports(kn, hw));
}

const char *kern_variant_names(ir_op op, const kern_node *kn, char *buf, size_t cap) {
    size_t count, len = 0;
    const kern_variant *const *list = kern_variants(op, &count);
    buf[0] = 0;
    for (size_t i = 0; i < count && len + 1 < cap; i++) {
        if (kn && !kern_applies(list[i], kn, core_hw_get())) continue;
        int w = snprintf(buf + len, cap - len, "%s%s", len ? ", " : "", list[i]->name);
        if (w < 0) break;
        len += (size_t)w < cap - len ? (size_t)w : cap - len - 1;
    }
    return buf;
}

bool kern_bf16_beats_fp32(uint32_t needs) {
    /* 1.2: below that the halved weight traffic is all bf16 would buy, not worth its error. The
     * rate of the instruction the variant multiplies with: a Sapphire Rapids core's AMX tile beats
     * its fp32 FMA 15 times while its vdpbf16ps runs at half the FMA's rate. */
    const peak_rates *r = peak_rates_get();
    const double amx = r->isa[PEAK_AMX_BF16], avx512 = r->isa[PEAK_AVX512_BF16];
    double bf16 = avx512;
    if ((needs & KERN_NEEDS_AMX) || ((needs & KERN_BF16_BEST_ISA) && amx > avx512)) bf16 = amx;
    return bf16 > 1.2 * r->f32;
}

bool kern_fp16_beats_fp32(void) {
    /* the same 1.2 as bf16's: a Sapphire Rapids core's vfmadd231ph runs at 2.1x its fp32 FMA */
    const peak_rates *r = peak_rates_get();
    return r->isa[PEAK_AVX512_FP16] > 1.2 * r->f32;
}

bool kern_cascade_may_pick(const kern_variant *v, const kern_node *kn) {
    const int prec = kern_knobs_of(kn)->precision;
    if (v->needs & KERN_ROUNDS_BF16)
        return prec == KERN_PREC_BF16 && kern_bf16_beats_fp32(v->needs);
    if (v->needs & KERN_ROUNDS_FP16) return prec == KERN_PREC_FP16 && kern_fp16_beats_fp32();
    /* int8 only where this CPU's vpdpbusd measured faster than its fp32 FMA (1.2x, as above) */
    if (v->needs & KERN_ROUNDS_INT8)
        return prec == KERN_PREC_INT8 &&
               peak_rates_get()->isa[PEAK_AVX512_VNNI_I8] > 1.2 * peak_rates_get()->f32;
    return true;
}

anvil_status kern_select(const kern_node *kn, const char *forced, const kern_variant **out) {
    size_t count;
    const kern_variant *const *list = kern_variants(kn->node->op, &count);
    const core_hw *hw = core_hw_get();
    if (forced) {
        const kern_variant *v = kern_find(kn->node->op, forced);
        char names[512];
        if (v && kern_applies(v, kn, hw)) {
            *out = v;
            return ANVIL_OK;
        }
        kern_variant_names(kn->node->op, kn, names, sizeof names);
        if (v)
            return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                            "%s: variant '%s' cannot run this node on this machine (shape, "
                            "attributes or ISA); variants that can: %s",
                            ir_node_label(kn->node), forced, names);
        return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                        "%s: %s has no variant named '%s'; variants that can run this node: %s",
                        ir_node_label(kn->node), ir_op_name(kn->node->op), forced, names);
    }
    for (size_t i = 1; i < count; i++)
        if (kern_cascade_may_pick(list[i], kn) && kern_applies(list[i], kn, hw)) {
            *out = list[i];
            return ANVIL_OK;
        }
    *out = list[0];
    return ANVIL_OK;
}

/* conv_f32 is the only variant that hands its nodes on. */
const kern_variant *kern_delegate(const kern_variant *v, const void *state) {
    return conv_delegate(v, state);
}
