/* attention_views: an anvil.Sdpa operand that is a Reshape to [batch, sequence, heads, size] of
 * one output of a Split along the last axis of a [batch, sequence, width] tensor (GPT-2's c_attn;
 * Q, K and V after fuse_parallel) reads the Split's input directly, as a column range
 * (view_q / view_k / view_v, ops/sdpa_common.h), so the Split's copy goes (dce removes it once
 * nothing else reads it).
 *
 * The Reshape's target must be a constant that provably keeps batch and sequence: each of its
 * first two entries 0 (copy), or -1 once with heads and size given, or equal to a known dim of the
 * Split's input; heads and size are known and their product is the Split's share. Runs after
 * fuse_parallel. */
#include "rewrite.h"

#include "ops/ops.h"
#include "ops/sdpa_common.h"

#include <string.h>

/* The sizes of Split s's outputs along its last axis (input rank 3), or false. */
static bool split_sizes(const pass_ctx *c, const ir_node *s, int64_t *sizes) {
    const ir_value *u = &c->g->values[s->inputs[0]];
    int64_t axis;
    if (u->shape.rank != 3 || ir_attr_int(s, "axis", 0, &axis) != ANVIL_OK ||
        (axis != -1 && axis != 2) || s->n_outputs > 8)
        return false;
    if (s->n_inputs >= 2 && s->inputs[1] != IR_NONE)
        return pass_const_int64s(c, s->inputs[1], sizes, (size_t)s->n_outputs);
    const int64_t *a;
    size_t n;
    if (ir_attr_ints(s, "split", &a, &n) == ANVIL_OK && a && n == (size_t)s->n_outputs) {
        memcpy(sizes, a, n * sizeof *sizes);
        return true;
    }
    /* equal parts of a known width */
    if (u->shape.d[2] < 0 || u->shape.d[2] % s->n_outputs) return false;
    for (int i = 0; i < s->n_outputs; i++) sizes[i] = u->shape.d[2] / s->n_outputs;
    return true;
}

/* Whether operand v of an Sdpa can be read as a view; *src, view[3] set. */
static bool view_of(const pass_ctx *c, ir_vid v, ir_vid *src, int64_t *view) {
    const ir_node *r = pass_producer(c, v);
    if (!r || r->op != IR_OP_RESHAPE || r->n_inputs < 2) return false;
    int64_t allowzero = 0, t[4], sizes[8];
    if (ir_attr_int(r, "allowzero", 0, &allowzero) != ANVIL_OK || allowzero ||
        !pass_const_int64s(c, r->inputs[1], t, 4))
        return false;
    const ir_node *s = pass_producer(c, r->inputs[0]);
    if (!s || s->op != IR_OP_SPLIT || !split_sizes(c, s, sizes)) return false;
    int j = 0;
    while (j < s->n_outputs && s->outputs[j] != r->inputs[0]) j++;
    if (j == s->n_outputs) return false;
    int64_t offset = 0;
    for (int i = 0; i < j; i++) offset += sizes[i];
    const ir_value *u = &c->g->values[s->inputs[0]];
    /* heads and size: both given, or one of them -1 */
    int64_t heads = t[2], size = t[3];
    if (heads == -1 && size > 0 && sizes[j] % size == 0) heads = sizes[j] / size;
    if (size == -1 && heads > 0 && sizes[j] % heads == 0) size = sizes[j] / heads;
    if (heads <= 0 || size <= 0 || heads * size != sizes[j]) return false;
    int minus = (t[2] == -1) + (t[3] == -1);
    for (int a = 0; a < 2; a++) {
        if (t[a] == 0) continue;
        if (t[a] == -1 && !minus++ && t[2] > 0 && t[3] > 0) continue;
        if (t[a] > 0 && u->shape.d[a] == t[a]) continue;
        return false;
    }
    *src = s->inputs[0];
    view[0] = offset;
    view[1] = heads;
    view[2] = size;
    return true;
}

anvil_status pass_attention_views(pass_ctx *c) {
    ir_graph *g = c->g;
    static const char *const names[3] = {"view_q", "view_k", "view_v"};
    for (int32_t k = 0; k < g->n_nodes; k++) {
        if (c->dead[k] || g->nodes[k].op != IR_OP_SDPA) continue;
        const sdpa_params *p = g->nodes[k].params;
        ir_vid src[3];
        int64_t view[3][3];
        bool any = false, take[3] = {false, false, false};
        for (int x = 0; x < 3; x++) {
            take[x] = p && !p->viewed[x] && view_of(c, g->nodes[k].inputs[x], &src[x], view[x]);
            any |= take[x];
        }
        if (!any) continue;
        ir_node *n = &g->nodes[k];
        ir_attr *attrs = core_arena_array(g->arena, (size_t)n->n_attrs + 3, sizeof *attrs);
        if (!attrs) return ANVIL_ERR_OUT_OF_MEMORY;
        memcpy(attrs, n->attrs, (size_t)n->n_attrs * sizeof *attrs);
        int na = n->n_attrs;
        for (int x = 0; x < 3; x++) {
            if (!take[x]) continue;
            int64_t *v = core_arena_array(g->arena, 3, sizeof *v);
            if (!v) return ANVIL_ERR_OUT_OF_MEMORY;
            memcpy(v, view[x], sizeof view[x]);
            attrs[na++] = (ir_attr){.name = names[x], .type = IR_ATTR_INTS, .n = 3, .ints = v};
        }
        n->attrs = attrs;
        n->n_attrs = na;
        n->params = NULL;
        CORE_TRY(op_get(IR_OP_SDPA)->check(g, n));
        for (int x = 0; x < 3; x++)
            if (take[x]) CORE_TRY(pass_node_set_input(c, k, x, src[x]));
        c->pg->attention_views++;
    }
    return ANVIL_OK;
}
