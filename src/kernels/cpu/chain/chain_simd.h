/* The chain kernel, written once over the eltwise vector vocabulary (eltwise_vec_<isa>.h and
 * eltwise_act.h, whose activation functions it shares so a fused step rounds like the unfused
 * node's variant) and instantiated by chain_avx512.c and chain_avx2.c. Include only from those
 * files, after defining, besides the vocabulary:
 *
 *   VW, M, V_LOADU, V_STOREU, V_TAILMASK, V_MLOAD, V_MSTORE   as eltwise_simd.h
 *   V_SQRT(x) V_NEG(x) V_FABS(x)  square root, sign flip, sign clear
 *   V_NANSEL(b, t)                b where b is NaN, else t
 *   CHAIN_U                       vectors a group keeps in registers
 *   CHAIN_ISA_NAME                name of the chain_isa table to define
 *
 * Depth first: a group of CHAIN_U vectors is loaded once, runs through every step in registers
 * and is stored once, so the whole chain costs one pass over memory. The step list is
 * interpreted per group: two switches per step per CHAIN_U vectors, well predicted because the
 * same steps repeat group after group. */
#include "chain.h"

#include <float.h>
#include <immintrin.h>
#include <math.h>

#include "../eltwise/eltwise_act.h"

#define CHAIN_ALWAYS_INLINE inline __attribute__((always_inline))

/* stmt for u = 0 .. nv-1, written out (nv <= 4 is a constant after inlining) so that the
 * compiler keeps r[], b[] and xv[] in registers instead of looping over them in memory. */
#define EACH(stmt)                                                                                 \
    do {                                                                                           \
        {                                                                                          \
            const int u = 0;                                                                       \
            stmt;                                                                                  \
        }                                                                                          \
        if (nv > 1) {                                                                              \
            const int u = 1;                                                                       \
            stmt;                                                                                  \
        }                                                                                          \
        if (nv > 2) {                                                                              \
            const int u = 2;                                                                       \
            stmt;                                                                                  \
        }                                                                                          \
        if (nv > 3) {                                                                              \
            const int u = 3;                                                                       \
            stmt;                                                                                  \
        }                                                                                          \
    } while (0)

#if CHAIN_U > 4
#error "EACH writes out at most 4 vectors"
#endif

/* Runs the steps over r[0..nv) (the chain's input at element i of the span, in place). masked:
 * the last, partial vector of a span, whose lanes past the span m leaves out. */
static CHAIN_ALWAYS_INLINE void chain_group(const chain_kprog *p, const float *const *opnd,
                                            size_t i, V *r, const int nv, const bool masked, M m) {
    V xv[CHAIN_U];
    EACH(xv[u] = r[u]);
    for (int s = 0; s < p->n; s++) {
        const chain_kstep *st = &p->st[s];
        V b[CHAIN_U];
        switch (st->src) {
        case CHAIN_SRC_X:
            EACH(b[u] = xv[u]);
            break;
        case CHAIN_SRC_BCAST: {
            const V t = V_SET1(*opnd[st->k]);
            EACH(b[u] = t);
            break;
        }
        case CHAIN_SRC_ROW: {
            const float *q = opnd[st->k] + i;
            if (masked)
                EACH(b[u] = V_MLOAD(q + u * VW, m, V_SET1(1.0f)));
            else
                EACH(b[u] = V_LOADU(q + u * VW));
            break;
        }
        default:
            EACH(b[u] = V_ZERO());
            break;
        }
        const V va = V_SET1(st->a), vb = V_SET1(st->b);
        switch (st->op) {
        case CHAIN_ADD:
            EACH(r[u] = V_ADD(r[u], b[u]));
            break;
        case CHAIN_SUB:
            EACH(r[u] = V_SUB(r[u], b[u]));
            break;
        case CHAIN_K_RSUB:
            EACH(r[u] = V_SUB(b[u], r[u]));
            break;
        case CHAIN_MUL:
            EACH(r[u] = V_MUL(r[u], b[u]));
            break;
        case CHAIN_DIV:
            EACH(r[u] = V_DIV(r[u], b[u]));
            break;
        case CHAIN_K_RDIV:
            EACH(r[u] = V_DIV(b[u], r[u]));
            break;
        /* max/min give their second operand when either is NaN: r's NaN comes through that way,
         * the operand's through V_NANSEL (np.maximum semantics, as the reference) */
        case CHAIN_MAX:
            EACH(r[u] = V_NANSEL(b[u], V_MAX(b[u], r[u])));
            break;
        case CHAIN_MIN:
            EACH(r[u] = V_NANSEL(b[u], V_MIN(b[u], r[u])));
            break;
        case CHAIN_CLIP:
            EACH(r[u] = f_clip(r[u], va, vb));
            break;
        case CHAIN_RELU:
            EACH(r[u] = f_relu(r[u]));
            break;
        case CHAIN_LEAKYRELU:
            EACH(r[u] = f_leaky(r[u], va));
            break;
        case CHAIN_HARDSIGMOID:
            EACH(r[u] = f_hardsigmoid(r[u], va, vb));
            break;
        case CHAIN_HARDSWISH:
            EACH(r[u] = f_hardswish(r[u]));
            break;
        case CHAIN_POW2:
            EACH(r[u] = V_MUL(r[u], r[u]));
            break;
        case CHAIN_POW3:
            EACH(r[u] = V_MUL(V_MUL(r[u], r[u]), r[u]));
            break;
        case CHAIN_POWHALF: /* powf(-inf, 0.5) is +inf where sqrt gives NaN */
            EACH(r[u] = V_LT(r[u], V_SET1(-FLT_MAX), V_SET1(INFINITY), V_SQRT(r[u])));
            break;
        case CHAIN_SQRT:
            EACH(r[u] = V_SQRT(r[u]));
            break;
        case CHAIN_NEG:
            EACH(r[u] = V_NEG(r[u]));
            break;
        case CHAIN_ABS:
            EACH(r[u] = V_FABS(r[u]));
            break;
        /* f_exp_clamped's: these compute without SLEEF too (emitted libraries do not link it) */
        case CHAIN_SIGMOID:
            EACH(r[u] = f_sigmoid(r[u]));
            break;
        case CHAIN_ERF:
            EACH(r[u] = f_erf(r[u]));
            break;
#ifdef ANVIL_HAVE_SLEEF
        case CHAIN_TANH:
            EACH(r[u] = V_TANH(r[u]));
            break;
        case CHAIN_EXP:
            EACH(r[u] = V_EXP(r[u]));
            break;
#endif
        default:
            break;
        }
    }
}

static void chain_span(const chain_kprog *p, float *y, const float *x, size_t n,
                       const float *const *opnd) {
    const M none = V_TAILMASK(0);
    size_t i = 0;
    for (; i + CHAIN_U * VW <= n; i += CHAIN_U * VW) {
        V r[CHAIN_U];
        const int nv = CHAIN_U;
        EACH(r[u] = V_LOADU(x + i + u * VW));
        chain_group(p, opnd, i, r, CHAIN_U, false, none);
        EACH(V_STOREU(y + i + u * VW, r[u]));
    }
    for (; i + VW <= n; i += VW) {
        V r[CHAIN_U];
        r[0] = V_LOADU(x + i);
        chain_group(p, opnd, i, r, 1, false, none);
        V_STOREU(y + i, r[0]);
    }
    if (i < n) {
        const M m = V_TAILMASK(n - i);
        V r[CHAIN_U];
        r[0] = V_MLOAD(x + i, m, V_ZERO());
        chain_group(p, opnd, i, r, 1, true, m);
        V_MSTORE(y + i, m, r[0]);
    }
}

const chain_isa CHAIN_ISA_NAME = {.span = chain_span};
