/* AVX-512 instance of the depthwise band kernel (conv_dw_tmpl.h) and row copy
 * (conv_rows_tmpl.h). Called only after
 * the variant's KERN_NEEDS_AVX512 matched. */
#include "conv_dwx.h"

#include "conv_vec_avx512.h"
#define DW_BAND_FN conv_dw_band_avx512
#include "conv_rows_tmpl.h"
#include "conv_dw_tmpl.h"
#define DWN_ROW_FN conv_dwn_row_avx512
#include "conv_dwn_tmpl.h"

/* ---- channels in lanes, for small planes (conv_dw_cl_geom in conv.h) ----------------------- */

/* The permutes' lane indices, per round (b = 8, 4, 2, 1): lane j of the new row i (i & b == 0)
 * is j of row i where j & b is clear, else j - b of row i + b; of the new row i + b, j + b of row
 * i, else j of row i + b. */
static const int32_t cl_idx[4][2][16] = {
    {{0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23},
     {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31}},
    {{0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27},
     {4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31}},
    {{0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29},
     {2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31}},
    {{0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30},
     {1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31}}};

/* Transposes the 16x16 block r (r[i][j] -> r[j][i]) in four rounds: round b swaps the b x b
 * off-diagonal sub-blocks of every 2b x 2b block, one two-source permute per row. */
static inline __attribute__((always_inline)) void cl_transpose16(__m512 r[16]) {
#pragma GCC unroll 4
    for (int s = 0; s < 4; s++) {
        const int b = 8 >> s;
        const __m512i ilo = _mm512_loadu_si512(cl_idx[s][0]),
                      ihi = _mm512_loadu_si512(cl_idx[s][1]);
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) {
            if (i & b) continue;
            const __m512 a = r[i], c = r[i + b];
            r[i] = _mm512_permutex2var_ps(a, ilo, c);
            r[i + b] = _mm512_permutex2var_ps(a, ihi, c);
        }
    }
}

static inline __mmask16 cl_mask(int64_t n) {
    return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1u);
}

void conv_dw_cl16_avx512(const conv_dw_cl_geom *g, const float *x, const float *w,
                         const float *bias, int nc, float *pad, float *out, float *y) {
    const __mmask16 cm = cl_mask(nc);
    __m512 r[16];
    /* in: 16 pixels of every channel at a time, turned into 16 pixel vectors of channels */
    for (int64_t p0 = 0; p0 < g->hw; p0 += 16) {
        const __mmask16 pm = cl_mask(g->hw - p0);
        for (int c = 0; c < 16; c++)
            r[c] = c < nc ? _mm512_maskz_loadu_ps(pm, x + c * g->hw + p0) : _mm512_setzero_ps();
        cl_transpose16(r);
        const int64_t np = g->hw - p0 < 16 ? g->hw - p0 : 16;
        for (int64_t i = 0; i < np; i++) _mm512_store_ps(pad + g->in_at[p0 + i] * 16, r[i]);
    }
    /* the taps' weights, one vector of channels per tap (up to 25 taps for conv_depthwise.c,
     * CONV_DWX_CL_MAX_TAPS for conv_dwx.c) */
    __m512 wt[CONV_DWX_CL_MAX_TAPS];
    for (int64_t t = 0; t < g->ntaps; t++) {
        float v[16] = {0};
        for (int c = 0; c < nc; c++) v[c] = w[c * g->ntaps + t];
        wt[t] = _mm512_loadu_ps(v);
    }
    const __m512 bv = bias ? _mm512_maskz_loadu_ps(cm, bias) : _mm512_setzero_ps();
    /* 8 output pixels at a time: 8 independent FMA chains over the taps (out_at is padded to a
     * multiple of 8 by repeating its last entry) */
    for (int64_t p0 = 0; p0 < g->ohw; p0 += 8) {
        const float *q[8];
        __m512 acc[8];
        for (int j = 0; j < 8; j++) {
            q[j] = pad + g->out_at[p0 + j] * 16;
            acc[j] = bv;
        }
        for (int64_t t = 0; t < g->ntaps; t++) {
            const int64_t off = g->tap_at[t] * 16;
            for (int j = 0; j < 8; j++)
                acc[j] = _mm512_fmadd_ps(wt[t], _mm512_load_ps(q[j] + off), acc[j]);
        }
        for (int j = 0; j < 8; j++) _mm512_store_ps(out + (p0 + j) * 16, acc[j]);
    }
    /* out: 16 pixel vectors at a time back into the channels' planes */
    for (int64_t p0 = 0; p0 < g->ohw; p0 += 16) {
        const __mmask16 pm = cl_mask(g->ohw - p0);
        for (int i = 0; i < 16; i++) r[i] = _mm512_load_ps(out + (p0 + i) * 16);
        cl_transpose16(r);
        for (int c = 0; c < nc; c++) _mm512_mask_storeu_ps(y + c * g->ohw + p0, pm, r[c]);
    }
}
