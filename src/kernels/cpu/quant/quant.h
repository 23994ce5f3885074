/* The int8 family's vector loops (quant_avx512.c, compiled with AVX-512 flags and called only
 * where the CPU has AVX-512): what the QLinear variants (qlinear.c) and the QuantizeLinear /
 * DequantizeLinear variants (qdq.c) do around the int8 GEMM tiles. Pointers are borrowed. */
#ifndef ANVIL_KERNELS_CPU_QUANT_H
#define ANVIL_KERNELS_CPU_QUANT_H

#include "kernels/cpu/family.h"
#include "kernels/kernels.h"

#include <stdbool.h>
#include <stdint.h>

/* Whether dt is one of the 8-bit types the int8 kernels take. */
static inline bool quant_is_8bit(anvil_dtype dt) {
    return dt == ANVIL_DTYPE_UINT8 || dt == ANVIL_DTYPE_INT8;
}

/* Elements of t's static shape, as int64 (kfam_numel). */
static inline int64_t quant_numel(const op_tinfo *t) {
    return (int64_t)kfam_numel(&t->shape);
}

/* The MaxPool variant of 8-bit tensors and anvil.QLinearAdd's (qpool.c), in the family's list
 * (qlinear.c). */
extern const kern_variant quant_variant_maxpool, quant_variant_add;
/* The depthwise QLinearConv (qconv_dw.c), in the same list. */
extern const kern_variant quant_variant_dwconv;

/* Requantizes m rows of n fp32 values (c[i*ldc + j]) into 8 bits: y = clamp(round(c) + zy) into
 * [0, 255] (is_signed false) or [-128, 127], rounding half to even as QuantizeLinear does, the
 * result at y[i*rs_y + j*cs_y] (cs_y 1: rows as rows; else, e.g. a convolution's NCHW planes, each
 * column j a run of rows cs_y apart, rs_y then 1). */
void quant_store_avx512(const float *c, int64_t ldc, int64_t m, int64_t n, int32_t zy,
                        bool is_signed, uint8_t *y, int64_t rs_y, int64_t cs_y);

/* hw pixels of an NCHW image (c planes, `plane` bytes apart) as hw rows of c bytes (channels-
 * last), each byte xor flip (0x80: an s8 image shifted into u8). */
void quant_nchw_to_nhwc_avx512(const uint8_t *x, int64_t c, int64_t hw, int64_t plane, uint8_t flip,
                               uint8_t *xt);

/* The implicit GEMM rows of output pixels [r0, r0 + m) of a 2-D convolution over the channels-
 * last image x (h x w pixels of c bytes): per pixel, its taps' channels in (ky, kx, c) order, a
 * tap in the padding filled with `fill`, zeros from kh*kw*c to the row stride k4. kernel, stride,
 * pad (the leading pads) and dil have two entries each; ow is the output's width. */
void quant_im2col_avx512(const uint8_t *x, int64_t h, int64_t w, int64_t c, const int64_t *kernel,
                         const int64_t *stride, const int64_t *pad, const int64_t *dil, int64_t ow,
                         int64_t r0, int64_t m, int64_t k4, uint8_t fill, uint8_t *dst);

/* A 2-D max pool's geometry: input ih x iw, output oh x ow, window kh x kw, strides, the leading
 * pads (the trailing ones follow), and row_len: the padded row the windows span, at least
 * pl + iw. */
typedef struct quant_pool {
    int64_t ih, iw, oh, ow, kh, kw, sh, sw, pt, pl, row_len;
} quant_pool;

/* MaxPool of one plane of 8-bit values (x: ih x iw, y: oh x ow), padding never winning. row:
 * scratch of row_len + 128 bytes. A stride other than 1 or 2 picks its outputs one by one. */
void quant_maxpool_avx512(const uint8_t *x, const quant_pool *g, bool is_signed, uint8_t *row,
                          uint8_t *y);

/* anvil.QLinearAdd's parameters (ops/quant/qadd.c). */
typedef struct quant_add_params {
    float sa, sb, sy;
    int32_t za, zb, zy;
    bool a_signed, b_signed, y_signed;
} quant_add_params;

/* anvil.QLinearAdd over n elements: y = clamp(round(((a - za) * sa + (b - zb) * sb) / sy) + zy),
 * in the float operations of the DequantizeLinear, Add and QuantizeLinear it replaces. */
void quant_add_avx512(const quant_add_params *p, const uint8_t *a, const uint8_t *b, int64_t n,
                      uint8_t *y);

/* Dynamic quantization of m rows of fp32 A (row i at a + i*k, k values), per row and symmetric:
 * scale[i] = max|row| / 127 (1 for a row of zeros), each value divided by it, rounded to
 * [-127, 127] and stored plus 128 as u8 at dst + i*k4; bytes k .. k4 of a row are 128. */
void quant_rows_dynamic_avx512(const float *a, int64_t m, int64_t k, uint8_t *dst, int64_t k4,
                               float *scale);

/* A depthwise 2-D convolution's geometry on one plane (no dilation) and its quantization: input
 * ih x iw, output oh x ow, window kh x kw (kh <= 16), strides, leading pads, row_len the padded
 * row the windows span (at least pl + iw, and (ow + 63) / 64 * 64 * sw + kw + 32 so that the last
 * block of 64 outputs reads inside it), the zero points of x and y and their types. */
typedef struct quant_dw {
    int64_t ih, iw, oh, ow, kh, kw, sh, sw, pt, pl, row_len;
    int32_t zx, zy;
    bool x_signed, y_signed;
} quant_dw;

/* One plane of a depthwise QLinearConv: y = clamp(round((sum over taps of (x - zx) * w + bias)
 * * mult) + zy), w the kh x kw weights less their zero point, the sums exact in int32 as the
 * reference's. rows: scratch of kh * (row_len + 64) bytes. */
void quant_dwconv_avx512(const uint8_t *x, const quant_dw *g, const int32_t *w, int32_t bias,
                         float mult, uint8_t *rows, uint8_t *y);

/* QuantizeLinear with one scale and zero point: y[i] = clamp(round(x[i] / s) + zy). */
void quant_f32_avx512(const float *x, int64_t n, float s, int32_t zy, bool is_signed, uint8_t *y);

/* DequantizeLinear with one scale and zero point: y[i] = (x[i] - zx) * s. */
void quant_dequant_f32_avx512(const uint8_t *x, int64_t n, float s, int32_t zx, bool is_signed,
                              float *y);

#endif
