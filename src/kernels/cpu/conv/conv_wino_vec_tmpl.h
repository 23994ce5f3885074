/* The Winograd transforms (conv.h: conv_wino_fns) written with the vector vocabulary of
 * conv_vec_<isa>.h, which the including file includes first along with conv_wino_tmpl.h (for the
 * B^T and A^T macros, which work on GCC vector types as they do on floats). The including file
 * defines WINO_SUFFIX.
 *
 * The input and output transforms of a tile row run DW_VL tiles at once, a lane per tile: tile
 * tx's input column tx*S + j is phase j % S of the row at tx + j / S, so every load is a plain
 * vector load once the row is split into its S phases (wino_split_*), and every V or M position
 * of DW_VL consecutive tiles is one vector store or load. The last vector of a row is masked. The
 * output rows interleave the tiles' m columns back with DW_INTERLEAVE2. */

#define WINO_V(NAME) WINO_CAT(NAME, WINO_SUFFIX)

/* DW_VL floats of the padded row from column q: x[q - pl + lane] where that is inside [0, w). */
static inline dw_v WINO_V(wino_row_at_)(const float *x, int64_t w, int64_t pl, int64_t q) {
    const int64_t a = q - pl;
    if (a >= 0 && a + DW_VL <= w) return DW_LOAD(x + a);
    if (a + DW_VL <= 0 || a >= w) return DW_ZERO();
    const int64_t lo = a < 0 ? -a : 0, hi = w - a < DW_VL ? w - a : DW_VL;
    return DW_LOAD_RANGE(x + a, lo, hi);
}

/* conv_wino_split_fn: one deinterleave of 2 * DW_VL floats at s = 2; at s = 4 two levels of them
 * over 4 * DW_VL floats (even and odd, then each of those again). */
static void WINO_V(wino_split_)(const float *x, int64_t w, int64_t pl, int64_t n, int s, float *ph,
                                int64_t lp) {
    if (s == 2) {
        for (int64_t q = 0; q < n; q += 2 * DW_VL) {
            dw_v e, o;
            DW_SPLIT2(WINO_V(wino_row_at_)(x, w, pl, q), WINO_V(wino_row_at_)(x, w, pl, q + DW_VL),
                      e, o);
            DW_STORE(ph + q / 2, e);
            DW_STORE(ph + lp + q / 2, o);
        }
        return;
    }
    for (int64_t q = 0; q < n; q += 4 * DW_VL) {
        dw_v e01, o01, e23, o23, p0, p1, p2, p3;
        DW_SPLIT2(WINO_V(wino_row_at_)(x, w, pl, q), WINO_V(wino_row_at_)(x, w, pl, q + DW_VL), e01,
                  o01);
        DW_SPLIT2(WINO_V(wino_row_at_)(x, w, pl, q + 2 * DW_VL),
                  WINO_V(wino_row_at_)(x, w, pl, q + 3 * DW_VL), e23, o23);
        DW_SPLIT2(e01, e23, p0, p2);
        DW_SPLIT2(o01, o23, p1, p3);
        DW_STORE(ph + q / 4, p0);
        DW_STORE(ph + lp + q / 4, p1);
        DW_STORE(ph + 2 * lp + q / 4, p2);
        DW_STORE(ph + 3 * lp + q / 4, p3);
    }
}

#define WINO_DEFINE_VIN(NAME, T, S, BT)                                                            \
    static void NAME(const float *const *ph, int64_t tiles_x, float *v, const int64_t *off) {      \
        for (int64_t tx = 0; tx < tiles_x; tx += DW_VL) {                                          \
            const int64_t n = tiles_x - tx < DW_VL ? tiles_x - tx : DW_VL;                         \
            dw_v d[T], e[T][T], col[T], o[T];                                                      \
            _Pragma("GCC unroll 6") for (int i = 0; i < T; i++) {                                  \
                _Pragma("GCC unroll 6") for (int j = 0; j < T; j++) d[j] =                         \
                    DW_LOAD_N(ph[i * S + j % S] + tx + j / S, n);                                  \
                BT(d, e[i]);                                                                       \
            }                                                                                      \
            _Pragma("GCC unroll 6") for (int j = 0; j < T; j++) {                                  \
                _Pragma("GCC unroll 6") for (int i = 0; i < T; i++) col[i] = e[i][j];              \
                BT(col, o);                                                                        \
                _Pragma("GCC unroll 6") for (int a = 0; a < T; a++)                                \
                    DW_STORE_N(v + off[a * T + j] + tx, o[a], n);                                  \
            }                                                                                      \
        }                                                                                          \
    }

/* Column c of the tiles' outputs is lane tx of y[c]; row outputs are tile-major, c-minor. */
#define WINO_DEFINE_VOUT(NAME, T, M, AT)                                                           \
    static void NAME(const float *mo, const int64_t *off, int64_t tiles_x, float bias,             \
                     float *const *rows) {                                                         \
        const dw_v b = DW_BCAST(bias);                                                             \
        for (int64_t tx = 0; tx < tiles_x; tx += DW_VL) {                                          \
            const int64_t n = tiles_x - tx < DW_VL ? tiles_x - tx : DW_VL;                         \
            dw_v s[T][M], col[T], y[M][M];                                                         \
            _Pragma("GCC unroll 6") for (int i = 0; i < T; i++) {                                  \
                dw_v r[T];                                                                         \
                _Pragma("GCC unroll 6") for (int j = 0; j < T; j++) r[j] =                         \
                    DW_LOAD_N(mo + off[i * T + j] + tx, n);                                        \
                AT(r, s[i]);                                                                       \
            }                                                                                      \
            _Pragma("GCC unroll 4") for (int c = 0; c < M; c++) {                                  \
                dw_v o[M];                                                                         \
                _Pragma("GCC unroll 6") for (int i = 0; i < T; i++) col[i] = s[i][c];              \
                AT(col, o);                                                                        \
                _Pragma("GCC unroll 4") for (int r = 0; r < M; r++) y[r][c] = o[r] + b;            \
            }                                                                                      \
            _Pragma("GCC unroll 4") for (int r = 0; r < M; r++)                                    \
                WINO_V(wino_store_row_)(rows[r] + tx * M, y[r], M, n);                             \
        }                                                                                          \
    }

/* n tiles' m outputs each, y[c] holding column c of tile i in lane i, stored tile after tile. */
static inline void WINO_V(wino_store_row_)(float *dst, const dw_v *y, int m, int64_t n) {
    dw_v out[4];
    if (m == 2) {
        DW_INTERLEAVE2(y[0], y[1], out[0], out[1]);
    } else {
        dw_v a0, a1, b0, b1;
        DW_INTERLEAVE2(y[0], y[2], a0, a1);
        DW_INTERLEAVE2(y[1], y[3], b0, b1);
        DW_INTERLEAVE2(a0, b0, out[0], out[1]);
        DW_INTERLEAVE2(a1, b1, out[2], out[3]);
    }
    const int64_t total = n * m;
    for (int k = 0; k < m && k * DW_VL < total; k++) {
        const int64_t left = total - k * DW_VL;
        if (left >= DW_VL)
            DW_STORE(dst + k * DW_VL, out[k]);
        else
            DW_STORE_N(dst + k * DW_VL, out[k], left);
    }
}

#define WINO_DEFINE_VOUTC(NAME, T, M, AT)                                                          \
    static void NAME(const float *mo, const int64_t *off, int64_t nch, const float *bias,          \
                     float *out) {                                                                 \
        for (int64_t o = 0; o < nch; o += DW_VL) {                                                 \
            const int64_t n = nch - o < DW_VL ? nch - o : DW_VL;                                   \
            const dw_v b = bias ? DW_LOAD_N(bias + o, n) : DW_ZERO();                              \
            dw_v s[T][M], col[T], y[M];                                                            \
            _Pragma("GCC unroll 6") for (int i = 0; i < T; i++) {                                  \
                dw_v r[T];                                                                         \
                _Pragma("GCC unroll 6") for (int j = 0; j < T; j++) r[j] =                         \
                    DW_LOAD_N(mo + off[i * T + j] + o, n);                                         \
                AT(r, s[i]);                                                                       \
            }                                                                                      \
            _Pragma("GCC unroll 4") for (int c = 0; c < M; c++) {                                  \
                _Pragma("GCC unroll 6") for (int i = 0; i < T; i++) col[i] = s[i][c];              \
                AT(col, y);                                                                        \
                _Pragma("GCC unroll 4") for (int r = 0; r < M; r++)                                \
                    DW_STORE_N(out + (r * M + c) * 16 + o, y[r] + b, n);                           \
            }                                                                                      \
        }                                                                                          \
    }

WINO_DEFINE_VIN(WINO_V(wino_vin2_), 4, 2, WINO_BT4)
WINO_DEFINE_VIN(WINO_V(wino_vin4_), 6, 4, WINO_BT6)
WINO_DEFINE_VIN(WINO_V(wino_vin2s_), 5, 4, WINO_BT5)
WINO_DEFINE_VOUT(WINO_V(wino_vout2_), 4, 2, WINO_AT4)
WINO_DEFINE_VOUT(WINO_V(wino_vout4_), 6, 4, WINO_AT6)
WINO_DEFINE_VOUT(WINO_V(wino_vout2s_), 5, 2, WINO_AT5)
WINO_DEFINE_VOUTC(WINO_V(wino_voutc2_), 4, 2, WINO_AT4)
WINO_DEFINE_VOUTC(WINO_V(wino_voutc4_), 6, 4, WINO_AT6)
WINO_DEFINE_VOUTC(WINO_V(wino_voutc2s_), 5, 2, WINO_AT5)

const conv_wino_fns WINO_CAT(conv_wino_fns_, WINO_SUFFIX) = {
    {WINO_V(wino_vin2_), WINO_V(wino_vin4_), WINO_V(wino_vin2s_)},
    {WINO_V(wino_vout2_), WINO_V(wino_vout4_), WINO_V(wino_vout2s_)},
    {WINO_V(wino_voutc2_), WINO_V(wino_voutc4_), WINO_V(wino_voutc2s_)},
    WINO_V(wino_split_)};
