/* The padded-row copy shared by the direct conv kernels (conv_dw_tmpl.h, conv_sc_tmpl.h), written
 * over a few vector primitives that the including file defines (conv_vec_avx512.h,
 * conv_vec_avx2.h):
 *
 *   dw_v               the vector type            DW_VL             floats per vector
 *   DW_LOAD(p)         unaligned load             DW_BCAST(x)       x in every lane
 *   DW_FMA(a, b, c)    a*b + c, fused             DW_ZERO()         all lanes 0
 *   DW_STORE(p, v)     unaligned store            DW_STORE_N(p, v, n) the first n lanes only
 *   DW_LOAD_N(p, n)    the first n lanes, 0 in the others, reading nothing past p[n - 1]
 *   DW_SPLIT2(lo, hi, ev, od)  the even and the odd lanes of the 2*DW_VL floats lo:hi
 *   dw_m, DW_MASK(n)   a mask of the first n lanes (all for n >= DW_VL)
 *   DW_LOADM(p, m), DW_STOREM(p, v, m)  load (0 elsewhere) and store of the lanes in mask m
 *
 * The padded rows are those of conv_dw_geom (conv.h). */
#ifndef ANVIL_CONV_ROWS_TMPL_H
#define ANVIL_CONV_ROWS_TMPL_H

/* Copies n input floats into padded row `row` from padded column q0 (see conv_dw_geom); src NULL
 * zeroes the whole row of ldp floats instead. */
static inline __attribute__((always_inline)) void dw_fill_row(float *restrict row, int64_t ldp,
                                                              const float *restrict src, int64_t n,
                                                              int64_t q0, int64_t half) {
    if (!src) {
        for (int64_t k = 0; k < ldp; k += DW_VL) DW_STORE(row + k, DW_ZERO());
        return;
    }
    if (half == 0) {
        float *d = row + q0;
        int64_t k = 0;
        for (; k + DW_VL <= n; k += DW_VL) DW_STORE(d + k, DW_LOAD(src + k));
        if (k < n) DW_STORE_N(d + k, DW_LOAD_N(src + k, n - k), n - k);
        return;
    }
    /* Input float k lands on column q0 + k: the even k go to one half, the odd k to the
     * other, each as one contiguous run. */
    float *ev = (q0 & 1) ? row + half + q0 / 2 : row + q0 / 2;
    float *od = (q0 & 1) ? row + (q0 + 1) / 2 : row + half + q0 / 2;
    int64_t k = 0;
    for (; k + 2 * DW_VL <= n; k += 2 * DW_VL) {
        dw_v e, o;
        DW_SPLIT2(DW_LOAD(src + k), DW_LOAD(src + k + DW_VL), e, o);
        DW_STORE(ev + k / 2, e);
        DW_STORE(od + k / 2, o);
    }
    if (k < n) {
        /* the tail, padded with zeros to a whole pair of vectors: the lanes past n are not
         * stored, as the stores are masked to the (n - k + 1) / 2 even and (n - k) / 2 odd
         * floats it has */
        const int64_t r = n - k;
        const dw_v lo = DW_LOAD_N(src + k, r < DW_VL ? r : DW_VL);
        const dw_v hi = r > DW_VL ? DW_LOAD_N(src + k + DW_VL, r - DW_VL) : DW_ZERO();
        dw_v e, o;
        DW_SPLIT2(lo, hi, e, o);
        DW_STORE_N(ev + k / 2, e, (r + 1) / 2);
        if (r > 1) DW_STORE_N(od + k / 2, o, r / 2);
    }
}

#endif
