/* The public API's tensors (anvil_tensor_*): create, wrap, free and read their fields. A tensor
 * is owned by whoever created it (anvil_tensor_free); a wrapped one borrows its data. In
 * anvil_loader, so that the .npy and .npz readers (and their fuzz targets) link without the
 * runtime. */
#include "api.h"
#include "runtime/runtime.h"

#include <stdlib.h>

anvil_status anvil_tensor_create(anvil_dtype dtype, int rank, const int64_t *dims,
                                 anvil_tensor **out) {
    API_CHECK(out, "anvil_tensor_create: out is NULL");
    *out = NULL;
    API_CHECK(rank == 0 || dims, "anvil_tensor_create: dims is NULL for rank %d", rank);
    return rt_tensor_new(dtype, rank, dims, out);
}

anvil_status anvil_tensor_wrap(anvil_dtype dtype, int rank, const int64_t *dims, void *data,
                               anvil_tensor **out) {
    API_CHECK(out, "anvil_tensor_wrap: out is NULL");
    *out = NULL;
    API_CHECK(rank == 0 || dims, "anvil_tensor_wrap: dims is NULL for rank %d", rank);
    API_CHECK(rank >= 0 && rank <= ANVIL_MAX_RANK, "rank %d is outside 0..%d", rank,
              ANVIL_MAX_RANK);
    size_t bytes, es = anvil_dtype_size(dtype);
    if (!es)
        return core_err(ANVIL_ERR_UNSUPPORTED, "tensors of dtype %s are not supported",
                        anvil_dtype_name(dtype));
    API_CHECK(core_tensor_bytes(dtype, dims, rank, &bytes),
              "tensor dims are negative or their byte size overflows");
    API_CHECK(data || bytes == 0, "anvil_tensor_wrap: data is NULL");
    API_CHECK((uintptr_t)data % es == 0, "anvil_tensor_wrap: data is not aligned to %zu bytes", es);
    anvil_tensor *t = core_calloc(1, sizeof *t);
    if (!t) return ANVIL_ERR_OUT_OF_MEMORY;
    t->dtype = dtype;
    t->rank = rank;
    for (int i = 0; i < rank; i++) t->dims[i] = dims[i];
    t->data = data;
    t->bytes = bytes;
    t->owns_data = false;
    *out = t;
    return ANVIL_OK;
}

void anvil_tensor_free(anvil_tensor *t) {
    if (!t) return;
    if (t->owns_data) free(t->data);
    free(t);
}

anvil_dtype anvil_tensor_dtype(const anvil_tensor *t) {
    return t ? t->dtype : ANVIL_DTYPE_UNDEFINED;
}

int anvil_tensor_rank(const anvil_tensor *t) {
    return t ? t->rank : 0;
}

const int64_t *anvil_tensor_dims(const anvil_tensor *t) {
    return t ? t->dims : NULL;
}

size_t anvil_tensor_element_count(const anvil_tensor *t) {
    size_t n = 0;
    if (t) core_numel(t->dims, t->rank, &n);
    return n;
}

size_t anvil_tensor_bytes(const anvil_tensor *t) {
    return t ? t->bytes : 0;
}

void *anvil_tensor_data(anvil_tensor *t) {
    return t ? t->data : NULL;
}
