/* Tensors that own their storage (rt_tensor_new, rt_tensor_new_uninit): 64-byte aligned,
 * sized and checked against the tensor limit. In anvil_loader with api/tensor.c, which makes the
 * public anvil_tensor_create out of them. */
#include "runtime/runtime.h"

#include <stdlib.h>
#include <string.h>

static anvil_status tensor_alloc(anvil_dtype dt, int rank, const int64_t *dims, bool zero,
                                 anvil_tensor **out) {
    *out = NULL;
    if (!core_dtype_supported(dt))
        return core_err(ANVIL_ERR_UNSUPPORTED, "tensors of dtype %s are not supported",
                        anvil_dtype_name(dt));
    if (rank < 0 || rank > ANVIL_MAX_RANK)
        return core_err(ANVIL_ERR_INVALID_ARGUMENT, "rank %d is outside 0..%d", rank,
                        ANVIL_MAX_RANK);
    size_t bytes;
    if (!core_tensor_bytes(dt, dims, rank, &bytes))
        return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                        "tensor dims are negative or their byte size overflows");
    if (bytes > core_max_tensor_bytes())
        return core_err(ANVIL_ERR_LIMIT, "a tensor of %zu bytes exceeds the limit of %zu bytes",
                        bytes, core_max_tensor_bytes());
    anvil_tensor *t = core_calloc(1, sizeof *t);
    if (!t) return ANVIL_ERR_OUT_OF_MEMORY;
    t->data = core_aligned_alloc(64, bytes ? bytes : 64);
    if (!t->data) {
        free(t);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    if (zero) memset(t->data, 0, bytes);
    t->dtype = dt;
    t->rank = rank;
    for (int i = 0; i < rank; i++) t->dims[i] = dims[i];
    t->bytes = bytes;
    t->owns_data = true;
    *out = t;
    return ANVIL_OK;
}

anvil_status rt_tensor_new(anvil_dtype dt, int rank, const int64_t *dims, anvil_tensor **out) {
    return tensor_alloc(dt, rank, dims, true, out);
}

anvil_status rt_tensor_new_uninit(anvil_dtype dt, int rank, const int64_t *dims,
                                  anvil_tensor **out) {
    return tensor_alloc(dt, rank, dims, false, out);
}
