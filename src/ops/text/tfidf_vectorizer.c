/* TfIdfVectorizer (opset 9) counts pool n-grams in each row of an integer
 * input. An n-gram of length L with skip distance d is x[s], x[s+d], ...,
 * x[s+(L-1)d]; distances run from 1 to max_skip_count + 1, except that unigrams
 * are counted once (at distance 1) since their position set does not depend on
 * d. Pool n-grams are matched by brute force against each start position: this
 * is the reference kernel, and pools are small. When the pool lists the same
 * n-gram twice the later entry wins, matching the ONNX reference's trie, whose
 * node id is overwritten. String inputs (pool_strings) are not supported: anvil
 * holds no string tensors. */
#include "ops/tensor_common.h"

#include <string.h>

enum { TFIDF_TF, TFIDF_IDF, TFIDF_TFIDF }; /* in the order of tfidf_modes */
static const char *const tfidf_modes[] = {"TF", "IDF", "TFIDF", NULL};

/* One pool n-gram that can match: its items are pool[start .. start+len). */
typedef struct tfidf_gram {
    size_t start, len;
    int64_t out; /* output column */
} tfidf_gram;

typedef struct tfidf_params {
    int mode;
    int64_t max_skip;
    const int64_t *pool;
    tfidf_gram *grams; /* the active n-grams (length within [min, max], not superseded) */
    size_t n_grams;
    int64_t out_size;
    const float *weights; /* NULL when absent; else out_size of them */
} tfidf_params;

static anvil_status tfidf_attr_err(const ir_node *n, const char *what) {
    return core_err(ANVIL_ERR_INVALID_MODEL, "node '%s' (TfIdfVectorizer): %s", ir_node_label(n),
                    what);
}

static bool tfidf_same(const int64_t *pool, const tfidf_gram *a, const tfidf_gram *b) {
    return a->len == b->len && memcmp(pool + a->start, pool + b->start, a->len * sizeof *pool) == 0;
}

static anvil_status tfidf_check(ir_graph *g, ir_node *n) {
    CORE_TRY(tensor_need_opset(n, 9));
    OP_PARAMS_NEW(g, tfidf_params, p);
    CORE_TRY(tensor_attr_choice(n, "mode", "", tfidf_modes, ANVIL_ERR_INVALID_MODEL,
                                "'TF', 'IDF' or 'TFIDF'", &p->mode));
    for (int i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, "pool_strings") == 0)
            return core_err(
                ANVIL_ERR_UNSUPPORTED,
                "node '%s' (TfIdfVectorizer): attribute 'pool_strings' is not supported (anvil has "
                "no string tensors); map tokens to integers and use pool_int64s",
                ir_node_label(n));
    int64_t min_len = 0, max_len = 0;
    CORE_TRY(ir_attr_int(n, "min_gram_length", -1, &min_len));
    CORE_TRY(ir_attr_int(n, "max_gram_length", -1, &max_len));
    CORE_TRY(ir_attr_int(n, "max_skip_count", -1, &p->max_skip));
    if (min_len < 1 || max_len < min_len)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "node '%s' (TfIdfVectorizer): min_gram_length = %lld and max_gram_length = "
                        "%lld must both be set with 1 <= min <= max",
                        ir_node_label(n), (long long)min_len, (long long)max_len);
    if (p->max_skip < 0 || p->max_skip > INT32_MAX)
        return core_err(
            ANVIL_ERR_INVALID_MODEL,
            "node '%s' (TfIdfVectorizer): max_skip_count = %lld must be set and in [0, %d]",
            ir_node_label(n), (long long)p->max_skip, INT32_MAX);
    const int64_t *counts = NULL, *indexes = NULL;
    size_t n_counts = 0, n_indexes = 0, n_pool = 0, n_weights = 0;
    CORE_TRY(ir_attr_ints(n, "pool_int64s", &p->pool, &n_pool));
    CORE_TRY(ir_attr_ints(n, "ngram_counts", &counts, &n_counts));
    CORE_TRY(ir_attr_ints(n, "ngram_indexes", &indexes, &n_indexes));
    CORE_TRY(ir_attr_floats(n, "weights", &p->weights, &n_weights));
    if (!p->pool || n_pool == 0) return tfidf_attr_err(n, "attribute 'pool_int64s' is required");
    if (!counts || n_counts == 0) return tfidf_attr_err(n, "attribute 'ngram_counts' is required");
    if (!indexes || n_indexes == 0)
        return tfidf_attr_err(n, "attribute 'ngram_indexes' is required");
    /* Count the n-grams: counts[i] is where the (i+1)-grams start in the pool. */
    size_t total = 0;
    for (size_t i = 0; i < n_counts; i++) {
        int64_t lo = counts[i], hi = i + 1 < n_counts ? counts[i + 1] : (int64_t)n_pool;
        if (lo < 0 || hi < lo || hi > (int64_t)n_pool)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "node '%s' (TfIdfVectorizer): ngram_counts must be non-decreasing "
                            "offsets into pool_int64s (%zu items); entry %zu is %lld",
                            ir_node_label(n), n_pool, i, (long long)lo);
        if ((uint64_t)(hi - lo) % (i + 1) != 0)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "node '%s' (TfIdfVectorizer): the %zu-grams span %lld pool items, not "
                            "a multiple of %zu",
                            ir_node_label(n), i + 1, (long long)(hi - lo), i + 1);
        total += (size_t)(hi - lo) / (i + 1);
    }
    if (n_indexes != total)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "node '%s' (TfIdfVectorizer): ngram_indexes has %zu entries but the pool "
                        "holds %zu n-grams; give one output column per n-gram",
                        ir_node_label(n), n_indexes, total);
    p->out_size = 0;
    for (size_t i = 0; i < n_indexes; i++) {
        if (indexes[i] < 0 || indexes[i] >= INT32_MAX)
            return core_err(
                ANVIL_ERR_INVALID_MODEL,
                "node '%s' (TfIdfVectorizer): ngram_indexes[%zu] = %lld is outside [0, %d)",
                ir_node_label(n), i, (long long)indexes[i], INT32_MAX);
        if (indexes[i] + 1 > p->out_size) p->out_size = indexes[i] + 1;
    }
    if (n_weights == 0) {
        p->weights = NULL;
    } else if ((int64_t)n_weights < p->out_size) {
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "node '%s' (TfIdfVectorizer): 'weights' has %zu entries but the output has "
                        "%lld columns; give one weight per column",
                        ir_node_label(n), n_weights, (long long)p->out_size);
    }
    p->grams = core_arena_array(g->arena, total, sizeof *p->grams);
    if (!p->grams) return ANVIL_ERR_OUT_OF_MEMORY;
    p->n_grams = 0;
    size_t id = 0;
    for (size_t i = 0; i < n_counts; i++) {
        size_t glen = i + 1;
        size_t lo = (size_t)counts[i], hi = i + 1 < n_counts ? (size_t)counts[i + 1] : n_pool;
        for (size_t s = lo; s + glen <= hi; s += glen, id++) {
            if ((int64_t)glen < min_len || (int64_t)glen > max_len) continue;
            tfidf_gram gr = {.start = s, .len = glen, .out = indexes[id]};
            size_t k = 0;
            while (k < p->n_grams && !tfidf_same(p->pool, &p->grams[k], &gr)) k++;
            p->grams[k] = gr; /* a later duplicate replaces the earlier entry */
            if (k == p->n_grams) p->n_grams++;
        }
    }
    n->params = p;
    return ANVIL_OK;
}

static anvil_status tfidf_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                                op_tinfo *out, int n_out) {
    (void)n_in;
    (void)n_out;
    const tfidf_params *p = n->params;
    if (in[0].dtype != ANVIL_DTYPE_INT32 && in[0].dtype != ANVIL_DTYPE_INT64)
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "node '%s' (TfIdfVectorizer): input X dtype %s is not supported; expected "
                        "INT32 or INT64 (string inputs are not supported)",
                        ir_node_label(n), anvil_dtype_name(in[0].dtype));
    const ir_shape *x = &in[0].shape;
    if (x->rank == 0 || x->rank > 2) {
        char buf[128];
        return core_err(ANVIL_ERR_SHAPE,
                        "node '%s' (TfIdfVectorizer): input X must be [C] or [N, C], got shape %s",
                        ir_node_label(n), ir_shape_str(g, x, buf, sizeof buf));
    }
    out[0].dtype = ANVIL_DTYPE_FLOAT32;
    out[0].shape = *x;
    if (x->rank > 0) {
        out[0].shape.d[x->rank - 1] = p->out_size;
        out[0].shape.sym[x->rank - 1] = -1;
    }
    return ANVIL_OK;
}

static anvil_status tfidf_run(const ir_node *n, const op_tensor *const *in, int n_in,
                              op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)ctx;
    const tfidf_params *p = n->params;
    const op_tensor *x = in[0];
    size_t rows = x->rank == 2 ? (size_t)x->dims[0] : 1;
    size_t cols = (size_t)x->dims[x->rank - 1];
    size_t width = (size_t)p->out_size;
    float *y = out[0]->data;
    for (size_t r = 0; r < rows; r++) {
        float *yr = y + r * width;
        for (size_t i = 0; i < width; i++) yr[i] = 0.0f;
        for (size_t gi = 0; gi < p->n_grams; gi++) {
            const tfidf_gram *gr = &p->grams[gi];
            size_t max_d = gr->len == 1 ? 1 : (size_t)p->max_skip + 1;
            for (size_t d = 1; d <= max_d; d++) {
                size_t span = (gr->len - 1) * d; /* cols <= INT64_MAX and d <= 2^31: no wrap */
                if (span >= cols) break;
                for (size_t s = 0; s + span < cols; s++) {
                    size_t j = 0;
                    while (j < gr->len && core_load_i64(x->dtype, x->data, r * cols + s + j * d) ==
                                              p->pool[gr->start + j])
                        j++;
                    if (j == gr->len) yr[gr->out] += 1.0f;
                }
            }
        }
        for (size_t i = 0; i < width; i++) {
            float w = p->weights ? p->weights[i] : 1.0f;
            if (p->mode == TFIDF_IDF)
                yr[i] = yr[i] > 0.0f ? w : 0.0f;
            else if (p->mode == TFIDF_TFIDF)
                yr[i] *= w;
        }
    }
    return ANVIL_OK;
}

const op_impl op_impl_tfidfvectorizer = {.min_inputs = 1,
                                         .max_inputs = 1,
                                         .min_outputs = 1,
                                         .max_outputs = 1,
                                         .check = tfidf_check,
                                         .infer = tfidf_infer,
                                         .run = tfidf_run};
