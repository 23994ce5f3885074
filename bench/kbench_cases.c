/* anvil_kbench's cases: one MatMul or Conv node built with the IR API as a session would see it
 * (weights constant, so every variant packs them once in prepare), its inputs filled from a fixed
 * seed, and the check of a variant's output against the reference: the reference kernel's whole
 * output for small cases, double-precision dot products at sampled positions (edges included)
 * for large ones, where the reference kernel would take minutes. Also the conv layer sets. */
#include "kbench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SAMPLES 2048

/* ---- random data (fixed seed: every run measures the same numbers) ------------------------- */

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static float rng_float(uint64_t *s) {
    return (float)((double)(rng_next(s) >> 40) * (2.0 / 16777216.0) - 1.0);
}

static int64_t rng_below(uint64_t *s, int64_t n) {
    return (int64_t)(rng_next(s) % (uint64_t)n);
}

/* ---- the benchmark cases --------------------------------------------------------------------- */

ir_node *kb_case_node(kb_case *c) {
    return &c->g->nodes[c->node];
}

void kb_case_free(kb_case *c) {
    for (int i = 0; i < c->n_in; i++) free(c->in[i].data);
    free(c->ref);
    ir_graph_free(c->g);
    memset(c, 0, sizeof *c);
}

static bool case_begin(kb_case *c, ir_op op, int n_in, int n_attrs) {
    if (ir_graph_create(NULL, &c->g) != ANVIL_OK) return false;
    c->g->opset = 17;
    c->n_in = n_in;
    ir_vid v;
    if (ir_graph_add_node(c->g, op, "bench", n_in, 1, n_attrs, &c->node) != ANVIL_OK ||
        ir_graph_add_value(c->g, "y", &v) != ANVIL_OK)
        return false;
    kb_case_node(c)->outputs[0] = v;
    c->g->values[v].producer = c->node;
    for (int i = 0; i < n_in; i++) {
        char name[16];
        snprintf(name, sizeof name, "x%d", i);
        if (ir_graph_add_value(c->g, name, &v) != ANVIL_OK) return false;
        kb_case_node(c)->inputs[i] = v;
    }
    return true;
}

static void attr_ints(kb_case *c, int k, const char *name, const int64_t *v, size_t n) {
    ir_attr *a = &kb_case_node(c)->attrs[k];
    a->name = core_arena_strdup(c->g->arena, name);
    a->type = IR_ATTR_INTS;
    int64_t *copy = core_arena_array(c->g->arena, n, sizeof *copy);
    memcpy(copy, v, n * sizeof *v);
    a->ints = copy;
    a->n = n;
}

static void attr_int(kb_case *c, int k, const char *name, int64_t v) {
    ir_attr *a = &kb_case_node(c)->attrs[k];
    a->name = core_arena_strdup(c->g->arena, name);
    a->type = IR_ATTR_INT;
    a->i = v;
}

/* Input i: random fp32 data times scale; known inputs are constants (weights). */
static bool case_input(kb_case *c, int i, int rank, const int64_t *dims, bool known, float scale,
                       uint64_t *rng) {
    op_tensor *t = &c->in[i];
    t->dtype = ANVIL_DTYPE_FLOAT32;
    t->rank = rank;
    size_t n = 1;
    for (int d = 0; d < rank; d++) {
        t->dims[d] = dims[d];
        n *= (size_t)dims[d];
    }
    float *p = core_aligned_alloc(64, n * sizeof(float) + 64);
    if (!p) return false;
    for (size_t j = 0; j < n; j++) p[j] = rng_float(rng) * scale;
    t->data = p;
    op_tinfo *ti = &c->tin[i];
    ti->dtype = ANVIL_DTYPE_FLOAT32;
    ir_shape_set(&ti->shape, rank, dims);
    ti->value = known ? p : NULL;
    return true;
}

/* check + infer; then the reference output when the shape is small enough (flops <= full_limit). */
static bool case_finish(kb_case *c, double full_limit) {
    ir_shape_unknown(&c->tout.shape);
    const op_impl *impl = op_get(kb_case_node(c)->op);
    if (op_check_graph(c->g) != ANVIL_OK ||
        impl->infer(c->g, kb_case_node(c), c->tin, c->n_in, &c->tout, 1) != ANVIL_OK ||
        !ir_shape_is_static(&c->tout.shape) ||
        !core_tensor_bytes(c->tout.dtype, c->tout.shape.d, c->tout.shape.rank, &c->out_bytes)) {
        fprintf(stderr, "kbench: %s: %s\n", c->label, anvil_last_error());
        return false;
    }
    if (c->flops > full_limit) return true;
    c->ref = core_aligned_alloc(64, c->out_bytes + 64);
    if (!c->ref) return false;
    op_tensor out = {c->tout.dtype, c->tout.shape.rank, {0}, c->ref};
    for (int d = 0; d < out.rank; d++) out.dims[d] = c->tout.shape.d[d];
    const op_tensor *ins[KB_MAX_IN];
    for (int i = 0; i < c->n_in; i++) ins[i] = &c->in[i];
    op_tensor *outs[1] = {&out};
    if (impl->run(kb_case_node(c), ins, c->n_in, outs, 1, NULL) != ANVIL_OK) {
        fprintf(stderr, "kbench: %s: reference failed: %s\n", c->label, anvil_last_error());
        return false;
    }
    return true;
}

bool kb_case_matmul(kb_case *c, int64_t m, int64_t n, int64_t k, bool var_b, uint64_t seed,
                    double full_limit) {
    memset(c, 0, sizeof *c);
    c->kind = KB_CASE_MATMUL;
    c->m = m;
    c->n = n;
    c->k = k;
    c->flops = 2.0 * (double)m * (double)n * (double)k;
    snprintf(c->label, sizeof c->label, "%lldx%lldx%lld", (long long)m, (long long)n, (long long)k);
    uint64_t rng = seed;
    return case_begin(c, IR_OP_MATMUL, 2, 0) &&
           case_input(c, 0, 2, (int64_t[]){m, k}, false, 1.0f, &rng) &&
           case_input(c, 1, 2, (int64_t[]){k, n}, !var_b, 1.0f, &rng) && case_finish(c, full_limit);
}

/* "r50 512x14x14>512 k3 s2": the layer's row label in the tables (and what --layer matches). */
void kb_conv_label(const kb_conv_layer *l, char *buf, size_t size) {
    snprintf(buf, size, "%s %dx%dx%d>%d k%d s%d%s", l->net, l->cin, l->h, l->w, l->cout, l->k,
             l->stride, l->group > 1 ? " dw" : "");
}

bool kb_case_conv(kb_case *c, const kb_conv_layer *l, bool nhwc, uint64_t seed, double full_limit) {
    memset(c, 0, sizeof *c);
    c->kind = KB_CASE_CONV;
    c->conv = *l;
    c->nhwc = nhwc;
    c->ho = (l->h + 2 * l->pad - l->k) / l->stride + 1;
    c->wo = (l->w + 2 * l->pad - l->k) / l->stride + 1;
    int cin_g = l->cin / l->group;
    c->flops = 2.0 * l->cout * (double)c->ho * (double)c->wo * cin_g * l->k * l->k;
    kb_conv_label(l, c->label, sizeof c->label);
    uint64_t rng = seed;
    /* Weights scaled by 1/sqrt(fan-in), as initialisations do, so outputs stay O(1). */
    float ws = 1.0f / sqrtf((float)(cin_g * l->k * l->k));
    if (!case_begin(c, nhwc ? IR_OP_CONV_NHWC : IR_OP_CONV, 3, 5)) return false;
    attr_ints(c, 0, "kernel_shape", (int64_t[]){l->k, l->k}, 2);
    attr_ints(c, 1, "strides", (int64_t[]){l->stride, l->stride}, 2);
    attr_ints(c, 2, "pads", (int64_t[]){l->pad, l->pad, l->pad, l->pad}, 4);
    attr_ints(c, 3, "dilations", (int64_t[]){1, 1}, 2);
    attr_int(c, 4, "group", l->group);
    const int64_t xd[4] = {1, nhwc ? l->h : l->cin, nhwc ? l->w : l->h, nhwc ? l->cin : l->w};
    return case_input(c, 0, 4, xd, false, 1.0f, &rng) &&
           case_input(c, 1, 4, (int64_t[]){l->cout, cin_g, l->k, l->k}, true, ws, &rng) &&
           case_input(c, 2, 1, (int64_t[]){l->cout}, true, 1.0f, &rng) &&
           case_finish(c, full_limit);
}

/* One output element computed in double: the sampled check's oracle. */
static double case_expected(const kb_case *c, int64_t a, int64_t b, int64_t d) {
    if (c->kind == KB_CASE_MATMUL) {
        const float *x = c->in[0].data, *w = c->in[1].data;
        double s = 0;
        for (int64_t k = 0; k < c->k; k++) s += (double)x[a * c->k + k] * w[k * c->n + b];
        return s;
    }
    const kb_conv_layer *l = &c->conv;
    const float *x = c->in[0].data, *w = c->in[1].data, *bias = c->in[2].data;
    int cin_g = l->cin / l->group, cout_g = l->cout / l->group;
    int64_t g = a / cout_g;
    double s = bias[a];
    for (int ci = 0; ci < cin_g; ci++)
        for (int kh = 0; kh < l->k; kh++)
            for (int kw = 0; kw < l->k; kw++) {
                int64_t ih = b * l->stride - l->pad + kh, iw = d * l->stride - l->pad + kw;
                if (ih < 0 || ih >= l->h || iw < 0 || iw >= l->w) continue;
                const int64_t ch = g * cin_g + ci;
                s +=
                    (double)
                        x[c->nhwc ? (ih * l->w + iw) * l->cin + ch : (ch * l->h + ih) * l->w + iw] *
                    w[((a * cin_g + ci) * l->k + kh) * l->k + kw];
            }
    return s;
}

/* max|got - ref| / max|ref| over the whole output (reference available) or over SAMPLES
 * positions, a quarter of them on the last row/column (edge tiles) and a quarter on the last
 * output channel / last pixel. Any NaN gives infinity. */
double kb_case_error(const kb_case *c, const float *got) {
    double maxd = 0, maxr = 0;
    if (c->ref) {
        size_t n = c->out_bytes / sizeof(float);
        for (size_t i = 0; i < n; i++) {
            double d = fabs((double)got[i] - c->ref[i]);
            if (!(d <= INFINITY) || got[i] != got[i]) return INFINITY;
            if (d > maxd) maxd = d;
            if (fabs((double)c->ref[i]) > maxr) maxr = fabs((double)c->ref[i]);
        }
        return maxr > 0 ? maxd / maxr : maxd;
    }
    uint64_t rng = 12345;
    for (int s = 0; s < SAMPLES; s++) {
        int64_t a, b, d = 0, idx;
        if (c->kind == KB_CASE_MATMUL) {
            a = s % 4 == 2 ? c->m - 1 : rng_below(&rng, c->m);
            b = s % 4 == 1 ? c->n - 1 : rng_below(&rng, c->n);
            idx = a * c->n + b;
        } else {
            a = s % 4 == 2 ? c->conv.cout - 1 : rng_below(&rng, c->conv.cout);
            b = s % 4 == 1 ? c->ho - 1 : rng_below(&rng, c->ho);
            d = s % 4 == 1 ? c->wo - 1 : rng_below(&rng, c->wo);
            idx = c->nhwc ? (b * c->wo + d) * c->conv.cout + a : (a * c->ho + b) * c->wo + d;
        }
        double want = case_expected(c, a, b, d), diff = fabs((double)got[idx] - want);
        if (got[idx] != got[idx] || !(diff <= INFINITY)) return INFINITY;
        if (diff > maxd) maxd = diff;
        if (fabs(want) > maxr) maxr = fabs(want);
    }
    return maxr > 0 ? maxd / maxr : maxd;
}

/* ---- shapes ---------------------------------------------------------------------------------- */

/* ResNet-50 v1.5 (torchvision; stride on the 3x3 of each stage's first block), 224x224, batch 1:
 * each distinct conv layer once, with how often the network has it. */
static const kb_conv_layer resnet50[] = {
    {"r50", 3, 224, 224, 64, 7, 2, 3, 1, 1},    {"r50", 64, 56, 56, 64, 1, 1, 0, 1, 1},
    {"r50", 64, 56, 56, 64, 3, 1, 1, 1, 3},     {"r50", 64, 56, 56, 256, 1, 1, 0, 1, 4},
    {"r50", 256, 56, 56, 64, 1, 1, 0, 1, 2},    {"r50", 256, 56, 56, 128, 1, 1, 0, 1, 1},
    {"r50", 128, 56, 56, 128, 3, 2, 1, 1, 1},   {"r50", 128, 28, 28, 512, 1, 1, 0, 1, 4},
    {"r50", 256, 56, 56, 512, 1, 2, 0, 1, 1},   {"r50", 512, 28, 28, 128, 1, 1, 0, 1, 3},
    {"r50", 128, 28, 28, 128, 3, 1, 1, 1, 3},   {"r50", 512, 28, 28, 256, 1, 1, 0, 1, 1},
    {"r50", 256, 28, 28, 256, 3, 2, 1, 1, 1},   {"r50", 256, 14, 14, 1024, 1, 1, 0, 1, 6},
    {"r50", 512, 28, 28, 1024, 1, 2, 0, 1, 1},  {"r50", 1024, 14, 14, 256, 1, 1, 0, 1, 5},
    {"r50", 256, 14, 14, 256, 3, 1, 1, 1, 5},   {"r50", 1024, 14, 14, 512, 1, 1, 0, 1, 1},
    {"r50", 512, 14, 14, 512, 3, 2, 1, 1, 1},   {"r50", 512, 7, 7, 2048, 1, 1, 0, 1, 3},
    {"r50", 1024, 14, 14, 2048, 1, 2, 0, 1, 1}, {"r50", 2048, 7, 7, 512, 1, 1, 0, 1, 2},
    {"r50", 512, 7, 7, 512, 3, 1, 1, 1, 2},
};

/* VGG-16, 224x224, batch 1: all 3x3, stride 1, pad 1. */
static const kb_conv_layer vgg16[] = {
    {"vgg", 3, 224, 224, 64, 3, 1, 1, 1, 1},   {"vgg", 64, 224, 224, 64, 3, 1, 1, 1, 1},
    {"vgg", 64, 112, 112, 128, 3, 1, 1, 1, 1}, {"vgg", 128, 112, 112, 128, 3, 1, 1, 1, 1},
    {"vgg", 128, 56, 56, 256, 3, 1, 1, 1, 1},  {"vgg", 256, 56, 56, 256, 3, 1, 1, 1, 2},
    {"vgg", 256, 28, 28, 512, 3, 1, 1, 1, 1},  {"vgg", 512, 28, 28, 512, 3, 1, 1, 1, 2},
    {"vgg", 512, 14, 14, 512, 3, 1, 1, 1, 3},
};

/* MobileNetV2 (width 1.0), 224x224, batch 1: the depthwise 3x3 layers (group = channels). */
static const kb_conv_layer mobilenetv2_dw[] = {
    {"mbv2", 32, 112, 112, 32, 3, 1, 1, 32, 1},  {"mbv2", 96, 112, 112, 96, 3, 2, 1, 96, 1},
    {"mbv2", 144, 56, 56, 144, 3, 1, 1, 144, 1}, {"mbv2", 144, 56, 56, 144, 3, 2, 1, 144, 1},
    {"mbv2", 192, 28, 28, 192, 3, 1, 1, 192, 2}, {"mbv2", 192, 28, 28, 192, 3, 2, 1, 192, 1},
    {"mbv2", 384, 14, 14, 384, 3, 1, 1, 384, 4}, {"mbv2", 576, 14, 14, 576, 3, 1, 1, 576, 2},
    {"mbv2", 576, 14, 14, 576, 3, 2, 1, 576, 1}, {"mbv2", 960, 7, 7, 960, 3, 1, 1, 960, 3},
};

/* EfficientNet-B0, 224x224, batch 1: its depthwise layers, 3x3 and 5x5 (padding k / 2). */
static const kb_conv_layer efficientnet_dw[] = {
    {"effb0", 32, 112, 112, 32, 3, 1, 1, 32, 1},   {"effb0", 96, 112, 112, 96, 3, 2, 1, 96, 1},
    {"effb0", 144, 56, 56, 144, 3, 1, 1, 144, 1},  {"effb0", 144, 56, 56, 144, 5, 2, 2, 144, 1},
    {"effb0", 240, 28, 28, 240, 5, 1, 2, 240, 1},  {"effb0", 240, 28, 28, 240, 3, 2, 1, 240, 1},
    {"effb0", 480, 14, 14, 480, 3, 1, 1, 480, 2},  {"effb0", 480, 14, 14, 480, 5, 1, 2, 480, 1},
    {"effb0", 672, 14, 14, 672, 5, 1, 2, 672, 2},  {"effb0", 672, 14, 14, 672, 5, 2, 2, 672, 1},
    {"effb0", 1152, 7, 7, 1152, 5, 1, 2, 1152, 3}, {"effb0", 1152, 7, 7, 1152, 3, 1, 1, 1152, 1},
};

const kb_conv_set kb_conv_sets[] = {
    {"resnet50", resnet50, sizeof resnet50 / sizeof *resnet50},
    {"vgg16", vgg16, sizeof vgg16 / sizeof *vgg16},
    {"mobilenetv2_dw", mobilenetv2_dw, sizeof mobilenetv2_dw / sizeof *mobilenetv2_dw},
    {"efficientnet_dw", efficientnet_dw, sizeof efficientnet_dw / sizeof *efficientnet_dw}};
const int kb_conv_set_count = sizeof kb_conv_sets / sizeof *kb_conv_sets;
