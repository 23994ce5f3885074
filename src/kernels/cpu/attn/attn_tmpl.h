/* One attention job (attn.h): queries [i0, i0 + MB) of one batch and head against every key,
 * written over the vector vocabulary of eltwise_vec_<isa>.h plus VW (lanes), V_LOAD/V_STORE
 * (aligned), ATT_C (vectors per query block), ATT_R (keys per score tile), ATT_RV (head-size
 * rows per output tile); the keys per block come with the problem (attn_prob.kb, a multiple of
 * ATT_R). Included once per query
 * block width: its functions are suffixed with ATT_C (att_block_4 for blocks of 4 vectors of
 * queries, att_block_1 for the narrow blocks that take a sequence's last queries instead of a
 * mostly empty wide block).
 *
 * Everything runs transposed, with the queries along the vector lanes:
 *   qt[e][i]  = scale * q[i][e]           packed once per job (zero rows past the last query);
 *   st[j][i]  = sum_e k[j][e] qt[e][i]    a block of kb keys: ATT_R keys broadcast from k's rows
 *                                         times ATT_C vectors of queries per register tile;
 *   the online softmax then works on whole vectors of queries: the running max and sum of each
 *   query are lanes, a key's scores a row, so no horizontal reduction is ever needed;
 *   ot[e][i] += sum_j v[j][e] pt[j][i]    ATT_RV head-size rows broadcast from v's rows times
 *                                         ATT_C vectors of queries, rescaled on the way in.
 * Key tails clamp their row pointers to the last key (the extra rows are computed and never
 * read); head-size tails of the output clamp the same way into the padded rows of ot. */
#ifndef ANVIL_ATTN_TMPL_ONCE
#define ANVIL_ATTN_TMPL_ONCE

#include <float.h>
#include <math.h>
#endif

#define MB (ATT_C * VW)
#define ATT_CAT2(a, b) a##_##b
#define ATT_CAT(a, b) ATT_CAT2(a, b)
#define att_scores ATT_CAT(att_scores, ATT_C)
#define att_values ATT_CAT(att_values, ATT_C)
#define att_masks ATT_CAT(att_masks, ATT_C)
#define att_softmax ATT_CAT(att_softmax, ATT_C)
#define att_block ATT_CAT(att_block, ATT_C)
#define att_pair_rows ATT_CAT(att_pair_rows, ATT_C)

#ifndef ANVIL_ATTN_EXP_ONCE
#define ANVIL_ATTN_EXP_ONCE
/* e^x for the softmax's x <= 0 (a score minus the running max, or two maxima apart): one FMA
 * chain of degree 5 after reducing by n ln 2, |error| < 3e-6 relative, against f_exp_clamped's
 * degree 7 plus two clamps and a blend: the exponentials are the largest cost in the block after
 * the two products. Below -87.3 the result is 0: the clamped polynomial's ~1e-38 times a value
 * of v is a denormal, and an Intel core takes a microcode assist for each one: GPT-2's causal
 * mask (-3.4e38 added to half the scores) made its 12 attentions 125 ms instead of 11 at 1 thread
 * on a Sapphire Rapids core (AMD's cores take denormals at full speed). NaN passes (V_MAX and
 * V_LT's compare return their second operand for it). */
static inline V att_exp(V x0) {
    const V x = V_MAX(V_SET1(-87.3365447504f), x0);
    const V n = V_ROUND(V_MUL(x, V_SET1(1.44269504088896341f)));
    V r = V_FMA(n, V_SET1(-0.693359375f), x);
    r = V_FMA(n, V_SET1(2.12194440e-4f), r);
    V p = V_FMA(V_SET1(1.0f / 120), r, V_SET1(1.0f / 24));
    p = V_FMA(p, r, V_SET1(1.0f / 6));
    p = V_FMA(p, r, V_SET1(0.5f));
    p = V_FMA(p, r, V_SET1(1.0f));
    p = V_FMA(p, r, V_SET1(1.0f));
    return V_LT(x0, V_SET1(-87.3365447504f), V_SET1(0.0f), V_LDEXP(p, n));
}

/* c * tanh(x / c) on a row of n floats (n a multiple of VW): tanh(t) = 1 - 2 / (e^2|t| + 1) with
 * t's sign. */
static void att_softcap(float *row, int64_t n, float c) {
    const V inv2 = V_SET1(2.0f / c), cap = V_SET1(c), one = V_SET1(1.0f), two = V_SET1(2.0f);
    for (int64_t i = 0; i < n; i += VW) {
        const V x = V_LOAD(row + i);
        /* e^88 already makes tanh 1 in float; the clamp keeps AVX2's exponent arithmetic in
         * range */
        const V e = att_exp(V_MIN(V_MUL(ATT_ABS(x), inv2), V_SET1(88.0f)));
        const V t = V_SUB(one, V_DIV(two, V_ADD(e, one)));
        V_STORE(row + i, V_MUL(cap, ATT_COPYSIGN(t, x)));
    }
}
#endif

/* The two products' multiply-add: fp32 FMA, or the pairs' product (ATT_DOT of the ISA file). A
 * file whose pair products keep two sums per 32-bit lane (fp16's, one per half) defines
 * ATT_WIDEN(acc): those lanes as fp32 sums, the two halves added; the products then run from
 * zero and are widened once, at the end of each register tile's loop. */
#ifndef ANVIL_ATTN_MAC_ONCE
#define ANVIL_ATTN_MAC_ONCE
#ifdef ATT_PAIRED
#define ATT_MAC(a, b, acc) ATT_DOT(a, b, acc)
#else
#define ATT_MAC(a, b, acc) V_FMA(a, b, acc)
#endif
#endif

/* st[r][.] = k row r . qt for ATT_R key rows. */
static inline void att_scores(const float *qt, const float *const *kr, int64_t d, float *st) {
    V acc[ATT_R][ATT_C];
#pragma GCC unroll 8
    for (int r = 0; r < ATT_R; r++)
#pragma GCC unroll 4
        for (int c = 0; c < ATT_C; c++) acc[r][c] = V_SET1(0.0f);
    for (int64_t e = 0; e < d; e++) {
        V x[ATT_C];
#pragma GCC unroll 4
        for (int c = 0; c < ATT_C; c++) x[c] = V_LOAD(qt + e * MB + c * VW);
#pragma GCC unroll 8
        for (int r = 0; r < ATT_R; r++) {
            const V kb = V_SET1(kr[r][e]);
#pragma GCC unroll 4
            for (int c = 0; c < ATT_C; c++) acc[r][c] = ATT_MAC(kb, x[c], acc[r][c]);
        }
    }
#ifdef ATT_WIDEN
#pragma GCC unroll 8
    for (int r = 0; r < ATT_R; r++)
#pragma GCC unroll 4
        for (int c = 0; c < ATT_C; c++) acc[r][c] = ATT_WIDEN(acc[r][c]);
#endif
#pragma GCC unroll 8
    for (int r = 0; r < ATT_R; r++)
#pragma GCC unroll 4
        for (int c = 0; c < ATT_C; c++) V_STORE(st + r * MB + c * VW, acc[r][c]);
}

#ifdef ATT_PAIRED
/* The products over pairs (attn.h's attn_isa.bf16: bf16 pairs, or fp16 pairs with ATT_WIDEN),
 * over 32-bit slots that each hold a pair of 16-bit values: ATT_DOT(a, b, acc) adds a's and b's
 * pairwise products into acc's fp32 lanes, and ATT_PAIRS(lo, hi, out) writes the 16 slots (lo[i],
 * hi[i]) of two rows of 16 floats (hi NULL: zeros) and ATT_ROW_PAIRS(x, n, out) the (n + 1) / 2
 * slots (x[2i], x[2i + 1]) of n floats (an odd n's last paired with zero), all from the ISA file.
 * att_scores and att_values then run on the slots as they run on floats: q's rows in head-size
 * pairs against each key row's pairs (d / 2 steps), the weights' rows in key pairs against v's
 * (keys / 2 steps). */

/* Rows 2 j2 and 2 j2 + 1 of a (rows x MB) block into slot rows of MB lanes: out row j2 pairs
 * them lane by lane, a missing second row pairing with zeros. */
static inline void att_pair_rows(const float *in, int64_t rows, float *out) {
    for (int64_t j = 0; j < rows; j += 2, out += MB)
        for (int c = 0; c < ATT_C; c++)
            ATT_PAIRS(in + j * MB + c * VW, j + 1 < rows ? in + (j + 1) * MB + c * VW : NULL,
                      out + c * VW);
}
#endif

/* ot rows [e0, e0 + ATT_RV) = alpha * ot + sum_j v[j][e] pt[j] over nb keys; vr[j] is key j's row
 * of v and ec[r] the (clamped) head-size index of row r. */
static inline void att_values(float *ot, const float *alpha, const float *pt, const float *v0,
                              int64_t vs, int64_t nb, const int64_t *ec) {
    V acc[ATT_RV][ATT_C], al[ATT_C];
#pragma GCC unroll 4
    for (int c = 0; c < ATT_C; c++) al[c] = V_LOAD(alpha + c * VW);
#pragma GCC unroll 8
    for (int r = 0; r < ATT_RV; r++)
#pragma GCC unroll 4
        for (int c = 0; c < ATT_C; c++)
#ifdef ATT_WIDEN
            acc[r][c] = V_SET1(0.0f);
#else
            acc[r][c] = V_MUL(V_LOAD(ot + r * MB + c * VW), al[c]);
#endif
    const float *vj = v0;
    for (int64_t j = 0; j < nb; j++, vj += vs) {
        V x[ATT_C];
#pragma GCC unroll 4
        for (int c = 0; c < ATT_C; c++) x[c] = V_LOAD(pt + j * MB + c * VW);
#pragma GCC unroll 8
        for (int r = 0; r < ATT_RV; r++) {
            const V vb = V_SET1(vj[ec[r]]);
#pragma GCC unroll 4
            for (int c = 0; c < ATT_C; c++) acc[r][c] = ATT_MAC(vb, x[c], acc[r][c]);
        }
    }
#ifdef ATT_WIDEN
    /* the block's sums (at most kb / 2 pair steps per lane) join the rescaled output in fp32 */
#pragma GCC unroll 8
    for (int r = 0; r < ATT_RV; r++)
#pragma GCC unroll 4
        for (int c = 0; c < ATT_C; c++)
            acc[r][c] = V_FMA(V_LOAD(ot + r * MB + c * VW), al[c], ATT_WIDEN(acc[r][c]));
#endif
#pragma GCC unroll 8
    for (int r = 0; r < ATT_RV; r++)
#pragma GCC unroll 4
        for (int c = 0; c < ATT_C; c++) V_STORE(ot + r * MB + c * VW, acc[r][c]);
}

/* Adds the float mask, applies the bool one and then the causal drop to a block of scores: keys
 * [j0, j0 + nb) of queries [i0, i0 + ni). A mask that does not vary along the queries is one value
 * per key row. */
static void att_masks(const attn_prob *p, int64_t b, int64_t h, int64_t i0, int64_t ni, int64_t j0,
                      int64_t nb, float *st) {
    const sdpa_geom *g = &p->g;
    if (g->has_mask) {
        const float *m = p->mask + b * g->mask[0] + h * g->mask[1] + i0 * g->mask[2];
        for (int64_t j = 0; j < nb; j++) {
            const float *mj = m + (j0 + j) * g->mask[3];
            float *row = st + j * MB;
            if (g->mask[2] == 0) {
                const V x = V_SET1(mj[0]);
                for (int c = 0; c < ATT_C; c++)
                    V_STORE(row + c * VW, V_ADD(V_LOAD(row + c * VW), x));
            } else {
                for (int64_t i = 0; i < ni; i++) row[i] += mj[i * g->mask[2]];
            }
        }
    }
    if (g->has_keep) {
        const bool *k = p->keep + b * g->keep[0] + h * g->keep[1] + i0 * g->keep[2];
        for (int64_t j = 0; j < nb; j++) {
            const bool *kj = k + (j0 + j) * g->keep[3];
            float *row = st + j * MB;
            if (g->keep[2] == 0) {
                if (kj[0] == p->invert)
                    for (int c = 0; c < ATT_C; c++) V_STORE(row + c * VW, V_SET1(p->fill));
            } else {
                for (int64_t i = 0; i < ni; i++)
                    if (kj[i * g->keep[2]] == p->invert) row[i] = p->fill;
            }
        }
    }
    if (p->causal) {
        /* key j0 + j drops the queries i it is past (j0 + j > i + coff): the row's first
         * (j0 + j - i0 - coff) lanes */
        for (int64_t j = 0; j < nb; j++) {
            const int64_t drop = j0 + j - i0 - p->coff < ni ? j0 + j - i0 - p->coff : ni;
            for (int64_t i = 0; i < drop; i++) st[j * MB + i] = -INFINITY;
        }
    }
}

/* The online softmax over one block of nb keys: updates the running max m and sum l, leaves
 * e^(s - m) in st and the factor that rescales what was accumulated before in alpha. */
static void att_softmax(float *st, int64_t nb, float *m, float *l, float *alpha) {
    for (int c = 0; c < ATT_C; c++) {
        const V m_old = V_LOAD(m + c * VW);
        V mx = m_old;
        for (int64_t j = 0; j < nb; j++) mx = V_MAX(mx, V_LOAD(st + j * MB + c * VW));
        /* a query whose scores are all -inf so far keeps 0 as its offset, so that no
         * -inf - -inf appears: its weights stay 0 */
        const V off = V_LT(mx, V_SET1(-FLT_MAX), V_SET1(0.0f), mx);
        V sum = V_SET1(0.0f);
        for (int64_t j = 0; j < nb; j++) {
            const V e = att_exp(V_SUB(V_LOAD(st + j * MB + c * VW), off));
            V_STORE(st + j * MB + c * VW, e);
            sum = V_ADD(sum, e);
        }
        const V a = att_exp(V_SUB(m_old, off));
        V_STORE(alpha + c * VW, a);
        V_STORE(l + c * VW, V_FMA(V_LOAD(l + c * VW), a, sum));
        V_STORE(m + c * VW, mx);
    }
}

static void att_block(const attn_prob *p, int64_t b, int64_t h, int64_t i0, float *ws) {
    const sdpa_geom *g = &p->g;
    const int64_t ni = g->sq - i0 < MB ? g->sq - i0 : MB;
    const int64_t dvp = (g->dv + ATT_RV - 1) / ATT_RV * ATT_RV;
    /* p->kb is a multiple of ATT_R: a block's score tiles end at its last row */
    float *qt = ws, *st = qt + g->d * MB, *ot = st + p->kb * MB, *m = ot + dvp * MB;
    float *l = m + MB, *alpha = l + MB;
#ifdef ATT_PAIRED
    /* the pair buffers, in attn_ws_floats' order: q's and the weights' (vector rows first, so
     * they stay aligned), then k's and v's block */
    const int64_t d2 = (g->d + 1) / 2, kb2 = (p->kb + 1) / 2;
    float *qp = alpha + MB, *pp = qp + d2 * MB, *kp = pp + kb2 * MB;
    float *vp = kp + (p->kb * d2 + 15) / 16 * 16;
#endif
    const float *q = p->q + b * g->q[0] + h * g->q[1] + i0 * g->q[2];
    for (int64_t e = 0; e < g->d; e++) {
        float *row = qt + e * MB;
        for (int64_t i = 0; i < ni; i++) row[i] = p->scale * q[i * g->q[2] + e * g->q[3]];
        for (int64_t i = ni; i < MB; i++) row[i] = 0.0f;
    }
#ifdef ATT_PAIRED
    att_pair_rows(qt, g->d, qp);
#endif
    for (int c = 0; c < ATT_C; c++) {
        V_STORE(m + c * VW, V_SET1(-INFINITY));
        V_STORE(l + c * VW, V_SET1(0.0f));
    }
    for (int64_t e = 0; e < dvp * MB; e += VW) V_STORE(ot + e, V_SET1(0.0f));
    const float *k = p->k + b * g->k[0] + h / g->group * g->k[1];
    const float *v = p->v + b * g->v[0] + h / g->group * g->v[1];
    /* causal: the blocks past the last query's last key drop everything */
    int64_t keys = p->causal && i0 + ni + p->coff < g->sk ? i0 + ni + p->coff : g->sk;
    if (keys < 0) keys = 0;
    for (int64_t j0 = 0; j0 < keys; j0 += p->kb) {
        const int64_t nb = g->sk - j0 < p->kb ? g->sk - j0 : p->kb;
#ifdef ATT_PAIRED
        /* the block's keys in head-size pairs, then its values in key pairs (their rows are
         * re-read by every query block of this head; converting them here keeps the job
         * self-contained, at a 1/(2 MB) of the block's multiplies) */
        for (int64_t j = 0; j < nb; j++) ATT_ROW_PAIRS(k + (j0 + j) * g->k[2], g->d, kp + j * d2);
        const int64_t nb2 = (nb + 1) / 2;
        for (int64_t j = 0; j < nb2; j++) {
            const float *v0 = v + (j0 + 2 * j) * g->v[2];
            const float *v1 = 2 * j + 1 < nb ? v0 + g->v[2] : NULL;
            for (int64_t e = 0; e < dvp; e += 16) {
                if (e + 16 <= g->dv && e + 16 <= dvp) {
                    ATT_PAIRS(v0 + e, v1 ? v1 + e : NULL, vp + j * dvp + e);
                    continue;
                }
                /* the tail: the padded rows repeat the last element (ec, below) */
                float lo[16], hi[16], w[16];
                for (int64_t x = 0; x < 16; x++) {
                    const int64_t ec = e + x < g->dv ? e + x : g->dv - 1;
                    lo[x] = v0[ec];
                    hi[x] = v1 ? v1[ec] : 0.0f;
                }
                ATT_PAIRS(lo, hi, w);
                for (int64_t x = 0; x < 16 && e + x < dvp; x++) vp[j * dvp + e + x] = w[x];
            }
        }
#endif
        for (int64_t j = 0; j < nb; j += ATT_R) {
            const float *kr[ATT_R];
            for (int r = 0; r < ATT_R; r++) {
                const int64_t key = j0 + j + r < g->sk ? j0 + j + r : g->sk - 1;
                kr[r] = k + key * g->k[2];
            }
#ifdef ATT_PAIRED
            const float *kpr[ATT_R];
            for (int r = 0; r < ATT_R; r++) kpr[r] = kp + (j + r < nb ? j + r : nb - 1) * d2;
            att_scores(qp, kpr, d2, st + j * MB);
            (void)kr;
#else
            att_scores(qt, kr, g->d, st + j * MB);
#endif
        }
        if (p->softcap > 0) att_softcap(st, nb * MB, p->softcap);
        att_masks(p, b, h, i0, ni, j0, nb, st);
        att_softmax(st, nb, m, l, alpha);
#ifdef ATT_PAIRED
        att_pair_rows(st, nb, pp);
#endif
        for (int64_t e0 = 0; e0 < dvp; e0 += ATT_RV) {
            int64_t ec[ATT_RV];
            for (int r = 0; r < ATT_RV; r++) ec[r] = e0 + r < g->dv ? e0 + r : g->dv - 1;
#ifdef ATT_PAIRED
            att_values(ot + e0 * MB, alpha, pp, vp, dvp, nb2, ec);
#else
            att_values(ot + e0 * MB, alpha, st, v + j0 * g->v[2], g->v[2], nb, ec);
#endif
        }
    }
    for (int c = 0; c < ATT_C; c++) V_STORE(l + c * VW, V_DIV(V_SET1(1.0f), V_LOAD(l + c * VW)));
    float *o = p->o + b * g->o[0] + h * g->o[1] + i0 * g->o[2];
    for (int64_t i = 0; i < ni; i++)
        for (int64_t e = 0; e < g->dv; e++) o[i * g->o[2] + e * g->o[3]] = ot[e * MB + i] * l[i];
}

#undef MB
#undef att_scores
#undef att_values
#undef att_masks
#undef att_softmax
#undef att_block
#undef att_pair_rows
