/* Private to the data family (src/kernels/cpu/data): the variants each file defines, for the
 * family table in data_variants.c, and small helpers the files share. Pointers passed to the
 * helpers are borrowed for the call. */
#ifndef ANVIL_KERNELS_DATA_H
#define ANVIL_KERNELS_DATA_H

#include "kernels/kernels.h"

#include <stdlib.h>
#include <string.h>

/* Below this many output bytes a node runs on the calling thread: waking the pool costs more
 * than the copy (about 32K fp32 elements). */
#define DATA_PAR_MIN_BYTES ((size_t)128 << 10)

/* data_resize.c: Resize and Upsample, nearest (any dtype) and linear (fp32). */
extern const kern_variant data_resize_nearest, data_resize_linear_f32_avx512,
    data_resize_linear_f32;
extern const kern_variant data_upsample_nearest, data_upsample_linear_f32_avx512,
    data_upsample_linear_f32;
/* data_pad.c: Pad with plan-time pads, every mode, any dtype. */
extern const kern_variant data_pad_rows;
/* data_copy.c: Concat, Split, Slice, Gather, Expand, Tile, any dtype. */
extern const kern_variant data_concat_copy, data_split_copy, data_slice_copy, data_gather_copy,
    data_expand_copy, data_tile_copy;
/* data_scatter.c: ScatterND with reduction add (float32) or none (any dtype). */
extern const kern_variant data_scatternd_add;

/* The context to split `bytes` of output over: ctx when the work is worth the pool, else NULL
 * (serial on the calling thread). */
static inline op_ctx *data_par(op_ctx *ctx, size_t bytes) {
    return bytes >= DATA_PAR_MIN_BYTES ? ctx : NULL;
}

/* Whether input i of kn exists (was given and not omitted). */
static inline bool data_has_input(const kern_node *kn, int i) {
    return i < kn->n_in && i < kn->node->n_inputs && kn->node->inputs[i] != IR_NONE;
}

/* Whether output i of kn exists. */
static inline bool data_has_output(const kern_node *kn, int i) {
    return i < kn->n_out && i < kn->node->n_outputs && kn->node->outputs[i] != IR_NONE;
}

/* Whether t's dtype is one anvil holds as fixed-size elements and its shape is static. */
static inline bool data_static(const op_tinfo *t) {
    return core_dtype_supported(t->dtype) && anvil_dtype_size(t->dtype) > 0 &&
           ir_shape_is_static(&t->shape);
}

/* Product of dims[from..to) (sizes were checked at plan time). */
static inline size_t data_prod(const int64_t *dims, int from, int to) {
    size_t p = 1;
    for (int i = from; i < to; i++) p *= (size_t)dims[i];
    return p;
}

/* Reads element i of an INT32 or INT64 tensor's data. */
static inline int64_t data_load_index(anvil_dtype dt, const void *p, size_t i) {
    return dt == ANVIL_DTYPE_INT32 ? (int64_t)((const int32_t *)p)[i] : ((const int64_t *)p)[i];
}

/* Copies n elements of es bytes from a source walked with element stride `stride` (may be
 * negative) into dense dst. */
static inline void data_strided_copy(char *dst, const char *src, size_t n, int64_t stride,
                                     size_t es) {
    if (stride == 1) {
        memcpy(dst, src, n * es);
        return;
    }
    switch (es) {
    case 1:
        for (size_t i = 0; i < n; i++) dst[i] = src[(int64_t)i * stride];
        break;
    case 2:
        for (size_t i = 0; i < n; i++) memcpy(dst + 2 * i, src + 2 * (int64_t)i * stride, 2);
        break;
    case 4:
        for (size_t i = 0; i < n; i++) memcpy(dst + 4 * i, src + 4 * (int64_t)i * stride, 4);
        break;
    case 8:
        for (size_t i = 0; i < n; i++) memcpy(dst + 8 * i, src + 8 * (int64_t)i * stride, 8);
        break;
    default:
        for (size_t i = 0; i < n; i++)
            memcpy(dst + es * i, src + (int64_t)es * (int64_t)i * stride, es);
        break;
    }
}

#endif
