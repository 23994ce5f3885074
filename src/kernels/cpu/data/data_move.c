/* The run-time halves of the data family's copies (data_move.h): the segment engine (Concat,
 * Split), the strided views (Slice, Expand, Tile), Gather and Pad. Called by the variants' run in
 * data_copy.c and data_pad.c and by the libraries `anvil compile` emits, so both compute the
 * same; uses only what src/emit/shim offers (op_parallel_for). data_copy.c's and
 * data_pad.c's headers describe the engines. */
#include "data_move.h"
#include "kernels/kernels.h"

static size_t dm_ceil_div(size_t a, size_t b) {
    return (a + b - 1) / b;
}

/* ---- segments ---- */

typedef struct dc_seg_job {
    const dc_seg_state *s;
    char *dense;       /* Concat: written; Split: read */
    char *const *part; /* per part: its data (Split: NULL for an omitted output) */
    bool split;
    size_t total;
} dc_seg_job;

/* Dense bytes [begin * DC_BLOCK, end * DC_BLOCK): walk row by row and segment by segment. */
static void dc_seg_blocks(void *arg, size_t begin, size_t end) {
    const dc_seg_job *j = arg;
    const dc_seg_state *s = j->s;
    size_t cur = begin * DC_BLOCK, stop = end * DC_BLOCK < j->total ? end * DC_BLOCK : j->total;
    size_t o = cur / s->row_bytes, r = cur % s->row_bytes;
    int i = 0;
    while (i + 1 < s->parts && s->seg_start[i + 1] <= r) i++;
    while (cur < stop) {
        size_t in_seg = r - s->seg_start[i], n = s->seg_bytes[i] - in_seg;
        if (n > stop - cur) n = stop - cur;
        if (n) {
            char *p = j->part[i];
            size_t at = o * s->seg_bytes[i] + in_seg;
            if (!j->split)
                memcpy(j->dense + cur, p + at, n);
            else if (p)
                memcpy(p + at, j->dense + cur, n);
        }
        cur += n;
        r += n;
        if (r == s->seg_start[i] + s->seg_bytes[i] && ++i == s->parts) {
            i = 0;
            r = 0;
            o++;
        }
    }
}

void data_seg_run(const dc_seg_state *s, char *dense, char *const *part, bool split, op_ctx *ctx) {
    size_t total = s->outer * s->row_bytes;
    if (total == 0) return;
    dc_seg_job j = {.s = s, .dense = dense, .part = part, .split = split, .total = total};
    op_parallel_for(data_par(ctx, total), dm_ceil_div(total, DC_BLOCK), dc_seg_blocks, &j);
}

/* ---- strided views ---- */

typedef struct dc_view_job {
    const dc_view *v;
    const char *src;
    char *dst;
} dc_view_job;

static void dc_view_units(void *arg, size_t begin, size_t end) {
    const dc_view_job *j = arg;
    const dc_view *v = j->v;
    const int last = v->rank - 1;
    const size_t inner = (size_t)v->dims[last], es = v->es;
    int64_t idx[DC_MAX], off = 0;
    size_t row = begin / v->pieces;
    size_t rest = row;
    for (int d = last - 1; d >= 0; d--) {
        idx[d] = (int64_t)(rest % (size_t)v->dims[d]);
        rest /= (size_t)v->dims[d];
        off += idx[d] * v->stride[d];
    }
    for (size_t u = begin; u < end; u++) {
        if (u / v->pieces != row) {
            row++;
            for (int d = last - 1; d >= 0; d--) {
                off += v->stride[d];
                if (++idx[d] < v->dims[d]) break;
                off -= idx[d] * v->stride[d];
                idx[d] = 0;
            }
        }
        size_t lo = (u % v->pieces) * v->piece, hi = lo + v->piece < inner ? lo + v->piece : inner;
        if (lo >= hi) continue;
        const char *src = j->src + (v->offset + off + (int64_t)lo * v->stride[last]) * (int64_t)es;
        data_strided_copy(j->dst + (row * inner + lo) * es, src, hi - lo, v->stride[last], es);
    }
}

void data_view_run(const dc_view *v, const char *src, char *dst, op_ctx *ctx) {
    if (v->numel == 0) return;
    dc_view_job j = {.v = v, .src = src, .dst = dst};
    op_parallel_for(data_par(ctx, v->numel * v->es), v->rows * v->pieces, dc_view_units, &j);
}

/* ---- Gather ---- */

bool data_gather_check(const dc_gather_state *s, const void *idx, size_t *pos) {
    const int64_t lim = s->axis_dim;
    for (size_t t = 0; t < s->q; t++) {
        int64_t v = dc_gather_index(s, idx, t);
        if (v < -lim || v >= lim) {
            *pos = t;
            return false;
        }
    }
    return true;
}

typedef struct dc_gather_job {
    const dc_gather_state *s;
    const char *src;
    char *dst;
    const void *idx;
} dc_gather_job;

/* Rows [begin, end) of (outer index, index): one slice of inner_bytes each. */
static void dc_gather_rows(void *arg, size_t begin, size_t end) {
    const dc_gather_job *j = arg;
    const dc_gather_state *s = j->s;
    const size_t ib = s->inner_bytes;
    size_t o = begin / s->q, t = begin % s->q;
    for (size_t row = begin; row < end; row++) {
        int64_t i = dc_gather_index(s, j->idx, t);
        if (i < 0) i += s->axis_dim;
        const char *src = j->src + ((size_t)o * (size_t)s->axis_dim + (size_t)i) * ib;
        if (ib <= 8)
            core_elem_copy(j->dst + row * ib, src, ib);
        else
            memcpy(j->dst + row * ib, src, ib);
        if (++t == s->q) {
            t = 0;
            o++;
        }
    }
}

void data_gather_run(const dc_gather_state *s, const char *src, const void *idx, char *dst,
                     op_ctx *ctx) {
    size_t rows = s->outer * s->q;
    if (rows == 0 || s->inner_bytes == 0) return;
    dc_gather_job j = {.s = s, .src = src, .dst = dst, .idx = idx};
    op_parallel_for(data_par(ctx, rows * s->inner_bytes), rows, dc_gather_rows, &j);
}

/* ---- Pad ---- */

typedef struct dp_job {
    const dp_state *s;
    const char *x;
    char *y;
    const char *fill_row; /* ow elements of the constant */
} dp_job;

static void dp_rows(void *arg, size_t begin, size_t end) {
    const dp_job *j = arg;
    const dp_state *s = j->s;
    const int last = s->rank - 1;
    const size_t es = s->es, ow = (size_t)s->out_dims[last], row_bytes = ow * es;
    const int64_t *mw = s->map[last];
    /* the leading output indices of row `begin` */
    int64_t idx[DM_MAX_RANK];
    size_t rest = begin;
    for (int d = last - 1; d >= 0; d--) {
        idx[d] = (int64_t)(rest % (size_t)s->out_dims[d]);
        rest /= (size_t)s->out_dims[d];
    }
    for (size_t r = begin; r < end; r++) {
        char *y = j->y + r * row_bytes;
        int64_t src = 0;
        bool constant_row = false;
        for (int d = 0; d < last; d++) {
            int64_t si = s->map[d][idx[d]];
            if (si < 0) constant_row = true;
            src += si * s->istr[d];
        }
        for (int d = last - 1; d >= 0; d--) {
            if (++idx[d] < s->out_dims[d]) break;
            idx[d] = 0;
        }
        if (constant_row) {
            memcpy(y, j->fill_row, row_bytes);
            continue;
        }
        const char *xrow = j->x + (size_t)src * es;
        size_t lead = (size_t)s->lead, kept = (size_t)s->kept;
        for (size_t o = 0; o < ow; o++) {
            if (o == lead && kept > 0) {
                memcpy(y + o * es, xrow + (size_t)s->crop * es, kept * es);
                o += kept - 1;
                continue;
            }
            int64_t si = mw[o];
            core_elem_copy(y + o * es, si < 0 ? j->fill_row : xrow + (size_t)si * es, es);
        }
    }
}

void data_pad_run_rows(const dp_state *s, const char *x, char *y, const void *fill_in,
                       size_t fill_numel, char *ws, op_ctx *ctx) {
    size_t total = 1;
    for (int d = 0; d < s->rank; d++) total *= (size_t)s->out_dims[d];
    if (total == 0) return;
    const size_t es = s->es, ow = (size_t)s->out_dims[s->rank - 1];
    unsigned char fill[16];
    memcpy(fill, s->attr_fill, sizeof fill);
    if (s->fill_from_input) {
        memset(fill, 0, sizeof fill);
        if (fill_in && fill_numel >= 1) memcpy(fill, fill_in, es);
    }
    char *fill_row = ws;
    bool zero = true;
    for (size_t i = 0; i < es; i++) zero = zero && fill[i] == 0;
    if (zero) {
        memset(fill_row, 0, ow * es);
    } else {
        memcpy(fill_row, fill, es);
        /* doubling copies: log2(ow) memcpy calls */
        for (size_t have = 1; have < ow; have *= 2)
            memcpy(fill_row + have * es, fill_row, (have * 2 <= ow ? have : ow - have) * es);
    }
    dp_job j = {.s = s, .x = x, .y = y, .fill_row = fill_row};
    op_parallel_for(data_par(ctx, total * es), total / ow, dp_rows, &j);
}
