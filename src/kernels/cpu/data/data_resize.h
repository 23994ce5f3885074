/* Private to data_resize*.c: the column plan of a linear resize, which the portable and the
 * AVX-512 row kernels read. Built once in prepare; every pointer points into the state's single
 * allocation and lives as long as the state. */
#ifndef ANVIL_KERNELS_DATA_RESIZE_H
#define ANVIL_KERNELS_DATA_RESIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
void rz_linear_row_avx512(const rz_hplan *p, const float *r0, const float *r1, float a, float b,
                          bool w_resized, float *tmp, float *dst);

#endif
