/* The run-time halves of the data family's copies (data_copy.c: Concat, Split, Slice, Expand,
 * Tile, Gather; data_pad.c: Pad): the states their prepare makes and the functions their run
 * calls, in data_move.c. IR-free: `anvil compile` copies both files into the libraries it emits
 * (they build against src/emit/shim) and bakes the same states into their code, so a
 * library moves exactly the bytes anvil moves. Pointers are borrowed for the call. */
#ifndef ANVIL_KERNELS_DATA_MOVE_H
#define ANVIL_KERNELS_DATA_MOVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/core_copy.h"

/* anvil's ANVIL_MAX_RANK (data_copy.c checks that they agree). */
#define DM_MAX_RANK 8
/* Below this many output bytes a node runs on the calling thread: waking the pool costs more
 * than the copy (about 32K fp32 elements). */
#define DATA_PAR_MIN_BYTES ((size_t)128 << 10)
/* Bytes per unit of parallel work. */
#define DC_BLOCK ((size_t)64 << 10)
/* Dims of a strided view: Tile splits each input dim in two. */
#define DC_MAX (2 * DM_MAX_RANK)

typedef struct op_ctx op_ctx;

/* The context to split `bytes` of output over: ctx when the work is worth the pool, else NULL
 * (serial on the calling thread). */
static inline op_ctx *data_par(op_ctx *ctx, size_t bytes) {
    return bytes >= DATA_PAR_MIN_BYTES ? ctx : NULL;
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

/* ---- segments: Concat and Split (data_copy.c) ---- */

typedef struct dc_seg_state {
    int axis, parts;
    size_t es, outer, row_bytes;
    size_t *seg_bytes; /* per part: bytes of one row's segment */
    size_t *seg_start; /* per part: the segment's offset in a row */
} dc_seg_state;

/* dense: the concatenated tensor (Concat: written; Split: read); part[i]: the others' data
 * (Split: NULL for an omitted output). */
void data_seg_run(const dc_seg_state *s, char *dense, char *const *part, bool split, op_ctx *ctx);

/* ---- strided views: Slice, Expand, Tile (data_copy.c) ---- */

typedef struct dc_view {
    int rank; /* >= 1 after dc_view_coalesce */
    size_t es;
    int64_t dims[DC_MAX], stride[DC_MAX]; /* source element strides per output dim */
    int64_t offset;                       /* source element of output index (0, ..., 0) */
    size_t numel, rows, pieces, piece;    /* rows of dims[rank-1]; each cut into pieces */
} dc_view;

/* dst (dense, v->numel elements) = the view of src. */
void data_view_run(const dc_view *v, const char *src, char *dst, op_ctx *ctx);

/* ---- Gather (data_copy.c) ---- */

typedef struct dc_gather_state {
    int axis;
    size_t es, outer, q, inner_bytes;
    int64_t axis_dim;
    bool idx32; /* the indices are INT32 (else INT64) */
} dc_gather_state;

/* Element t of the indices. */
static inline int64_t dc_gather_index(const dc_gather_state *s, const void *idx, size_t t) {
    return s->idx32 ? (int64_t)((const int32_t *)idx)[t] : ((const int64_t *)idx)[t];
}

/* Whether every index is in [-axis_dim, axis_dim); else *pos is the first bad one's position. */
bool data_gather_check(const dc_gather_state *s, const void *idx, size_t *pos);
/* dst = the gathered slices of src (the indices checked). */
void data_gather_run(const dc_gather_state *s, const char *src, const void *idx, char *dst,
                     op_ctx *ctx);

/* ---- Pad (data_pad.c) ---- */

typedef struct dp_state {
    int rank;
    size_t es;
    int64_t in_dims[DM_MAX_RANK], out_dims[DM_MAX_RANK], istr[DM_MAX_RANK];
    int64_t *map[DM_MAX_RANK]; /* per axis: output index -> input index or -1 */
    int64_t lead, kept, crop;  /* the last axis's copied run */
    unsigned char attr_fill[16];
    bool fill_from_input; /* input 2 holds the constant (opset >= 11) */
    int64_t *block;
} dp_state;

/* y = x padded; fill: the constant input's data when s->fill_from_input (NULL: absent, zero),
 * else unused; ws: one output row (out_dims[rank - 1] elements). */
void data_pad_run_rows(const dp_state *s, const char *x, char *y, const void *fill,
                       size_t fill_numel, char *ws, op_ctx *ctx);

#endif
