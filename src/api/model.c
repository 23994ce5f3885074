/* The public API of models: the load pipeline and what a model says about its inputs and outputs.
 * Kept apart from sessions (session.c) so that loading a model needs no kernel, pass or executor:
 * the loader fuzz target links only this side (library anvil_loader). */
#include "api.h"
#include "env.h"
#include "onnx/onnx.h"
#include "runtime/infer.h"

#include <stdlib.h>
#include <string.h>

/* ---- models -------------------------------------------------------------------------------- */

/* After import: order the nodes, validate every node's attributes, infer what shapes can be known
 * with symbolic inputs, then verify the whole graph (dtypes of node outputs exist only after
 * inference, so verification comes last). */
static anvil_status model_finish(onnx_model *om, anvil_model **out) {
    ir_graph *g = om->graph;
    anvil_status st = ir_graph_toposort(g);
    if (st == ANVIL_OK) st = op_check_graph(g);
    if (st == ANVIL_OK) st = rt_infer_graph_static(g);
    if (st == ANVIL_OK) st = ir_graph_verify(g);
    if (st != ANVIL_OK) {
        onnx_model_free(om);
        return st;
    }
    anvil_model *m = core_calloc(1, sizeof *m);
    if (!m) {
        onnx_model_free(om);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    m->onnx = om;
    *out = m;
    return ANVIL_OK;
}

anvil_status anvil_model_load(const char *path, anvil_model **out) {
    API_CHECK(out, "anvil_model_load: out is NULL");
    *out = NULL;
    API_CHECK(path && *path, "anvil_model_load: path is NULL or empty");
    api_env_init();
    core_err_clear();
    onnx_model *om;
    anvil_status st = onnx_load_file(path, &om);
    if (st != ANVIL_OK) return st;
    st = model_finish(om, out);
    if (st != ANVIL_OK) core_err_prefix(st, "%s", path);
    return st;
}

anvil_status anvil_model_load_buffer(const void *data, size_t size, anvil_model **out) {
    API_CHECK(out, "anvil_model_load_buffer: out is NULL");
    *out = NULL;
    API_CHECK(data || size == 0, "anvil_model_load_buffer: data is NULL");
    api_env_init();
    core_err_clear();
    onnx_model *om;
    CORE_TRY(onnx_load_buffer(data, size, &om));
    return model_finish(om, out);
}

void anvil_model_free(anvil_model *m) {
    if (!m) return;
    onnx_model_free(m->onnx);
    free(m);
}

const ir_graph *api_model_graph(const anvil_model *m) {
    return m->onnx->graph;
}

void api_model_meta_get(const anvil_model *m, api_model_meta *out) {
    out->ir_version = m->onnx->ir_version;
    out->producer_name = m->onnx->producer_name ? m->onnx->producer_name : "";
    out->producer_version = m->onnx->producer_version ? m->onnx->producer_version : "";
}

size_t anvil_model_input_count(const anvil_model *m) {
    return m ? (size_t)m->onnx->graph->n_inputs : 0;
}

size_t anvil_model_output_count(const anvil_model *m) {
    return m ? (size_t)m->onnx->graph->n_outputs : 0;
}

static void value_info(const ir_graph *g, ir_vid v, anvil_value_info *out) {
    const ir_value *val = &g->values[v];
    memset(out, 0, sizeof *out);
    out->name = val->name;
    out->dtype = val->dtype;
    out->rank = val->shape.rank;
    for (int i = 0; i < val->shape.rank; i++) {
        out->dims[i] = val->shape.d[i] >= 0 ? val->shape.d[i] : -1;
        int32_t sym = val->shape.sym[i];
        out->dim_names[i] =
            (val->shape.d[i] < 0 && sym >= 0 && sym < g->n_syms) ? g->syms[sym] : "";
    }
}

/* Describes the main graph's input (output false) or output (output true) number index. */
static anvil_status io_info(const anvil_model *m, bool output, size_t index,
                            anvil_value_info *out) {
    const char *kind = output ? "output" : "input";
    API_CHECK(m && out, "anvil_model_%s_info: model or out is NULL", kind);
    const ir_graph *g = m->onnx->graph;
    int32_t count = output ? g->n_outputs : g->n_inputs;
    API_CHECK(index < (size_t)count, "%s index %zu is out of range (the model has %d)", kind, index,
              (int)count);
    value_info(g, output ? g->outputs[index] : g->inputs[index], out);
    return ANVIL_OK;
}

anvil_status anvil_model_input_info(const anvil_model *m, size_t index, anvil_value_info *out) {
    return io_info(m, false, index, out);
}

anvil_status anvil_model_output_info(const anvil_model *m, size_t index, anvil_value_info *out) {
    return io_info(m, true, index, out);
}
