/* Winograd F(2x2,3x3) and F(4x4,3x3) tile transforms, written as plain loops over the tiles of
 * one tile row so that the compiler vectorizes them along the tiles with whatever ISA the
 * including file is compiled for (conv_winograd.c: baseline, conv_wino_avx2.c, conv_wino_avx512.c).
 * The including file defines WINO_SUFFIX (the name suffix of the functions it gets).
 *
 * Contracts: conv.h (conv_wino_in_fn / conv_wino_out_fn). The matrices are Lavin & Gray's:
 *   F(2,3): B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1],  A^T = [1 1 1 0; 0 1 -1 -1]
 *   F(2,3) at stride 2 (5 inputs 4 apart per 2 outputs): B^T d = [d0 - d2, d2, d4 - d2, d1, d3],
 *           A^T = [1 1 0 1 0; 0 1 1 0 1] (conv_winograd.c derives it)
 *   F(4,3): B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0;
 *                  0 4 0 -5 0 1],
 *           A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]
 * written out term by term (a multiplication by a zero entry is not free in IEEE arithmetic, so
 * the compiler would not drop it from a generic matrix product). */
#include <stdint.h>

#define WINO_CAT2(a, b) a##b
#define WINO_CAT(a, b) WINO_CAT2(a, b)

/* o = B^T r for one 4-vector (F(2,3)). */
#define WINO_BT4(r, o)                                                                             \
    do {                                                                                           \
        (o)[0] = (r)[0] - (r)[2];                                                                  \
        (o)[1] = (r)[1] + (r)[2];                                                                  \
        (o)[2] = (r)[2] - (r)[1];                                                                  \
        (o)[3] = (r)[1] - (r)[3];                                                                  \
    } while (0)

/* o = B^T r for one 6-vector (F(4,3)). */
#define WINO_BT6(r, o)                                                                             \
    do {                                                                                           \
        (o)[0] = 4.0f * (r)[0] - 5.0f * (r)[2] + (r)[4];                                           \
        (o)[1] = -4.0f * ((r)[1] + (r)[2]) + (r)[3] + (r)[4];                                      \
        (o)[2] = 4.0f * ((r)[1] - (r)[2]) - (r)[3] + (r)[4];                                       \
        (o)[3] = 2.0f * ((r)[3] - (r)[1]) - (r)[2] + (r)[4];                                       \
        (o)[4] = 2.0f * ((r)[1] - (r)[3]) - (r)[2] + (r)[4];                                       \
        (o)[5] = 4.0f * (r)[1] - 5.0f * (r)[3] + (r)[5];                                           \
    } while (0)

/* o = B^T r for one 5-vector (F(2,3) at stride 2). */
#define WINO_BT5(r, o)                                                                             \
    do {                                                                                           \
        (o)[0] = (r)[0] - (r)[2];                                                                  \
        (o)[1] = (r)[2];                                                                           \
        (o)[2] = (r)[4] - (r)[2];                                                                  \
        (o)[3] = (r)[1];                                                                           \
        (o)[4] = (r)[3];                                                                           \
    } while (0)

/* o = A^T r (F(2,3) at stride 2): 5 -> 2. */
#define WINO_AT5(r, o)                                                                             \
    do {                                                                                           \
        (o)[0] = (r)[0] + (r)[1] + (r)[3];                                                         \
        (o)[1] = (r)[1] + (r)[2] + (r)[4];                                                         \
    } while (0)

/* o = A^T r (F(2,3)): 4 -> 2. */
#define WINO_AT4(r, o)                                                                             \
    do {                                                                                           \
        (o)[0] = (r)[0] + (r)[1] + (r)[2];                                                         \
        (o)[1] = (r)[1] - (r)[2] - (r)[3];                                                         \
    } while (0)

/* o = A^T r (F(4,3)): 6 -> 4. */
#define WINO_AT6(r, o)                                                                             \
    do {                                                                                           \
        const float p12 = (r)[1] + (r)[2], m12 = (r)[1] - (r)[2];                                  \
        const float p34 = (r)[3] + (r)[4], m34 = (r)[3] - (r)[4];                                  \
        (o)[0] = (r)[0] + p12 + p34;                                                               \
        (o)[1] = m12 + 2.0f * m34;                                                                 \
        (o)[2] = p12 + 4.0f * p34;                                                                 \
        (o)[3] = m12 + 8.0f * m34 + (r)[5];                                                        \
    } while (0)

/* One generic body per algorithm: T = tile (4, 5 or 6), M = outputs per tile (2 or 4), S = input
 * columns from one tile to the next (M times the stride). */
#define WINO_DEFINE_IN(NAME, T, M, S, BT)                                                          \
    static void NAME(const float *const *xr, int64_t tiles_x, float *v, const int64_t *off) {      \
        for (int64_t tx = 0; tx < tiles_x; tx++) {                                                 \
            float d[T][T], e[T][T], col[T], o[T];                                                  \
            _Pragma("GCC unroll 6") for (int i = 0; i < T; i++) {                                  \
                _Pragma("GCC unroll 6") for (int j = 0; j < T; j++) d[i][j] = xr[i][tx * S + j];   \
                BT(d[i], e[i]);                                                                    \
            }                                                                                      \
            _Pragma("GCC unroll 6") for (int j = 0; j < T; j++) {                                  \
                _Pragma("GCC unroll 6") for (int i = 0; i < T; i++) col[i] = e[i][j];              \
                BT(col, o);                                                                        \
                _Pragma("GCC unroll 6") for (int a = 0; a < T; a++) v[off[a * T + j] + tx] = o[a]; \
            }                                                                                      \
        }                                                                                          \
    }

#define WINO_DEFINE_OUT(NAME, T, M, AT)                                                            \
    static void NAME(const float *mo, const int64_t *off, int64_t tiles_x, float bias,             \
                     float *const *rows) {                                                         \
        for (int64_t tx = 0; tx < tiles_x; tx++) {                                                 \
            float s[T][M], col[T], o[M];                                                           \
            _Pragma("GCC unroll 6") for (int i = 0; i < T; i++) {                                  \
                float r[T];                                                                        \
                _Pragma("GCC unroll 6") for (int j = 0; j < T; j++) r[j] =                         \
                    mo[off[i * T + j] + tx];                                                       \
                AT(r, s[i]);                                                                       \
            }                                                                                      \
            _Pragma("GCC unroll 4") for (int c = 0; c < M; c++) {                                  \
                _Pragma("GCC unroll 6") for (int i = 0; i < T; i++) col[i] = s[i][c];              \
                AT(col, o);                                                                        \
                _Pragma("GCC unroll 4") for (int r = 0; r < M; r++) rows[r][tx * M + c] =          \
                    o[r] + bias;                                                                   \
            }                                                                                      \
        }                                                                                          \
    }

/* The same per tile over up to 16 output channels, the channel loop innermost so that it is the
 * one vectorized. */
#define WINO_DEFINE_OUTC(NAME, T, M, AT)                                                           \
    static void NAME(const float *mo, const int64_t *off, int64_t nch, const float *bias,          \
                     float *out) {                                                                 \
        for (int64_t o = 0; o < nch; o++) {                                                        \
            float s[T][M], col[T], y[M];                                                           \
            const float b = bias ? bias[o] : 0.0f;                                                 \
            _Pragma("GCC unroll 6") for (int i = 0; i < T; i++) {                                  \
                float r[T];                                                                        \
                _Pragma("GCC unroll 6") for (int j = 0; j < T; j++) r[j] = mo[off[i * T + j] + o]; \
                AT(r, s[i]);                                                                       \
            }                                                                                      \
            _Pragma("GCC unroll 4") for (int c = 0; c < M; c++) {                                  \
                _Pragma("GCC unroll 6") for (int i = 0; i < T; i++) col[i] = s[i][c];              \
                AT(col, y);                                                                        \
                _Pragma("GCC unroll 4") for (int r = 0; r < M; r++) out[(r * M + c) * 16 + o] =    \
                    y[r] + b;                                                                      \
            }                                                                                      \
        }                                                                                          \
    }

WINO_DEFINE_IN(WINO_CAT(wino_in2_, WINO_SUFFIX), 4, 2, 2, WINO_BT4)
WINO_DEFINE_IN(WINO_CAT(wino_in4_, WINO_SUFFIX), 6, 4, 4, WINO_BT6)
WINO_DEFINE_IN(WINO_CAT(wino_in2s_, WINO_SUFFIX), 5, 2, 4, WINO_BT5)
WINO_DEFINE_OUT(WINO_CAT(wino_out2_, WINO_SUFFIX), 4, 2, WINO_AT4)
WINO_DEFINE_OUT(WINO_CAT(wino_out4_, WINO_SUFFIX), 6, 4, WINO_AT6)
WINO_DEFINE_OUT(WINO_CAT(wino_out2s_, WINO_SUFFIX), 5, 2, WINO_AT5)
WINO_DEFINE_OUTC(WINO_CAT(wino_out2c_, WINO_SUFFIX), 4, 2, WINO_AT4)
WINO_DEFINE_OUTC(WINO_CAT(wino_out4c_, WINO_SUFFIX), 6, 4, WINO_AT6)
WINO_DEFINE_OUTC(WINO_CAT(wino_out2sc_, WINO_SUFFIX), 5, 2, WINO_AT5)

const conv_wino_fns WINO_CAT(conv_wino_fns_, WINO_SUFFIX) = {
    {WINO_CAT(wino_in2_, WINO_SUFFIX), WINO_CAT(wino_in4_, WINO_SUFFIX),
     WINO_CAT(wino_in2s_, WINO_SUFFIX)},
    {WINO_CAT(wino_out2_, WINO_SUFFIX), WINO_CAT(wino_out4_, WINO_SUFFIX),
     WINO_CAT(wino_out2s_, WINO_SUFFIX)},
    {WINO_CAT(wino_out2c_, WINO_SUFFIX), WINO_CAT(wino_out4c_, WINO_SUFFIX),
     WINO_CAT(wino_out2sc_, WINO_SUFFIX)}};
