/* The depthwise plane kernel, written once over a few vector primitives and instantiated per ISA
 * (conv_dw_avx512.c, conv_dw_avx2.c). The including file defines:
 *
 *   DW_VL              floats per vector          dw_v              the vector type
 *   DW_LOAD(p)         unaligned load             DW_LOAD_S2(p)     p[0], p[2], ... p[2*(VL-1)]
 *   DW_BCAST(x)        x in every lane            DW_FMA(a, b, c)   a*b + c, fused
 *   DW_STORE(p, v)     unaligned store            DW_STORE_N(p, v, n) the first n lanes only
 *   DW_PLANE_FN        the name of the function to define
 *
 * Vectors run along the output width. The padded input plane (see conv.h) makes every tap load
 * unconditional. Each step computes 2 output rows x 4 vectors: 8 independent FMA chains keep
 * both FMA pipes busy despite their latency, and the two rows share the loaded input rows when
 * the vertical stride is 1. kh, kw and sx are compile-time constants in each instance. */

static inline __attribute__((always_inline)) void
dw_block(const float *restrict xp, int64_t ldp, int64_t sy, const float *restrict w, float bias,
         float *restrict y, int64_t ldy, int64_t ox, int64_t n_last, const int kh, const int kw,
         const int sx, const int rows, const int nv) {
    dw_v acc[2][4];
#pragma GCC unroll 2
    for (int r = 0; r < rows; r++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) acc[r][v] = DW_BCAST(bias);
#pragma GCC unroll 5
    for (int ky = 0; ky < kh; ky++)
#pragma GCC unroll 5
        for (int kx = 0; kx < kw; kx++) {
            const dw_v wv = DW_BCAST(w[ky * kw + kx]);
#pragma GCC unroll 2
            for (int r = 0; r < rows; r++) {
                const float *src = xp + (r * sy + ky) * ldp + ox * sx + kx;
#pragma GCC unroll 4
                for (int v = 0; v < nv; v++) {
                    const float *p = src + v * DW_VL * sx;
                    acc[r][v] = DW_FMA(wv, sx == 1 ? DW_LOAD(p) : DW_LOAD_S2(p), acc[r][v]);
                }
            }
        }
#pragma GCC unroll 2
    for (int r = 0; r < rows; r++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) {
            float *d = y + r * ldy + ox + v * DW_VL;
            if (n_last < DW_VL && v == nv - 1)
                DW_STORE_N(d, acc[r][v], n_last);
            else
                DW_STORE(d, acc[r][v]);
        }
}

static inline __attribute__((always_inline)) void dw_plane(const float *xp, int64_t ldp, int64_t sy,
                                                           const float *w, float bias, float *y,
                                                           int64_t oh, int64_t ow, const int kh,
                                                           const int kw, const int sx) {
    for (int64_t oy = 0; oy < oh; oy += 2) {
        const float *x0 = xp + oy * sy * ldp;
        float *y0 = y + oy * ow;
        int64_t ox = 0;
        if (oy + 1 < oh) {
            for (; ox + 4 * DW_VL <= ow; ox += 4 * DW_VL)
                dw_block(x0, ldp, sy, w, bias, y0, ow, ox, DW_VL, kh, kw, sx, 2, 4);
            for (; ox < ow; ox += DW_VL)
                dw_block(x0, ldp, sy, w, bias, y0, ow, ox, ow - ox < DW_VL ? ow - ox : DW_VL, kh,
                         kw, sx, 2, 1);
        } else {
            for (; ox + 4 * DW_VL <= ow; ox += 4 * DW_VL)
                dw_block(x0, ldp, sy, w, bias, y0, ow, ox, DW_VL, kh, kw, sx, 1, 4);
            for (; ox < ow; ox += DW_VL)
                dw_block(x0, ldp, sy, w, bias, y0, ow, ox, ow - ox < DW_VL ? ow - ox : DW_VL, kh,
                         kw, sx, 1, 1);
        }
    }
}

void DW_PLANE_FN(const float *xp, int64_t ldp, int64_t sy, int64_t sx, int kh, int kw,
                 const float *w, float bias, float *y, int64_t oh, int64_t ow) {
#define DW_CASE(KH, KW, SX)                                                                        \
    if (kh == KH && kw == KW && sx == SX) {                                                        \
        dw_plane(xp, ldp, sy, w, bias, y, oh, ow, KH, KW, SX);                                     \
        return;                                                                                    \
    }
    DW_CASE(3, 3, 1)
    DW_CASE(3, 3, 2)
    DW_CASE(5, 5, 1)
    DW_CASE(5, 5, 2)
    DW_CASE(3, 5, 1)
    DW_CASE(3, 5, 2)
    DW_CASE(5, 3, 1)
    DW_CASE(5, 3, 2)
#undef DW_CASE
}
