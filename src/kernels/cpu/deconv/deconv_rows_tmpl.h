/* The row kernels of deconv.h, written once as plain loops that the compiler vectorizes; included
 * by deconv_rows.c (baseline flags) and deconv_rows_avx512.c (AVX-512 flags), which define
 * DECONV_ROWS_SUF first. The loops the scatters spend their time in are the stride-1 add (a
 * contiguous axpy), the stride-2 add of a pair of taps and the stride == kernel copy for kernels 2
 * to 4, where neighbouring taps interleave into one contiguous run of output that the vectorizer
 * builds with permutes instead of strided stores. */
#include "deconv.h"

#include "ops/nn_common.h"

#define DECONV_CAT2(a, b) a##b
#define DECONV_CAT(a, b) DECONV_CAT2(a, b)
#define DECONV_FN(name) DECONV_CAT(name##_, DECONV_ROWS_SUF)

/* The ix for which q = base + ix*s + off lies in [olo, ohi), as [*lo, *hi). */
static inline void DECONV_FN(tap_range)(int64_t w, int64_t s, int64_t base, int64_t off,
                                        int64_t olo, int64_t ohi, int64_t *lo, int64_t *hi) {
    nn_valid_range(w, s, base + off - olo, ohi - olo, lo, hi);
}

static void DECONV_FN(row_add)(const float *c, int64_t ldc, int64_t kw, int64_t s, int64_t dil,
                               int64_t w, int64_t base, int64_t olo, int64_t ohi,
                               float *restrict out) {
    int64_t kx = 0;
    if (s == 2 && dil == 1)
        /* taps kx and kx+1 land on neighbouring positions: one contiguous run of 2*n floats */
        for (; kx + 1 < kw; kx += 2) {
            const float *restrict c0 = c + kx * ldc, *restrict c1 = c0 + ldc;
            int64_t lo0, hi0, lo1, hi1;
            DECONV_FN(tap_range)(w, 2, base, kx, olo, ohi, &lo0, &hi0);
            DECONV_FN(tap_range)(w, 2, base, kx + 1, olo, ohi, &lo1, &hi1);
            int64_t lo = lo0 > lo1 ? lo0 : lo1, hi = hi0 < hi1 ? hi0 : hi1;
            if (hi < lo) hi = lo;
            const int64_t b = base + kx;
            for (int64_t ix = lo; ix < hi; ix++) {
                out[b + 2 * ix] += c0[ix];
                out[b + 2 * ix + 1] += c1[ix];
            }
            /* the ends where only one of the two taps lands (at most a few positions) */
            for (int64_t ix = lo0; ix < hi0 && ix < lo; ix++) out[b + 2 * ix] += c0[ix];
            for (int64_t ix = hi > lo0 ? hi : lo0; ix < hi0; ix++) out[b + 2 * ix] += c0[ix];
            for (int64_t ix = lo1; ix < hi1 && ix < lo; ix++) out[b + 2 * ix + 1] += c1[ix];
            for (int64_t ix = hi > lo1 ? hi : lo1; ix < hi1; ix++) out[b + 2 * ix + 1] += c1[ix];
        }
    for (; kx < kw; kx++) {
        const float *restrict ck = c + kx * ldc;
        int64_t lo, hi;
        DECONV_FN(tap_range)(w, s, base, kx * dil, olo, ohi, &lo, &hi);
        const int64_t b = base + kx * dil;
        if (s == 1)
            for (int64_t ix = lo; ix < hi; ix++) out[b + ix] += ck[ix];
        else
            for (int64_t ix = lo; ix < hi; ix++) out[b + ix * s] += ck[ix];
    }
}

static void DECONV_FN(row_set)(const float *c, int64_t ldc, int64_t kw, int64_t w, float bias,
                               float *restrict out) {
    const float *restrict c0 = c;
    switch (kw) {
    case 1:
        for (int64_t ix = 0; ix < w; ix++) out[ix] = c0[ix] + bias;
        return;
    case 2: {
        const float *restrict c1 = c + ldc;
        for (int64_t ix = 0; ix < w; ix++) {
            out[2 * ix] = c0[ix] + bias;
            out[2 * ix + 1] = c1[ix] + bias;
        }
        return;
    }
    case 3: {
        const float *restrict c1 = c + ldc, *restrict c2 = c + 2 * ldc;
        for (int64_t ix = 0; ix < w; ix++) {
            out[3 * ix] = c0[ix] + bias;
            out[3 * ix + 1] = c1[ix] + bias;
            out[3 * ix + 2] = c2[ix] + bias;
        }
        return;
    }
    case 4: {
        const float *restrict c1 = c + ldc, *restrict c2 = c + 2 * ldc, *restrict c3 = c + 3 * ldc;
        for (int64_t ix = 0; ix < w; ix++) {
            out[4 * ix] = c0[ix] + bias;
            out[4 * ix + 1] = c1[ix] + bias;
            out[4 * ix + 2] = c2[ix] + bias;
            out[4 * ix + 3] = c3[ix] + bias;
        }
        return;
    }
    default:
        for (int64_t kx = 0; kx < kw; kx++)
            for (int64_t ix = 0; ix < w; ix++) out[ix * kw + kx] = c[kx * ldc + ix] + bias;
    }
}

const deconv_rows DECONV_CAT(deconv_rows_, DECONV_ROWS_SUF) = {DECONV_FN(row_add),
                                                               DECONV_FN(row_set)};
