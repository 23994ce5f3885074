/* Private to the data family (src/kernels/cpu/data): the variants each file defines, for the
 * family table in data_variants.c, and small helpers the files share. Pointers passed to the
 * helpers are borrowed for the call. */
#ifndef ANVIL_KERNELS_DATA_H
#define ANVIL_KERNELS_DATA_H

#include "data_move.h"
#include "kernels/kernels.h"

#include <stdio.h>

#include <stdlib.h>
#include <string.h>

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

/* The source files a data variant's emitted code calls into (data_move.h), for kern_emit.need. */
static inline anvil_status data_emit_need(kern_emit *e) {
    CORE_TRY(e->need(e, "kernels/cpu/data/data_move.h"));
    CORE_TRY(e->need(e, "kernels/cpu/data/data_move.c"));
    return e->include(e, "kernels/cpu/data/data_move.h");
}

/* n's label with every character that could end or format a C string literal ('"', '\\', '%',
 * controls) replaced by '_', for the messages of emitted code. */
static inline const char *data_emit_label(const ir_node *n, char *buf, size_t cap) {
    snprintf(buf, cap, "%s", ir_node_label(n));
    for (char *c = buf; *c; c++)
        if (*c == '"' || *c == '\\' || *c == '%' || (unsigned char)*c < 32 || *c == 127) *c = '_';
    return buf;
}

/* Emits `TYPE NAME[n] = {v...};` into the node's statements, for the tables a state points at
 * (the file scope would not do: kern_emit.decl drops text it already holds). */
static inline void data_emit_table(kern_emit *e, const char *type, const char *name,
                                   const int64_t *v, size_t n) {
    e->code(e, "%s %s[%zu] = {", type, name, n ? n : 1);
    for (size_t i = 0; i < n; i++)
        e->code(e, "%s%lld", i ? (i % 16 ? ", " : ",\n    ") : "", (long long)v[i]);
    e->code(e, "%s};\n", n ? "" : "0");
}

#endif
