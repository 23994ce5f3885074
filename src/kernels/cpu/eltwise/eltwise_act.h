/* The activation functions over one vector, written once over the vector vocabulary of
 * eltwise_simd.h (V, V_SET1, V_ADD, V_SUB, V_MUL, V_DIV, V_FMA, V_MAX, V_MIN, V_LT, V_GE, V_ROUND,
 * V_LDEXP, and with ANVIL_HAVE_SLEEF also V_EXP, V_TANH, V_LOG1P). Included by the eltwise ISA
 * files (through eltwise_simd.h) and by the GEMM ISA files, whose micro-kernels apply a fused
 * activation to their accumulators with the same arithmetic the unfused node would use. Include
 * once per file, after defining the vocabulary. */
#ifndef ANVIL_ELTWISE_ACT_H
#define ANVIL_ELTWISE_ACT_H

#include <math.h>

#include "eltwise_exp.h"

#define V_ZERO() V_SET1(0.0f)
#define V_ABS(x) V_MAX(V_SUB(V_ZERO(), (x)), (x))

/* ---- unary activations ---------------------------------------------------------------------- */

static inline V f_relu(V x) {
    return V_MAX(V_ZERO(), x);
}
static inline V f_leaky(V x, V a) {
    return V_LT(x, V_ZERO(), V_MUL(a, x), x);
}
/* Lower bound first, then upper (as the reference); NaN passes through both. */
static inline V f_clip(V x, V lo, V hi) {
    return V_MIN(hi, V_MAX(lo, x));
}
static inline V f_hardsigmoid(V x, V a, V b) {
    return V_MIN(V_SET1(1.0f), V_MAX(V_ZERO(), V_FMA(a, x, b)));
}
static inline V f_hardswish(V x) {
    V t = V_FMA(V_SET1((float)(1.0 / 6.0)), x, V_SET1(0.5f));
    return V_MUL(x, V_MIN(V_SET1(1.0f), V_MAX(V_ZERO(), t)));
}

/* The ones below use only f_exp_clamped, so they exist without SLEEF too (the libraries `anvil
 * compile` emits do not link it); gelu_tanh and softplus need SLEEF's tanh / log1p. */

/* Three steps of Horner's rule: ((p x + c0) x + c1) x + c2. */
static inline V v_horner3(V p, V x, float c0, float c1, float c2) {
    return V_FMA(V_FMA(V_FMA(p, x, V_SET1(c0)), x, V_SET1(c1)), x, V_SET1(c2));
}
/* n sigmoid(u) as one quotient, n / (1 + e^-u): e^-u is +inf below u = -89, where the quotient
 * is its limit (a signed 0; NaN for an infinite n, as n * sigmoid(u) is). Sigmoid, SiLU, Swish
 * and GELU's tanh form are each one of these, a multiply fewer than n * sigmoid(u). */
static inline V f_times_sigmoid(V n, V u) {
    return V_DIV(n, V_ADD(V_SET1(1.0f), f_exp_logistic(V_SUB(V_ZERO(), u))));
}
static inline V f_sigmoid(V x) {
    return f_times_sigmoid(V_SET1(1.0f), x);
}
static inline V f_silu(V x) {
    return f_times_sigmoid(x, x);
}
/* erf in two pieces, each about 1 ulp (SLEEF's u10 erf is ~4x slower, and BERT's Gelu spends
 * most of its non-GEMM time in it):
 *   |x| < 1:  x * P(x^2), P a degree-6 fit of erf(x)/x (relative error 7e-8);
 *   |x| >= 1: 1 - e^(-x^2) * h(x), h = erfc(x) e^(x^2) (smooth, in [0.14, 0.43]) fitted in
 *             degree 12 on [1, 3.92] (relative 2.4e-8); past 3.92 erf is 1 in float.
 * NaN stays NaN; +-inf give +-1. */
static inline V f_erf(V x) {
    const V t = V_MUL(x, x), ax = V_ABS(x);
    V p = V_SET1(7.847259257687256e-05f);
    p = v_horner3(p, t, -0.0008008189033716917f, 0.005188099108636379f, -0.026853691786527634f);
    p = v_horner3(p, t, 0.1128358244895935f, -0.3761262595653534f, 1.1283791065216064f);
    const V small = V_MUL(x, p);
    /* clamped (NaN kept: V_MIN returns its second operand for NaN) so that e^(-x^2) never
     * goes denormal, which costs microcode assists: past 3.92 the result rounds to 1 anyway */
    const V xc = V_MIN(V_SET1(3.92f), ax);
    const V u = V_MUL(V_SUB(xc, V_SET1(2.46f)), V_SET1(1.0f / 1.46f));
    V h = V_SET1(1.0051507160824258e-05f);
    h = v_horner3(h, u, -3.011766057170462e-05f, 5.0610178732313216e-05f, -0.00012712914030998945f);
    h = v_horner3(h, u, 0.00036322572850622237f, -0.000916590157430619f, 0.0022108915727585554f);
    h = v_horner3(h, u, -0.005213573575019836f, 0.011899635195732117f, -0.02616809494793415f);
    h = v_horner3(h, u, 0.05525609105825424f, -0.11151688545942307f, 0.213820680975914f);
    const V big = V_SUB(V_SET1(1.0f), V_MUL(h, f_exp_clamped(V_SUB(V_ZERO(), V_MUL(xc, xc)))));
    return V_LT(ax, V_SET1(1.0f), small, V_LT(x, V_ZERO(), V_SUB(V_ZERO(), big), big));
}
/* The standard normal's cdf, Phi(x) = (1 + erf(x / sqrt 2)) / 2, and in *pdf its density
 * e^(-x^2/2) / sqrt(2 pi), through erf's complement in Abramowitz and Stegun's form 7.1.26:
 * erfc(z) = t (a1 + t (a2 + ... + t a5)) e^(-z^2), t = 1 / (1 + p z), z >= 0 (absolute error
 * 1.5e-7; oneDNN's GELU post-op uses it too), whose exponential is the density's. About 30 vector
 * operations against f_erf's 41 and both its branches. Phi is 1 - c/2 for x >= 0 and c/2 below,
 * c = erfc(|x| / sqrt 2), so the negative side keeps its relative accuracy; past z = 9 both tails
 * are taken as exact (c and the density 0; e^-81 is still a normal float, so no denormal is ever
 * formed). A caller that does not read *pdf leaves its two operations to the compiler to drop. */
static inline V f_normal_cdf(V x, V *pdf) {
    const V z = V_MUL(V_ABS(x), V_SET1(0.7071067811865476f));
    const V zc = V_MIN(V_SET1(9.0f), z);
    const V t = V_DIV(V_SET1(1.0f), V_FMA(V_SET1(0.3275911f), zc, V_SET1(1.0f)));
    V p = V_FMA(V_SET1(1.061405429f), t, V_SET1(-1.453152027f));
    p = V_FMA(p, t, V_SET1(1.421413741f));
    p = V_FMA(p, t, V_SET1(-0.284496736f));
    p = V_FMA(p, t, V_SET1(0.254829592f));
    const V e = f_exp_clamped(V_SUB(V_ZERO(), V_MUL(zc, zc)));
    const V half_c = V_LT(z, V_SET1(9.0f), V_MUL(V_MUL(p, t), V_MUL(e, V_SET1(0.5f))), V_ZERO());
    *pdf = V_LT(z, V_SET1(9.0f), V_MUL(e, V_SET1(0.3989422804014327f)), V_ZERO());
    return V_GE(x, V_ZERO(), V_SUB(V_SET1(1.0f), half_c), half_c);
}
/* GELU's erf form, x Phi(x) (f_normal_cdf). ViT-S's fused FFN GEMM (197 x 384 x 1536, bf16, one
 * Zen 4 core) took 1.32 ms with f_erf's GELU against 1.06 without one; 1.24 with this. Measured
 * against double precision on [-12, 12]: absolute error at most 4e-7, relative 1.7e-4 where
 * |GELU| is near 1e-3 (x near -3.5, where c itself is 1e-3 and 1.5e-7 of it is what the form
 * leaves). NaN stays NaN; +inf gives +inf, -inf NaN (as x (1 + erf) does). */
static inline V f_gelu(V x) {
    V pdf;
    return V_MUL(x, f_normal_cdf(x, &pdf));
}
#ifdef ANVIL_HAVE_SLEEF
/* x (1 + tanh(u)) / 2 = x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3): f_sigmoid's one
 * exponential instead of SLEEF's tanh, which made GPT-2's 12 fused FFN GEMMs (128x3072) take
 * 2.3 ms each against 0.7 for the same GEMM without it on a Sapphire Rapids core (1 thread). */
static inline V f_gelu_tanh(V x) {
    V x3 = V_MUL(V_MUL(x, x), x);
    V u2 = V_MUL(V_SET1(1.5957691216057308f), V_ADD(x, V_MUL(V_SET1(0.044715f), x3)));
    return f_times_sigmoid(x, u2);
}
/* log(1 + e^x) = max(x, 0) + log1p(e^-|x|) */
static inline V f_softplus(V x) {
    return V_ADD(V_MAX(V_ZERO(), x), V_LOG1P(f_exp_clamped(V_SUB(V_ZERO(), V_ABS(x)))));
}
#endif

#endif
