/* ISA loops of the backward kernels (grad_variants.c, bn_pool_grad.c and ln_grad.c dispatch to
 * them), and the variants bn_pool_grad.c and ln_grad.c define for the family table in
 * grad_variants.c. */
#ifndef ANVIL_KERNELS_CPU_TRAIN_GRAD_H
#define ANVIL_KERNELS_CPU_TRAIN_GRAD_H

#include "kernels/kernels.h"

#include <stddef.h>
#include <stdint.h>

/* dx[i] = x[i] > 0 ? dy[i] : 0 for i < n (AVX-512F). */
void train_relu_avx512(const float *dy, const float *x, float *dx, size_t n);
/* dx[i] = dy[i] * d/dx GELU(x[i]) (erf form), i < n (AVX-512F). */
void train_gelu_erf_avx512(const float *dy, const float *x, float *dx, size_t n);

/* ---- BatchNormTrain / BatchNormGrad (bn_pool_grad.c) ----------------------------------------
 * A virtual channel is one channel, or group = 16 / area adjacent channels when their area
 * divides 16 (a run of 16 floats per image then covers them all). A block is nv virtual channels
 * side by side holding `channels` channels: per image (`runs` of them, `stride` floats apart)
 * `total` floats, virtual channel v at [v * len, min((v + 1) * len, total)), len = group * area.
 * Element i of v sits in lane (i - v * len) % 16, which belongs to channel v * group + lane / area
 * (v itself when group is 1). Per-channel parameters are arrays of `channels` floats, the block's
 * first channel first; sums come back per lane, 16 doubles per virtual channel. The loops go
 * image by image along the block: channel by channel, a store would share its address's low 12
 * bits with the next load (a channel's runs lie a multiple of 4 KiB apart), which cost the 4x4
 * maps' passes 20-25% on Zen 4. All pointers are borrowed for the call. */
typedef struct grad_block {
    const float *x, *dy; /* X; dY (dsums, dx) */
    float *out;          /* Y or dX (affine, dx); may be x or dy itself */
    float *acc;          /* scratch of the sums: 32 floats per virtual channel */
    size_t runs, stride, nv, len, total;
    size_t group, area, channels;
} grad_block;

/* s (16 nv doubles, written) = lane sums of x */
void train_bn_sum_avx512(const grad_block *b, double *s);
/* s = lane sums of (x - m)^2 */
void train_bn_sqdev_avx512(const grad_block *b, const float *m, double *s);
/* sdy = lane sums of dy, sdyx = lane sums of dy * (x - m) */
void train_bn_dsums_avx512(const grad_block *b, const float *m, double *sdy, double *sdyx);
/* out = x * a + c */
void train_bn_affine_avx512(const grad_block *b, const float *a, const float *c);
/* out = a * dy + bb * (x - m) + c */
void train_bn_dx_avx512(const grad_block *b, const float *m, const float *a, const float *bb,
                        const float *c);

/* ---- MaxPoolGrad (bn_pool_grad.c) -------------------------------------------------------------
 * One N x C plane of a 2-D max pool (a 1-D pool has ih = oh = kh = 1): pads at the start of each
 * dim, the output sizes already resolved (ceil_mode included); ih * iw fits int32. */
typedef struct grad_pool2d {
    int32_t ih, iw, oh, ow, kh, kw, sh, sw, dh, dw, ph, pw;
} grad_pool2d;

/* For `count` consecutive planes (x and dx: ih * iw floats each, dy: oh * ow): dx (written) = the
 * gradient of the plane's pool: dy[o] added at the first largest valid input of window o,
 * windows in order (the reference's sums, bit for bit). x, dy, dx borrowed for the call, dx not
 * overlapping the others. */
void train_max_pool_planes_avx512(const grad_pool2d *g, const float *x, const float *dy, float *dx,
                                  size_t count);

/* The variants of anvil.BatchNormTrain, anvil.BatchNormGrad and anvil.MaxPoolGrad (AVX-512 and
 * portable), listed in kern_family_train. */
extern const kern_variant train_v_bn_train_avx512, train_v_bn_train_f32, train_v_bn_grad_avx512,
    train_v_bn_grad_f32, train_v_max_pool_grad_avx512, train_v_max_pool_grad_f32;

/* ---- LayerNormGrad (ln_grad.c) ---------------------------------------------------------------
 * Rows of d values (the dims from `axis` on); per row the reference's statistics recomputed from
 * X in double: mean, inv = 1 / sqrt(var + epsilon), and the means of g = dY * scale and of
 * g * xhat, xhat = (x - mean) * inv. All pointers borrowed for the call. */
typedef struct grad_ln {
    const float *dy, *x, *scale; /* dY and X: rows of d floats; scale: d floats */
    float *dx;                   /* rows of d floats, or NULL: not wanted */
    size_t d;
    float epsilon;
} grad_ln;

/* Rows [r0, r1): dX of each row written (where wanted), dY * xhat added into ds and dY into db
 * (d floats each, neither NULL), row after row. */
void train_ln_rows_avx512(const grad_ln *p, size_t r0, size_t r1, float *ds, float *db);

/* The variants of anvil.LayerNormGrad (ln_grad.c), listed in kern_family_train. */
extern const kern_variant train_v_ln_grad_avx512, train_v_ln_grad_f32;

#endif
