/* ModelProto -> ir: model-level checks (IR version, opsets), then each graph: initializers,
 * inputs, every node output, nodes, graph outputs.
 *
 * Why node outputs are created before any node: ONNX requires topological order but exporters
 * sometimes break it, and a cycle has no order at all. Defining every value first lets each node
 * input be resolved whatever the order; ordering problems are then the verifier's to report.
 * A name that nothing defines is refused here, naming the node.
 *
 * Why subgraphs are decoded lazily: the decoder leaves a GRAPH attribute as a span of the
 * input (see onnx.options). A subgraph is decoded only when it is converted, after
 * ir_graph_create has checked the nesting depth, so a file of deeply nested graphs costs one
 * bounded level of recursion per graph up to IR_MAX_GRAPH_DEPTH and no more.
 *
 * Why unsupported operators do not stop the walk: a user fixing a model wants every operator
 * anvil lacks at once, not one per attempt. The first one switches the import to scanning: the
 * rest of the model (subgraphs included) is only walked for op types and depth, and one error
 * lists them all. */
#include "onnx_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Distinct unsupported operators named in the message; the rest are counted. */
#define MAX_LISTED_OPS 24

typedef struct unsup_op {
    char *domain, *op_type;
    int64_t opset; /* -1: the model does not import the domain */
    size_t nodes;
} unsup_op;

typedef struct importer {
    onnx_import im;
    const onnx_ModelProto *mp;
    unsup_op unsup[MAX_LISTED_OPS];
    size_t n_unsup, other_unsup_nodes;
    bool any_unsup;
    bool err_context; /* the error already names the subgraph it happened in */
} importer;

static bool default_domain(const char *d) {
    return !d || !*d || !strcmp(d, "ai.onnx");
}

/* The version the model imports for a domain, -1 if none. */
static int64_t domain_opset(const importer *x, const char *domain) {
    for (pb_size_t i = 0; i < x->mp->opset_import_count; i++) {
        const onnx_OperatorSetIdProto *o = &x->mp->opset_import[i];
        bool same = default_domain(domain) ? default_domain(o->domain)
                                           : (o->domain && !strcmp(o->domain, domain));
        if (same && o->has_version) return o->version;
    }
    return -1;
}

static anvil_status tally_unsupported(importer *x, const char *domain, const char *op_type) {
    x->any_unsup = true;
    const char *d = default_domain(domain) ? "" : domain;
    for (size_t i = 0; i < x->n_unsup; i++) {
        if (!strcmp(x->unsup[i].domain, d) && !strcmp(x->unsup[i].op_type, op_type)) {
            x->unsup[i].nodes++;
            return ANVIL_OK;
        }
    }
    if (x->n_unsup == MAX_LISTED_OPS) {
        x->other_unsup_nodes++;
        return ANVIL_OK;
    }
    unsup_op *u = &x->unsup[x->n_unsup];
    u->domain = core_strdup(d);
    u->op_type = core_strdup(op_type);
    if (!u->domain || !u->op_type) {
        free(u->domain);
        free(u->op_type);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    u->opset = domain_opset(x, d);
    u->nodes = 1;
    x->n_unsup++;
    return ANVIL_OK;
}

static anvil_status report_unsupported(const importer *x) {
    char list[1400];
    size_t len = 0;
    list[0] = '\0';
    for (size_t i = 0; i < x->n_unsup && len < sizeof list; i++) {
        const unsup_op *u = &x->unsup[i];
        char opset[32];
        if (u->opset >= 0)
            snprintf(opset, sizeof opset, "opset %" PRId64, u->opset);
        else
            snprintf(opset, sizeof opset, "domain not imported");
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%.100s%s%.100s (%s, %zu node%s)",
                                i ? ", " : "", u->domain, *u->domain ? "::" : "", u->op_type, opset,
                                u->nodes, u->nodes == 1 ? "" : "s");
    }
    if (x->other_unsup_nodes && len < sizeof list)
        snprintf(list + len, sizeof list - len, ", and %zu nodes of further operators",
                 x->other_unsup_nodes);
    return core_err(ANVIL_ERR_UNSUPPORTED,
                    "unsupported operators: %s; anvil runs the standard ONNX operators it "
                    "implements (default domain only): replace these, or re-export without "
                    "custom or fused operators",
                    list);
}

static void importer_free(importer *x) {
    for (size_t i = 0; i < x->n_unsup; i++) {
        free(x->unsup[i].domain);
        free(x->unsup[i].op_type);
    }
}

/* ---- values ---------------------------------------------------------------------------------- */

/* Copies a shape from graph `from` into graph `to`, re-interning its symbolic dims. */
static anvil_status shape_copy(ir_graph *to, const ir_graph *from, const ir_shape *src,
                               ir_shape *dst) {
    *dst = *src;
    for (int i = 0; i < src->rank; i++)
        if (src->d[i] < 0 && src->sym[i] >= 0 && src->sym[i] < from->n_syms)
            CORE_TRY(ir_graph_add_sym(to, from->syms[src->sym[i]], &dst->sym[i]));
    return ANVIL_OK;
}

/* Finds `name` in g or, for a subgraph, in an enclosing graph; in the latter case it becomes an
 * IR_VALUE_OUTER value of g (and of every graph in between). *out is IR_NONE if no graph
 * defines it. */
static anvil_status resolve(ir_graph *g, const char *name, ir_vid *out) {
    *out = ir_graph_find_value(g, name);
    if (*out != IR_NONE || !g->parent) return ANVIL_OK;
    ir_vid pv;
    CORE_TRY(resolve(g->parent, name, &pv));
    if (pv == IR_NONE) return ANVIL_OK;
    const ir_value *src = &g->parent->values[pv];
    anvil_dtype dt = src->dtype;
    ir_shape shape;
    CORE_TRY(shape_copy(g, g->parent, &src->shape, &shape));
    ir_vid v;
    CORE_TRY(ir_graph_add_value(g, name, &v));
    g->values[v].flags = IR_VALUE_OUTER;
    g->values[v].dtype = dt;
    g->values[v].shape = shape;
    *out = v;
    return ANVIL_OK;
}

/* Declared type of a graph input or output. Absent parts stay unknown (UNDEFINED dtype,
 * unknown rank, anonymous dims). */
static anvil_status value_type(ir_graph *g, const onnx_ValueInfoProto *vi, const char *what,
                               anvil_dtype *dt, ir_shape *shape) {
    *dt = ANVIL_DTYPE_UNDEFINED;
    ir_shape_unknown(shape);
    if (!vi->has_type) return ANVIL_OK;
    const char *kind = NULL;
    switch (vi->type.which_value) {
    case 0:
        return ANVIL_OK;
    case onnx_TypeProto_tensor_type_tag:
        break;
    case onnx_TypeProto_sequence_type_tag:
        kind = "a sequence";
        break;
    case onnx_TypeProto_map_type_tag:
        kind = "a map";
        break;
    case onnx_TypeProto_optional_type_tag:
        kind = "an optional";
        break;
    case onnx_TypeProto_sparse_tensor_type_tag:
        kind = "a sparse tensor";
        break;
    default:
        kind = "an unknown";
        break;
    }
    if (kind)
        return core_err(ANVIL_ERR_UNSUPPORTED, "%s has %s type; anvil supports dense tensors only",
                        what, kind);
    const onnx_TypeProto_Tensor *tt = &vi->type.value.tensor_type;
    if (tt->has_elem_type && tt->elem_type != 0)
        CORE_TRY(onnx_dtype_check(tt->elem_type, what, dt));
    if (!tt->has_shape) return ANVIL_OK;
    if (tt->shape.dim_count > IR_MAX_RANK)
        return core_err(ANVIL_ERR_LIMIT, "%s has rank %u; anvil supports at most %d dims", what,
                        (unsigned)tt->shape.dim_count, IR_MAX_RANK);
    shape->rank = tt->shape.dim_count;
    size_t known = 1;
    bool overflow = false;
    for (int i = 0; i < shape->rank; i++) {
        const onnx_TensorShapeProto_Dimension *d = &tt->shape.dim[i];
        shape->d[i] = IR_DIM_UNKNOWN;
        shape->sym[i] = -1;
        if (d->which_value == onnx_TensorShapeProto_Dimension_dim_value_tag) {
            int64_t v = d->value.dim_value;
            if (v < -1)
                return core_err(ANVIL_ERR_INVALID_MODEL,
                                "%s: dim %d is %" PRId64 "; dims must be >= 0, or symbolic", what,
                                i, v);
            if (v >= 0) {
                shape->d[i] = v;
                overflow |= !core_mul_size(known, (size_t)v, &known);
            }
        } else if (d->which_value == onnx_TensorShapeProto_Dimension_dim_param_tag &&
                   d->value.dim_param && *d->value.dim_param &&
                   strcmp(d->value.dim_param, "?") != 0) {
            /* exporters write "?" for "unknown", not for one dim shared by every "?" */
            CORE_TRY(ir_graph_add_sym(g, d->value.dim_param, &shape->sym[i]));
        }
    }
    if (*dt == ANVIL_DTYPE_UNDEFINED) return ANVIL_OK;
    size_t bytes;
    char sbuf[160];
    if (overflow || !core_mul_size(known, anvil_dtype_size(*dt), &bytes))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s has shape %s of %s, whose size overflows 64 bits; the dims are wrong",
                        what, ir_shape_str(g, shape, sbuf, sizeof sbuf), anvil_dtype_name(*dt));
    if (bytes > core_max_tensor_bytes())
        return core_err(ANVIL_ERR_LIMIT,
                        "%s has shape %s of %s: at least %zu bytes, more than anvil's limit of "
                        "%zu bytes per tensor (raise it with ANVIL_MAX_TENSOR_BYTES)",
                        what, ir_shape_str(g, shape, sbuf, sizeof sbuf), anvil_dtype_name(*dt),
                        bytes, core_max_tensor_bytes());
    return ANVIL_OK;
}

static anvil_status import_initializer(importer *x, ir_graph *g, const onnx_TensorProto *tp,
                                       size_t index) {
    if (!tp->name || !*tp->name)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "initializer %zu of graph '%s' has no name; every initializer must be "
                        "named",
                        index, g->name);
    char what[256];
    snprintf(what, sizeof what, "initializer '%.200s'", tp->name);
    ir_tensor t;
    CORE_TRY(onnx_tensor_convert(&x->im, tp, what, &t));
    ir_vid v;
    CORE_TRY(ir_graph_add_value(g, tp->name, &v));
    ir_value *val = &g->values[v];
    val->dtype = t.dtype;
    ir_shape_set(&val->shape, t.rank, t.dims);
    val->flags = IR_VALUE_CONST;
    val->data = t.data;
    val->data_bytes = t.bytes;
    return ANVIL_OK;
}

/* Checks graph input or output (kind "input" or "output") number index has a name, writes
 * "graph <kind> '<name>'" into what[cap] and reads its declared type into dt and shape. */
static anvil_status graph_io_type(ir_graph *g, const onnx_ValueInfoProto *vi, const char *kind,
                                  size_t index, char *what, size_t cap, anvil_dtype *dt,
                                  ir_shape *shape) {
    if (!vi->name || !*vi->name)
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s %zu of graph '%s' has no name", kind, index,
                        g->name);
    snprintf(what, cap, "graph %s '%.200s'", kind, vi->name);
    return value_type(g, vi, what, dt, shape);
}

static anvil_status import_input(ir_graph *g, const onnx_ValueInfoProto *vi, size_t index) {
    char what[256];
    anvil_dtype dt;
    ir_shape shape;
    CORE_TRY(graph_io_type(g, vi, "input", index, what, sizeof what, &dt, &shape));
    ir_vid v = ir_graph_find_value(g, vi->name);
    if (v != IR_NONE) {
        const ir_value *val = &g->values[v];
        if (!(val->flags & IR_VALUE_CONST))
            return core_err(ANVIL_ERR_INVALID_MODEL, "%s is listed twice in graph '%s'", what,
                            g->name);
        /* an initializer listed among the inputs (IR < 4 style): it stays a constant */
        if (dt != ANVIL_DTYPE_UNDEFINED && dt != val->dtype)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s is declared %s but its initializer is %s; fix the exporter", what,
                            anvil_dtype_name(dt), anvil_dtype_name(val->dtype));
        return ANVIL_OK;
    }
    if (g->depth == 0 && dt == ANVIL_DTYPE_UNDEFINED)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s has no element type; a model's inputs must be typed tensors", what);
    CORE_TRY(ir_graph_add_value(g, vi->name, &v));
    g->values[v].dtype = dt;
    g->values[v].shape = shape;
    return ir_graph_add_input(g, v);
}

static anvil_status import_output(ir_graph *g, const onnx_ValueInfoProto *vi, size_t index) {
    char what[256];
    anvil_dtype dt;
    ir_shape shape;
    CORE_TRY(graph_io_type(g, vi, "output", index, what, sizeof what, &dt, &shape));
    ir_vid v;
    CORE_TRY(resolve(g, vi->name, &v));
    if (v == IR_NONE)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s is not produced by any node and is no input or initializer", what);
    ir_value *val = &g->values[v];
    /* inputs and constants already carry their own type; node outputs take the declared one,
     * which the runtime later checks inference against */
    if (!(val->flags & (IR_VALUE_CONST | IR_VALUE_GRAPH_INPUT | IR_VALUE_OUTER))) {
        if (dt != ANVIL_DTYPE_UNDEFINED) val->dtype = dt;
        if (shape.rank >= 0) val->shape = shape;
    }
    return ir_graph_add_output(g, v);
}

/* ---- nodes and attributes ------------------------------------------------------------------- */

static anvil_status import_graph(importer *x, const onnx_GraphProto *gp, ir_graph *g);
static anvil_status scan_graph(importer *x, const onnx_pb_bytes *span, int depth);

static anvil_status nesting_error(void) {
    return core_err(ANVIL_ERR_LIMIT,
                    "subgraphs are nested more than %d deep; flatten the model's control flow",
                    IR_MAX_GRAPH_DEPTH);
}

/* Decodes and converts one serialized subgraph as a child of g. */
static anvil_status import_subgraph(importer *x, ir_graph *g, const onnx_pb_bytes *span,
                                    ir_graph **out) {
    if (x->any_unsup) { /* the import will fail: only count operators */
        *out = NULL;
        return scan_graph(x, span, g->depth + 1);
    }
    ir_graph *child;
    CORE_TRY(ir_graph_create(g, &child)); /* refuses nesting deeper than IR_MAX_GRAPH_DEPTH */
    *out = child;                         /* owned by g from here on */
    onnx_GraphProto gp;
    memset(&gp, 0, sizeof gp);
    CORE_TRY(onnx_pb_decode(&x->im.pb, onnx_GraphProto_fields, span->data, span->size, &gp));
    anvil_status s = import_graph(x, &gp, child);
    pb_release(onnx_GraphProto_fields, &gp);
    return s;
}

static const char *attr_type_name(int t) {
    switch (t) {
    case onnx_AttributeProto_AttributeType_SPARSE_TENSOR:
        return "SPARSE_TENSOR";
    case onnx_AttributeProto_AttributeType_SPARSE_TENSORS:
        return "SPARSE_TENSORS";
    case onnx_AttributeProto_AttributeType_TYPE_PROTO:
        return "TYPE_PROTO";
    case onnx_AttributeProto_AttributeType_TYPE_PROTOS:
        return "TYPE_PROTOS";
    default:
        return ir_attr_type_name((ir_attr_type)t);
    }
}

/* The attribute types whose value fields are filled in ap, as a bit set over AttributeType. */
static uint32_t attr_filled(const importer *x, const onnx_AttributeProto *ap) {
    size_t n;
    uint32_t m = 0;
    if (ap->has_f) m |= 1u << onnx_AttributeProto_AttributeType_FLOAT;
    if (ap->has_i) m |= 1u << onnx_AttributeProto_AttributeType_INT;
    if (ap->s) m |= 1u << onnx_AttributeProto_AttributeType_STRING;
    if (ap->has_t) m |= 1u << onnx_AttributeProto_AttributeType_TENSOR;
    if (ap->g.count) m |= 1u << onnx_AttributeProto_AttributeType_GRAPH;
    if (onnx_pb_list_items(&x->im.pb, ap->floats, ONNX_PB_F32, &n))
        m |= 1u << onnx_AttributeProto_AttributeType_FLOATS;
    if (onnx_pb_list_items(&x->im.pb, ap->ints, ONNX_PB_I64, &n))
        m |= 1u << onnx_AttributeProto_AttributeType_INTS;
    if (ap->strings_count) m |= 1u << onnx_AttributeProto_AttributeType_STRINGS;
    if (onnx_pb_list_items(&x->im.pb, ap->tensors, ONNX_PB_MSG, &n))
        m |= 1u << onnx_AttributeProto_AttributeType_TENSORS;
    if (onnx_pb_list_items(&x->im.pb, ap->graphs, ONNX_PB_SPAN, &n))
        m |= 1u << onnx_AttributeProto_AttributeType_GRAPHS;
    if (ap->sparse_tensor.count) m |= 1u << onnx_AttributeProto_AttributeType_SPARSE_TENSOR;
    if (ap->sparse_tensors.count) m |= 1u << onnx_AttributeProto_AttributeType_SPARSE_TENSORS;
    if (ap->tp.count) m |= 1u << onnx_AttributeProto_AttributeType_TYPE_PROTO;
    if (ap->type_protos.count) m |= 1u << onnx_AttributeProto_AttributeType_TYPE_PROTOS;
    return m;
}

/* Checks that the declared type of an attribute matches the one value field it fills. */
static anvil_status attr_check_type(const importer *x, const onnx_AttributeProto *ap,
                                    const char *label, int *type_out) {
    int type = ap->has_type ? (int)ap->type : 0;
    uint32_t filled = attr_filled(x, ap);
    if (type <= 0 || type > onnx_AttributeProto_AttributeType_TYPE_PROTOS) {
        if (type == 0)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: attribute '%s' has no type; set AttributeProto.type (IR >= 2)",
                            label, ap->name);
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s: attribute '%s' has unknown type %d", label,
                        ap->name, type);
    }
    uint32_t other = filled & ~(1u << type);
    bool is_list = type == onnx_AttributeProto_AttributeType_FLOATS ||
                   type == onnx_AttributeProto_AttributeType_INTS ||
                   type == onnx_AttributeProto_AttributeType_STRINGS ||
                   type == onnx_AttributeProto_AttributeType_TENSORS ||
                   type == onnx_AttributeProto_AttributeType_GRAPHS ||
                   type == onnx_AttributeProto_AttributeType_SPARSE_TENSORS ||
                   type == onnx_AttributeProto_AttributeType_TYPE_PROTOS;
    /* a list may be empty, which protobuf cannot tell from absent; a single value must exist */
    if (other || (!is_list && !(filled & (1u << type)))) {
        const char *holds = "no value";
        for (int t = 1; t <= onnx_AttributeProto_AttributeType_TYPE_PROTOS; t++)
            if (other & (1u << t)) {
                holds = attr_type_name(t);
                break;
            }
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute '%s' is declared %s but holds %s; the exporter wrote an "
                        "inconsistent attribute",
                        label, ap->name, attr_type_name(type), holds);
    }
    if (type == onnx_AttributeProto_AttributeType_SPARSE_TENSOR ||
        type == onnx_AttributeProto_AttributeType_SPARSE_TENSORS ||
        type == onnx_AttributeProto_AttributeType_TYPE_PROTO ||
        type == onnx_AttributeProto_AttributeType_TYPE_PROTOS)
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: attribute '%s' has type %s, which anvil does not support", label,
                        ap->name, attr_type_name(type));
    if (type == onnx_AttributeProto_AttributeType_GRAPH && ap->g.count != 1)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute '%s' holds %" PRIu32 " graphs in its single graph field",
                        label, ap->name, ap->g.count);
    *type_out = type;
    return ANVIL_OK;
}

/* Fills attribute k of node `idx` from ap. label names the node. */
static anvil_status import_attr(importer *x, ir_graph *g, int32_t idx, int k,
                                const onnx_AttributeProto *ap, const char *label) {
    if (!ap->name || !*ap->name)
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s: attribute %d has no name", label, k);
    if (ap->ref_attr_name && *ap->ref_attr_name)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute '%s' refers to function attribute '%s'; such references "
                        "are only valid inside function bodies",
                        label, ap->name, ap->ref_attr_name);
    int type = 0;
    CORE_TRY(attr_check_type(x, ap, label, &type));
    core_arena *ar = g->arena;
    ir_attr *a = &g->nodes[idx].attrs[k]; /* arena memory: stays put while g grows */
    a->name = core_arena_strdup(ar, ap->name);
    if (!a->name) return ANVIL_ERR_OUT_OF_MEMORY;
    a->type = (ir_attr_type)type;
    char what[512];
    size_t n = 0;
    const void *items;
    switch (a->type) {
    case IR_ATTR_FLOAT:
        a->f = ap->f;
        break;
    case IR_ATTR_INT:
        a->i = ap->i;
        break;
    case IR_ATTR_STRING:
        a->s = core_arena_strndup(ar, (const char *)ap->s->bytes, ap->s->size);
        if (!a->s) return ANVIL_ERR_OUT_OF_MEMORY;
        a->s_len = ap->s->size;
        break;
    case IR_ATTR_FLOATS:
    case IR_ATTR_INTS: {
        bool fl = a->type == IR_ATTR_FLOATS;
        items = onnx_pb_list_items(&x->im.pb, fl ? ap->floats : ap->ints,
                                   fl ? ONNX_PB_F32 : ONNX_PB_I64, &n);
        size_t es = fl ? sizeof(float) : sizeof(int64_t);
        void *copy = core_arena_array(ar, n ? n : 1, es);
        if (!copy) return ANVIL_ERR_OUT_OF_MEMORY;
        if (n) memcpy(copy, items, n * es);
        if (fl)
            a->floats = copy;
        else
            a->ints = copy;
        a->n = n;
        break;
    }
    case IR_ATTR_STRINGS: {
        n = ap->strings_count;
        const char **list = core_arena_array(ar, n ? n : 1, sizeof *list);
        if (!list) return ANVIL_ERR_OUT_OF_MEMORY;
        for (size_t i = 0; i < n; i++) {
            const pb_bytes_array_t *b = ap->strings[i];
            list[i] = b ? core_arena_strndup(ar, (const char *)b->bytes, b->size)
                        : core_arena_strdup(ar, "");
            if (!list[i]) return ANVIL_ERR_OUT_OF_MEMORY;
        }
        a->strings = list;
        a->n = n;
        break;
    }
    case IR_ATTR_TENSOR:
        a->t = core_arena_alloc(ar, sizeof *a->t);
        if (!a->t) return ANVIL_ERR_OUT_OF_MEMORY;
        snprintf(what, sizeof what, "%s attribute '%.64s'", label, ap->name);
        CORE_TRY(onnx_tensor_convert(&x->im, &ap->t, what, a->t));
        break;
    case IR_ATTR_TENSORS:
        items = onnx_pb_list_items(&x->im.pb, ap->tensors, ONNX_PB_MSG, &n);
        a->tensors = core_arena_array(ar, n ? n : 1, sizeof *a->tensors);
        if (!a->tensors) return ANVIL_ERR_OUT_OF_MEMORY;
        for (size_t i = 0; i < n; i++) {
            snprintf(what, sizeof what, "%s attribute '%.64s'[%zu]", label, ap->name, i);
            CORE_TRY(onnx_tensor_convert(&x->im, (const onnx_TensorProto *)items + i, what,
                                         &a->tensors[i]));
        }
        a->n = n;
        break;
    case IR_ATTR_GRAPH:
    case IR_ATTR_GRAPHS: {
        const onnx_pb_bytes *spans = &ap->g;
        n = 1;
        if (a->type == IR_ATTR_GRAPHS)
            spans = onnx_pb_list_items(&x->im.pb, ap->graphs, ONNX_PB_SPAN, &n);
        ir_graph **list = core_arena_array(ar, n ? n : 1, sizeof *list);
        if (!list) return ANVIL_ERR_OUT_OF_MEMORY;
        for (size_t i = 0; i < n; i++) {
            anvil_status s = import_subgraph(x, g, &spans[i], &list[i]);
            if (s != ANVIL_OK) {
                if (x->err_context) return s;
                x->err_context = true;
                return core_err_prefix(s, "%s attribute '%.64s'", label, ap->name);
            }
        }
        if (a->type == IR_ATTR_GRAPH)
            a->g = list[0];
        else
            a->graphs = list;
        a->n = a->type == IR_ATTR_GRAPHS ? n : 0;
        break;
    }
    default:
        break;
    }
    return ANVIL_OK;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Refuses a node that sets an attribute twice (sorting keeps this linear-logarithmic). */
static anvil_status check_attr_names(const ir_node *n, const char *label) {
    if (n->n_attrs < 2) return ANVIL_OK;
    const char **names = core_alloc((size_t)n->n_attrs * sizeof *names);
    if (!names) return ANVIL_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < n->n_attrs; i++) names[i] = n->attrs[i].name;
    qsort(names, (size_t)n->n_attrs, sizeof *names, cmp_str);
    anvil_status s = ANVIL_OK;
    for (int i = 1; i < n->n_attrs && s == ANVIL_OK; i++)
        if (!strcmp(names[i - 1], names[i]))
            s = core_err(ANVIL_ERR_INVALID_MODEL, "%s sets attribute '%s' twice", label, names[i]);
    free(names);
    return s;
}

/* Walks the GRAPH / GRAPHS attributes of a node that will not be built, for the operator
 * tally and the depth limit only. */
static anvil_status scan_node_graphs(importer *x, const onnx_NodeProto *np, int depth) {
    size_t n_attrs;
    const onnx_AttributeProto *attrs =
        onnx_pb_list_items(&x->im.pb, np->attribute, ONNX_PB_MSG, &n_attrs);
    for (size_t k = 0; k < n_attrs; k++) {
        const onnx_AttributeProto *ap = &attrs[k];
        if (ap->g.count) CORE_TRY(scan_graph(x, &ap->g, depth + 1));
        size_t n;
        const onnx_pb_bytes *spans = onnx_pb_list_items(&x->im.pb, ap->graphs, ONNX_PB_SPAN, &n);
        for (size_t i = 0; i < n; i++) CORE_TRY(scan_graph(x, &spans[i], depth + 1));
    }
    return ANVIL_OK;
}

static bool node_known(const onnx_NodeProto *np, ir_op *op) {
    /* anvil's internal ops are not ONNX: a model naming one is naming an op anvil lacks */
    return default_domain(np->domain) && ir_op_lookup(np->op_type, op) && !ir_op_internal(*op);
}

static anvil_status scan_graph(importer *x, const onnx_pb_bytes *span, int depth) {
    if (depth > IR_MAX_GRAPH_DEPTH) return nesting_error();
    onnx_GraphProto gp;
    memset(&gp, 0, sizeof gp);
    CORE_TRY(onnx_pb_decode(&x->im.pb, onnx_GraphProto_fields, span->data, span->size, &gp));
    size_t n;
    const onnx_NodeProto *nodes = onnx_pb_list_items(&x->im.pb, gp.node, ONNX_PB_MSG, &n);
    anvil_status s = ANVIL_OK;
    for (size_t i = 0; i < n && s == ANVIL_OK; i++) {
        ir_op op;
        if (nodes[i].op_type && !node_known(&nodes[i], &op))
            s = tally_unsupported(x, nodes[i].domain, nodes[i].op_type);
        if (s == ANVIL_OK) s = scan_node_graphs(x, &nodes[i], depth);
    }
    pb_release(onnx_GraphProto_fields, &gp);
    return s;
}

/* "node 'name' (OpType)" for a node not yet in the graph; unnamed nodes get their default
 * name "<OpType>_<index>" in *name (buf). */
static void node_names(const onnx_NodeProto *np, size_t i, char *buf, size_t cap, const char **name,
                       char *label, size_t lcap) {
    if (np->name && *np->name) {
        *name = np->name;
    } else {
        snprintf(buf, cap, "%.100s_%zu", np->op_type, i);
        *name = buf;
    }
    snprintf(label, lcap, "node '%.200s' (%.100s)", *name, np->op_type);
}

static anvil_status import_node(importer *x, ir_graph *g, const onnx_NodeProto *np, size_t i) {
    char auto_name[128], label[320];
    const char *name;
    node_names(np, i, auto_name, sizeof auto_name, &name, label, sizeof label);
    ir_op op;
    if (!node_known(np, &op)) {
        CORE_TRY(tally_unsupported(x, np->domain, np->op_type));
        return scan_node_graphs(x, np, g->depth);
    }
    if (x->any_unsup) return scan_node_graphs(x, np, g->depth);

    int32_t idx;
    size_t n_attrs;
    const onnx_AttributeProto *attrs =
        onnx_pb_list_items(&x->im.pb, np->attribute, ONNX_PB_MSG, &n_attrs);
    if (n_attrs > INT32_MAX)
        return core_err(ANVIL_ERR_LIMIT, "%s has %zu attributes", label, n_attrs);
    CORE_TRY(ir_graph_add_node(g, op, name, np->input_count, np->output_count, (int)n_attrs, &idx));
    for (pb_size_t k = 0; k < np->input_count; k++) {
        const char *in = np->input[k];
        if (!in || !*in) continue; /* omitted optional input */
        ir_vid v;
        CORE_TRY(resolve(g, in, &v));
        if (v == IR_NONE)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: input %u '%.200s' is never defined: no node output, graph "
                            "input or initializer%s has that name",
                            label, (unsigned)k, in,
                            g->parent ? " of this graph or an enclosing one" : "");
        g->nodes[idx].inputs[k] = v;
    }
    for (pb_size_t k = 0; k < np->output_count; k++) {
        const char *out = np->output[k];
        if (!out || !*out) continue;
        ir_vid v = ir_graph_find_value(g, out);
        if (v == IR_NONE)
            return core_err(ANVIL_ERR_INTERNAL, "%s: output '%.200s' was not pre-defined", label,
                            out);
        g->nodes[idx].outputs[k] = v;
        g->values[v].producer = idx;
    }
    for (size_t k = 0; k < n_attrs; k++) {
        CORE_TRY(import_attr(x, g, idx, (int)k, &attrs[k], label));
        if (x->any_unsup) return ANVIL_OK; /* a subgraph held an unsupported op */
    }
    return check_attr_names(&g->nodes[idx], label);
}

static anvil_status import_graph(importer *x, const onnx_GraphProto *gp, ir_graph *g) {
    onnx_pb_ctx *pb = &x->im.pb;
    g->name = core_arena_strdup(g->arena, gp->name ? gp->name : "");
    if (!g->name) return ANVIL_ERR_OUT_OF_MEMORY;
    if (gp->sparse_initializer.count)
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "graph '%s' has sparse initializers; anvil supports dense tensors only: "
                        "store them densely",
                        g->name);
    size_t n;
    const onnx_TensorProto *inits = onnx_pb_list_items(pb, gp->initializer, ONNX_PB_MSG, &n);
    for (size_t i = 0; i < n; i++) CORE_TRY(import_initializer(x, g, &inits[i], i));
    const onnx_ValueInfoProto *ins = onnx_pb_list_items(pb, gp->input, ONNX_PB_MSG, &n);
    for (size_t i = 0; i < n; i++) CORE_TRY(import_input(g, &ins[i], i));

    size_t n_nodes;
    const onnx_NodeProto *nodes = onnx_pb_list_items(pb, gp->node, ONNX_PB_MSG, &n_nodes);
    for (size_t i = 0; i < n_nodes; i++) {
        const onnx_NodeProto *np = &nodes[i];
        if (!np->op_type || !*np->op_type)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "node %zu ('%.200s') of graph '%s' has no op_type", i,
                            np->name ? np->name : "", g->name);
        for (pb_size_t k = 0; k < np->output_count; k++) {
            if (!np->output[k] || !*np->output[k]) continue;
            ir_vid v;
            anvil_status s = ir_graph_add_value(g, np->output[k], &v);
            if (s != ANVIL_OK) {
                char auto_name[128], label[320];
                const char *name;
                node_names(np, i, auto_name, sizeof auto_name, &name, label, sizeof label);
                return core_err_prefix(s, "%s output %u", label, (unsigned)k);
            }
        }
    }
    for (size_t i = 0; i < n_nodes; i++) CORE_TRY(import_node(x, g, &nodes[i], i));
    if (x->any_unsup) return ANVIL_OK;

    const onnx_ValueInfoProto *outs = onnx_pb_list_items(pb, gp->output, ONNX_PB_MSG, &n);
    for (size_t i = 0; i < n; i++) CORE_TRY(import_output(g, &outs[i], i));
    return ANVIL_OK;
}

/* ---- the model ------------------------------------------------------------------------------ */

/* The default-domain opset, or 0 if the model imports none. */
static anvil_status model_opset(const onnx_ModelProto *mp, int *opset) {
    int64_t v = -1;
    for (pb_size_t i = 0; i < mp->opset_import_count; i++) {
        const onnx_OperatorSetIdProto *o = &mp->opset_import[i];
        if (!o->has_version)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "opset_import entry for domain '%s' has no version",
                            o->domain ? o->domain : "");
        if (!default_domain(o->domain)) continue;
        if (v >= 0 && v != o->version)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "the model imports the default ONNX domain twice, as opset %" PRId64
                            " and %" PRId64,
                            v, o->version);
        v = o->version;
    }
    if (v < 0) { /* refused after the walk, which may find operators to list first */
        *opset = 0;
        return ANVIL_OK;
    }
    if (v > ONNX_OPSET_MAX)
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "opset %" PRId64 " is newer than anvil supports (%d..%d); re-export "
                        "with opset %d or older",
                        v, ONNX_OPSET_MIN, ONNX_OPSET_MAX, ONNX_OPSET_MAX);
    if (v < ONNX_OPSET_MIN)
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "opset %" PRId64 " is older than anvil supports (%d..%d); upgrade the "
                        "model with onnx.version_converter.convert_version(model, %d)",
                        v, ONNX_OPSET_MIN, ONNX_OPSET_MAX, ONNX_OPSET_MAX);
    *opset = (int)v;
    return ANVIL_OK;
}

static anvil_status import_decoded(importer *x, const onnx_ModelProto *mp, onnx_model *m) {
    if (!mp->has_graph)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "not an ONNX model: the protobuf has no graph (is it a serialized tensor "
                        "or some other message?)");
    if (!mp->has_ir_version)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "not an ONNX model: the protobuf has a graph but no ir_version");
    if (mp->ir_version < ONNX_IR_VERSION_MIN || mp->ir_version > ONNX_IR_VERSION_MAX)
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "IR version %" PRId64 " is not supported: anvil reads IR versions %d to "
                        "%d; re-export the model with onnx 1.3 to 1.22",
                        mp->ir_version, ONNX_IR_VERSION_MIN, ONNX_IR_VERSION_MAX);
    int opset = 0;
    CORE_TRY(model_opset(mp, &opset));
    m->ir_version = mp->ir_version;
    m->opset = opset;
    m->model_version = mp->has_model_version ? mp->model_version : 0;
    CORE_TRY(ir_graph_create(NULL, &m->graph));
    m->graph->opset = opset;
    core_arena *ar = m->graph->arena;
    m->producer_name = core_arena_strdup(ar, mp->producer_name ? mp->producer_name : "");
    m->producer_version = core_arena_strdup(ar, mp->producer_version ? mp->producer_version : "");
    m->domain = core_arena_strdup(ar, mp->domain ? mp->domain : "");
    if (!m->producer_name || !m->producer_version || !m->domain) return ANVIL_ERR_OUT_OF_MEMORY;
    x->mp = mp;
    CORE_TRY(import_graph(x, &mp->graph, m->graph));
    if (x->any_unsup) return report_unsupported(x);
    if (opset == 0)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "the model imports no default-domain opset (no opset_import entry for "
                        "domain \"\"); re-export it with an opset between %d and %d",
                        ONNX_OPSET_MIN, ONNX_OPSET_MAX);
    return ANVIL_OK;
}

anvil_status onnx_import_model(onnx_model *m, const uint8_t *data, size_t size) {
    importer x;
    memset(&x, 0, sizeof x);
    x.im.store = m->store;
    x.im.dir = m->dir && *m->dir ? m->dir : NULL;
    onnx_pb_ctx_init(&x.im.pb, data, size);
    onnx_ModelProto mp;
    memset(&mp, 0, sizeof mp);
    anvil_status s = onnx_pb_decode(&x.im.pb, onnx_ModelProto_fields, data, size, &mp);
    if (s == ANVIL_ERR_INVALID_MODEL)
        s = core_err_prefix(s, "not an ONNX model (or a truncated or corrupt one)");
    if (s == ANVIL_OK) {
        s = import_decoded(&x, &mp, m);
        pb_release(onnx_ModelProto_fields, &mp);
    }
    onnx_pb_ctx_free(&x.im.pb);
    importer_free(&x);
    return s;
}
