/* The AVX-512 loops of BatchNormTrain, BatchNormGrad and MaxPoolGrad (bn_pool_grad.c plans the
 * nodes and splits them across threads; grad.h has the contracts).
 *
 * The batch-norm loops stream a block of channels image by image. A run of 64 floats or more
 * goes into four float accumulators (one add's latency would otherwise cap a loop at 16 floats
 * per 3 cycles) and from float into double after at most 16 vectors per lane (red_block).
 *
 * MaxPoolGrad takes 16 adjacent outputs of a row at a time: each tap of their windows is a load
 * (tap), a compare and two masked moves, in the reference's tap order with its "first valid,
 * then strictly greater" rule per lane. The gradients are then added one by one in output order,
 * as the reference adds them: overlapping windows (3x3 stride 2) share inputs, and float sums in
 * another order would not match it bit for bit. */
#include "grad.h"

#include <immintrin.h>
#include <stdbool.h>
#include <string.h>

enum { RED_SUM, RED_SQDEV, RED_DSUMS };

/* One vector of a reduction: SUM adds x into a; SQDEV adds (x - m)^2 into a; DSUMS adds dy into
 * a and dy * (x - m) into b. Lanes outside k add nothing. */
static inline __attribute__((always_inline)) void red_step(int mode, __m512 x, __m512 dy, __m512 m,
                                                           __mmask16 k, __m512 *a, __m512 *b) {
    if (mode == RED_SUM) {
        *a = _mm512_add_ps(*a, x);
    } else if (mode == RED_SQDEV) {
        const __m512 d = _mm512_maskz_sub_ps(k, x, m);
        *a = _mm512_fmadd_ps(d, d, *a);
    } else {
        *a = _mm512_add_ps(*a, dy);
        *b = _mm512_fmadd_ps(dy, _mm512_maskz_sub_ps(k, x, m), *b);
    }
}

/* s[0..15] += a (in double) */
static inline __attribute__((always_inline)) void to_double(__m512 a, double *s) {
    _mm512_storeu_pd(s,
                     _mm512_add_pd(_mm512_loadu_pd(s), _mm512_cvtps_pd(_mm512_castps512_ps256(a))));
    _mm512_storeu_pd(s + 8, _mm512_add_pd(_mm512_loadu_pd(s + 8),
                                          _mm512_cvtps_pd(_mm512_extractf32x8_ps(a, 1))));
}

/* The sums of one virtual channel's n floats of one image (x, dy: their first), into its float
 * lanes acc (fresh: from 0), and those into s, t in double when flush. Inlined with n = 16 for
 * the virtual channels of one vector, where the loop's bookkeeping would cost more than the
 * vector. */
static inline __attribute__((always_inline)) void red_vch(int mode, const float *x, const float *dy,
                                                          size_t n, __m512 m, float *acc,
                                                          bool fresh, bool flush, double *s,
                                                          double *t) {
    const __m512 z = _mm512_setzero_ps();
    const __mmask16 all = 0xffff;
    __m512 a0 = fresh ? z : _mm512_loadu_ps(acc), a1 = z, a2 = z, a3 = z;
    __m512 b0 = fresh || mode != RED_DSUMS ? z : _mm512_loadu_ps(acc + 16), b1 = z, b2 = z, b3 = z;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        red_step(mode, _mm512_loadu_ps(x + i), _mm512_loadu_ps(dy + i), m, all, &a0, &b0);
        red_step(mode, _mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(dy + i + 16), m, all, &a1, &b1);
        red_step(mode, _mm512_loadu_ps(x + i + 32), _mm512_loadu_ps(dy + i + 32), m, all, &a2, &b2);
        red_step(mode, _mm512_loadu_ps(x + i + 48), _mm512_loadu_ps(dy + i + 48), m, all, &a3, &b3);
    }
    /* the four only where the loop above ran (adding zeros is not free: x + 0 is not x for -0) */
    __m512 a = a0, b = b0;
    if (n >= 64) {
        a = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
        b = _mm512_add_ps(_mm512_add_ps(b0, b1), _mm512_add_ps(b2, b3));
    }
    for (; i + 16 <= n; i += 16)
        red_step(mode, _mm512_loadu_ps(x + i), _mm512_loadu_ps(dy + i), m, all, &a, &b);
    if (i < n) {
        const __mmask16 k = (__mmask16)((1u << (n - i)) - 1u);
        red_step(mode, _mm512_maskz_loadu_ps(k, x + i), _mm512_maskz_loadu_ps(k, dy + i), m, k, &a,
                 &b);
    }
    if (flush) {
        to_double(a, s);
        if (mode == RED_DSUMS) to_double(b, t);
    } else {
        _mm512_storeu_ps(acc, a);
        if (mode == RED_DSUMS) _mm512_storeu_ps(acc + 16, b);
    }
}

/* Virtual channel v's per-lane parameters from the per-channel values p (idx: lane / area) */
static inline __attribute__((always_inline)) __m512 lanes_of(const grad_block *b, const float *p,
                                                             size_t v, __m512i idx) {
    if (b->group == 1) return _mm512_set1_ps(p[v]);
    const size_t ch = v * b->group, n = b->channels - ch < b->group ? b->channels - ch : b->group;
    return _mm512_permutexvar_ps(idx, _mm512_maskz_loadu_ps((__mmask16)((1u << n) - 1u), p + ch));
}

static inline __attribute__((always_inline)) __m512i lane_index(const grad_block *b) {
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    /* area is 1, 2, 4 or 8 where group > 1 */
    const int shift = b->area == 1 ? 0 : b->area == 2 ? 1 : b->area == 4 ? 2 : 3;
    return _mm512_srli_epi32(iota, (unsigned)shift);
}

/* The reductions go image by image along the block, each virtual channel's float lanes kept in
 * acc between images and added into double after every `every` images, or every CHUNK floats of
 * a long run: at most 16 vectors into a float lane. dscale and dB of a 16 x 64 x 32 x 32 batch
 * (16384 values a channel) then land within 1.5e-5 of the reference's double sums, an ulp of
 * the largest (200). */
#define CHUNK 1024

static inline __attribute__((always_inline)) void red_block(int mode, const grad_block *b,
                                                            const float *mp, double *s, double *t) {
    const size_t vecs = (b->len + 15) / 16, every = vecs >= 16 ? 1 : 16 / vecs;
    /* virtual channels of one full vector each */
    const size_t ones = b->len == 16 ? b->total / 16 : 0;
    const __m512i idx = lane_index(b);
    memset(s, 0, sizeof(double) * 16 * b->nv);
    if (mode == RED_DSUMS) memset(t, 0, sizeof(double) * 16 * b->nv);
    for (size_t q = 0; q < b->runs; q++) {
        const float *x = b->x + q * b->stride;
        const float *dy = mode == RED_DSUMS ? b->dy + q * b->stride : x;
        const bool fresh = q % every == 0, flush = (q + 1) % every == 0 || q + 1 == b->runs;
        for (size_t v = 0; v < ones; v++)
            red_vch(mode, x + 16 * v, dy + 16 * v, 16,
                    mode != RED_SUM ? lanes_of(b, mp, v, idx) : _mm512_setzero_ps(),
                    b->acc + 32 * v, fresh, flush, s + 16 * v, t ? t + 16 * v : NULL);
        for (size_t v = ones; v < b->nv; v++) {
            const size_t lo = v * b->len, hi = b->total - lo < b->len ? b->total : lo + b->len;
            const __m512 m = mode != RED_SUM ? lanes_of(b, mp, v, idx) : _mm512_setzero_ps();
            /* every is 1 where a run exceeds CHUNK: each chunk starts and flushes its own sums */
            for (size_t c0 = lo; c0 < hi; c0 += CHUNK)
                red_vch(mode, x + c0, dy + c0, hi - c0 < CHUNK ? hi - c0 : CHUNK, m,
                        b->acc + 32 * v, fresh, flush, s + 16 * v, t ? t + 16 * v : NULL);
        }
    }
}

void train_bn_sum_avx512(const grad_block *b, double *s) {
    red_block(RED_SUM, b, NULL, s, NULL);
}

void train_bn_sqdev_avx512(const grad_block *b, const float *m, double *s) {
    red_block(RED_SQDEV, b, m, s, NULL);
}

void train_bn_dsums_avx512(const grad_block *b, const float *m, double *sdy, double *sdyx) {
    red_block(RED_DSUMS, b, m, sdy, sdyx);
}

/* y = x * a + c over n floats (inlined with n = 16 as red_vch), a product and a sum as the
 * reference rounds them rather than one fused rounding: Y then matches it bit for bit where a and
 * c do */
static inline __attribute__((always_inline)) __m512 affine_of(__m512 x, __m512 a, __m512 c) {
    return _mm512_add_ps(_mm512_mul_ps(x, a), c);
}

static inline __attribute__((always_inline)) void affine_vch(const float *x, float *y, size_t n,
                                                             __m512 va, __m512 vc) {
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        _mm512_storeu_ps(y + i, affine_of(_mm512_loadu_ps(x + i), va, vc));
        _mm512_storeu_ps(y + i + 16, affine_of(_mm512_loadu_ps(x + i + 16), va, vc));
    }
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, affine_of(_mm512_loadu_ps(x + i), va, vc));
    if (i < n) {
        const __mmask16 k = (__mmask16)((1u << (n - i)) - 1u);
        _mm512_mask_storeu_ps(y + i, k, affine_of(_mm512_maskz_loadu_ps(k, x + i), va, vc));
    }
}

void train_bn_affine_avx512(const grad_block *b, const float *a, const float *c) {
    const size_t ones = b->len == 16 ? b->total / 16 : 0;
    const __m512i idx = lane_index(b);
    for (size_t q = 0; q < b->runs; q++) {
        const float *x = b->x + q * b->stride;
        float *y = b->out + q * b->stride;
        for (size_t v = 0; v < ones; v++)
            affine_vch(x + 16 * v, y + 16 * v, 16, lanes_of(b, a, v, idx), lanes_of(b, c, v, idx));
        for (size_t v = ones; v < b->nv; v++) {
            const size_t lo = v * b->len, hi = b->total - lo < b->len ? b->total : lo + b->len;
            affine_vch(x + lo, y + lo, hi - lo, lanes_of(b, a, v, idx), lanes_of(b, c, v, idx));
        }
    }
}

static inline __attribute__((always_inline)) __m512 dx_of(__m512 dy, __m512 x, __m512 m, __m512 a,
                                                          __m512 b, __m512 c) {
    return _mm512_fmadd_ps(a, dy, _mm512_fmadd_ps(b, _mm512_sub_ps(x, m), c));
}

/* dx = a * dy + b * (x - m) + c over n floats (inlined with n = 16 as red_vch) */
static inline __attribute__((always_inline)) void dx_vch(const float *x, const float *dy, float *dx,
                                                         size_t n, __m512 vm, __m512 va, __m512 vb,
                                                         __m512 vc) {
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        _mm512_storeu_ps(dx + i,
                         dx_of(_mm512_loadu_ps(dy + i), _mm512_loadu_ps(x + i), vm, va, vb, vc));
        _mm512_storeu_ps(dx + i + 16, dx_of(_mm512_loadu_ps(dy + i + 16),
                                            _mm512_loadu_ps(x + i + 16), vm, va, vb, vc));
    }
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dx + i,
                         dx_of(_mm512_loadu_ps(dy + i), _mm512_loadu_ps(x + i), vm, va, vb, vc));
    if (i < n) {
        const __mmask16 k = (__mmask16)((1u << (n - i)) - 1u);
        _mm512_mask_storeu_ps(dx + i, k,
                              dx_of(_mm512_maskz_loadu_ps(k, dy + i),
                                    _mm512_maskz_loadu_ps(k, x + i), vm, va, vb, vc));
    }
}

void train_bn_dx_avx512(const grad_block *b, const float *m, const float *a, const float *bb,
                        const float *c) {
    const size_t ones = b->len == 16 ? b->total / 16 : 0;
    const __m512i idx = lane_index(b);
    for (size_t q = 0; q < b->runs; q++) {
        const float *x = b->x + q * b->stride, *dy = b->dy + q * b->stride;
        float *dx = b->out + q * b->stride;
        for (size_t v = 0; v < ones; v++)
            dx_vch(x + 16 * v, dy + 16 * v, dx + 16 * v, 16, lanes_of(b, m, v, idx),
                   lanes_of(b, a, v, idx), lanes_of(b, bb, v, idx), lanes_of(b, c, v, idx));
        for (size_t v = ones; v < b->nv; v++) {
            const size_t lo = v * b->len, hi = b->total - lo < b->len ? b->total : lo + b->len;
            dx_vch(x + lo, dy + lo, dx + lo, hi - lo, lanes_of(b, m, v, idx),
                   lanes_of(b, a, v, idx), lanes_of(b, bb, v, idx), lanes_of(b, c, v, idx));
        }
    }
}

/* ---- MaxPoolGrad ---------------------------------------------------------------------------- */

/* The taps of one (ky, kx) for 16 outputs of P planes (1 or 4) whose windows' validity is the
 * same: four compare-and-move chains side by side keep the vector units busy where one waits on
 * each compare (the stem pool's gradient of a 16 x 64 x 32 x 32 batch: 1.06 ms one plane at a
 * time, 0.57 ms four). The 16 lanes sit at columns c + S * l of each plane's row: stride 1 is one
 * masked load, stride 2 two loads and a permute of their even floats (with a gather per tap the
 * same pool took 1.55 ms), other strides (S = 0) a gather of the columns xc. */
static inline __attribute__((always_inline)) void tap(int P, int S, const float *row, size_t in,
                                                      int32_t iw, int32_t c, __m512i xc,
                                                      __mmask16 valid, __mmask16 have, __m512i ix,
                                                      __m512 *bv, __m512i *bi) {
    __mmask16 ka = valid, kb = 0;
    if (S == 2) {
        /* the columns c .. c + 31 that lie in the row */
        const int64_t lo = c < 0 ? -(int64_t)c : 0, hi = (int64_t)iw - c < 32 ? iw - c : 32;
        const uint64_t m = (hi >= 32 ? 0xffffffffull : (1ull << hi) - 1) & ~((1ull << lo) - 1);
        ka = (__mmask16)m;
        kb = (__mmask16)(m >> 16);
    }
    const __m512i even =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    for (int p = 0; p < P; p++) {
        const float *r = row + (size_t)p * in;
        __m512 v;
        if (S == 1)
            v = _mm512_maskz_loadu_ps(ka, r + c);
        else if (S == 2)
            v = _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(ka, r + c), even,
                                       _mm512_maskz_loadu_ps(kb, r + c + 16));
        else
            v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), valid, xc, r, 4);
        const __mmask16 take =
            _mm512_mask_cmp_ps_mask(valid, v, bv[p], _CMP_GT_OQ) | (valid & ~have);
        bv[p] = _mm512_mask_mov_ps(bv[p], take, v);
        bi[p] = _mm512_mask_mov_epi32(bi[p], take, ix);
    }
}

/* P planes from x, dy into dx; `next` planes follow them in this call, whose inputs are
 * prefetched a row's share at a time: in a training step they come from DRAM (cold caches, the
 * same pool: median 0.62 ms against 0.71 ms without). */
static inline __attribute__((always_inline)) void planes(int P, int S, const grad_pool2d *g,
                                                         const float *x, const float *dy, float *dx,
                                                         size_t next) {
    const size_t in = (size_t)g->ih * (size_t)g->iw, on = (size_t)g->oh * (size_t)g->ow;
    memset(dx, 0, sizeof(float) * in * (size_t)P);
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i zero = _mm512_setzero_si512(), iw = _mm512_set1_epi32(g->iw);
    const int32_t sw = S ? S : g->sw;
    int32_t best[4][16];
    for (int32_t oy = 0; oy < g->oh; oy++) {
        const int32_t y0 = oy * g->sh - g->ph;
        /* the taps ky of this row that fall inside the input */
        const int32_t ky_lo = y0 >= 0 ? 0 : (-y0 + g->dh - 1) / g->dh;
        const int32_t ky_hi = y0 >= g->ih                            ? 0
                              : (g->ih - 1 - y0) / g->dh + 1 < g->kh ? (g->ih - 1 - y0) / g->dh + 1
                                                                     : g->kh;
        if (next) {
            /* this row's share of the next `next` planes */
            const size_t nx = next * in, ny = next * on, o = (size_t)oy, h = (size_t)g->oh;
            for (size_t i = o * nx / h; i < (o + 1) * nx / h; i += 16) {
                _mm_prefetch((const char *)(x + P * in + i), _MM_HINT_T0);
                __builtin_prefetch(dx + P * in + i, 1, 3);
            }
            for (size_t i = o * ny / h; i < (o + 1) * ny / h; i += 16)
                _mm_prefetch((const char *)(dy + P * on + i), _MM_HINT_T0);
        }
        for (int32_t ox0 = 0; ox0 < g->ow; ox0 += 16) {
            const int32_t lanes = g->ow - ox0 < 16 ? g->ow - ox0 : 16;
            const __mmask16 lm = (__mmask16)((1u << lanes) - 1u);
            /* input column of tap kx = 0 per lane */
            const int32_t c00 = ox0 * sw - g->pw;
            const __m512i xc0 = _mm512_add_epi32(_mm512_mullo_epi32(iota, _mm512_set1_epi32(sw)),
                                                 _mm512_set1_epi32(c00));
            __m512 bv[4];
            __m512i bi[4];
            for (int p = 0; p < P; p++) {
                bv[p] = _mm512_setzero_ps();
                bi[p] = _mm512_set1_epi32(-1);
            }
            __mmask16 have = 0;
            for (int32_t ky = ky_lo; ky < ky_hi; ky++) {
                const int32_t y = y0 + ky * g->dh;
                const float *row = x + (size_t)y * (size_t)g->iw;
                const __m512i rowi = _mm512_set1_epi32(y * g->iw);
                for (int32_t kx = 0; kx < g->kw; kx++) {
                    const __m512i xc = _mm512_add_epi32(xc0, _mm512_set1_epi32(kx * g->dw));
                    const __mmask16 valid = _mm512_mask_cmplt_epi32_mask(
                        _mm512_mask_cmpge_epi32_mask(lm, xc, zero), xc, iw);
                    if (!valid) continue;
                    tap(P, S, row, in, g->iw, c00 + kx * g->dw, xc, valid, have,
                        _mm512_add_epi32(rowi, xc), bv, bi);
                    have |= valid;
                }
            }
            for (int p = 0; p < P; p++) _mm512_storeu_si512(best[p], bi[p]);
            const float *dyr = dy + (size_t)oy * (size_t)g->ow + ox0;
            if (have == lm) { /* every window has an input (no window all padding) */
                for (int32_t l = 0; l < lanes; l++)
                    for (int p = 0; p < P; p++)
                        dx[(size_t)p * in + (size_t)best[p][l]] += dyr[(size_t)p * on + l];
                continue;
            }
            for (int32_t l = 0; l < lanes; l++)
                if (have >> l & 1)
                    for (int p = 0; p < P; p++)
                        dx[(size_t)p * in + (size_t)best[p][l]] += dyr[(size_t)p * on + l];
        }
    }
}

static void planes_of(int S, const grad_pool2d *g, const float *x, const float *dy, float *dx,
                      size_t count) {
    const size_t in = (size_t)g->ih * (size_t)g->iw, on = (size_t)g->oh * (size_t)g->ow;
    size_t p = 0;
#define PLANES(P, S)                                                                               \
    planes(P, S, g, x + p * in, dy + p * on, dx + p * in, count - p - P < 4 ? count - p - P : 4)
    if (S == 1) {
        for (; p + 4 <= count; p += 4) PLANES(4, 1);
        for (; p < count; p++) PLANES(1, 1);
    } else if (S == 2) {
        for (; p + 4 <= count; p += 4) PLANES(4, 2);
        for (; p < count; p++) PLANES(1, 2);
    } else {
        for (; p + 4 <= count; p += 4) PLANES(4, 0);
        for (; p < count; p++) PLANES(1, 0);
    }
#undef PLANES
}

void train_max_pool_planes_avx512(const grad_pool2d *g, const float *x, const float *dy, float *dx,
                                  size_t count) {
    planes_of(g->sw == 1 || g->sw == 2 ? g->sw : 0, g, x, dy, dx, count);
}
