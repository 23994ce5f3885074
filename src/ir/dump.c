/* Text and Graphviz dumps of a graph, for people debugging a model or a pass.
 *
 * Both dumps only read the graph and never fail: anything odd (a value id out of range, an
 * unknown shape) is printed as such rather than refused, because a dump is most useful precisely
 * when the graph is broken. Names come from model files and may contain anything, so they are
 * escaped: control characters in the text dump, quotes and backslashes in dot strings. Attribute
 * lists and tensors are shortened so one node stays one line. */
#include "ir.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Longest attribute rendering; longer ones end in "...". */
#define DUMP_ATTR_CAP 160
/* List attributes show this many items, then a count. */
#define DUMP_LIST_ITEMS 16
/* Tensor attributes show their values when they have at most this many elements. */
#define DUMP_TENSOR_ITEMS 8

/* A bounded string builder: appends are truncated at the capacity, never overflow. */
typedef struct dump_buf {
    char *s;
    size_t cap, len;
} dump_buf;

static void buf_printf(dump_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_printf(dump_buf *b, const char *fmt, ...) {
    if (b->len + 1 >= b->cap) return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (w < 0) return;
    b->len += (size_t)w;
    if (b->len >= b->cap) {
        b->len = b->cap - 1;
        if (b->cap > 4) memcpy(b->s + b->cap - 4, "...", 4);
    }
}

static bool vid_ok(const ir_graph *g, ir_vid v) {
    return v >= 0 && v < g->n_values;
}

static const char *vname(const ir_graph *g, ir_vid v) {
    if (!vid_ok(g, v)) return "<bad value id>";
    return g->values[v].name ? g->values[v].name : "?";
}

/* Writes s with control characters shown as \xNN so a name cannot break the line structure. */
static void put_text(FILE *f, const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\x%02x", c);
        else
            fputc(c, f);
    }
}

/* Writes s escaped for the inside of a dot double-quoted string. "\n" in s is kept as a line
 * break; other control characters become spaces. */
static void put_dot(FILE *f, const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            fputc('\\', f);
            fputc(c, f);
        } else if (c == '\n') {
            fputs("\\n", f);
        } else if (c < 0x20 || c == 0x7f) {
            fputc(' ', f);
        } else {
            fputc(c, f);
        }
    }
}

static void format_string(dump_buf *b, const char *s) {
    buf_printf(b, "\"");
    for (; s && *s && b->len + 1 < b->cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            buf_printf(b, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            buf_printf(b, "\\x%02x", c);
        else
            buf_printf(b, "%c", c);
    }
    buf_printf(b, "\"");
}

static void format_tensor(dump_buf *b, const ir_tensor *t) {
    if (!t) {
        buf_printf(b, "tensor(?)");
        return;
    }
    buf_printf(b, "tensor(%s[", anvil_dtype_name(t->dtype));
    for (int i = 0; i < t->rank && i < IR_MAX_RANK; i++)
        buf_printf(b, "%s%lld", i ? "," : "", (long long)t->dims[i]);
    buf_printf(b, "]");
    size_t numel, es = anvil_dtype_size(t->dtype);
    bool show = t->data && es && t->rank >= 0 && t->rank <= IR_MAX_RANK &&
                core_numel(t->dims, t->rank, &numel) && numel <= DUMP_TENSOR_ITEMS &&
                numel * es <= t->bytes && core_dtype_supported(t->dtype);
    if (show) {
        buf_printf(b, ":");
        for (size_t i = 0; i < numel; i++) {
            /* constant data may be unaligned: copy one element out before reading it */
            _Alignas(16) unsigned char elem[16];
            memcpy(elem, (const unsigned char *)t->data + i * es, es);
            if (core_dtype_is_float(t->dtype))
                buf_printf(b, "%s%g", i ? "," : " ", core_load_f64(t->dtype, elem, 0));
            else
                buf_printf(b, "%s%lld", i ? "," : " ", (long long)core_load_i64(t->dtype, elem, 0));
        }
    }
    buf_printf(b, ")");
}

static void format_graph_ref(dump_buf *b, const ir_graph *sub) {
    if (sub && sub->name && sub->name[0])
        buf_printf(b, "graph '%s'", sub->name);
    else
        buf_printf(b, "graph");
}

/* Renders one attribute value compactly ("[3,3]", "0.5", "\"SAME_UPPER\"", ...). */
static void format_attr(dump_buf *b, const ir_attr *a) {
    switch (a->type) {
    case IR_ATTR_INT:
        buf_printf(b, "%lld", (long long)a->i);
        break;
    case IR_ATTR_FLOAT:
        buf_printf(b, "%g", (double)a->f);
        break;
    case IR_ATTR_STRING:
        format_string(b, a->s);
        break;
    case IR_ATTR_TENSOR:
        format_tensor(b, a->t);
        break;
    case IR_ATTR_GRAPH:
        format_graph_ref(b, a->g);
        break;
    case IR_ATTR_INTS:
    case IR_ATTR_FLOATS:
    case IR_ATTR_STRINGS:
    case IR_ATTR_TENSORS:
    case IR_ATTR_GRAPHS: {
        buf_printf(b, "[");
        size_t shown = a->n < DUMP_LIST_ITEMS ? a->n : DUMP_LIST_ITEMS;
        for (size_t i = 0; i < shown; i++) {
            if (i) buf_printf(b, ",");
            if (a->type == IR_ATTR_INTS && a->ints)
                buf_printf(b, "%lld", (long long)a->ints[i]);
            else if (a->type == IR_ATTR_FLOATS && a->floats)
                buf_printf(b, "%g", (double)a->floats[i]);
            else if (a->type == IR_ATTR_STRINGS && a->strings)
                format_string(b, a->strings[i]);
            else if (a->type == IR_ATTR_TENSORS && a->tensors)
                format_tensor(b, &a->tensors[i]);
            else if (a->type == IR_ATTR_GRAPHS && a->graphs)
                format_graph_ref(b, a->graphs[i]);
            else
                buf_printf(b, "?");
        }
        if (shown < a->n) buf_printf(b, ",...");
        buf_printf(b, "]");
        if (shown < a->n) buf_printf(b, " (%zu items)", a->n);
        break;
    }
    default:
        buf_printf(b, "<%s>", ir_attr_type_name(a->type));
        break;
    }
}

static void format_shape(dump_buf *b, const ir_graph *g, ir_vid v) {
    char sb[256];
    if (!vid_ok(g, v)) {
        buf_printf(b, "[?]");
        return;
    }
    buf_printf(b, "%s", ir_shape_str(g, &g->values[v].shape, sb, sizeof sb));
}

static const char *graph_title(const ir_graph *g) {
    return g->name && g->name[0] ? g->name : (g->depth == 0 ? "main" : "subgraph");
}

/* ---- text ---------------------------------------------------------------------------------- */

static void text_value(FILE *f, const ir_graph *g, ir_vid v, bool with_dtype) {
    char sb[256];
    dump_buf b = {sb, sizeof sb, 0};
    sb[0] = '\0';
    put_text(f, vname(g, v));
    if (!vid_ok(g, v)) return;
    format_shape(&b, g, v);
    if (with_dtype)
        fprintf(f, ": %s%s", anvil_dtype_name(g->values[v].dtype), sb);
    else
        fprintf(f, "%s", sb);
}

static void text_graph(FILE *f, const ir_graph *g, int indent, int level);

static void text_node(FILE *f, const ir_graph *g, int32_t i, int indent, int level) {
    const ir_node *n = &g->nodes[i];
    fprintf(f, "%*s#%d ", indent, "", (int)i);
    put_text(f, n->name ? n->name : "?");
    fprintf(f, " = %s(", ir_op_name(n->op));
    for (int k = 0; k < n->n_inputs; k++) {
        if (k) fprintf(f, ", ");
        if (n->inputs[k] == IR_NONE)
            fprintf(f, "_");
        else
            text_value(f, g, n->inputs[k], false);
    }
    fprintf(f, ") -> ");
    for (int k = 0; k < n->n_outputs; k++) {
        if (k) fprintf(f, ", ");
        if (n->outputs[k] == IR_NONE)
            fprintf(f, "_");
        else
            text_value(f, g, n->outputs[k], true);
    }
    if (n->n_attrs > 0) {
        fprintf(f, " {");
        for (int k = 0; k < n->n_attrs; k++) {
            char ab[DUMP_ATTR_CAP];
            dump_buf b = {ab, sizeof ab, 0};
            ab[0] = '\0';
            format_attr(&b, &n->attrs[k]);
            fprintf(f, "%s", k ? ", " : "");
            put_text(f, n->attrs[k].name ? n->attrs[k].name : "?");
            fprintf(f, "=%s", ab);
        }
        fprintf(f, "}");
    }
    if (n->fusion) {
        const ir_fusion *u = n->fusion;
        fprintf(f, " fused[");
        if (u->bias >= 0) fprintf(f, "+bias(in%d)", u->bias);
        if (u->residual >= 0) fprintf(f, "%s+residual(in%d)", u->bias >= 0 ? " " : "", u->residual);
        if (u->act != IR_ACT_NONE)
            fprintf(f, "%s%s", u->bias >= 0 || u->residual >= 0 ? " " : "", ir_act_name(u->act));
        fprintf(f, "]");
    }
    fprintf(f, "\n");
    for (int k = 0; k < n->n_attrs; k++) {
        const ir_attr *a = &n->attrs[k];
        for (size_t j = 0; j < ir_attr_graph_count(a); j++) {
            const ir_graph *sub = ir_attr_graph_at(a, j);
            if (!sub) continue;
            fprintf(f, "%*s  %s", indent, "", a->name ? a->name : "?");
            if (a->type == IR_ATTR_GRAPHS) fprintf(f, "[%zu]", j);
            fprintf(f, ":\n");
            text_graph(f, sub, indent + 4, level + 1);
        }
    }
}

static void text_graph(FILE *f, const ir_graph *g, int indent, int level) {
    if (level > IR_MAX_GRAPH_DEPTH) {
        fprintf(f, "%*s(subgraphs nested deeper than %d are not shown)\n", indent, "",
                IR_MAX_GRAPH_DEPTH);
        return;
    }
    int32_t n_init = 0, n_outer = 0;
    size_t init_bytes = 0;
    for (ir_vid v = 0; v < g->n_values; v++) {
        const ir_value *val = &g->values[v];
        if ((val->flags & IR_VALUE_CONST) && val->producer < 0) {
            n_init++;
            init_bytes += val->data_bytes;
        }
        if (val->flags & IR_VALUE_OUTER) n_outer++;
    }
    fprintf(f, "%*sgraph '", indent, "");
    put_text(f, graph_title(g));
    fprintf(f, "' (opset %d): %d inputs, %d outputs, %d nodes, %d initializers (%zu bytes)\n",
            g->opset, (int)g->n_inputs, (int)g->n_outputs, (int)g->n_nodes, (int)n_init,
            init_bytes);
    fprintf(f, "%*sinputs:\n", indent, "");
    for (int32_t k = 0; k < g->n_inputs; k++) {
        fprintf(f, "%*s  ", indent, "");
        text_value(f, g, g->inputs[k], true);
        fprintf(f, "\n");
    }
    if (n_outer > 0) {
        fprintf(f, "%*souter references:\n", indent, "");
        for (ir_vid v = 0; v < g->n_values; v++) {
            if (!(g->values[v].flags & IR_VALUE_OUTER)) continue;
            fprintf(f, "%*s  ", indent, "");
            text_value(f, g, v, true);
            fprintf(f, "\n");
        }
    }
    if (n_init > 0) {
        fprintf(f, "%*sinitializers:\n", indent, "");
        for (ir_vid v = 0; v < g->n_values; v++) {
            const ir_value *val = &g->values[v];
            if (!(val->flags & IR_VALUE_CONST) || val->producer >= 0) continue;
            fprintf(f, "%*s  ", indent, "");
            text_value(f, g, v, true);
            fprintf(f, " (%zu bytes)\n", val->data_bytes);
        }
    }
    fprintf(f, "%*snodes:\n", indent, "");
    for (int32_t i = 0; i < g->n_nodes; i++) text_node(f, g, i, indent + 2, level);
    fprintf(f, "%*soutputs:\n", indent, "");
    for (int32_t k = 0; k < g->n_outputs; k++) {
        fprintf(f, "%*s  ", indent, "");
        text_value(f, g, g->outputs[k], true);
        fprintf(f, "\n");
    }
}

void ir_graph_dump_text(const ir_graph *g, void *file) {
    if (!g || !file) return;
    text_graph(file, g, 0, g->depth);
}

/* ---- dot ----------------------------------------------------------------------------------- */

/* Each graph gets a number so ids stay unique across clusters: g<N>_n<node>, g<N>_v<value>
 * (sources: inputs, initializers, outer references), g<N>_o<k> (graph outputs). */
typedef struct dot_ctx {
    FILE *f;
    int next_graph;
} dot_ctx;

static void dot_shape_label(FILE *f, const ir_graph *g, ir_vid v) {
    char sb[256];
    dump_buf b = {sb, sizeof sb, 0};
    sb[0] = '\0';
    format_shape(&b, g, v);
    put_dot(f, sb);
}

/* The dot id of whatever writes value v: its producer node or its source node. */
static void dot_source_id(FILE *f, const ir_graph *g, int gid, ir_vid v) {
    int32_t p = vid_ok(g, v) ? g->values[v].producer : -1;
    if (p >= 0 && p < g->n_nodes)
        fprintf(f, "g%d_n%d", gid, (int)p);
    else
        fprintf(f, "g%d_v%d", gid, (int)v);
}

static void dot_graph(dot_ctx *c, const ir_graph *g, int gid, int indent, int level);

static void dot_node(dot_ctx *c, const ir_graph *g, int gid, int32_t i, int indent, int level) {
    FILE *f = c->f;
    const ir_node *n = &g->nodes[i];
    fprintf(f, "%*sg%d_n%d [shape=box, style=\"rounded,filled\", fillcolor=\"#e8eef7\", label=\"",
            indent, "", gid, (int)i);
    put_dot(f, n->name ? n->name : "?");
    fprintf(f, "\\n%s", ir_op_name(n->op));
    if (n->fusion && n->fusion->residual >= 0) fprintf(f, " +residual");
    if (n->fusion && n->fusion->bias >= 0) fprintf(f, " +bias");
    if (n->fusion && n->fusion->act != IR_ACT_NONE) fprintf(f, " +%s", ir_act_name(n->fusion->act));
    for (int k = 0; k < n->n_attrs; k++) {
        const ir_attr *a = &n->attrs[k];
        if (a->type == IR_ATTR_GRAPH || a->type == IR_ATTR_GRAPHS) continue;
        char ab[DUMP_ATTR_CAP];
        dump_buf b = {ab, sizeof ab, 0};
        ab[0] = '\0';
        buf_printf(&b, "%s=", a->name ? a->name : "?");
        format_attr(&b, a);
        fputs("\\n", f);
        put_dot(f, ab);
    }
    fprintf(f, "\"];\n");
    for (int k = 0; k < n->n_inputs; k++) {
        ir_vid v = n->inputs[k];
        if (v == IR_NONE) continue;
        fprintf(f, "%*s", indent, "");
        dot_source_id(f, g, gid, v);
        fprintf(f, " -> g%d_n%d [label=\"", gid, (int)i);
        dot_shape_label(f, g, v);
        fprintf(f, "\", tooltip=\"");
        put_dot(f, vname(g, v));
        fprintf(f, "\"];\n");
    }
    for (int k = 0; k < n->n_attrs; k++) {
        const ir_attr *a = &n->attrs[k];
        for (size_t j = 0; j < ir_attr_graph_count(a); j++) {
            const ir_graph *sub = ir_attr_graph_at(a, j);
            if (!sub) continue;
            int sid = c->next_graph++;
            fprintf(f, "%*ssubgraph cluster_g%d {\n", indent, "", sid);
            fprintf(f, "%*s  style=dashed; label=\"", indent, "");
            put_dot(f, n->name ? n->name : "?");
            fputc('.', f);
            put_dot(f, a->name ? a->name : "?");
            if (a->type == IR_ATTR_GRAPHS) fprintf(f, "[%zu]", j);
            fprintf(f, "\";\n");
            dot_graph(c, sub, sid, indent + 2, level + 1);
            fprintf(f, "%*s}\n", indent, "");
            /* the edge ties the body to its owner; lhead makes it end at the cluster border */
            if (sub->n_outputs > 0)
                fprintf(f,
                        "%*sg%d_n%d -> g%d_o0 [style=dotted, arrowhead=none, "
                        "lhead=cluster_g%d];\n",
                        indent, "", gid, (int)i, sid, sid);
        }
    }
}

static void dot_graph(dot_ctx *c, const ir_graph *g, int gid, int indent, int level) {
    FILE *f = c->f;
    if (level > IR_MAX_GRAPH_DEPTH) {
        fprintf(f, "%*sg%d_deep [shape=plaintext, label=\"(nested too deep)\"];\n", indent, "",
                gid);
        return;
    }
    for (int32_t k = 0; k < g->n_inputs; k++) {
        ir_vid v = g->inputs[k];
        if (!vid_ok(g, v)) continue;
        fprintf(f, "%*sg%d_v%d [shape=ellipse, style=filled, fillcolor=\"#e6f4e6\", label=\"",
                indent, "", gid, (int)v);
        put_dot(f, vname(g, v));
        fprintf(f, "\\n%s ", anvil_dtype_name(g->values[v].dtype));
        dot_shape_label(f, g, v);
        fprintf(f, "\"];\n");
    }
    for (ir_vid v = 0; v < g->n_values; v++) {
        const ir_value *val = &g->values[v];
        bool initializer = (val->flags & IR_VALUE_CONST) && val->producer < 0;
        bool outer = (val->flags & IR_VALUE_OUTER) != 0;
        if (!initializer && !outer) continue;
        fprintf(f, "%*sg%d_v%d [shape=%s, fontsize=8, label=\"", indent, "", gid, (int)v,
                initializer ? "note" : "ellipse, style=dashed");
        put_dot(f, vname(g, v));
        fprintf(f, "\\n%s ", anvil_dtype_name(val->dtype));
        dot_shape_label(f, g, v);
        fprintf(f, "%s\"];\n", outer ? "\\n(outer scope)" : "");
    }
    for (int32_t i = 0; i < g->n_nodes; i++) dot_node(c, g, gid, i, indent, level);
    for (int32_t k = 0; k < g->n_outputs; k++) {
        ir_vid v = g->outputs[k];
        fprintf(f, "%*sg%d_o%d [shape=ellipse, style=bold, label=\"", indent, "", gid, (int)k);
        put_dot(f, vname(g, v));
        if (vid_ok(g, v)) fprintf(f, "\\n%s", anvil_dtype_name(g->values[v].dtype));
        fprintf(f, "\"];\n");
        if (!vid_ok(g, v)) continue;
        fprintf(f, "%*s", indent, "");
        dot_source_id(f, g, gid, v);
        fprintf(f, " -> g%d_o%d [label=\"", gid, (int)k);
        dot_shape_label(f, g, v);
        fprintf(f, "\"];\n");
    }
}

void ir_graph_dump_dot(const ir_graph *g, void *file) {
    if (!g || !file) return;
    dot_ctx c = {file, 1};
    FILE *f = file;
    fprintf(f, "digraph \"");
    put_dot(f, graph_title(g));
    fprintf(f, "\" {\n");
    fprintf(f, "  graph [rankdir=TB, compound=true, fontname=\"Helvetica\"];\n");
    fprintf(f, "  node [fontname=\"Helvetica\", fontsize=10];\n");
    fprintf(f, "  edge [fontname=\"Helvetica\", fontsize=9];\n");
    dot_graph(&c, g, 0, 2, g->depth);
    fprintf(f, "}\n");
}
