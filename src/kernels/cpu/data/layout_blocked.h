/* Activations between anvil's plain NCHW fp32 and the channel blockings oneDNN's convolutions
 * take ([N][C/blk][spatial][blk], blk 8 or 16): layout_blocked_avx512bf16.c, for CPUs with
 * AVX-512 and AVX512-BF16 only (callers check). n images of c channels of hw pixels each; strides
 * in elements; pointers borrowed for the call. */
#ifndef ANVIL_KERNELS_LAYOUT_BLOCKED_H
#define ANVIL_KERNELS_LAYOUT_BLOCKED_H

#include <stddef.h>
#include <stdint.h>

/* From fp32 x (batch stride xn, channel stride xc, pixels dense) to bf16 y blocked by blk (batch
 * stride yn, channel-block stride ycb), rounded to nearest even (input denormals read as zero,
 * as vcvtneps2bf16 does). Channels past c that share a group of 8 with real ones are written as
 * zeros; the rest of the last block is not written (the caller zeroes it once). */
void data_nchw_to_bf16_blocked(const float *x, int64_t n, int64_t c, int64_t hw, size_t xn,
                               size_t xc, uint16_t *y, int blk, size_t yn, size_t ycb);
/* From fp32 t blocked by blk (batch stride tn, channel-block stride tcb) to fp32 y (batch stride
 * yn, channel stride yc, pixels dense): channels < c only. */
void data_blocked_to_nchw_f32(const float *t, int64_t n, int64_t c, int64_t hw, int blk, size_t tn,
                              size_t tcb, float *y, size_t yn, size_t yc);

#endif
