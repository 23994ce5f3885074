/* The deconv family's internals: the geometry of a ConvTranspose node (fp32, NCHW, 1-3 spatial
 * dims) as its variants see it, and the scatter ("col2im") of a column buffer into the output.
 *
 * Both variants compute, per image and group, the GEMM
 *   col[(m*K + t), p] = sum_c W[g*cg + c, m, t] * X[g*cg + c, p]     (K = kernel taps)
 * over a chunk of input positions p, and then scatter each row (m, t) of col into output channel
 * g*mg + m at the positions p*stride + t*dilation - pad. Files: deconv_common.c (geometry, the
 * N-D scatter), deconv_rows_tmpl.h instantiated in deconv_rows.c (baseline) and
 * deconv_rows_avx512.c (the same loops vectorized for AVX-512), deconv_variants.c (the variants
 * and the family list).
 *
 * Every pointer argument is borrowed for the duration of the call. */
#ifndef ANVIL_KERNELS_DECONV_H
#define ANVIL_KERNELS_DECONV_H

#include "kernels/kernels.h"

#include <stdint.h>

/* Spatial dims the family handles (1-D, 2-D and 3-D ConvTranspose). */
#define DECONV_MAX_SP 3

/* A ConvTranspose with every dimension known: X [n, c, in...], W [c, mg, k...], Y [n, m, out...];
 * pads resolved as the reference resolves them (output_shape, auto_pad, output_padding). */
typedef struct deconv_geom {
    int nsp;
    int64_t n, c, m, group, cg, mg;
    int64_t in[DECONV_MAX_SP], out[DECONV_MAX_SP], k[DECONV_MAX_SP];
    int64_t s[DECONV_MAX_SP], d[DECONV_MAX_SP], pb[DECONV_MAX_SP]; /* stride, dilation, pad begin */
    int64_t in_size, out_size, k_size;                             /* products of in, out and k */
    bool has_bias;
} deconv_geom;

/* Fills g from kn when it is a ConvTranspose with float32 inputs and output, static shapes and
 * 1-3 spatial dims whose resolved output size matches the inferred output; false otherwise. */
bool deconv_geom_of(const kern_node *kn, deconv_geom *g);

/* Whether every input position's taps land on distinct output positions inside the output:
 * stride == kernel, dilation 1, no begin pad and out >= in * kernel in every dim (the rest of the
 * output, from output_padding, gets the bias only). */
bool deconv_geom_disjoint(const deconv_geom *g);

/* ---- row kernels (the last spatial dim) -------------------------------------------------------
 * c: kw rows of col (row kx at c + kx*ldc), each w floats, for the kw taps of the last dim. */

/* out[q] += c[kx*ldc + ix] for q = base + ix*s + kx*dil, wherever olo <= q < ohi. */
typedef void (*deconv_row_add_fn)(const float *c, int64_t ldc, int64_t kw, int64_t s, int64_t dil,
                                  int64_t w, int64_t base, int64_t olo, int64_t ohi, float *out);
/* out[ix*kw + kx] = c[kx*ldc + ix] + bias for ix < w, kx < kw (stride == kernel, dilation 1). */
typedef void (*deconv_row_set_fn)(const float *c, int64_t ldc, int64_t kw, int64_t w, float bias,
                                  float *out);

typedef struct deconv_rows {
    deconv_row_add_fn add;
    deconv_row_set_fn set;
} deconv_rows;

extern const deconv_rows deconv_rows_portable;
extern const deconv_rows deconv_rows_avx512;
/* The fastest row kernels hw can run (never NULL). */
const deconv_rows *deconv_rows_for(const core_hw *hw);

/* ---- scatter of one output channel ------------------------------------------------------------
 * colm: the K rows (ldcol floats apart) of one output channel m; its columns are the input
 * positions whose first spatial index is in [r0, r1) (all of the other dims), in order. y: that
 * channel's output plane. */

/* Adds colm into the output positions whose first spatial index is in [o0, o1). */
void deconv_col2im_add(const deconv_geom *g, const deconv_rows *rk, const float *colm,
                       int64_t ldcol, int64_t r0, int64_t r1, int64_t o0, int64_t o1, float *y);
/* Disjoint geometry (deconv_geom_disjoint): writes colm + bias into the positions it covers. */
void deconv_col2im_set(const deconv_geom *g, const deconv_rows *rk, const float *colm,
                       int64_t ldcol, int64_t r0, int64_t r1, float bias, float *y);
/* Disjoint geometry: writes bias into the output positions no input position covers (the
 * output_padding margin; nothing when there is none). */
void deconv_fill_uncovered(const deconv_geom *g, float bias, float *y);
/* y[i] = bias for the output positions whose first spatial index is in [o0, o1). */
void deconv_fill_rows(const deconv_geom *g, int64_t o0, int64_t o1, float bias, float *y);

#endif
