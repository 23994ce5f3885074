/* The rnn kernels in plain C with libm: the table every machine has (below AVX2, or with
 * ANVIL_ISA=scalar). The products are written in blocks of RNN_PAD columns, which the compiler
 * vectorizes for the baseline ISA; the gates call libm per element. */
#include "rnn.h"

#include <math.h>

static void p_gemm_small(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                         const float *b, const float *bias, float *c, int64_t ldc) {
    for (int64_t i = 0; i < m; i++) {
        float *ci = c + i * ldc;
        for (int64_t j = 0; j < n; j++) ci[j] = bias ? bias[j] : 0.0f;
        for (int64_t j0 = 0; j0 < n; j0 += RNN_PANEL) {
            const int64_t pw = n - j0 < RNN_PANEL ? n - j0 : RNN_PANEL;
            const float *panel = b + j0 * k;
            for (int64_t p = 0; p < k; p++) {
                const float av = a[i * lda + p], *bp = panel + p * pw;
                for (int64_t j = 0; j < pw; j += RNN_PAD)
                    for (int q = 0; q < RNN_PAD; q++) ci[j0 + j + q] += av * bp[j + q];
            }
        }
    }
}

/* As the reference: lower bound first; NaN passes. */
static inline float clipf(float x, float lim) {
    return x < -lim ? -lim : x > lim ? lim : x;
}

static inline float sigmoidf(float x) {
    if (x >= 0) return 1.0f / (1.0f + expf(-x));
    const float e = expf(x);
    return e / (1.0f + e);
}

static void p_lstm_row(int64_t n, int64_t hp, const float *xw, const float *rec, const float *p,
                       float *c, float *h, float clip) {
    for (int64_t j = 0; j < n; j++) {
        const float cp = c[j];
        float xi = xw[j] + rec[j], xf = xw[2 * hp + j] + rec[2 * hp + j];
        float xo = xw[hp + j] + rec[hp + j];
        if (p) {
            xi += p[j] * cp;
            xf += p[2 * hp + j] * cp;
        }
        const float ig = sigmoidf(clipf(xi, clip)), fg = sigmoidf(clipf(xf, clip));
        const float cc = tanhf(clipf(xw[3 * hp + j] + rec[3 * hp + j], clip));
        const float cn = fg * cp + ig * cc;
        if (p) xo += p[hp + j] * cn;
        c[j] = cn;
        h[j] = sigmoidf(clipf(xo, clip)) * tanhf(cn);
    }
}

static void p_gru_lbr_row(int64_t n, int64_t hp, const float *xw, const float *rec,
                          const float *rbh, float *h, float clip) {
    for (int64_t j = 0; j < n; j++) {
        const float z = sigmoidf(clipf(xw[j] + rec[j], clip));
        const float r = sigmoidf(clipf(xw[hp + j] + rec[hp + j], clip));
        const float hh = tanhf(clipf(xw[2 * hp + j] + r * (rec[2 * hp + j] + rbh[j]), clip));
        h[j] = (1.0f - z) * hh + z * h[j];
    }
}

static void p_gru_zr_row(int64_t hp, float *xw, const float *rec, const float *h, float *rh,
                         float clip) {
    for (int64_t j = 0; j < hp; j++) {
        const float z = sigmoidf(clipf(xw[j] + rec[j], clip));
        const float r = sigmoidf(clipf(xw[hp + j] + rec[hp + j], clip));
        xw[j] = z;
        rh[j] = r * h[j];
    }
}

static void p_gru_h_row(int64_t hp, const float *xw_h, const float *prod, const float *z, float *h,
                        float clip) {
    for (int64_t j = 0; j < hp; j++) {
        const float hh = tanhf(clipf(xw_h[j] + prod[j], clip));
        h[j] = (1.0f - z[j]) * hh + z[j] * h[j];
    }
}

static void p_rnn_row(int64_t hp, const float *xw, const float *rec, float *h, float clip) {
    for (int64_t j = 0; j < hp; j++) h[j] = tanhf(clipf(xw[j] + rec[j], clip));
}

const rnn_isa rnn_isa_portable = {
    .gemm_small = p_gemm_small,
    .lstm_row = p_lstm_row,
    .gru_lbr_row = p_gru_lbr_row,
    .gru_zr_row = p_gru_zr_row,
    .gru_h_row = p_gru_h_row,
    .rnn_row = p_rnn_row,
};
