/* The rnn family: fp32 LSTM, GRU and RNN as "<op>_f32_avx512", "<op>_f32_avx2" and "<op>_f32"
 * (portable C and libm, everywhere).
 *
 * The reference kernel computes every timestep with two matrix-vector products per batch row.
 * Here the input projection of all timesteps is one GEMM (X [T*B, I] times W^T [I, D*G*H], both
 * directions at once, with Wb + Rb folded into its bias), so only the recurrent product
 * h_{t-1} R^T remains inside the loop, for all batch rows of a direction at once, followed by
 * the vectorized gates (rnn.h). W and R are laid out once in prepare: transposed for the small
 * product kernel (rnn_isa.gemm_small) where there are few rows, packed for anvil's GEMM
 * (gemm.h) otherwise. Each gate's block of columns is padded to a multiple of RNN_PAD floats, so
 * the gates only see whole vectors; the padding lanes stay out of every product and output.
 *
 * Directions, and slices of the batch, are independent recurrences: they are the units split
 * across threads (the input projection is split inside anvil's GEMM). Where they are fewer than
 * the threads (one direction of a batch of 1: a GEMV per step, its R^T read from L3 each time),
 * each direction's hidden units are split instead, "stepwise": every step is one fork-join in
 * which a thread multiplies by its columns of R^T (a slice of every gate, laid out apart so that
 * it stays in that core's L2) and runs the gates of its units. h is double-buffered, since the
 * next step's products read all of it.
 *
 * Accepted: constant W, R, B and P (they are laid out in prepare); X, initial_h, initial_c and
 * sequence_lens may change per run. sequence_lens is handled as the reference does (rows past
 * their length keep their state and get zeros in Y; reverse rows start at their own last step).
 * Declined: other dtypes, dynamic shapes, non-default activations, input_forget, empty batch,
 * input or hidden sizes, and a workspace past MAX_WORKSPACE (everything the reference does then
 * stays with it). */
#include "../gemm/gemm.h"
#include "kernels/kernels.h"
#include "rnn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Up to this many rows the products use the ISA's small kernel against W / R transposed in
 * place of anvil's GEMM (whose packing of A and blocking only pay on more rows). Measured on
 * Zen 4, LSTM H 256: the two tie for the recurrent product from 8 to 64 rows; at 1 row (a GEMV)
 * the small kernel is what keeps a step near the L2 bandwidth. */
#define X_SMALL_ROWS 4
#define R_SMALL_ROWS 16
/* The input projection of all steps is held at once (T B D G H floats): past this many bytes
 * of workspace the node stays with the reference, which needs only per-step scratch. */
#define MAX_WORKSPACE ((size_t)1 << 30)
/* Below this many multiply-adds per run the recurrence runs on the calling thread. */
#define PAR_MIN_WORK ((int64_t)1 << 18)
/* The stepwise split (above) needs this many multiply-adds per step and direction to pay for a
 * fork-join per step. */
#define STEP_MIN_WORK ((int64_t)1 << 18)

typedef enum { K_RNN, K_GRU, K_LSTM } rnn_kind;

typedef struct rnn_state {
    const rnn_isa *isa;
    rnn_kind kind;
    int G, D;
    bool reverse, batch_first, lbr;
    float clip; /* INFINITY: none */
    int64_t T, B, I, H, Hp, GHp, DGHp;
    int threads, chunks; /* units of the recurrence: D * chunks batch slices */
    /* > 1: stepwise (above), units D * slices; each slice's R^T columns of gate g for direction
     * d are rts[(d * slices + k) * G + g], [H, width] in panels */
    int slices;
    float **rts;
    /* input projection: xw = X W^T + bias, rows of DGHp */
    bool x_small;
    float *wt; /* [I, DGHp] in panels (x_small) */
    gemm_packed pw;
    const gemm_kernel *kx;
    gemm_blocking bx;
    /* recurrence: per direction, h R^T */
    bool r_small;
    /* per direction: every gate, or for GRU without linear_before_reset the z and r gates [0]
     * and the h gate [1], which multiplies r * h: [H, columns] in panels (r_small), or packed */
    float *rt[2][2];
    gemm_packed pr[2][2];
    const gemm_kernel *kr;
    gemm_blocking br;
    float *bias; /* [DGHp] */
    float *rbh;  /* GRU with linear_before_reset: Rb of the h gate, [D][Hp] */
    float *peep; /* LSTM with P: [D][3 Hp] */
    /* workspace, byte offsets */
    size_t off_xw, off_h, off_h2, off_c, off_rec, off_rh, off_lens, off_gx, off_gr, gr_stride,
        total;
} rnn_state;

/* Input i is a static fp32 tensor of the given rank (and constant, if asked). */
static bool f32_input(const kern_node *kn, int i, int rank, bool constant) {
    const op_tinfo *t = &kn->in[i];
    return t->dtype == ANVIL_DTYPE_FLOAT32 && ir_shape_is_static(&t->shape) &&
           t->shape.rank == rank && (!constant || t->value);
}

/* The default activations (the only ones the gate kernels compute): absent, or listed by name
 * once or per direction. Sigmoid and Tanh take no alpha / beta. */
static bool default_acts(const ir_node *n, rnn_kind kind, int D) {
    static const char *const defaults[3][3] = {
        {"Tanh", NULL, NULL}, {"Sigmoid", "Tanh", NULL}, {"Sigmoid", "Tanh", "Tanh"}};
    const int nact = kind == K_RNN ? 1 : kind == K_GRU ? 2 : 3;
    const ir_attr *a = ir_node_attr(n, "activations");
    if (!a) return true;
    if (a->type != IR_ATTR_STRINGS || (a->n != (size_t)nact && a->n != (size_t)(nact * D)))
        return false;
    for (size_t k = 0; k < a->n; k++)
        if (!a->strings[k] || strcmp(a->strings[k], defaults[kind][k % (size_t)nact]) != 0)
            return false;
    return true;
}

static bool read_attrs(const ir_node *n, rnn_state *s) {
    s->kind = n->op == IR_OP_LSTM ? K_LSTM : n->op == IR_OP_GRU ? K_GRU : K_RNN;
    s->G = s->kind == K_LSTM ? 4 : s->kind == K_GRU ? 3 : 1;
    const char *dir;
    if (ir_attr_string(n, "direction", "forward", &dir) != ANVIL_OK) return false;
    if (strcmp(dir, "forward") == 0) {
        s->D = 1;
    } else if (strcmp(dir, "reverse") == 0) {
        s->D = 1;
        s->reverse = true;
    } else if (strcmp(dir, "bidirectional") == 0) {
        s->D = 2;
    } else {
        return false;
    }
    if (ir_attr_flag(n, "layout", false, &s->batch_first) != ANVIL_OK) return false;
    s->clip = INFINITY;
    if (ir_node_attr(n, "clip")) {
        if (ir_attr_float(n, "clip", 0.0f, &s->clip) != ANVIL_OK || !(s->clip > 0)) return false;
    }
    bool input_forget = false;
    if (s->kind == K_GRU && ir_attr_flag(n, "linear_before_reset", false, &s->lbr) != ANVIL_OK)
        return false;
    if (s->kind == K_LSTM &&
        (ir_attr_flag(n, "input_forget", false, &input_forget) != ANVIL_OK || input_forget))
        return false;
    return default_acts(n, s->kind, s->D);
}

static size_t align64(size_t b) {
    return (b + 63) & ~(size_t)63;
}

/* Adds a region of n elements of `size` bytes at *off, advancing it; false on overflow. */
static bool region(size_t *off, size_t *at, int64_t n, size_t size) {
    size_t bytes;
    if (n < 0 || !core_mul_size((size_t)n, size, &bytes) || bytes > SIZE_MAX / 2 - *off)
        return false;
    *at = *off;
    *off = align64(*off + bytes);
    return true;
}

/* Everything the node's attributes and shapes decide: false where the variants decline it.
 * Shared by supports, workspace_size and prepare. */
static bool plan(const kern_node *kn, const core_hw *hw, rnn_state *s) {
    memset(s, 0, sizeof *s);
    const ir_node *n = kn->node;
    if (kn->n_in < 3 || !kern_has_input(kn, 0) || !kern_has_input(kn, 1) ||
        !kern_has_input(kn, 2) || !read_attrs(n, s))
        return false;
    if (!f32_input(kn, 0, 3, false) || !f32_input(kn, 1, 3, true) || !f32_input(kn, 2, 3, true))
        return false;
    const int64_t *x = kn->in[0].shape.d, *w = kn->in[1].shape.d, *r = kn->in[2].shape.d;
    s->T = x[s->batch_first ? 1 : 0];
    s->B = x[s->batch_first ? 0 : 1];
    s->I = x[2];
    s->H = r[2];
    const int64_t lim = (int64_t)1 << 24;
    if (s->B < 1 || s->I < 1 || s->H < 1 || s->B > lim || s->I > lim || s->H > lim ||
        s->T > ((int64_t)1 << 40) || w[0] != s->D || r[0] != s->D || w[1] != s->G * s->H ||
        r[1] != s->G * s->H || w[2] != s->I)
        return false;
    const int64_t D = s->D, H = s->H;
    if (kern_has_input(kn, 3)) {
        const int64_t *b = kn->in[3].shape.d;
        if (!f32_input(kn, 3, 2, true) || b[0] != D || b[1] != 2 * s->G * H) return false;
    }
    if (kern_has_input(kn, 4)) {
        const op_tinfo *t = &kn->in[4];
        if ((t->dtype != ANVIL_DTYPE_INT32 && t->dtype != ANVIL_DTYPE_INT64) ||
            !ir_shape_is_static(&t->shape) || t->shape.rank != 1 || t->shape.d[0] != s->B)
            return false;
    }
    for (int i = 5; i <= 6; i++) {
        if (!kern_has_input(kn, i) || (i == 6 && s->kind != K_LSTM)) continue;
        const int64_t *d = kn->in[i].shape.d;
        if (!f32_input(kn, i, 3, false) || d[s->batch_first ? 1 : 0] != D ||
            d[s->batch_first ? 0 : 1] != s->B || d[2] != H)
            return false;
    }
    if (s->kind == K_LSTM && kern_has_input(kn, 7)) {
        const int64_t *p = kn->in[7].shape.d;
        if (!f32_input(kn, 7, 2, true) || p[0] != D || p[1] != 3 * H) return false;
    }
    for (int o = 0; o < kn->n_out; o++)
        if (kern_has_output(kn, o) && kn->out[o].dtype != ANVIL_DTYPE_FLOAT32) return false;

    s->Hp = (H + RNN_PAD - 1) / RNN_PAD * RNN_PAD;
    s->GHp = s->G * s->Hp;
    s->DGHp = D * s->GHp;
    s->threads = kn->threads > 0 ? kn->threads : 1;
    /* batch slices per direction: enough to give every thread a unit, when the work pays */
    const int64_t work = s->T * s->B * H * s->GHp * D;
    int64_t chunks = s->threads / s->D;
    if (chunks > s->B) chunks = s->B;
    if (chunks < 1 || work < PAR_MIN_WORK) chunks = 1;
    /* stepwise where the recurrences leave threads idle; GRU without linear_before_reset needs
     * the whole r * h before its second product, a second sync per step, and stays as it is */
    s->slices = 1;
    int64_t slices = s->threads / D, units_h = s->Hp / RNN_PAD;
    if (slices > units_h) slices = units_h;
    if (D * chunks < s->threads && slices > 1 && s->B <= R_SMALL_ROWS &&
        s->B * H * s->GHp >= STEP_MIN_WORK && !(s->kind == K_GRU && !s->lbr)) {
        s->slices = (int)slices;
        chunks = 1;
    }
    s->chunks = (int)chunks;
    const int64_t rows = s->T * s->B, chunk_rows = (s->B + chunks - 1) / chunks;
    s->x_small = rows <= X_SMALL_ROWS;
    s->r_small = chunk_rows <= R_SMALL_ROWS;
    if (!s->x_small) {
        s->kx = gemm_kernel_default(rows, s->DGHp, s->I, hw);
        s->bx = gemm_blocking_for(kn, s->kx, rows, s->DGHp, s->I, hw, 0, 0, 0);
    }
    if (!s->r_small) {
        s->kr = gemm_kernel_default(chunk_rows, s->GHp, H, hw);
        s->br = gemm_blocking_for(kn, s->kr, chunk_rows, s->GHp, H, hw, 0, 0, 0);
    }

    size_t off = 0, units = (size_t)(D * chunks);
    int64_t states = D * s->B;
    if (!region(&off, &s->off_xw, rows, (size_t)s->DGHp * sizeof(float)) ||
        !region(&off, &s->off_h, states * s->Hp, sizeof(float)) ||
        !region(&off, &s->off_h2, states * s->Hp, sizeof(float)) ||
        !region(&off, &s->off_c, states * s->Hp, sizeof(float)) ||
        !region(&off, &s->off_rec, states * s->GHp, sizeof(float)) ||
        !region(&off, &s->off_rh, states * s->Hp, sizeof(float)) ||
        !region(&off, &s->off_lens, s->B, sizeof(int64_t)))
        return false;
    if (!s->x_small &&
        !region(&off, &s->off_gx, s->threads, align64(gemm_thread_workspace(s->kx, &s->bx))))
        return false;
    if (!s->r_small) {
        s->gr_stride = align64(gemm_thread_workspace(s->kr, &s->br));
        if (!region(&off, &s->off_gr, (int64_t)units, s->gr_stride)) return false;
    }
    s->total = off;
    return s->total <= MAX_WORKSPACE;
}

static bool supports(const kern_node *kn, const core_hw *hw) {
    rnn_state s;
    return plan(kn, hw, &s);
}

static size_t workspace_size(const kern_node *kn) {
    rnn_state s;
    return plan(kn, core_hw_get(), &s) ? s.total : 0;
}

/* ---- prepare --------------------------------------------------------------------------------- */

static void release(void *state) {
    rnn_state *s = state;
    if (!s) return;
    free(s->wt);
    free(s->bias);
    free(s->rbh);
    free(s->peep);
    gemm_packed_free(&s->pw);
    for (int64_t i = 0; s->rts && i < (int64_t)s->D * s->slices * s->G; i++) free(s->rts[i]);
    free(s->rts);
    for (int d = 0; d < 2; d++)
        for (int q = 0; q < 2; q++) {
            free(s->rt[d][q]);
            gemm_packed_free(&s->pr[d][q]);
        }
    free(s);
}

static float *zalloc(int64_t n) {
    return core_calloc((size_t)(n > 0 ? n : 1), sizeof(float));
}

/* src [k, n] (row stride ld) in gemm_small's panels (rnn.h), malloc'd; NULL without memory. */
static float *panels(const float *src, int64_t ld, int64_t k, int64_t n) {
    float *dst = malloc((size_t)(k * n > 0 ? k * n : 1) * sizeof *dst), *o = dst;
    if (!dst) return NULL;
    for (int64_t j0 = 0; j0 < n; j0 += RNN_PANEL) {
        const int64_t pw = n - j0 < RNN_PANEL ? n - j0 : RNN_PANEL;
        for (int64_t p = 0; p < k; p++, o += pw)
            memcpy(o, src + p * ld + j0, (size_t)pw * sizeof *o);
    }
    return dst;
}

/* One part of R^T (columns [off, off + cols) of a [H, GHp] matrix) for the recurrence. */
static anvil_status lay_out_part(rnn_state *s, const float *rd, int64_t d, int q, int64_t off,
                                 int64_t cols) {
    if (!s->r_small) return gemm_pack_b(s->kr, s->H, cols, rd + off, s->GHp, 1, &s->pr[d][q]);
    s->rt[d][q] = panels(rd + off, s->GHp, s->H, cols);
    return s->rt[d][q] ? ANVIL_OK : ANVIL_ERR_OUT_OF_MEMORY;
}

/* Slice k of the hidden units [*j0, *j1), of the slices of a stepwise state: whole vectors. */
static void slice_bounds(const rnn_state *s, int64_t k, int64_t *j0, int64_t *j1) {
    const int64_t v = s->Hp / RNN_PAD;
    *j0 = v * k / s->slices * RNN_PAD;
    *j1 = v * (k + 1) / s->slices * RNN_PAD;
}

/* The stepwise slices of Rt [D][H, GHp] (rts, see rnn_state). */
static anvil_status lay_out_slices(rnn_state *s, const float *rt) {
    const int64_t n = (int64_t)s->D * s->slices * s->G;
    if (!(s->rts = core_calloc((size_t)n, sizeof *s->rts))) return ANVIL_ERR_OUT_OF_MEMORY;
    for (int64_t i = 0; i < n; i++) {
        const int64_t g = i % s->G, k = i / s->G % s->slices, d = i / s->G / s->slices;
        int64_t j0, j1;
        slice_bounds(s, k, &j0, &j1);
        s->rts[i] = panels(rt + d * s->H * s->GHp + g * s->Hp + j0, s->GHp, s->H, j1 - j0);
        if (!s->rts[i]) return ANVIL_ERR_OUT_OF_MEMORY;
    }
    return ANVIL_OK;
}

/* W [D, G H, I] as Wt [I, DGHp] and R [D, G H, H] as Rt [D][H, GHp], gate blocks padded; then
 * in panels for the small kernel, or packed for anvil's GEMM where the rows are many (R in
 * slices when stepwise). */
static anvil_status lay_out_weights(rnn_state *s, const float *W, const float *R) {
    const int64_t D = s->D, G = s->G, H = s->H, I = s->I, Hp = s->Hp, GHp = s->GHp;
    float *wt = zalloc(I * s->DGHp), *rt = zalloc(D * H * GHp);
    if (!wt || !rt) {
        free(wt);
        free(rt);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    for (int64_t d = 0; d < D; d++)
        for (int64_t g = 0; g < G; g++)
            for (int64_t j = 0; j < H; j++) {
                const float *wr = W + ((d * G + g) * H + j) * I;
                const float *rr = R + ((d * G + g) * H + j) * H;
                const int64_t col = g * Hp + j;
                for (int64_t i = 0; i < I; i++) wt[i * s->DGHp + d * GHp + col] = wr[i];
                for (int64_t k = 0; k < H; k++) rt[(d * H + k) * GHp + col] = rr[k];
            }
    anvil_status st = ANVIL_OK;
    if (s->x_small) {
        s->wt = panels(wt, s->DGHp, I, s->DGHp);
        if (!s->wt) st = ANVIL_ERR_OUT_OF_MEMORY;
    } else {
        st = gemm_pack_b(s->kx, I, s->DGHp, wt, s->DGHp, 1, &s->pw);
    }
    free(wt);
    const bool split = s->kind == K_GRU && !s->lbr;
    if (st == ANVIL_OK && s->slices > 1) st = lay_out_slices(s, rt);
    for (int64_t d = 0; d < D && s->slices == 1 && st == ANVIL_OK; d++) {
        const float *rd = rt + d * H * GHp;
        st = lay_out_part(s, rd, d, 0, 0, split ? 2 * Hp : GHp);
        if (st == ANVIL_OK && split) st = lay_out_part(s, rd, d, 1, 2 * Hp, Hp);
    }
    free(rt);
    return st;
}

/* The input projection's bias Wb + Rb, padded; GRU with linear_before_reset keeps Rb of the h
 * gate apart (it is multiplied by r), and P is padded per gate. */
static anvil_status lay_out_vectors(rnn_state *s, const float *Bv, const float *P) {
    const int64_t D = s->D, G = s->G, H = s->H, Hp = s->Hp, GHp = s->GHp;
    s->bias = zalloc(s->DGHp);
    if (s->kind == K_GRU && s->lbr) s->rbh = zalloc(D * Hp);
    if (P) s->peep = zalloc(D * 3 * Hp);
    if (!s->bias || (s->kind == K_GRU && s->lbr && !s->rbh) || (P && !s->peep))
        return ANVIL_ERR_OUT_OF_MEMORY;
    for (int64_t d = 0; d < D && Bv; d++)
        for (int64_t g = 0; g < G; g++)
            for (int64_t j = 0; j < H; j++) {
                const float wb = Bv[d * 2 * G * H + g * H + j];
                const float rb = Bv[d * 2 * G * H + (G + g) * H + j];
                if (s->rbh && g == 2) {
                    s->bias[d * GHp + g * Hp + j] = wb;
                    s->rbh[d * Hp + j] = rb;
                } else {
                    s->bias[d * GHp + g * Hp + j] = wb + rb;
                }
            }
    for (int64_t d = 0; d < D && P; d++)
        for (int64_t q = 0; q < 3; q++)
            for (int64_t j = 0; j < H; j++)
                s->peep[(d * 3 + q) * Hp + j] = P[d * 3 * H + q * H + j];
    return ANVIL_OK;
}

static anvil_status prepare_isa(const kern_node *kn, void **state, const rnn_isa *isa) {
    rnn_state *s = core_calloc(1, sizeof *s);
    if (!s) return ANVIL_ERR_OUT_OF_MEMORY;
    if (!plan(kn, core_hw_get(), s)) {
        free(s);
        return core_err(ANVIL_ERR_UNSUPPORTED, "%s: the rnn variants do not apply",
                        ir_node_label(kn->node));
    }
    s->isa = isa;
    const bool peep = s->kind == K_LSTM && kern_has_input(kn, 7);
    anvil_status st = lay_out_weights(s, kn->in[1].value, kn->in[2].value);
    if (st == ANVIL_OK)
        st = lay_out_vectors(s, kern_has_input(kn, 3) ? kn->in[3].value : NULL,
                             peep ? kn->in[7].value : NULL);
    if (st != ANVIL_OK) {
        release(s);
        return st == ANVIL_ERR_OUT_OF_MEMORY
                   ? core_err(st, "%s: no memory for the laid-out weights", ir_node_label(kn->node))
                   : st;
    }
    kern_node_mark_copied(kn, 1);
    kern_node_mark_copied(kn, 2);
    if (kern_has_input(kn, 3)) kern_node_mark_copied(kn, 3);
    if (peep) kern_node_mark_copied(kn, 7);
    *state = s;
    return ANVIL_OK;
}

/* ---- run ------------------------------------------------------------------------------------ */

typedef struct rnn_job {
    const rnn_state *s;
    const float *h0, *c0; /* NULL: zeros */
    float *y, *yh, *yc;   /* NULL: not wanted */
    const int64_t *lens;
    bool full; /* every length is T */
    char *ws;
    int64_t step; /* stepwise: the step being run */
} rnn_job;

/* c[nb, cols] (row stride GHp) = a[nb, H] (row stride Hp) times direction d's part of R^T:
 * part 0 starts at column 0, part 1 (GRU's h gate) at 2 Hp. */
static void rec_product(const rnn_state *s, int64_t d, int part, int64_t nb, const float *a,
                        float *c, int64_t cols, void *gws) {
    if (s->r_small) {
        s->isa->gemm_small(nb, cols, s->H, a, s->Hp, s->rt[d][part], NULL, c, s->GHp);
        return;
    }
    gemm_problem p = {0};
    p.m = nb;
    p.n = cols;
    p.k = s->H;
    p.a = a;
    p.rs_a = s->Hp;
    p.cs_a = 1;
    p.pb = &s->pr[d][part];
    p.c = c;
    p.ldc = s->GHp;
    p.ep = gemm_epilogue_none();
    gemm_run_serial(s->kr, &s->br, &p, gws);
}

/* Where (batch row b, step t, direction d) starts in Y. */
static int64_t y_at(const rnn_state *s, int64_t b, int64_t t, int64_t d) {
    return (s->batch_first ? (b * s->T + t) * s->D + d : (t * s->D + d) * s->B + b) * s->H;
}

/* Where (batch row b, direction d) starts in initial_h, initial_c, Y_h and Y_c. */
static int64_t state_at(const rnn_state *s, int64_t b, int64_t d) {
    return (s->batch_first ? b * s->D + d : d * s->B + b) * s->H;
}

static void unit_run(const rnn_job *j, int64_t u) {
    const rnn_state *s = j->s;
    const rnn_isa *isa = s->isa;
    const int64_t T = s->T, B = s->B, H = s->H, Hp = s->Hp, GHp = s->GHp;
    const int64_t d = u / s->chunks, ch = u % s->chunks;
    const int64_t b0 = B * ch / s->chunks, b1 = B * (ch + 1) / s->chunks, nb = b1 - b0;
    const bool rev = s->reverse || d == 1, bf = s->batch_first;
    const bool split = s->kind == K_GRU && !s->lbr;
    float *xw = (float *)(j->ws + s->off_xw);
    float *h = (float *)(j->ws + s->off_h) + (d * B + b0) * Hp;
    float *c = (float *)(j->ws + s->off_c) + (d * B + b0) * Hp;
    float *rec = (float *)(j->ws + s->off_rec) + (d * B + b0) * GHp;
    float *rh = (float *)(j->ws + s->off_rh) + (d * B + b0) * Hp;
    void *gws = s->r_small ? NULL : j->ws + s->off_gr + (size_t)u * s->gr_stride;
    const float *peep = s->peep ? s->peep + d * 3 * Hp : NULL;
    const float *rbh = s->rbh ? s->rbh + d * Hp : NULL;

    memset(h, 0, (size_t)(nb * Hp) * sizeof *h);
    memset(c, 0, (size_t)(nb * Hp) * sizeof *c);
    memset(rh, 0, (size_t)(nb * Hp) * sizeof *rh);
    for (int64_t b = b0; b < b1; b++) {
        const int64_t st = state_at(s, b, d);
        if (j->h0) memcpy(h + (b - b0) * Hp, j->h0 + st, (size_t)H * sizeof *h);
        if (j->c0) memcpy(c + (b - b0) * Hp, j->c0 + st, (size_t)H * sizeof *c);
    }
    for (int64_t step = 0; step < T; step++) {
        rec_product(s, d, 0, nb, h, rec, split ? 2 * Hp : GHp, gws);
        for (int pass = 0; pass < (split ? 2 : 1); pass++) {
            if (pass == 1) rec_product(s, d, 1, nb, rh, rec + 2 * Hp, Hp, gws);
            for (int64_t b = b0; b < b1; b++) {
                const int64_t len = j->lens[b], row = b - b0;
                if (step >= len) continue;
                const int64_t t = rev ? len - 1 - step : step;
                float *xr = xw + (bf ? b * T + t : t * B + b) * s->DGHp + d * GHp;
                const float *rr = rec + row * GHp;
                float *hr = h + row * Hp;
                switch (s->kind) {
                case K_LSTM:
                    isa->lstm_row(Hp, Hp, xr, rr, peep, c + row * Hp, hr, s->clip);
                    break;
                case K_RNN:
                    isa->rnn_row(Hp, xr, rr, hr, s->clip);
                    break;
                case K_GRU:
                    if (!split)
                        isa->gru_lbr_row(Hp, Hp, xr, rr, rbh, hr, s->clip);
                    else if (pass == 0)
                        isa->gru_zr_row(Hp, xr, rr, hr, rh + row * Hp, s->clip);
                    else
                        isa->gru_h_row(Hp, xr + 2 * Hp, rr + 2 * Hp, xr, hr, s->clip);
                    break;
                }
                if (j->y && pass == (split ? 1 : 0))
                    memcpy(j->y + y_at(s, b, t, d), hr, (size_t)H * sizeof *hr);
            }
        }
    }
    for (int64_t b = b0; b < b1; b++) {
        const int64_t row = b - b0, st = state_at(s, b, d);
        if (j->y && !j->full)
            for (int64_t t = j->lens[b]; t < T; t++)
                memset(j->y + y_at(s, b, t, d), 0, (size_t)H * sizeof(float));
        if (j->yh) memcpy(j->yh + st, h + row * Hp, (size_t)H * sizeof(float));
        if (j->yc) memcpy(j->yc + st, c + row * Hp, (size_t)H * sizeof(float));
    }
}

static void unit_range(void *arg, size_t begin, size_t end) {
    for (size_t u = begin; u < end; u++) unit_run(arg, (int64_t)u);
}

/* One step of one stepwise unit: direction d, hidden units of slice k, every batch row. Reads h
 * of the previous step from one buffer, writes this step's into the other. */
static void slice_step(const rnn_job *j, int64_t u) {
    const rnn_state *s = j->s;
    const int64_t B = s->B, Hp = s->Hp, GHp = s->GHp, step = j->step;
    const int64_t d = u / s->slices, k = u % s->slices;
    int64_t j0, j1;
    slice_bounds(s, k, &j0, &j1);
    const int64_t w = j1 - j0, wy = (j1 < s->H ? j1 : s->H) - j0; /* units, those in Y */
    float *hbuf[2] = {(float *)(j->ws + s->off_h), (float *)(j->ws + s->off_h2)};
    const float *hcur = hbuf[step & 1] + d * B * Hp;
    float *hnext = hbuf[(step + 1) & 1] + d * B * Hp;
    float *c = (float *)(j->ws + s->off_c) + d * B * Hp;
    float *rec = (float *)(j->ws + s->off_rec) + d * B * GHp;
    const float *xw = (const float *)(j->ws + s->off_xw);
    for (int64_t g = 0; g < s->G; g++)
        s->isa->gemm_small(B, w, s->H, hcur, Hp, s->rts[(d * s->slices + k) * s->G + g], NULL,
                           rec + g * Hp + j0, GHp);
    const bool rev = s->reverse || d == 1;
    for (int64_t b = 0; b < B; b++) {
        float *hr = hnext + b * Hp + j0;
        memcpy(hr, hcur + b * Hp + j0, (size_t)w * sizeof *hr);
        const int64_t len = j->lens[b];
        if (step >= len) continue;
        const int64_t t = rev ? len - 1 - step : step;
        const float *xr = xw + (s->batch_first ? b * s->T + t : t * B + b) * s->DGHp + d * GHp + j0;
        const float *rr = rec + b * GHp + j0;
        switch (s->kind) {
        case K_LSTM:
            s->isa->lstm_row(w, Hp, xr, rr, s->peep ? s->peep + d * 3 * Hp + j0 : NULL,
                             c + b * Hp + j0, hr, s->clip);
            break;
        case K_RNN:
            s->isa->rnn_row(w, xr, rr, hr, s->clip);
            break;
        case K_GRU:
            s->isa->gru_lbr_row(w, Hp, xr, rr, s->rbh + d * Hp + j0, hr, s->clip);
            break;
        }
        if (j->y && wy > 0) memcpy(j->y + y_at(s, b, t, d) + j0, hr, (size_t)wy * sizeof *hr);
    }
}

static void slice_range(void *arg, size_t begin, size_t end) {
    for (size_t u = begin; u < end; u++) slice_step(arg, (int64_t)u);
}

/* The stepwise recurrence: initial states, T fork-joins, final states. */
static void run_stepwise(rnn_job *j, op_ctx *ctx) {
    const rnn_state *s = j->s;
    const int64_t B = s->B, H = s->H, Hp = s->Hp, D = s->D, T = s->T;
    float *h = (float *)(j->ws + s->off_h), *c = (float *)(j->ws + s->off_c);
    memset(h, 0, (size_t)(D * B * Hp) * sizeof *h);
    memset(c, 0, (size_t)(D * B * Hp) * sizeof *c);
    memset(j->ws + s->off_h2, 0, (size_t)(D * B * Hp) * sizeof *h);
    for (int64_t d = 0; d < D; d++)
        for (int64_t b = 0; b < B; b++) {
            const int64_t st = state_at(s, b, d);
            if (j->h0) memcpy(h + (d * B + b) * Hp, j->h0 + st, (size_t)H * sizeof *h);
            if (j->c0) memcpy(c + (d * B + b) * Hp, j->c0 + st, (size_t)H * sizeof *c);
        }
    for (j->step = 0; j->step < T; j->step++)
        op_parallel_for(ctx, (size_t)(D * s->slices), slice_range, j);
    const float *hl = (const float *)(j->ws + (T & 1 ? s->off_h2 : s->off_h));
    for (int64_t d = 0; d < D; d++)
        for (int64_t b = 0; b < B; b++) {
            const int64_t st = state_at(s, b, d), row = d * B + b;
            if (j->y && !j->full)
                for (int64_t t = j->lens[b]; t < T; t++)
                    memset(j->y + y_at(s, b, t, d), 0, (size_t)H * sizeof(float));
            if (j->yh) memcpy(j->yh + st, hl + row * Hp, (size_t)H * sizeof(float));
            if (j->yc) memcpy(j->yc + st, c + row * Hp, (size_t)H * sizeof(float));
        }
}

static const float *opt_in(const op_tensor *const *in, int n_in, int i) {
    return i < n_in && in[i] ? in[i]->data : NULL;
}

static float *opt_out(op_tensor *const *out, int n_out, int i) {
    return i < n_out && out[i] ? out[i]->data : NULL;
}

static anvil_status run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                        op_tensor *const *out, int n_out, void *workspace, op_ctx *ctx) {
    const rnn_state *s = state;
    rnn_job j = {s,
                 opt_in(in, n_in, 5),
                 s->kind == K_LSTM ? opt_in(in, n_in, 6) : NULL,
                 opt_out(out, n_out, 0),
                 opt_out(out, n_out, 1),
                 s->kind == K_LSTM ? opt_out(out, n_out, 2) : NULL,
                 NULL,
                 true,
                 workspace,
                 0};
    int64_t *lens = (int64_t *)(j.ws + s->off_lens);
    const op_tensor *sl = n_in > 4 ? in[4] : NULL;
    for (int64_t b = 0; b < s->B; b++) {
        lens[b] = sl ? core_load_i64(sl->dtype, sl->data, (size_t)b) : s->T;
        if (lens[b] < 0 || lens[b] > s->T)
            return core_err(
                ANVIL_ERR_RUNTIME,
                "%s: sequence_lens[%lld] is %lld; it must be in 0..%lld (the sequence length of X)",
                ir_node_label(n), (long long)b, (long long)lens[b], (long long)s->T);
        j.full &= lens[b] == s->T;
    }
    j.lens = lens;
    /* a pool larger than the one the workspace was sized for runs the GEMM serially */
    op_ctx *gctx = op_ctx_threads(ctx) <= s->threads ? ctx : NULL;
    const int64_t rows = s->T * s->B;
    float *xw = (float *)(j.ws + s->off_xw);
    if (s->x_small) {
        s->isa->gemm_small(rows, s->DGHp, s->I, in[0]->data, s->I, s->wt, s->bias, xw, s->DGHp);
    } else {
        gemm_problem p = {0};
        p.m = rows;
        p.n = s->DGHp;
        p.k = s->I;
        p.a = in[0]->data;
        p.rs_a = s->I;
        p.cs_a = 1;
        p.pb = &s->pw;
        p.c = xw;
        p.ldc = s->DGHp;
        p.ep = gemm_epilogue_none();
        p.ep.col_bias = s->bias;
        gemm_run(s->kx, &s->bx, &p, j.ws + s->off_gx, gctx);
    }
    if (s->slices > 1) {
        run_stepwise(&j, gctx);
        return ANVIL_OK;
    }
    const size_t units = (size_t)(s->D * s->chunks);
    op_parallel_for(units > 1 ? gctx : NULL, units, unit_range, &j);
    return ANVIL_OK;
}

/* ---- the variant table ------------------------------------------------------------------------
 */

#define RNN_PREPARE(ISA)                                                                           \
    static anvil_status prepare_##ISA(const kern_node *kn, void **state) {                         \
        return prepare_isa(kn, state, &rnn_isa_##ISA);                                             \
    }
#define RNN_VARIANT(ID, OP, NAME, NEEDS, ISA)                                                      \
    static const kern_variant v_##ID = {NAME,          OP,      NEEDS, supports, workspace_size,   \
                                        prepare_##ISA, release, run,   NULL,     NULL,             \
                                        NULL,          NULL};
#define RNN_OPS(ISA, SUFFIX, NEEDS)                                                                \
    RNN_PREPARE(ISA)                                                                               \
    RNN_VARIANT(lstm_##ISA, IR_OP_LSTM, "lstm_f32" SUFFIX, NEEDS, ISA)                             \
    RNN_VARIANT(gru_##ISA, IR_OP_GRU, "gru_f32" SUFFIX, NEEDS, ISA)                                \
    RNN_VARIANT(rnn_##ISA, IR_OP_RNN, "rnn_f32" SUFFIX, NEEDS, ISA)

RNN_OPS(avx512, "_avx512", KERN_NEEDS_AVX512)
RNN_OPS(avx2, "_avx2", KERN_NEEDS_AVX2)
RNN_OPS(portable, "", 0)

/* Per op: AVX-512, AVX2, then the portable one. */
#define OP_REFS(OP) &v_##OP##_avx512, &v_##OP##_avx2, &v_##OP##_portable,
const kern_variant *const kern_family_rnn[] = {OP_REFS(lstm) OP_REFS(gru) OP_REFS(rnn) NULL};
