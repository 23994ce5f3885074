/* The tuning problem key: the text that names what a node asks of the tuner.
 *
 * Two nodes must share a key exactly when any variant would perform the same on both, so the key
 * holds everything a variant's speed can depend on (op, attributes, fused epilogue, which inputs
 * are constant and so packed at prepare, dtypes, dims, threads) and nothing else: node names and
 * the opset stay out, which is how a model's repeated blocks tune once. Attributes are sorted by
 * name so that the order an exporter wrote them in does not matter. Strings are quoted and
 * escaped, so no attribute value can imitate a separator and two different nodes never produce
 * the same text. Graph and tensor attributes make the node untunable: control flow and constants
 * are never timed, and their contents have no short canonical text. */
#include "tune/tune.h"

#include "kernels/kernels.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* A bounded text being appended to; `over` records that something did not fit, so the writers
 * need no checks of their own and the caller reports the overflow once. */
typedef struct key_buf {
    char *p;
    size_t cap, len;
    bool over;
} key_buf;

static void kb_printf(key_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void kb_printf(key_buf *b, const char *fmt, ...) {
    if (b->over) return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= b->cap - b->len) {
        b->over = true;
        b->p[b->len] = '\0';
        return;
    }
    b->len += (size_t)w;
}

/* Writes s[0..len) with the separators, quotes, backslashes and unprintable bytes escaped as
 * \xHH, so the text reads back to exactly one string. */
static void kb_escaped(key_buf *b, const char *s, size_t len) {
    for (size_t i = 0; i < len && !b->over; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c >= 0x7f || strchr("\\\"|;,=[]>", c))
            kb_printf(b, "\\x%02X", c);
        else
            kb_printf(b, "%c", c);
    }
}

/* Short dtype names keep the key readable and well under its bound. */
static const char *dtype_short(anvil_dtype dt) {
    switch (dt) {
    case ANVIL_DTYPE_FLOAT32:
        return "f32";
    case ANVIL_DTYPE_FLOAT16:
        return "f16";
    case ANVIL_DTYPE_BFLOAT16:
        return "bf16";
    case ANVIL_DTYPE_FLOAT64:
        return "f64";
    case ANVIL_DTYPE_INT8:
        return "i8";
    case ANVIL_DTYPE_UINT8:
        return "u8";
    case ANVIL_DTYPE_INT16:
        return "i16";
    case ANVIL_DTYPE_UINT16:
        return "u16";
    case ANVIL_DTYPE_INT32:
        return "i32";
    case ANVIL_DTYPE_UINT32:
        return "u32";
    case ANVIL_DTYPE_INT64:
        return "i64";
    case ANVIL_DTYPE_UINT64:
        return "u64";
    case ANVIL_DTYPE_BOOL:
        return "bool";
    default:
        return NULL;
    }
}

static void kb_dtype(key_buf *b, anvil_dtype dt) {
    const char *s = dtype_short(dt);
    if (s)
        kb_printf(b, "%s", s);
    else
        kb_printf(b, "dt%d", (int)dt);
}

/* Whether input i of the node was left out (an optional input); kernels see no tensor there. */
static bool input_omitted(const kern_node *kn, int i) {
    return i < kn->node->n_inputs && kn->node->inputs[i] == IR_NONE;
}

static bool output_omitted(const kern_node *kn, int i) {
    return i < kn->node->n_outputs && kn->node->outputs[i] == IR_NONE;
}

/* Orders attributes by name, then by position, a total order even for a (malformed) node that
 * repeats a name. */
static bool attr_before(const ir_attr *attrs, int a, int b) {
    int c = strcmp(attrs[a].name ? attrs[a].name : "", attrs[b].name ? attrs[b].name : "");
    return c < 0 || (c == 0 && a < b);
}

static anvil_status attr_value(key_buf *b, const ir_node *n, const ir_attr *a) {
    switch (a->type) {
    case IR_ATTR_INT:
        kb_printf(b, "%lld", (long long)a->i);
        break;
    case IR_ATTR_FLOAT:
        kb_printf(b, "%.9g", (double)a->f);
        break;
    case IR_ATTR_STRING:
        kb_printf(b, "\"");
        kb_escaped(b, a->s ? a->s : "", a->s ? a->s_len : 0);
        kb_printf(b, "\"");
        break;
    case IR_ATTR_INTS:
        for (size_t j = 0; j < a->n; j++)
            kb_printf(b, "%s%lld", j ? "," : "", (long long)a->ints[j]);
        break;
    case IR_ATTR_FLOATS:
        for (size_t j = 0; j < a->n; j++)
            kb_printf(b, "%s%.9g", j ? "," : "", (double)a->floats[j]);
        break;
    case IR_ATTR_STRINGS:
        for (size_t j = 0; j < a->n; j++) {
            const char *s = a->strings[j] ? a->strings[j] : "";
            kb_printf(b, "%s\"", j ? "," : "");
            kb_escaped(b, s, strlen(s));
            kb_printf(b, "\"");
        }
        break;
    default:
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s is not tunable: its attribute '%s' holds a %s (control flow and "
                        "constants are never tuned)",
                        ir_node_label(n), a->name ? a->name : "", ir_attr_type_name(a->type));
    }
    return ANVIL_OK;
}

/* Every attribute, sorted by picking the next one in attr_before order each round: no
 * allocation, and a buffer that fills stops the rounds early. */
static anvil_status put_attrs(key_buf *b, const ir_node *n) {
    int prev = -1;
    for (int round = 0; round < n->n_attrs && !b->over; round++) {
        int next = -1;
        for (int j = 0; j < n->n_attrs; j++) {
            if (prev >= 0 && !attr_before(n->attrs, prev, j)) continue;
            if (next < 0 || attr_before(n->attrs, j, next)) next = j;
        }
        const ir_attr *a = &n->attrs[next];
        kb_printf(b, "%s", round ? ";" : "");
        kb_escaped(b, a->name ? a->name : "", a->name ? strlen(a->name) : 0);
        kb_printf(b, "=");
        CORE_TRY(attr_value(b, n, a));
        prev = next;
    }
    return ANVIL_OK;
}

/* The fused epilogue: bias and residual with their input positions, then the activation with
 * the parameters it reads. A fusion that adds nothing is the same as none and writes nothing. */
static void put_fusion(key_buf *b, const ir_fusion *f) {
    if (!f || (f->bias < 0 && f->residual < 0 && f->act == IR_ACT_NONE)) return;
    const char *sep = "";
    kb_printf(b, "|fuse=");
    if (f->bias >= 0) {
        kb_printf(b, "bias@%d", f->bias);
        sep = ",";
    }
    if (f->residual >= 0) {
        kb_printf(b, "%sresidual@%d", sep, f->residual);
        sep = ",";
    }
    if (f->act == IR_ACT_NONE) return;
    kb_printf(b, "%s%s", sep, ir_act_name(f->act));
    if (f->act == IR_ACT_CLIP)
        kb_printf(b, "(%.9g,%.9g)", (double)f->lo, (double)f->hi);
    else if (f->act == IR_ACT_LEAKY_RELU)
        kb_printf(b, "(%.9g)", (double)f->alpha);
    else if (f->act == IR_ACT_HARD_SIGMOID)
        kb_printf(b, "(%.9g,%.9g)", (double)f->alpha, (double)f->beta);
}

static void put_dtype_ranks(key_buf *b, const kern_node *kn) {
    kb_printf(b, "|in=");
    for (int i = 0; i < kn->n_in; i++) {
        kb_printf(b, "%s", i ? "," : "");
        if (input_omitted(kn, i)) {
            kb_printf(b, "-");
            continue;
        }
        kb_dtype(b, kn->in[i].dtype);
        kb_printf(b, "/%d", kn->in[i].shape.rank);
    }
    kb_printf(b, "|out=");
    for (int i = 0; i < kn->n_out; i++) {
        kb_printf(b, "%s", i ? "," : "");
        if (output_omitted(kn, i)) {
            kb_printf(b, "-");
            continue;
        }
        kb_dtype(b, kn->out[i].dtype);
        kb_printf(b, "/%d", kn->out[i].shape.rank);
    }
}

static void put_shape(key_buf *b, const ir_shape *s) {
    kb_printf(b, "[");
    for (int d = 0; d < s->rank; d++) kb_printf(b, "%s%lld", d ? "," : "", (long long)s->d[d]);
    kb_printf(b, "]");
}

/* Every input and output must have static shapes: a key with unknown dims would stand for many
 * problems at once. */
static anvil_status check_static(const kern_node *kn) {
    char sb[256];
    for (int i = 0; i < kn->n_in; i++)
        if (!input_omitted(kn, i) && !ir_shape_is_static(&kn->in[i].shape))
            return core_err(ANVIL_ERR_UNSUPPORTED,
                            "%s is not tunable until its shapes are known: input %d has shape %s",
                            ir_node_label(kn->node), i,
                            ir_shape_str(NULL, &kn->in[i].shape, sb, sizeof sb));
    for (int i = 0; i < kn->n_out; i++)
        if (!output_omitted(kn, i) && !ir_shape_is_static(&kn->out[i].shape))
            return core_err(ANVIL_ERR_UNSUPPORTED,
                            "%s is not tunable until its shapes are known: output %d has shape %s",
                            ir_node_label(kn->node), i,
                            ir_shape_str(NULL, &kn->out[i].shape, sb, sizeof sb));
    return ANVIL_OK;
}

static anvil_status too_long(const ir_node *n, const char *what, size_t cap) {
    return core_err(ANVIL_ERR_LIMIT,
                    "%s: its tuning %s is longer than %zu bytes (too many or too long attributes, "
                    "inputs or outputs); the node cannot be tuned",
                    ir_node_label(n), what, cap - 1);
}

static anvil_status problem_fill(const kern_node *kn, tune_problem *out) {
    const ir_node *n = kn->node;
    CORE_TRY(check_static(kn));

    key_buf f = {out->family, sizeof out->family, 0, false};
    out->family[0] = '\0';
    kb_printf(&f, "%s|", ir_op_name(n->op));
    CORE_TRY(put_attrs(&f, n));
    put_fusion(&f, n->fusion);
    kb_printf(&f, "|const=");
    for (int i = 0; i < kn->n_in; i++)
        kb_printf(&f, "%s%s", i ? "," : "",
                  input_omitted(kn, i) ? "-"
                  : kn->in[i].value    ? "1"
                                       : "0");
    put_dtype_ranks(&f, kn);
    /* A session that accepts reduced precision asks another question (its candidates include
     * the bf16 variants), so it keys apart; fp32 keys stay as they always were. */
    static const char *const prec[] = {"", "|p=bf16", "|p=fp16", "|p=auto"};
    const int pr = kern_knobs_of(kn)->precision;
    if (pr > 0 && pr < 4) kb_printf(&f, "%s", prec[pr]);
    if (f.over) return too_long(n, "family", sizeof out->family);

    key_buf k = {out->key, sizeof out->key, 0, false};
    kb_printf(&k, "%s|shapes=", out->family);
    for (int i = 0; i < kn->n_in; i++) {
        kb_printf(&k, "%s", i ? "," : "");
        if (input_omitted(kn, i))
            kb_printf(&k, "-");
        else
            put_shape(&k, &kn->in[i].shape);
    }
    kb_printf(&k, ">");
    for (int i = 0; i < kn->n_out; i++) {
        kb_printf(&k, "%s", i ? "," : "");
        if (output_omitted(kn, i))
            kb_printf(&k, "-");
        else
            put_shape(&k, &kn->out[i].shape);
    }
    kb_printf(&k, "|t=%d", kn->threads);
    if (k.over) return too_long(n, "key", sizeof out->key);

    for (int i = 0; i < kn->n_in; i++) {
        if (input_omitted(kn, i)) continue;
        for (int d = 0; d < kn->in[i].shape.rank && out->n_dims < TUNE_MAX_DIMS; d++)
            out->dims[out->n_dims++] = kn->in[i].shape.d[d];
    }
    return ANVIL_OK;
}

anvil_status tune_problem_of(const kern_node *kn, tune_problem *out) {
    if (!out) return core_err(ANVIL_ERR_INVALID_ARGUMENT, "tune_problem_of: out is NULL");
    memset(out, 0, sizeof *out);
    if (!kn || !kn->node || (kn->n_in > 0 && !kn->in) || (kn->n_out > 0 && !kn->out) ||
        kn->n_in < 0 || kn->n_out < 0)
        return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                        "tune_problem_of: kn, its node and its input and output lists must be set");
    anvil_status s = problem_fill(kn, out);
    if (s != ANVIL_OK) memset(out, 0, sizeof *out);
    return s;
}
