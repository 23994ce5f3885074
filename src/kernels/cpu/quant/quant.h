/* The int8 family's vector loops (quant_avx512.c, compiled with AVX-512 flags and called only
 * where the CPU has AVX-512): what the QLinear variants (qlinear.c) and the QuantizeLinear /
 * DequantizeLinear variants (qdq.c) do around the int8 GEMM tiles. Pointers are borrowed. */
#ifndef ANVIL_KERNELS_CPU_QUANT_H
#define ANVIL_KERNELS_CPU_QUANT_H

#include <stdbool.h>
#include <stdint.h>

/* Requantizes m rows of n fp32 values (c[i*ldc + j]) into 8 bits: y = clamp(round(c) + zy) into
 * [0, 255] (is_signed false) or [-128, 127], rounding half to even as QuantizeLinear does, the
 * result at y[i*rs_y + j*cs_y] (cs_y 1: rows as rows; else, e.g. a convolution's NCHW planes, each
 * column j a run of rows cs_y apart). */
void quant_store_avx512(const float *c, int64_t ldc, int64_t m, int64_t n, int32_t zy,
                        bool is_signed, uint8_t *y, int64_t rs_y, int64_t cs_y);

/* QuantizeLinear with one scale and zero point: y[i] = clamp(round(x[i] / s) + zy). */
void quant_f32_avx512(const float *x, int64_t n, float s, int32_t zy, bool is_signed, uint8_t *y);

/* DequantizeLinear with one scale and zero point: y[i] = (x[i] - zx) * s. */
void dequant_f32_avx512(const uint8_t *x, int64_t n, float s, int32_t zx, bool is_signed, float *y);

#endif
