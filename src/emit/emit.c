/* anvil compile: a plan written out as C. The session runs once on the caller's inputs, so the
 * plan (variants, their prepared states, arena offsets) is exactly the one anvil would run; each
 * step's variant then writes the statements that compute its node (kern_emitter), against the
 * arena offsets, the weights' offsets and the workspace fixed here. What the variants prepared
 * (packed weights) and the constants the nodes read go into one weights image, checked by size
 * and hash when the library loads it.
 *
 * The emitted NET.c has no graph, no parser and no allocation while it runs: NET_create makes
 * the arena, the workspace and the thread pool once, NET_run is the steps in order. */
#include "emit/emit.h"
#include "runtime/plan.h"

#include "kernels/cpu/gemm/gemm.h"
#include "kernels/fusion.h"
#include "kernels/kernels.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EMIT_WEIGHTS_HEADER 64
#define EMIT_MAX_FILES 128

typedef struct emitter {
    kern_emit e; /* first: the callbacks get the emitter back by a cast */
    rt_session *s;
    const ir_graph *g; /* rt_session_graph(s) */
    const rt_plan *p;
    emit_buf code, decls, weights;
    const char *files[EMIT_MAX_FILES];
    int n_files;
    const char *includes[EMIT_MAX_FILES];
    int n_includes;
    size_t *const_off; /* per value: its offset in the weights, or SIZE_MAX */
    /* the current node's expressions */
    const ir_node *n;
    char (*in_expr)[64], (*out_expr)[64];
    anvil_status err;        /* a callback\'s failure (cb_in), reported after the emitter returns */
    char **out_files;        /* per graph output: the runner's .npy file base (owned) */
    char (*result_expr)[64]; /* per graph output: where NET_run copies it from (owned) */
    double latency_ms;       /* the session's median over a few runs, for the README */
} emitter;

static emitter *E(kern_emit *e) {
    return (emitter *)e;
}

static void cb_code(kern_emit *e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    emit_buf_vprintf(&E(e)->code, fmt, ap);
    va_end(ap);
}

/* File-scope text; a declaration already written (an extern two nodes need) is not repeated. */
static void cb_decl(kern_emit *e, const char *fmt, ...) {
    emit_buf one = {0};
    va_list ap;
    va_start(ap, fmt);
    emit_buf_vprintf(&one, fmt, ap);
    va_end(ap);
    emit_buf *d = &E(e)->decls;
    if (one.oom)
        d->oom = true;
    else if (one.len && !(d->data && strstr(d->data, one.data)))
        emit_buf_bytes(d, one.data, one.len);
    emit_buf_free(&one);
}

/* FNV-1a over the weights: what NET_create checks the file against. */
static uint64_t fnv1a(const unsigned char *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static size_t blob_add(emitter *m, const void *data, size_t bytes) {
    static const unsigned char zeros[64];
    size_t pad = (64 - m->weights.len % 64) % 64;
    emit_buf_bytes(&m->weights, zeros, pad);
    size_t off = m->weights.len;
    emit_buf_bytes(&m->weights, data, bytes);
    return off;
}

static anvil_status cb_blob(kern_emit *e, const void *data, size_t bytes, char *expr, size_t cap) {
    emitter *m = E(e);
    size_t off = blob_add(m, data, bytes);
    if (m->weights.oom) return ANVIL_ERR_OUT_OF_MEMORY;
    snprintf(expr, cap, "(W + %zu)", off - EMIT_WEIGHTS_HEADER);
    return ANVIL_OK;
}

static anvil_status add_file(const char **list, int *n, const char *file) {
    for (int i = 0; i < *n; i++)
        if (!strcmp(list[i], file)) return ANVIL_OK;
    if (*n == EMIT_MAX_FILES) return core_err(ANVIL_ERR_LIMIT, "more than %d emitted files", *n);
    list[(*n)++] = file;
    return ANVIL_OK;
}

static anvil_status cb_need(kern_emit *e, const char *file) {
    if (!emit_source_known(file))
        return core_err(ANVIL_ERR_INTERNAL,
                        "the emitted code needs %s, which is not among the embedded sources "
                        "(cmake/emit.cmake)",
                        file);
    return add_file(E(e)->files, &E(e)->n_files, file);
}

static anvil_status cb_include(kern_emit *e, const char *header) {
    CORE_TRY(cb_need(e, header));
    return add_file(E(e)->includes, &E(e)->n_includes, header);
}

/* The C expression of value v's bytes while NET_run runs: the caller's input, the arena, or the
 * weights (a constant is stored on first use). */
static anvil_status value_expr(emitter *m, ir_vid v, char *buf, size_t cap) {
    const rt_loc *l = &m->p->loc[v];
    switch (l->kind) {
    case LOC_INPUT:
        snprintf(buf, cap, "((void *)in[%d])", l->input);
        return ANVIL_OK;
    case LOC_ARENA:
        snprintf(buf, cap, "(A + %zu)", l->offset);
        return ANVIL_OK;
    case LOC_CONST: {
        if (m->const_off[v] == SIZE_MAX) {
            const op_tinfo *t = &m->p->shapes.info[v];
            size_t bytes = 0;
            if (!core_tensor_bytes(t->dtype, t->shape.d, t->shape.rank, &bytes))
                return core_err(ANVIL_ERR_LIMIT, "constant '%s' is too large",
                                m->g->values[v].name);
            m->const_off[v] = blob_add(m, l->ptr, bytes);
            if (m->weights.oom) return ANVIL_ERR_OUT_OF_MEMORY;
        }
        snprintf(buf, cap, "((void *)(W + %zu))", m->const_off[v] - EMIT_WEIGHTS_HEADER);
        return ANVIL_OK;
    }
    default:
        return core_err(ANVIL_ERR_UNSUPPORTED, "value '%s' is made while running (dynamic)",
                        m->g->values[v].name);
    }
}

/* Input i's expression, made when an emitter first asks: a constant that a variant packed for
 * itself (and never reads) must not land in the weights a second time. */
static const char *cb_in(kern_emit *e, int i) {
    emitter *m = E(e);
    if (i < 0 || i >= m->n->n_inputs || m->n->inputs[i] == IR_NONE) return "NULL";
    if (!m->in_expr[i][0]) {
        anvil_status st = value_expr(m, m->n->inputs[i], m->in_expr[i], sizeof m->in_expr[i]);
        if (st != ANVIL_OK) {
            if (m->err == ANVIL_OK) m->err = st;
            return "NULL";
        }
    }
    return m->in_expr[i];
}

static const char *cb_out(kern_emit *e, int i) {
    emitter *m = E(e);
    if (i < 0 || i >= m->n->n_outputs || m->n->outputs[i] == IR_NONE) return "NULL";
    return m->out_expr[i];
}

/* Why step stp cannot be emitted, or NULL. */
static const char *step_blocker(const rt_step *stp) {
    if (stp->dynamic) return "its output shapes depend on the data (a dynamic step)";
    if (stp->alias) return NULL;
    if (!stp->variant->emit) return "its variant has no emitter";
    const kern_variant *d = kern_delegate(stp->variant, stp->state);
    if (d && !d->emit) return "the variant it hands the node to has no emitter";
    return NULL;
}

/* Checks the whole plan first and lists every node that cannot be emitted in one message. */
static anvil_status check_plan(const rt_session *s, const rt_plan *p) {
    const ir_graph *g = rt_session_graph(s);
    emit_buf msg = {0};
    int bad = 0;
    for (int32_t i = 0; i < p->n_steps; i++) {
        const rt_step *stp = &p->steps[i];
        const char *why = step_blocker(stp);
        if (!why) continue;
        const ir_node *n = &g->nodes[stp->node];
        const kern_variant *d = stp->variant ? kern_delegate(stp->variant, stp->state) : NULL;
        emit_buf_printf(&msg, "\n  %s: %s%s%s%s", ir_node_label(n),
                        stp->variant ? stp->variant->name : "", d ? " -> " : "", d ? d->name : "",
                        stp->variant ? "; " : "");
        emit_buf_printf(&msg, "%s", why);
        bad++;
    }
    for (int32_t i = 0; i < g->n_inputs; i++)
        if (rt_session_input_decides_shapes(s, i)) {
            emit_buf_printf(&msg, "\n  input '%s': its contents decide shapes",
                            g->values[g->inputs[i]].name);
            bad++;
        }
    anvil_status st = ANVIL_OK;
    if (bad)
        st = core_err(ANVIL_ERR_UNSUPPORTED,
                      "%d node%s cannot be emitted as C:%s\nforce an emittable variant with "
                      "--variant NODE=NAME, or run the model with anvil instead",
                      bad, bad > 1 ? "s" : "", msg.oom ? " (out of memory)" : msg.data);
    emit_buf_free(&msg);
    return st;
}

/* Re-indents generated statements by their braces (4 spaces a level, from `depth`), so that the
 * emitters can write flat text. Braces inside comments and strings are not counted: the
 * emitters keep them out of both (comment_safe). */
static void indent_into(emit_buf *dst, const char *text, int depth) {
    const char *p = text;
    while (p && *p) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        while (n && (*p == ' ' || *p == '\t')) {
            p++;
            n--;
        }
        int opens = 0, closes = 0;
        for (size_t i = 0; i < n; i++) {
            opens += p[i] == '{';
            closes += p[i] == '}';
        }
        int d = depth - (n && *p == '}' ? 1 : 0);
        if (n) emit_buf_printf(dst, "%*s%.*s\n", 4 * (d > 0 ? d : 0), "", (int)n, p);
        depth += opens - closes;
        p = nl ? nl + 1 : NULL;
    }
}

/* A name for a C comment: no comment end, no braces (indent_into counts them), at most 80
 * characters. */
static const char *comment_safe(const char *name, char *buf, size_t cap) {
    size_t k = 0;
    for (const char *q = name; *q && k + 1 < cap && k < 80; q++) {
        char c = *q;
        buf[k++] = (c == '{' || c == '}' || c == '\n' || (c == '*' && q[1] == '/')) ? '_' : c;
    }
    buf[k] = '\0';
    return buf;
}

/* The node's fused epilogue after a variant that does not apply it (the runtime's
 * kern_fusion_apply): output 0 as rows of its last dim, through the GEMM's epilogue loop. */
static anvil_status emit_fusion_after(emitter *m, const ir_node *n, const op_tensor *y) {
    const ir_fusion *f = n->fusion;
    if (!f) return ANVIL_OK;
    if (y->dtype != ANVIL_DTYPE_FLOAT32)
        return core_err(ANVIL_ERR_UNSUPPORTED, "a fused epilogue on a non-float32 output");
    int64_t cols = y->rank > 0 ? y->dims[y->rank - 1] : 1, numel = 1;
    for (int d = 0; d < y->rank; d++) numel *= y->dims[d];
    if (numel == 0 || cols == 0) return ANVIL_OK;
    CORE_TRY(gemm_emit_files_need(&m->e));
    gemm_epilogue ep = kern_fusion_epilogue(f);
    char bias[64] = "", res[64] = "";
    if (f->bias >= 0) snprintf(bias, sizeof bias, "%s", cb_in(&m->e, f->bias));
    if (f->residual >= 0) {
        snprintf(res, sizeof res, "%s", cb_in(&m->e, f->residual));
        ep.rs_r = cols;
        ep.cs_r = 1;
        ep.beta = 1.0f;
    }
    emit_buf_printf(&m->code, "{ /* its fused epilogue */\n");
    kern_emit_epilogue(&m->e, "fe", &ep, NULL, *bias ? bias : NULL, *res ? res : NULL);
    emit_buf_printf(&m->code,
                    "gemm_epilogue_apply(&fe, (float *)(%s), %lld, 0, 0, %lld, %lld);\n}\n",
                    cb_out(&m->e, 0), (long long)cols, (long long)(numel / cols), (long long)cols);
    return ANVIL_OK;
}

static anvil_status emit_step(emitter *m, const rt_step *stp) {
    const rt_session *s = m->s;
    const ir_graph *g = m->g;
    const ir_node *n = &g->nodes[stp->node];
    m->n = n;
    op_tinfo *in = core_calloc((size_t)n->n_inputs + 1, sizeof *in);
    op_tinfo *out = core_calloc((size_t)n->n_outputs + 1, sizeof *out);
    m->in_expr = core_calloc((size_t)n->n_inputs + 1, sizeof *m->in_expr);
    m->out_expr = core_calloc((size_t)n->n_outputs + 1, sizeof *m->out_expr);
    anvil_status st = ANVIL_OK;
    if (!in || !out || !m->in_expr || !m->out_expr) {
        st = ANVIL_ERR_OUT_OF_MEMORY;
        goto done;
    }
    for (int i = 0; i < n->n_inputs; i++) {
        if (n->inputs[i] == IR_NONE) {
            ir_shape_unknown(&in[i].shape);
            snprintf(m->in_expr[i], 64, "NULL");
            continue;
        }
        in[i] = m->p->shapes.info[n->inputs[i]];
    }
    for (int i = 0; i < n->n_outputs; i++) {
        if (n->outputs[i] == IR_NONE) {
            ir_shape_unknown(&out[i].shape);
            snprintf(m->out_expr[i], 64, "NULL");
            continue;
        }
        out[i] = m->p->shapes.info[n->outputs[i]];
        if ((st = value_expr(m, n->outputs[i], m->out_expr[i], 64)) != ANVIL_OK) goto done;
    }
    const rt_session_config *cfg = rt_session_config_of(s);
    kern_node kn = {n,    in,           n->n_inputs,
                    out,  n->n_outputs, stp->threads > 0 ? stp->threads : cfg->threads,
                    NULL, &stp->config, &cfg->knobs};
    m->e.in_t = stp->in;
    m->e.out_t = stp->out;
    m->e.n_in = n->n_inputs;
    m->e.n_out = n->n_outputs;
    char shape[128];
    const op_tensor *y = &stp->out[0];
    int w = snprintf(shape, sizeof shape, "[");
    for (int d = 0; d < y->rank && w < (int)sizeof shape - 24; d++)
        w += snprintf(shape + w, sizeof shape - (size_t)w, "%s%lld", d ? "," : "",
                      (long long)y->dims[d]);
    snprintf(shape + w, sizeof shape - (size_t)w, "]");
    const kern_variant *d = kern_delegate(stp->variant, stp->state);
    char label[96];
    emit_buf_printf(&m->code, "{ /* %s: %s %s, %s%s%s */\n",
                    comment_safe(ir_node_label(n), label, sizeof label), ir_op_name(n->op), shape,
                    stp->variant->name, d ? " -> " : "", d ? d->name : "");
    if (stp->threads > 0)
        emit_buf_printf(&m->code, "op_ctx c = {net->pool, %d};\n", stp->threads);
    else
        emit_buf_printf(&m->code, "op_ctx c = {net->pool, 0};\n");
    m->e.ctx = "&c";
    m->err = ANVIL_OK;
    st = stp->variant->emit->write(&kn, stp->state, &m->e);
    if (st == ANVIL_OK && stp->fusion_after) st = emit_fusion_after(m, n, &stp->out[0]);
    if (st == ANVIL_OK) st = m->err;
    if (st != ANVIL_OK) st = core_err_prefix(st, "%s (%s)", ir_node_label(n), stp->variant->name);
    emit_buf_printf(&m->code, "}\n");
done:
    free(in);
    free(out);
    free(m->in_expr);
    free(m->out_expr);
    m->in_expr = m->out_expr = NULL;
    return st;
}

static bool c_identifier(const char *s) {
    if (!s || !*s || strlen(s) > 48 || (*s >= '0' && *s <= '9')) return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_'))
            return false;
    return true;
}

/* The io tables of NET.h / NET.c: names, dtypes (anvil's and numpy's), ranks, dims, bytes. */
static void io_tables(emit_buf *h, emit_buf *c, const char *name, const char *kind,
                      const ir_graph *g, const rt_plan *p, const ir_vid *vals, int n) {
    emit_buf_printf(h, "#define %s_N_%sS %d\n", name, kind, n);
    emit_buf_printf(c, "const %s_tensor_info %s_%ss[%d] = {\n", name, name,
                    !strcmp(kind, "INPUT") ? "input" : "output", n > 0 ? n : 1);
    for (int i = 0; i < n; i++) {
        const op_tinfo *t = &p->shapes.info[vals[i]];
        size_t bytes = 0;
        core_tensor_bytes(t->dtype, t->shape.d, t->shape.rank, &bytes);
        emit_buf_printf(c, "    {\"");
        for (const char *q = g->values[vals[i]].name; *q; q++)
            emit_buf_printf(c, *q == '"' || *q == '\\' ? "\\%c" : "%c", *q);
        emit_buf_printf(c, "\", \"%s\", %d, {", anvil_dtype_name(t->dtype), t->shape.rank);
        for (int d = 0; d < t->shape.rank; d++)
            emit_buf_printf(c, "%s%lld", d ? ", " : "", (long long)t->shape.d[d]);
        emit_buf_printf(c, "%s}, %zu},\n", t->shape.rank ? "" : "0", bytes);
    }
    emit_buf_printf(c, "};\n");
}

static anvil_status write_header(const char *dir, const char *name, const rt_session *s,
                                 const rt_plan *p) {
    const ir_graph *g = rt_session_graph(s);
    emit_buf h = {0}, unused = {0};
    const char *N = name;
    emit_buf_printf(
        &h,
        "/* %s: a neural network as a C library, generated by anvil compile.\n"
        " *\n"
        " *   %s *net;\n"
        " *   if (%s_create(\"%s.weights\", 0, NULL, &net) != 0) puts(%s_last_error());\n"
        " *   %s_run(net, inputs, outputs);   (one buffer per input and output, "
        "dense, row-major)\n"
        " *   %s_free(net);\n"
        " *\n"
        " * Shapes are fixed (%s_inputs / %s_outputs say them). Every pointer "
        "argument is borrowed\n"
        " * for the call only. Functions return 0 or an anvil status code (>0), with "
        "%s_last_error()\n"
        " * saying what was wrong. */\n"
        "#ifndef %s_H\n#define %s_H\n\n#include <stddef.h>\n#include <stdint.h>\n\n",
        N, N, N, N, N, N, N, N, N, N, N, N);
    emit_buf_printf(&h, "#define %s_PLAN_THREADS %d /* the threads the plan was made for */\n", N,
                    rt_session_config_of(s)->threads);
    io_tables(&h, &unused, N, "INPUT", g, p, g->inputs, g->n_inputs);
    io_tables(&h, &unused, N, "OUTPUT", g, p, g->outputs, g->n_outputs);
    emit_buf_free(&unused);
    emit_buf_printf(
        &h,
        "\ntypedef struct %s_tensor_info {\n"
        "    const char *name;\n"
        "    const char *dtype; /* \"FLOAT\", \"INT64\", ... (ONNX's names) */\n"
        "    int rank;\n"
        "    int64_t dims[8];\n"
        "    size_t bytes;\n"
        "} %s_tensor_info;\n"
        "extern const %s_tensor_info %s_inputs[];\n"
        "extern const %s_tensor_info %s_outputs[];\n\n"
        "typedef struct %s %s;\n\n"
        "/* Bytes of the activation arena a network needs (for a caller-provided arena). */\n"
        "size_t %s_arena_bytes(void);\n"
        "/* Bytes of the weights (the %s.weights file holds them after a 64-byte header). */\n"
        "size_t %s_weights_bytes(void);\n"
        "/* Loads the weights (the %s.weights file at `weights`, checked by size and hash; NULL "
        "when\n"
        " * they are compiled in) and makes a network running on `threads` threads (0: all "
        "cores;\n"
        " * at most %s_PLAN_THREADS, the plan's).\n"
        " * arena: %s_arena_bytes() bytes, 64-byte aligned, owned by the caller and used only "
        "by\n"
        " * this network until %s_free; NULL: allocated here. *out owned by the caller "
        "(%s_free). */\n"
        "int %s_create(const char *weights, int threads, void *arena, %s **out);\n"
        "/* Computes the outputs: in[i] holds %s_inputs[i].bytes bytes, out[j] receives\n"
        " * %s_outputs[j].bytes bytes. No allocation; one run at a time per network. */\n"
        "int %s_run(%s *net, const void *const *in, void *const *out);\n"
        "void %s_free(%s *net);\n"
        "/* What the last failing call on this thread said. Static storage. */\n"
        "const char *%s_last_error(void);\n\n#endif\n",
        N, N, N, N, N, N, N, N, N, N, N, N, N, N, N, N, N, N, N, N, N, N, N, N, N);
    char file[128];
    snprintf(file, sizeof file, "%s.h", name);
    anvil_status st = h.oom ? ANVIL_ERR_OUT_OF_MEMORY : emit_write_file(dir, file, h.data, h.len);
    emit_buf_free(&h);
    return st;
}

/* The status enum of anvil.h, for the shim's core.h (generated, so it cannot differ). */
static anvil_status write_status_header(const char *dir) {
    emit_buf b = {0};
    emit_buf_printf(&b, "/* anvil's status codes (anvil.h), written by anvil compile. */\n"
                        "#ifndef ANVIL_STATUS_H\n#define ANVIL_STATUS_H\n\ntypedef enum "
                        "anvil_status {\n");
    for (int i = 0; i <= ANVIL_ERR_INTERNAL; i++)
        emit_buf_printf(&b, "    %s = %d,\n", core_status_name((anvil_status)i), i);
    emit_buf_printf(&b, "} anvil_status;\n\n#endif\n");
    anvil_status st =
        b.oom ? ANVIL_ERR_OUT_OF_MEMORY : emit_write_file(dir, "src/anvil_status.h", b.data, b.len);
    emit_buf_free(&b);
    return st;
}

static void write_source_body(emitter *m, emit_buf *c, const char *N, const char *model,
                              bool embed) {
    const rt_session *s = m->s;
    const ir_graph *g = m->g;
    const rt_plan *p = m->p;
    const size_t wbytes = m->weights.len - EMIT_WEIGHTS_HEADER;
    emit_buf_printf(c,
                    "/* %s: generated by anvil compile from %s. The plan anvil ran for these "
                    "shapes, as\n"
                    " * straight-line calls into anvil's kernels (src/), with the arena offsets "
                    "and the\n"
                    " * weights' offsets fixed. */\n"
                    "#include \"%s.h\"\n\n#include \"kernels/kernels.h\"\n",
                    N, model, N);
    for (int i = 0; i < m->n_includes; i++) emit_buf_printf(c, "#include \"%s\"\n", m->includes[i]);
    emit_buf_printf(c, "\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n%s\n",
                    embed ? "" : "#include <sys/mman.h>\n");
    emit_buf unused = {0};
    io_tables(&unused, c, N, "INPUT", g, p, g->inputs, g->n_inputs);
    io_tables(&unused, c, N, "OUTPUT", g, p, g->outputs, g->n_outputs);
    emit_buf_free(&unused);
    emit_buf_printf(c,
                    "\n#define ARENA_BYTES %zu\n#define WS_BYTES %zu\n#define WEIGHTS_BYTES "
                    "%zu\n#define WEIGHTS_HASH 0x%016llxull\n"
                    "/* the threads the plan was made for: the workspace holds a slice per "
                    "thread */\n#define PLAN_THREADS %d\n\n",
                    p->arena_bytes, p->workspace_bytes, wbytes,
                    (unsigned long long)fnv1a(
                        (const unsigned char *)m->weights.data + EMIT_WEIGHTS_HEADER, wbytes),
                    rt_session_config_of(s)->threads);
    emit_buf_printf(c,
                    "struct %s {\n    unsigned char *arena, *weights;\n    void *ws;\n    "
                    "core_pool *pool;\n    int own_arena, own_weights;\n};\n\n",
                    N);
    if (m->decls.len) {
        indent_into(c, m->decls.data, 0);
        emit_buf_printf(c, "\n");
    }
    emit_buf_printf(c,
                    "size_t %s_arena_bytes(void) {\n    return ARENA_BYTES;\n}\n\n"
                    "size_t %s_weights_bytes(void) {\n    return WEIGHTS_BYTES;\n}\n\n"
                    "const char *%s_last_error(void) {\n    return core_last_error();\n}\n\n",
                    N, N, N);
}

/* The rest of NET.c: create (weights from the file or the object, checked), run, free. */
static void write_source_tail(emitter *m, emit_buf *c, const char *N, bool embed) {
    const ir_graph *g = m->g;
    const rt_plan *p = m->p;
    if (embed) emit_buf_printf(c, "extern const unsigned char %s_weights_data[];\n\n", N);
    if (!embed)
        emit_buf_printf(c, "static uint64_t fnv1a(const unsigned char *p, size_t n) {\n"
                           "    uint64_t h = 1469598103934665603ull;\n"
                           "    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;\n"
                           "    return h;\n}\n\n");
    emit_buf_printf(c,
                    "/* The image starts with a 64-byte header: \"ANVILW1\", the size and the hash "
                    "of what follows. */\n"
                    "static int check_image(const unsigned char *hd, const char *what) {\n"
                    "    uint64_t size, hash;\n"
                    "    memcpy(&size, hd + 8, 8);\n"
                    "    memcpy(&hash, hd + 16, 8);\n"
                    "    if (memcmp(hd, \"ANVILW1\", 8))\n"
                    "        return core_err(ANVIL_ERR_INVALID_ARGUMENT, \"%%s: not an anvil "
                    "weights file\", what);\n"
                    "    if (size != WEIGHTS_BYTES || hash != WEIGHTS_HASH)\n"
                    "        return core_err(ANVIL_ERR_INVALID_ARGUMENT,\n"
                    "                        \"%%s: weights of another library (%%llu bytes, "
                    "this one needs %%llu)\", what,\n"
                    "                        (unsigned long long)size, (unsigned long "
                    "long)WEIGHTS_BYTES);\n"
                    "    return 0;\n}\n\n");
    emit_buf_printf(c, "static int load_weights(%s *net, const char *path) {\n", N);
    if (embed) {
        emit_buf_printf(c,
                        "    (void)path;\n"
                        "    int st = check_image(%s_weights_data, \"the compiled-in weights\");\n"
                        "    if (st) return st;\n"
                        "    net->weights = (unsigned char *)%s_weights_data + 64;\n"
                        "    return 0;\n}\n\n",
                        N, N);
    } else {
        emit_buf_printf(
            c,
            "    if (!path) return core_err(ANVIL_ERR_INVALID_ARGUMENT, \"no weights file given "
            "(%s.weights)\");\n"
            "    FILE *f = fopen(path, \"rb\");\n"
            "    if (!f) return core_err(ANVIL_ERR_IO, \"%%s: cannot open the weights file\", "
            "path);\n"
            "    unsigned char hd[64];\n"
            "    int st = fread(hd, 1, 64, f) == 64 ? check_image(hd, path)\n"
            "                                       : (int)core_err(ANVIL_ERR_INVALID_ARGUMENT, "
            "\"%%s: truncated weights file\", path);\n"
            "    if (!st) {\n"
            "        /* on transparent huge pages where the OS offers them, as anvil places its\n"
            "         * packed weights (gemm_pack_b): fewer TLB misses, even L2 set use */\n"
            "        const size_t huge = (size_t)2 << 20;\n"
            "        net->weights = core_aligned_alloc(WEIGHTS_BYTES >= huge ? huge : 64,\n"
            "                                          WEIGHTS_BYTES ? WEIGHTS_BYTES : 64);\n"
            "        net->own_weights = 1;\n"
            "#ifdef MADV_HUGEPAGE\n"
            "        if (net->weights && WEIGHTS_BYTES >= huge)\n"
            "            (void)madvise(net->weights, WEIGHTS_BYTES / huge * huge, MADV_HUGEPAGE);\n"
            "#endif\n"
            "        if (!net->weights) st = ANVIL_ERR_OUT_OF_MEMORY;\n"
            "        else if (fread(net->weights, 1, WEIGHTS_BYTES, f) != WEIGHTS_BYTES)\n"
            "            st = core_err(ANVIL_ERR_INVALID_ARGUMENT, \"%%s: truncated weights "
            "file\", path);\n"
            "        else if (fnv1a(net->weights, WEIGHTS_BYTES) != WEIGHTS_HASH)\n"
            "            st = core_err(ANVIL_ERR_INVALID_ARGUMENT, \"%%s: corrupt weights "
            "(hash mismatch)\", path);\n"
            "    }\n"
            "    fclose(f);\n"
            "    return st;\n}\n\n",
            N);
    }
    emit_buf_printf(
        c,
        "void %s_free(%s *net) {\n"
        "    if (!net) return;\n"
        "    if (net->own_arena) free(net->arena);\n"
        "    if (net->own_weights) free(net->weights);\n"
        "    free(net->ws);\n"
        "    core_pool_free(net->pool);\n"
        "    free(net);\n}\n\n"
        "int %s_create(const char *weights, int threads, void *arena, %s **out) {\n"
        "    *out = NULL;\n"
        "    krt_env_load();\n"
        "    %s *net = core_calloc(1, sizeof *net);\n"
        "    if (!net) return ANVIL_ERR_OUT_OF_MEMORY;\n"
        "    int st = 0;\n"
        "    if ((uintptr_t)arena %% 64)\n"
        "        st = core_err(ANVIL_ERR_INVALID_ARGUMENT, \"the arena must be 64-byte "
        "aligned\");\n"
        "    if (!st && threads <= 0) threads = core_hw_get()->logical_cores > 0 ? "
        "core_hw_get()->logical_cores : 1;\n"
        "    if (threads > PLAN_THREADS) threads = PLAN_THREADS;\n"
        "    if (!st) st = load_weights(net, weights);\n"
        "    if (!st && !(net->arena = arena)) {\n"
        "        net->arena = core_aligned_alloc(64, ARENA_BYTES ? ARENA_BYTES : 64);\n"
        "        net->own_arena = 1;\n"
        "        if (!net->arena) st = ANVIL_ERR_OUT_OF_MEMORY;\n"
        "    }\n"
        "    if (!st && !(net->ws = core_aligned_alloc(64, WS_BYTES ? WS_BYTES : 64))) st = "
        "ANVIL_ERR_OUT_OF_MEMORY;\n"
        "    if (!st) st = core_pool_create(threads, &net->pool);\n",
        N, N, N, N, N);
    /* the ISA the kernels were chosen for must be there */
    uint32_t needs = 0;
    for (int32_t i = 0; i < p->n_steps; i++) {
        const rt_step *stp = &p->steps[i];
        if (stp->alias || !stp->variant) continue;
        const kern_variant *d = kern_delegate(stp->variant, stp->state);
        needs |=
            (d ? d->needs : stp->variant->needs) &
            (KERN_NEEDS_AVX2 | KERN_NEEDS_AVX512 | KERN_NEEDS_AVX512_BF16 | KERN_NEEDS_AVX512_FP16);
    }
    emit_buf_printf(c,
                    "    if (!st && !kern_isa_ok(%uu, core_hw_get()))\n"
                    "        st = core_err(ANVIL_ERR_UNSUPPORTED, \"this CPU lacks the ISA the "
                    "library was compiled for (%s)\");\n"
                    "    if (st) {\n        %s_free(net);\n        return st;\n    }\n"
                    "    *out = net;\n    return 0;\n}\n\n",
                    needs,
                    (needs & KERN_NEEDS_AVX512_BF16) && (needs & KERN_NEEDS_AVX512_FP16)
                        ? "AVX-512 with AVX512-BF16 and AVX512-FP16"
                    : (needs & KERN_NEEDS_AVX512_FP16) ? "AVX-512 with AVX512-FP16"
                    : (needs & KERN_NEEDS_AVX512_BF16) ? "AVX-512 with AVX512-BF16"
                    : (needs & KERN_NEEDS_AVX512)      ? "AVX-512"
                    : (needs & KERN_NEEDS_AVX2)        ? "AVX2"
                                                       : "x86-64",
                    N);
    emit_buf_printf(c,
                    "int %s_run(%s *net, const void *const *in, void *const *out) {\n"
                    "    unsigned char *A = net->arena;\n"
                    "    const unsigned char *W = net->weights;\n"
                    "    void *ws = net->ws;\n"
                    "    (void)A;\n    (void)W;\n    (void)ws;\n    (void)in;\n",
                    N, N);
    indent_into(c, m->code.data, 1);
    for (int32_t j = 0; j < g->n_outputs; j++)
        emit_buf_printf(c, "    memcpy(out[%d], %s, %s_outputs[%d].bytes);\n", j, m->result_expr[j],
                        N, j);
    emit_buf_printf(c, "    return 0;\n}\n");
}

static anvil_status write_weights(emitter *m, const char *dir, const char *N, bool embed) {
    unsigned char *hd = (unsigned char *)m->weights.data;
    uint64_t size = m->weights.len - EMIT_WEIGHTS_HEADER;
    uint64_t hash = fnv1a(hd + EMIT_WEIGHTS_HEADER, size);
    memcpy(hd, "ANVILW1", 8);
    memcpy(hd + 8, &size, 8);
    memcpy(hd + 16, &hash, 8);
    char file[128];
    snprintf(file, sizeof file, "%s.weights", N);
    CORE_TRY(emit_write_file(dir, file, m->weights.data, m->weights.len));
    if (!embed) return ANVIL_OK;
    emit_buf a = {0};
    emit_buf_printf(&a,
                    "/* %s's weights, compiled in (anvil compile --embed-weights): the bytes of "
                    "%s.weights. */\n"
                    "    .section .rodata\n    .balign 64\n    .globl %s_weights_data\n"
                    "%s_weights_data:\n    .incbin \"%s.weights\"\n"
                    "    .section .note.GNU-stack,\"\",@progbits\n",
                    N, N, N, N, N);
    snprintf(file, sizeof file, "%s_weights.S", N);
    anvil_status st = a.oom ? ANVIL_ERR_OUT_OF_MEMORY : emit_write_file(dir, file, a.data, a.len);
    emit_buf_free(&a);
    return st;
}

static anvil_status emit_all(emitter *m, const emit_options *o, const char *dir) {
    rt_session *s = m->s;
    const ir_graph *g = m->g;
    const rt_plan *p = m->p;
    const char *N = o->name;
    static const unsigned char header[EMIT_WEIGHTS_HEADER];
    emit_buf_bytes(&m->weights, header, sizeof header);
    for (int32_t i = 0; i < p->n_steps; i++)
        if (!p->steps[i].alias) CORE_TRY(emit_step(m, &p->steps[i]));
    /* the outputs' places (a constant output joins the weights here, before they are written) */
    for (int32_t j = 0; j < g->n_outputs; j++)
        CORE_TRY(value_expr(m, g->outputs[j], m->result_expr[j], sizeof m->result_expr[j]));
    if (m->code.oom || m->decls.oom || m->weights.oom) return ANVIL_ERR_OUT_OF_MEMORY;

    /* the shipped runtime: the shims, core's hardware detection and pool, the status enum */
    static const char *const base[] = {"core/core_hw.h", "core/core_copy.h", "core/hw.c",
                                       "core/pool.c",    "ir/ir_act.h",      "kernels/kern_isa.h"};
    for (size_t i = 0; i < sizeof base / sizeof base[0]; i++) CORE_TRY(cb_need(&m->e, base[i]));
    CORE_TRY(emit_copy_source(dir, "emit/shim/core.h", "core/core.h"));
    CORE_TRY(emit_copy_source(dir, "emit/shim/kernels.h", "kernels/kernels.h"));
    CORE_TRY(emit_copy_source(dir, "emit/shim/krt.c", "krt.c"));
    CORE_TRY(write_status_header(dir));
    const char *sources[EMIT_MAX_FILES + 1];
    int n_sources = 0;
    sources[n_sources++] = "krt.c";
    for (int i = 0; i < m->n_files; i++) {
        CORE_TRY(emit_copy_source(dir, m->files[i], NULL));
        size_t len = strlen(m->files[i]);
        if (len > 2 && !strcmp(m->files[i] + len - 2, ".c")) sources[n_sources++] = m->files[i];
    }

    /* the GEMM's template instantiates only the tiles the code names */
    for (int i = 0; i < m->n_files; i++) {
        if (strcmp(m->files[i], "kernels/cpu/gemm/gemm.h")) continue;
        emit_buf all = {0};
        emit_buf_printf(&all, "%s\n%s", m->decls.data ? m->decls.data : "",
                        m->code.data ? m->code.data : "");
        char *tiles = all.oom ? NULL : gemm_emit_tiles_header(all.data);
        emit_buf_free(&all);
        if (!tiles) return ANVIL_ERR_OUT_OF_MEMORY;
        anvil_status st =
            emit_write_file(dir, "src/kernels/cpu/gemm/gemm_tiles_emitted.h", tiles, strlen(tiles));
        free(tiles);
        CORE_TRY(st);
    }
    CORE_TRY(write_header(dir, N, s, p));
    CORE_TRY(write_weights(m, dir, N, o->embed_weights));
    emit_buf c = {0};
    write_source_body(m, &c, N, g->name && *g->name ? g->name : "a model", o->embed_weights);
    write_source_tail(m, &c, N, o->embed_weights);
    char file[128];
    snprintf(file, sizeof file, "%s.c", N);
    anvil_status st = c.oom ? ANVIL_ERR_OUT_OF_MEMORY : emit_write_file(dir, file, c.data, c.len);
    emit_buf_free(&c);
    if (st != ANVIL_OK) return st;

    emit_lib lib = {N,
                    sources,
                    n_sources,
                    o->embed_weights,
                    g->n_inputs,
                    g->n_outputs,
                    (const char *const *)m->out_files,
                    m->latency_ms,
                    p->arena_bytes,
                    m->weights.len - EMIT_WEIGHTS_HEADER,
                    g->name};
    return emit_support_files(dir, &lib);
}

/* The file base `anvil run` writes output j to: the name with every character outside
 * [A-Za-z0-9_-] replaced by '_' ("output" if empty), plus "_<j>" when an earlier output took it
 * (tools/cmd_run.c; the emit tests compare the two). */
static anvil_status output_file(const ir_graph *g, int32_t j, char *const *earlier, char **out) {
    const char *name = g->values[g->outputs[j]].name;
    size_t n = strlen(name);
    char *b = malloc(n + 32);
    if (!b) return ANVIL_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
        b[i] = keep ? c : '_';
    }
    b[n] = '\0';
    if (!n) strcpy(b, "output");
    for (int32_t k = 0; k < j; k++)
        if (!strcmp(earlier[k], b)) {
            snprintf(b + strlen(b), 32, "_%d", j);
            break;
        }
    *out = b;
    return ANVIL_OK;
}

/* Runs the session on inputs without fetching any output. */
static anvil_status run_once(rt_session *s, const anvil_tensor *const *inputs) {
    bool *none = core_calloc((size_t)rt_session_graph(s)->n_outputs + 1, sizeof *none);
    if (!none) return ANVIL_ERR_OUT_OF_MEMORY;
    anvil_status st = rt_session_run(s, inputs, none, NULL);
    free(none);
    return st;
}

/* The median of a few more runs of the plan (at most ~2 s of them), for the README. */
static double median_latency(rt_session *s, const anvil_tensor *const *inputs) {
    double t[15];
    int n = 0;
    uint64_t start = core_now_ns();
    while (n < 15 && core_now_ns() - start < 2000000000ull) {
        uint64_t t0 = core_now_ns();
        if (run_once(s, inputs) != ANVIL_OK) return 0;
        t[n++] = (double)(core_now_ns() - t0) / 1e6;
    }
    for (int i = 1; i < n; i++)
        for (int k = i; k > 0 && t[k] < t[k - 1]; k--) {
            double x = t[k];
            t[k] = t[k - 1];
            t[k - 1] = x;
        }
    return n ? t[n / 2] : 0;
}

anvil_status emit_library(rt_session *s, const anvil_tensor *const *inputs, const emit_options *o,
                          const char *dir) {
    const ir_graph *g = rt_session_graph(s);
    if (!c_identifier(o->name))
        return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                        "library name '%s' is not a C identifier of at most 48 characters",
                        o->name ? o->name : "");
    /* one run makes the plan for these shapes and proves it runs */
    CORE_TRY(run_once(s, inputs));
    const rt_plan *p = rt_session_last_plan(s);
    if (!p) return core_err(ANVIL_ERR_INTERNAL, "no plan after a run");
    if (p->tuning)
        return core_err(ANVIL_ERR_UNSUPPORTED, "the session is still tuning online; compile "
                                               "from a tuning database instead");
    if (rt_session_has_compiled_bodies(s))
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "the model has control flow (If/Loop/Scan bodies), which cannot be "
                        "emitted as C");
    CORE_TRY(check_plan(s, p));
    emitter m = {0};
    m.e.impl = &m;
    m.e.code = cb_code;
    m.e.decl = cb_decl;
    m.e.blob = cb_blob;
    m.e.need = cb_need;
    m.e.include = cb_include;
    m.e.in = cb_in;
    m.e.out = cb_out;
    m.e.ws = "ws";
    m.s = s;
    m.g = g;
    m.p = p;
    m.latency_ms = median_latency(s, inputs);
    m.const_off = malloc(((size_t)g->n_values + 1) * sizeof *m.const_off);
    m.out_files = core_calloc((size_t)g->n_outputs + 1, sizeof *m.out_files);
    m.result_expr = core_calloc((size_t)g->n_outputs + 1, sizeof *m.result_expr);
    anvil_status st =
        m.const_off && m.out_files && m.result_expr ? ANVIL_OK : ANVIL_ERR_OUT_OF_MEMORY;
    for (int32_t v = 0; st == ANVIL_OK && v <= g->n_values; v++) m.const_off[v] = SIZE_MAX;
    for (int32_t j = 0; st == ANVIL_OK && j < g->n_outputs; j++)
        st = output_file(g, j, m.out_files, &m.out_files[j]);
    if (st == ANVIL_OK) st = emit_all(&m, o, dir);
    for (int32_t j = 0; m.out_files && j < g->n_outputs; j++) free(m.out_files[j]);
    free(m.out_files);
    free(m.result_expr);
    free(m.const_off);
    emit_buf_free(&m.code);
    emit_buf_free(&m.decls);
    emit_buf_free(&m.weights);
    return st;
}
