/* f_exp_clamped over the vector vocabulary of eltwise_vec_<isa>.h (V, V_SET1, V_ADD, V_MUL,
 * V_FMA, V_MAX, V_MIN, V_ROUND, V_LDEXP): included by eltwise_act.h, and on its own by families
 * that define their own V_ABS / V_ZERO (reduce). Include once per file, after the vocabulary. */
#ifndef ANVIL_ELTWISE_EXP_H
#define ANVIL_ELTWISE_EXP_H

/* e^x inline, about 1 ulp, for the exponentials whose argument is bounded (a sigmoid's e^-|x|,
 * softmax's e^(x - max), erf's e^(-x^2), an LSTM gate's): SLEEF's functions are calls into a
 * shared library around which every vector register is spilled, which made a SiLU or an LSTM
 * step several times slower than this. x is clamped to [-87.33, 88] (the normal range of 2^n):
 * below, the result is 0 (denormals flushed); above, it stays finite, so the Exp op itself keeps
 * SLEEF's V_EXP. NaN passes (V_MAX/V_MIN return their second operand for it). */
static inline V v_exp_core(V x) {
    const V n = V_ROUND(V_MUL(x, V_SET1(1.44269504088896341f)));
    V r = V_FMA(n, V_SET1(-0.693359375f), x);
    r = V_FMA(n, V_SET1(2.12194440e-4f), r);
    V p = V_SET1(1.9875691500e-4f);
    p = V_FMA(p, r, V_SET1(1.3981999507e-3f));
    p = V_FMA(p, r, V_SET1(8.3334519073e-3f));
    p = V_FMA(p, r, V_SET1(4.1665795894e-2f));
    p = V_FMA(p, r, V_SET1(1.6666665459e-1f));
    p = V_FMA(p, r, V_SET1(5.0000001201e-1f));
    p = V_FMA(p, V_MUL(r, r), V_ADD(r, V_SET1(1.0f)));
    return V_LDEXP(p, n);
}
static inline V f_exp_clamped(V x0) {
    const V x = V_MIN(V_SET1(88.0f), V_MAX(V_SET1(-87.3365447504f), x0));
    /* below the normal range: 0, so that e.g. x * sigmoid(x) at -inf is NaN as in the
     * reference, not -inf */
    return V_LT(x0, V_SET1(-87.3365447504f), V_SET1(0.0f), v_exp_core(x));
}

/* e^x for the logistic forms 1 / (1 + e^-x) and x / (1 + e^-x) only: clamped below at the
 * smallest normal 2^n (so the result never goes denormal and needs no select) and above at 89,
 * past which it is +inf (2^128 scaled, not the NaN an infinite x would make of the reduction),
 * where those forms reach their exact limit 0 (x / inf a signed 0; -inf / inf NaN, as the
 * reference's x * sigmoid(x)). Without f_exp_clamped's select and sigmoid's |x| split, a SiLU
 * took 0.126 ns per value on a Zen 5 core against 0.206 (16 K values in L1, AVX-512). */
static inline V f_exp_logistic(V x0) {
    return v_exp_core(V_MIN(V_SET1(89.0f), V_MAX(V_SET1(-87.3365447504f), x0)));
}

#endif
