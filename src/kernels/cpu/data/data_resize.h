/* Private to data_resize*.c: the state a Resize / Upsample prepare makes (with the column plan of
 * a linear resize, which the portable and the AVX-512 row kernels read) and the run over it
 * (data_resize_run.c). Built once in prepare; every pointer points into one of the state's
 * allocations and lives as long as the state. IR-free: `anvil compile` copies this header,
 * data_resize_run.c and data_resize_avx512.c into the libraries it emits. */
#ifndef ANVIL_KERNELS_DATA_RESIZE_H
#define ANVIL_KERNELS_DATA_RESIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "data_move.h"

/* The output row in blocks of 16 columns. Block k reads input columns base[k] + off[o] for its
 * columns o; when fits[k], every offset is below 32, so two vector loads at base[k] and a
 * permute fetch them. */
typedef struct rz_hplan {
    size_t iw, ow;
    const int32_t *base;        /* per block */
    const uint8_t *fits;        /* per block */
    const int32_t *off0, *off1; /* per output column: the two taps, relative to their block base */
    const float *w0, *w1;       /* per output column: the taps' weights */
} rz_hplan;

/* One output row of a linear resize with AVX-512: blends source rows r0 and r1 (weights a, b;
 * b == 0 reads r0 alone) into tmp (iw floats, 64-byte aligned) and gathers dst (ow floats)
 * from it through the plan; dst = tmp's blend when w_resized is false. */
void data_resize_linear_row_avx512(const rz_hplan *p, const float *r0, const float *r1, float a,
                                   float b, bool w_resized, float *tmp, float *dst);

typedef struct rz_state {
    size_t es;
    int threads;
    int64_t planes, ih, iw, oh, ow;
    int64_t in_dims[DM_MAX_RANK], out_dims[DM_MAX_RANK];
    int rank;
    /* nearest: source row per output row, source column per output column */
    int64_t *mh, *mw;
    int factor;      /* > 0: mw[o] == o / factor for every o (integer upsampling) */
    bool w_identity; /* mw[o] == o and ow == iw */
    /* linear: two taps per output row and column */
    int64_t *y0, *y1, *x0, *x1;
    float *wy0, *wy1, *wx0, *wx1;
    bool w_resized;
    size_t ws_stride; /* floats of workspace per thread (linear) */
    bool avx512;      /* linear rows through data_resize_linear_row_avx512 and hplan */
    rz_hplan hplan;
    void *block, *hblock; /* the allocations behind the tables */
    size_t block_bytes, hblock_bytes;
} rz_state;

/* y = the resize of x (shapes as prepared); ws: threads rows of ws_stride floats (linear). */
void data_resize_run_rows(const rz_state *s, const char *x, char *y, float *ws, op_ctx *ctx);

#endif
