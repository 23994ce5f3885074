/* The run-time half of the Resize / Upsample variants (data_resize.h): output rows split across
 * threads, nearest as copies through the index tables, linear as a vertical blend then the column
 * taps. Called by data_resize.c's run and by the libraries `anvil compile` emits, so both compute
 * the same; uses only what src/emit/shim offers. */
#include "data_resize.h"
#include "kernels/kernels.h"

#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

typedef struct rz_job {
    const rz_state *s;
    const char *x;
    char *y;
    float *ws;
    size_t rows, parts;
} rz_job;

/* One output row of nearest: dst[o] = src[mw[o]]. */
static void rz_nearest_row(const rz_state *s, char *dst, const char *src) {
    const size_t ow = (size_t)s->ow, es = s->es;
    const int64_t *mw = s->mw;
    if (s->w_identity) {
        memcpy(dst, src, ow * es);
        return;
    }
    if (s->factor == 2 && es == 4) {
        const uint32_t *in = (const uint32_t *)src;
        uint32_t *out = (uint32_t *)dst;
        size_t i = 0;
#ifdef __SSE2__
        for (; i + 4 <= ow / 2; i += 4) {
            __m128i v = _mm_loadu_si128((const __m128i *)(in + i));
            _mm_storeu_si128((__m128i *)(out + 2 * i), _mm_unpacklo_epi32(v, v));
            _mm_storeu_si128((__m128i *)(out + 2 * i + 4), _mm_unpackhi_epi32(v, v));
        }
#endif
        for (; i < ow / 2; i++) {
            uint32_t v = in[i];
            out[2 * i] = v;
            out[2 * i + 1] = v;
        }
        return;
    }
    switch (es) {
    case 1:
        for (size_t o = 0; o < ow; o++) dst[o] = src[mw[o]];
        break;
    case 2:
        for (size_t o = 0; o < ow; o++) ((uint16_t *)dst)[o] = ((const uint16_t *)src)[mw[o]];
        break;
    case 4:
        for (size_t o = 0; o < ow; o++) ((uint32_t *)dst)[o] = ((const uint32_t *)src)[mw[o]];
        break;
    case 8:
        for (size_t o = 0; o < ow; o++) ((uint64_t *)dst)[o] = ((const uint64_t *)src)[mw[o]];
        break;
    default:
        for (size_t o = 0; o < ow; o++) memcpy(dst + o * es, src + (size_t)mw[o] * es, es);
        break;
    }
}

/* Output rows [begin, end) of all planes (row r: plane r / oh, output row r % oh). A row whose
 * source is the previous row's copies that output row instead of gathering again. */
static void rz_nearest_rows(void *arg, size_t begin, size_t end) {
    const rz_job *j = arg;
    const rz_state *s = j->s;
    const size_t oh = (size_t)s->oh, row_out = (size_t)s->ow * s->es;
    const size_t row_in = (size_t)s->iw * s->es, plane_in = (size_t)s->ih * row_in;
    for (size_t r = begin; r < end; r++) {
        size_t p = r / oh, oy = r % oh;
        char *dst = j->y + r * row_out;
        if (r > begin && oy > 0 && s->mh[oy] == s->mh[oy - 1]) {
            memcpy(dst, dst - row_out, row_out);
            continue;
        }
        rz_nearest_row(s, dst, j->x + p * plane_in + (size_t)s->mh[oy] * row_in);
    }
}

/* Part t of the output rows with its own row of workspace: blend the two source rows, then
 * gather the columns. */
static void rz_linear_parts(void *arg, size_t begin, size_t end) {
    const rz_job *j = arg;
    const rz_state *s = j->s;
    const size_t oh = (size_t)s->oh, iw = (size_t)s->iw, ow = (size_t)s->ow;
    const float *x = (const float *)j->x;
    float *y = (float *)j->y;
    for (size_t t = begin; t < end; t++) {
        float *tmp = j->ws + t * s->ws_stride;
        size_t lo = j->rows * t / j->parts, hi = j->rows * (t + 1) / j->parts;
        for (size_t r = lo; r < hi; r++) {
            size_t p = r / oh, oy = r % oh;
            const float *plane = x + p * (size_t)s->ih * iw;
            const float *r0 = plane + (size_t)s->y0[oy] * iw, *r1 = plane + (size_t)s->y1[oy] * iw;
            float *dst = y + r * ow, *row = s->w_resized ? tmp : dst;
            const float a = s->wy0[oy], b = s->wy1[oy];
            if (s->avx512) {
                data_resize_linear_row_avx512(&s->hplan, r0, r1, a, b, s->w_resized, tmp, dst);
                continue;
            }
            if (b == 0) {
                if (a == 1 && s->w_resized)
                    row = (float *)r0;
                else
                    for (size_t i = 0; i < iw; i++) row[i] = a * r0[i];
            } else {
                for (size_t i = 0; i < iw; i++) row[i] = a * r0[i] + b * r1[i];
            }
            if (!s->w_resized) continue;
            const int64_t *x0 = s->x0, *x1 = s->x1;
            const float *w0 = s->wx0, *w1 = s->wx1;
            for (size_t o = 0; o < ow; o++) dst[o] = w0[o] * row[x0[o]] + w1[o] * row[x1[o]];
        }
    }
}

void data_resize_run_rows(const rz_state *s, const char *x, char *y, float *ws, op_ctx *ctx) {
    size_t rows = (size_t)s->planes * (size_t)s->oh;
    size_t bytes = rows * (size_t)s->ow * s->es;
    if (bytes == 0) return;
    rz_job j = {.s = s, .x = x, .y = y, .ws = ws, .rows = rows};
    op_ctx *c = data_par(ctx, bytes);
    if (s->mh) {
        op_parallel_for(c, rows, rz_nearest_rows, &j);
        return;
    }
    int T = op_ctx_threads(c);
    if (T > s->threads) T = s->threads;
    if ((size_t)T > rows) T = (int)rows;
    if (T < 1) T = 1;
    j.parts = (size_t)T;
    op_parallel_for(T > 1 ? c : NULL, j.parts, rz_linear_parts, &j);
}
