/* What a kernel gets from whoever runs it, through op_ctx: threads (op_parallel_for), storage for
 * outputs whose size only the kernel knows (op_output_alloc), and the running of subgraphs
 * (op_subgraph_run). The ops layer defines these calls; the runner (runtime, a test, a benchmark)
 * fills the context, so that no kernel calls up into the runtime. */
#include "ops/ops.h"

#include <stdlib.h>
#include <string.h>

anvil_status op_output_alloc(op_ctx *ctx, op_tensor *t, anvil_dtype dt, int rank,
                             const int64_t *dims) {
    (void)ctx;
    if (rank < 0 || rank > IR_MAX_RANK)
        return core_err(ANVIL_ERR_INTERNAL, "output rank %d is outside 0..%d", rank, IR_MAX_RANK);
    size_t bytes;
    if (!core_dtype_supported(dt))
        return core_err(ANVIL_ERR_UNSUPPORTED, "outputs of dtype %s are not supported",
                        anvil_dtype_name(dt));
    if (!core_tensor_bytes(dt, dims, rank, &bytes) || bytes > core_max_tensor_bytes())
        return core_err(ANVIL_ERR_LIMIT,
                        "an output of %s would exceed the %zu-byte limit per tensor "
                        "(ANVIL_MAX_TENSOR_BYTES)",
                        anvil_dtype_name(dt), core_max_tensor_bytes());
    void *p = core_aligned_alloc(64, bytes ? bytes : 64);
    if (!p) return ANVIL_ERR_OUT_OF_MEMORY;
    memset(p, 0, bytes ? bytes : 64);
    t->dtype = dt;
    t->rank = rank;
    memset(t->dims, 0, sizeof t->dims);
    for (int i = 0; i < rank; i++) t->dims[i] = dims[i];
    t->data = p;
    return ANVIL_OK;
}

void op_tensor_release(op_tensor *t) {
    if (!t) return;
    free(t->data);
    t->data = NULL;
}

anvil_status op_subgraph_run(op_ctx *ctx, const ir_graph *body, const op_tensor *const *in,
                             int n_in, op_tensor *out, int n_out) {
    for (int j = 0; j < n_out; j++) out[j].data = NULL;
    if (!ctx || !ctx->subgraph)
        return core_err(ANVIL_ERR_INTERNAL, "a subgraph can only run inside a running node");
    return ctx->subgraph(ctx, body, in, n_in, out, n_out);
}
