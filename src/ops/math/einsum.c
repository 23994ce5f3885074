/* Einsum: the general reference kernel. The equation is parsed once at load; inference and the
 * kernel then bind labels to dims (repeated labels in one operand take its diagonal, size-1 dims
 * broadcast, "..." stands for the broadcast leading dims) and the kernel walks the whole index
 * space, output indices outermost, so each output element is one finished sum. */
#include "ops/tensor_common.h"

#define EIN_MAX_INPUTS 16
#define EIN_MAX_TERM 64 /* labels per term, before ellipsis expansion */
#define EIN_LABELS 52   /* a-z and A-Z */
#define EIN_ELL (-1)    /* the "..." token */
#define EIN_MAX_VARS (EIN_LABELS + IR_MAX_RANK)

typedef struct ein_term {
    int n;                    /* tokens */
    int8_t tok[EIN_MAX_TERM]; /* label 0..51 or EIN_ELL */
    bool has_ell;
} ein_term;

typedef struct ein_params {
    int n_terms;
    ein_term in[EIN_MAX_INPUTS];
    ein_term out;
    bool implicit; /* no "->": the output is derived */
} ein_params;

static int ein_label(char c) {
    if (c >= 'a' && c <= 'z') return c - 'a';
    if (c >= 'A' && c <= 'Z') return 26 + (c - 'A');
    return -1;
}

/* Implicit output order: labels sorted by character code, upper case before lower case. */
static int ein_label_rank(int l) {
    return l >= 26 ? l - 26 : l + 26;
}

/* Parses one term from s[*pos] up to ',', '-' or the end. */
static anvil_status ein_parse_term(const ir_node *n, const char *s, size_t *pos, ein_term *t) {
    t->n = 0;
    t->has_ell = false;
    while (s[*pos] && s[*pos] != ',' && s[*pos] != '-') {
        char c = s[*pos];
        if (c == ' ') {
            (*pos)++;
            continue;
        }
        if (t->n >= EIN_MAX_TERM)
            return core_err(ANVIL_ERR_LIMIT, "%s: an equation term has more than %d labels",
                            ir_node_label(n), EIN_MAX_TERM);
        if (c == '.') {
            if (strncmp(s + *pos, "...", 3) != 0 || t->has_ell)
                return core_err(ANVIL_ERR_INVALID_MODEL,
                                "%s: attribute 'equation' has a stray '.' or a second '...' in "
                                "one term at offset %zu",
                                ir_node_label(n), *pos);
            t->has_ell = true;
            t->tok[t->n++] = EIN_ELL;
            *pos += 3;
            continue;
        }
        int l = ein_label(c);
        if (l < 0)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: attribute 'equation' has '%c' at offset %zu; labels are letters "
                            "a-z, A-Z",
                            ir_node_label(n), c, *pos);
        t->tok[t->n++] = (int8_t)l;
        (*pos)++;
    }
    return ANVIL_OK;
}

static anvil_status einsum_check(ir_graph *g, ir_node *n) {
    CORE_TRY(tensor_check_opset(n, 12, 0));
    const ir_attr *a = ir_node_attr(n, "equation");
    if (!a)
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s: attribute 'equation' is required",
                        ir_node_label(n));
    const char *eq;
    CORE_TRY(ir_attr_string(n, "equation", "", &eq));
    if (n->n_inputs > EIN_MAX_INPUTS)
        return core_err(ANVIL_ERR_LIMIT, "%s: %d operands; anvil's Einsum takes at most %d",
                        ir_node_label(n), n->n_inputs, EIN_MAX_INPUTS);
    OP_PARAMS_NEW(g, ein_params, p);
    memset(p, 0, sizeof *p);
    size_t pos = 0;
    for (;;) {
        if (p->n_terms >= EIN_MAX_INPUTS)
            return core_err(ANVIL_ERR_LIMIT, "%s: the equation has more than %d operands",
                            ir_node_label(n), EIN_MAX_INPUTS);
        CORE_TRY(ein_parse_term(n, eq, &pos, &p->in[p->n_terms++]));
        if (eq[pos] != ',') break;
        pos++;
    }
    p->implicit = true;
    if (eq[pos] == '-') {
        if (eq[pos + 1] != '>')
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: attribute 'equation' has '-' not followed by '>' at offset %zu",
                            ir_node_label(n), pos);
        pos += 2;
        p->implicit = false;
        CORE_TRY(ein_parse_term(n, eq, &pos, &p->out));
        if (eq[pos])
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: attribute 'equation' has '%c' after the output term",
                            ir_node_label(n), eq[pos]);
    }
    if (p->n_terms != n->n_inputs)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: the equation '%s' has %d operand terms but the node has %d inputs",
                        ir_node_label(n), eq, p->n_terms, n->n_inputs);
    bool used[EIN_LABELS] = {false}, seen_out[EIN_LABELS] = {false};
    for (int i = 0; i < p->n_terms; i++)
        for (int k = 0; k < p->in[i].n; k++)
            if (p->in[i].tok[k] >= 0) used[p->in[i].tok[k]] = true;
    for (int k = 0; k < p->out.n; k++) {
        int l = p->out.tok[k];
        if (l < 0) continue;
        if (!used[l] || seen_out[l])
            return core_err(ANVIL_ERR_INVALID_MODEL, "%s: output label '%c' of equation '%s' %s",
                            ir_node_label(n), l < 26 ? 'a' + l : 'A' + l - 26, eq,
                            used[l] ? "appears twice in the output" : "appears in no operand");
        seen_out[l] = true;
    }
    n->params = p;
    return ANVIL_OK;
}

/* The labels and ellipsis bound to sizes for one call. dims may hold IR_DIM_UNKNOWN during
 * load-time inference. */
typedef struct ein_bind {
    int ell; /* broadcast dims "..." stands for */
    int64_t ell_dim[IR_MAX_RANK];
    int64_t label_dim[EIN_LABELS]; /* -2: label unused */
    int count[EIN_LABELS];         /* occurrences over all operands */
    ein_term out;                  /* the output term (derived when implicit) */
    bool out_has_ell;
} ein_bind;

/* Merges size d into *cur with broadcasting of 1; false when they conflict. */
static bool ein_merge(int64_t *cur, int64_t d) {
    if (*cur == -2 || *cur == 1 || *cur == IR_DIM_UNKNOWN) {
        if (!(*cur == IR_DIM_UNKNOWN && d == 1)) *cur = d;
        return true;
    }
    return d == 1 || d == IR_DIM_UNKNOWN || d == *cur;
}

static anvil_status ein_bind_dims(const ir_node *n, const int *ranks, const int64_t *const *dims,
                                  ein_bind *b) {
    const ein_params *p = n->params;
    memset(b, 0, sizeof *b);
    for (int l = 0; l < EIN_LABELS; l++) b->label_dim[l] = -2;
    for (int i = 0; i < p->n_terms; i++) {
        const ein_term *t = &p->in[i];
        int labels = t->n - (t->has_ell ? 1 : 0);
        int e = ranks[i] - labels;
        if (t->has_ell ? e < 0 : e != 0)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: input %d has rank %d but its equation term has %d labels%s",
                            ir_node_label(n), i, ranks[i], labels, t->has_ell ? " plus '...'" : "");
        if (e > b->ell) {
            /* right-align the existing broadcast dims under the longer ellipsis */
            int shift = e - b->ell;
            for (int k = b->ell - 1; k >= 0; k--) b->ell_dim[k + shift] = b->ell_dim[k];
            for (int k = 0; k < shift; k++) b->ell_dim[k] = -2;
            b->ell = e;
        }
        int axis = 0;
        for (int k = 0; k < t->n; k++) {
            if (t->tok[k] == EIN_ELL) {
                for (int j = 0; j < e; j++)
                    if (!ein_merge(&b->ell_dim[b->ell - e + j], dims[i][axis + j]))
                        return core_err(ANVIL_ERR_SHAPE,
                                        "%s: input %d dim %d (%lld) does not broadcast with the "
                                        "other operands' '...' dims",
                                        ir_node_label(n), i, axis + j,
                                        (long long)dims[i][axis + j]);
                axis += e;
                continue;
            }
            int l = t->tok[k];
            b->count[l]++;
            if (!ein_merge(&b->label_dim[l], dims[i][axis]))
                return core_err(ANVIL_ERR_SHAPE,
                                "%s: label '%c' has size %lld at input %d dim %d but %lld "
                                "elsewhere",
                                ir_node_label(n), l < 26 ? 'a' + l : 'A' + l - 26,
                                (long long)dims[i][axis], i, axis, (long long)b->label_dim[l]);
            axis++;
        }
    }
    for (int k = 0; k < b->ell; k++)
        if (b->ell_dim[k] == -2) b->ell_dim[k] = 1;
    bool any_ell = false;
    for (int i = 0; i < p->n_terms; i++) any_ell |= p->in[i].has_ell;
    if (!p->implicit) {
        b->out = p->out;
        if (p->out.has_ell && !any_ell)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: the output term has '...' but no operand does", ir_node_label(n));
    } else {
        /* implicit: broadcast dims first, then labels seen exactly once, in label order */
        b->out.n = 0;
        if (any_ell) b->out.tok[b->out.n++] = EIN_ELL;
        for (int r = 0; r < EIN_LABELS; r++)
            for (int l = 0; l < EIN_LABELS; l++)
                if (ein_label_rank(l) == r && b->count[l] == 1) b->out.tok[b->out.n++] = (int8_t)l;
        b->out.has_ell = any_ell;
    }
    b->out_has_ell = b->out.has_ell;
    return ANVIL_OK;
}

static anvil_status einsum_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                                 op_tinfo *out, int n_out) {
    (void)g;
    (void)n_out;
    anvil_dtype dt = in[0].dtype;
    for (int i = 0; i < n_in; i++) {
        if (in[i].dtype != dt)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: input %d is %s but input 0 is %s; Einsum "
                            "operands share one dtype",
                            ir_node_label(n), i, anvil_dtype_name(in[i].dtype),
                            anvil_dtype_name(dt));
    }
    if (!core_dtype_supported(dt) || dt == ANVIL_DTYPE_BOOL)
        return core_err(ANVIL_ERR_UNSUPPORTED, "%s: Einsum needs a numeric dtype, got %s",
                        ir_node_label(n), anvil_dtype_name(dt));
    out[0].dtype = dt;
    int ranks[EIN_MAX_INPUTS];
    const int64_t *dims[EIN_MAX_INPUTS];
    for (int i = 0; i < n_in; i++) {
        if (in[i].shape.rank < 0) {
            ir_shape_unknown(&out[0].shape);
            return ANVIL_OK;
        }
        ranks[i] = in[i].shape.rank;
        dims[i] = in[i].shape.d;
    }
    ein_bind b;
    CORE_TRY(ein_bind_dims(n, ranks, dims, &b));
    int r = b.out.n - (b.out_has_ell ? 1 : 0) + (b.out_has_ell ? b.ell : 0);
    CORE_TRY(tensor_check_rank(n, "the output", r));
    ir_shape *y = &out[0].shape;
    tensor_shape_unknown_dims(y, r);
    int o = 0;
    for (int k = 0; k < b.out.n; k++) {
        if (b.out.tok[k] == EIN_ELL) {
            for (int j = 0; j < b.ell; j++) y->d[o++] = b.ell_dim[j];
        } else {
            y->d[o++] = b.label_dim[b.out.tok[k]];
        }
    }
    return ANVIL_OK;
}

/* The loop nest: output variables first, then summed ones; each has a size and per-operand
 * element strides (summed over repeated labels, which walks the diagonal; 0 where broadcast). */
typedef struct ein_loop {
    int nv, nout;
    int64_t size[EIN_MAX_VARS];
    int64_t stride[EIN_MAX_INPUTS][EIN_MAX_VARS];
} ein_loop;

static void ein_add_stride(ein_loop *L, int op, int var, int64_t dim, int64_t stride) {
    if (dim != 1 || L->size[var] == 1) L->stride[op][var] += stride;
}

static anvil_status einsum_run(const ir_node *n, const op_tensor *const *in, int n_in,
                               op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_out;
    (void)ctx;
    const ein_params *p = n->params;
    int ranks[EIN_MAX_INPUTS];
    const int64_t *dims[EIN_MAX_INPUTS];
    for (int i = 0; i < n_in; i++) {
        ranks[i] = in[i]->rank;
        dims[i] = in[i]->dims;
    }
    ein_bind b;
    CORE_TRY(ein_bind_dims(n, ranks, dims, &b));
    /* variable numbering: var_of_label / var_of_ell give each its place in the nest */
    int var_of_label[EIN_LABELS], var_of_ell[IR_MAX_RANK] = {0};
    ein_loop L;
    memset(&L, 0, sizeof L);
    for (int l = 0; l < EIN_LABELS; l++) var_of_label[l] = -1;
    for (int k = 0; k < b.out.n; k++) {
        if (b.out.tok[k] == EIN_ELL) {
            for (int j = 0; j < b.ell; j++) {
                var_of_ell[j] = L.nv;
                L.size[L.nv++] = b.ell_dim[j];
            }
        } else {
            var_of_label[b.out.tok[k]] = L.nv;
            L.size[L.nv++] = b.label_dim[b.out.tok[k]];
        }
    }
    L.nout = L.nv;
    if (!b.out_has_ell)
        for (int j = 0; j < b.ell; j++) {
            var_of_ell[j] = L.nv;
            L.size[L.nv++] = b.ell_dim[j];
        }
    for (int l = 0; l < EIN_LABELS; l++)
        if (b.count[l] && var_of_label[l] < 0) {
            var_of_label[l] = L.nv;
            L.size[L.nv++] = b.label_dim[l];
        }
    for (int i = 0; i < n_in; i++) {
        const ein_term *t = &p->in[i];
        int64_t st[IR_MAX_RANK];
        tensor_strides(in[i]->dims, in[i]->rank, st);
        int e = in[i]->rank - (t->n - (t->has_ell ? 1 : 0)), axis = 0;
        for (int k = 0; k < t->n; k++) {
            if (t->tok[k] == EIN_ELL) {
                for (int j = 0; j < e; j++)
                    ein_add_stride(&L, i, var_of_ell[b.ell - e + j], in[i]->dims[axis + j],
                                   st[axis + j]);
                axis += e;
            } else {
                ein_add_stride(&L, i, var_of_label[t->tok[k]], in[i]->dims[axis], st[axis]);
                axis++;
            }
        }
    }
    op_tensor *y = out[0];
    size_t ycnt = op_tensor_numel(y), inner = 1;
    /* the summed index space can exceed every operand ("i,j->" multiplies two sizes) */
    for (int v = L.nout; v < L.nv; v++)
        if (!core_mul_size(inner, (size_t)L.size[v], &inner) ||
            (ycnt && !core_mul_size(inner, ycnt, &(size_t){0})))
            return core_err(ANVIL_ERR_LIMIT,
                            "%s: the equation's index space is too large to enumerate; split "
                            "the contraction into smaller Einsum or MatMul nodes",
                            ir_node_label(n));
    bool is_float = core_dtype_is_float(y->dtype);
    int64_t idx[EIN_MAX_VARS] = {0}, off[EIN_MAX_INPUTS] = {0};
    for (size_t o = 0; o < ycnt; o++) {
        double accf = 0;
        uint64_t acci = 0;
        /* an empty sum (a summed dim of size 0) never moves the offsets, and never reads them */
        for (size_t s = 0; s < inner; s++) {
            double pf = 1;
            uint64_t pi = 1;
            for (int i = 0; i < n_in; i++) {
                if (is_float)
                    pf *= core_load_f64(in[i]->dtype, in[i]->data, (size_t)off[i]);
                else
                    pi *= (uint64_t)core_load_i64(in[i]->dtype, in[i]->data, (size_t)off[i]);
            }
            accf += pf;
            acci += pi;
            /* advance the odometer over all variables, innermost last */
            for (int v = L.nv - 1; v >= 0; v--) {
                if (++idx[v] < L.size[v]) {
                    for (int i = 0; i < n_in; i++) off[i] += L.stride[i][v];
                    break;
                }
                for (int i = 0; i < n_in; i++) off[i] -= (L.size[v] - 1) * L.stride[i][v];
                idx[v] = 0;
            }
        }
        if (is_float)
            core_store_f64(y->dtype, y->data, o, accf);
        else
            core_store_i64(y->dtype, y->data, o, (int64_t)acci);
    }
    return ANVIL_OK;
}

const op_impl op_impl_einsum = {
    .min_inputs = 1,
    .max_inputs = EIN_MAX_INPUTS,
    .min_outputs = 1,
    .max_outputs = 1,
    .check = einsum_check,
    .infer = einsum_infer,
    .run = einsum_run,
};
