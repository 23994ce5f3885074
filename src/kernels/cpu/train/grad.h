/* ISA loops of the backward kernels (grad_variants.c dispatches to them). */
#ifndef ANVIL_KERNELS_CPU_TRAIN_GRAD_H
#define ANVIL_KERNELS_CPU_TRAIN_GRAD_H

#include <stddef.h>

/* dx[i] = x[i] > 0 ? dy[i] : 0 for i < n (AVX-512F). */
void grad_relu_avx512(const float *dy, const float *x, float *dx, size_t n);

#endif
