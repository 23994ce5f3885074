/* The profiler: times a node's candidates on its real shapes and says which is fastest.
 *
 * Round 1 visits the candidates one at a time: prepare, one run whose output is checked against
 * the reference kernel's, a short timed batch, release. Holding every candidate's prepared state
 * at once would hold the node's packed weights once per candidate (hundreds of MB for a large
 * MatMul), so only the survivors of the first prune are prepared together; from round 2 on they
 * run interleaved, a short batch each per round, so a noisy moment on a shared machine falls on
 * all of them alike. Medians, not means: one preempted run must not decide anything. */
#include "tune/tune.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void tune_profile_defaults(tune_profile_opts *o) {
    if (o->max_reps <= 0) o->max_reps = 60;
    if (o->target_rse <= 0) o->target_rse = 0.02;
    if (o->prune_factor <= 1.0) o->prune_factor = 1.3;
    if (o->prune_after <= 0) o->prune_after = 1;
    if (o->round_seconds <= 0) o->round_seconds = 0.004;
    if (o->max_seconds <= 0) o->max_seconds = 4.0;
    if (o->tolerance <= 0) o->tolerance = 1e-3;
    if (o->tolerance_bf16 <= 0) o->tolerance_bf16 = 5e-2;
}

/* The error c may have against o's oracle: the reduced formats' where either rounds to bf16 or
 * fp16. */
static double tolerance_of(const tune_profile_opts *o, const tune_candidate *c) {
    const bool reduced = (c->v->needs & KERN_ROUNDS_REDUCED) ||
                         (o->oracle && (o->oracle->needs & KERN_ROUNDS_REDUCED));
    return reduced ? o->tolerance_bf16 : o->tolerance;
}

/* One candidate made runnable: its prepared state, workspace and fusion duty. */
typedef struct prof_exec {
    void *state;
    void *ws;
    bool fusion_after;
} prof_exec;

typedef struct prof {
    const kern_node *kn;
    const tune_profile_opts *o;
    op_tensor *in, *out, *ref; /* [n_in], [n_out], [n_out] */
    const op_tensor **inp;
    op_tensor **outp;
    double *times; /* [n * max_reps] */
} prof;

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Uniform in [-1, 1): the scale of a normalised activation. Integer inputs stay zero, which is a
 * valid index for any Gather-like input. */
static void fill_random(op_tensor *t, uint64_t *seed) {
    size_t n = op_tensor_numel(t);
    for (size_t i = 0; i < n; i++) {
        float f = (float)(rng_next(seed) >> 40) / (float)(1u << 23) - 1.0f;
        switch (t->dtype) {
        case ANVIL_DTYPE_FLOAT32:
            ((float *)t->data)[i] = f;
            break;
        case ANVIL_DTYPE_FLOAT64:
            ((double *)t->data)[i] = f;
            break;
        case ANVIL_DTYPE_FLOAT16:
            ((uint16_t *)t->data)[i] = core_f32_to_f16(f);
            break;
        case ANVIL_DTYPE_BFLOAT16:
            ((uint16_t *)t->data)[i] = core_f32_to_bf16(f);
            break;
        default:
            return;
        }
    }
}

static bool tensor_alloc(op_tensor *t, const op_tinfo *info) {
    t->dtype = info->dtype;
    t->rank = info->shape.rank;
    memcpy(t->dims, info->shape.d, sizeof(int64_t) * (size_t)t->rank);
    size_t bytes = op_tensor_numel(t) * anvil_dtype_size(t->dtype);
    t->data = core_aligned_alloc(64, bytes ? bytes : 64);
    if (t->data) memset(t->data, 0, bytes);
    return t->data != NULL;
}

static double elem(const op_tensor *t, size_t i) {
    switch (t->dtype) {
    case ANVIL_DTYPE_FLOAT32:
        return ((const float *)t->data)[i];
    case ANVIL_DTYPE_FLOAT64:
        return ((const double *)t->data)[i];
    case ANVIL_DTYPE_FLOAT16:
        return core_f16_to_f32(((const uint16_t *)t->data)[i]);
    case ANVIL_DTYPE_BFLOAT16:
        return core_bf16_to_f32(((const uint16_t *)t->data)[i]);
    default:
        return 0;
    }
}

/* Largest |out - ref| over the largest |ref|, over every output; infinity when an integer output
 * differs at all or a value is NaN where the reference's is not. */
static double max_error(const prof *p) {
    double worst = 0;
    for (int j = 0; j < p->kn->n_out; j++) {
        if (!p->outp[j]) continue;
        const op_tensor *y = p->outp[j], *r = &p->ref[j];
        size_t n = op_tensor_numel(r);
        if (!core_dtype_is_float(r->dtype)) {
            if (memcmp(y->data, r->data, n * anvil_dtype_size(r->dtype))) return INFINITY;
            continue;
        }
        double scale = 0, err = 0;
        for (size_t i = 0; i < n; i++) {
            double a = elem(y, i), b = elem(r, i);
            if (isnan(b)) {
                if (!isnan(a)) return INFINITY;
                continue;
            }
            if (isnan(a)) return INFINITY;
            if (fabs(b) > scale) scale = fabs(b);
            if (fabs(a - b) > err) err = fabs(a - b);
        }
        double rel = scale > 0 ? err / scale : err;
        if (rel > worst) worst = rel;
    }
    return worst;
}

static void exec_release(const kern_variant *v, prof_exec *e) {
    if (e->state && v->release) v->release(e->state);
    free(e->ws);
    memset(e, 0, sizeof *e);
}

static anvil_status exec_prepare(const prof *p, const tune_candidate *c, prof_exec *e) {
    memset(e, 0, sizeof *e);
    kern_node kn = *p->kn;
    kn.threads = c->threads;
    kn.copied = NULL;
    kn.config = &c->cfg;
    anvil_status s = ANVIL_OK;
    if (c->v->prepare && (s = c->v->prepare(&kn, &e->state)) != ANVIL_OK) return s;
    size_t ws = c->v->workspace_size ? c->v->workspace_size(&kn) : 0;
    if (ws && !(e->ws = core_aligned_alloc(64, ws))) {
        exec_release(c->v, e);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    e->fusion_after = kern_fusion_pending(c->v, &kn);
    return ANVIL_OK;
}

static anvil_status exec_run(const prof *p, const tune_candidate *c, prof_exec *e) {
    op_ctx ctx = {.pool = p->o->pool, .threads = c->threads};
    const ir_node *n = p->kn->node;
    anvil_status s =
        c->v->run(n, e->state, p->inp, p->kn->n_in, p->outp, p->kn->n_out, e->ws, &ctx);
    if (s == ANVIL_OK && e->fusion_after)
        s = kern_fusion_apply(n, p->inp, p->kn->n_in, p->outp[0], &ctx);
    return s;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void tune_summarize(double *t, int n, double *median, double *spread, double *rse) {
    double med = 0, sp = 1, r = INFINITY;
    if (n > 0) {
        qsort(t, (size_t)n, sizeof *t, cmp_double);
        med = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
        if (med > 0) sp = t[(n * 9) / 10 < n ? (n * 9) / 10 : n - 1] / med;
        double iqr = t[(3 * n) / 4 < n ? (3 * n) / 4 : n - 1] - t[n / 4];
        if (n >= 5 && med > 0) r = 1.2533 * (iqr / 1.349) / sqrt((double)n) / med;
    }
    if (median) *median = med;
    if (spread) *spread = sp;
    if (rse) *rse = r;
}

/* c's statistics from its timings (kept in run order for the rounds still to come). */
static void summarize(tune_candidate *c, const double *times, double *rse) {
    int n = c->reps;
    double s[n > 0 ? n : 1];
    memcpy(s, times, sizeof(double) * (size_t)n);
    tune_summarize(s, n, &c->median_ns, &c->spread, rse);
}

/* Times c for one round: enough runs to fill round_seconds (at least one), appended to times. */
static anvil_status time_round(const prof *p, tune_candidate *c, prof_exec *e, double *times) {
    double budget = p->o->round_seconds * 1e9;
    double spent = 0;
    do {
        uint64_t t0 = core_now_ns();
        anvil_status s = exec_run(p, c, e);
        uint64_t t1 = core_now_ns();
        if (s != ANVIL_OK) return s;
        times[c->reps++] = (double)(t1 - t0);
        spent += (double)(t1 - t0);
    } while (spent < budget && c->reps < p->o->max_reps);
    return ANVIL_OK;
}

static double best_alive(const tune_candidate *c, int n) {
    double best = 0;
    for (int i = 0; i < n; i++)
        if (c[i].state == TUNE_CAND_ALIVE && c[i].reps && (best == 0 || c[i].median_ns < best))
            best = c[i].median_ns;
    return best;
}

static void prune_slow(tune_candidate *c, int n, double factor, int round) {
    double best = best_alive(c, n);
    for (int i = 0; i < n; i++) {
        if (c[i].state == TUNE_CAND_ALIVE && c[i].median_ns > best * factor) {
            c[i].state = TUNE_CAND_SLOW;
            c[i].round = round;
        }
    }
}

/* Round 1, one candidate at a time (see the file comment). */
static anvil_status first_round(prof *p, tune_candidate *c, int n, uint64_t deadline) {
    for (int i = 0; i < n; i++) {
        tune_candidate *ci = &c[i];
        prof_exec e;
        if (exec_prepare(p, ci, &e) != ANVIL_OK) {
            ci->state = TUNE_CAND_FAILED;
            continue;
        }
        if (exec_run(p, ci, &e) != ANVIL_OK) {
            ci->state = TUNE_CAND_FAILED;
        } else {
            ci->max_err = max_error(p);
            if (!(ci->max_err <= tolerance_of(p->o, ci))) ci->state = TUNE_CAND_WRONG;
        }
        double *times = p->times + (size_t)i * (size_t)p->o->max_reps;
        if (ci->state == TUNE_CAND_ALIVE) {
            double rse;
            if (time_round(p, ci, &e, times) != ANVIL_OK)
                ci->state = TUNE_CAND_FAILED;
            else
                summarize(ci, times, &rse);
        }
        exec_release(ci->v, &e);
        /* Past the deadline the rest are not timed at all; the cascade still is, so there is
         * always something to compare a winner with. */
        if (core_now_ns() > deadline) {
            for (int k = i + 1; k < n; k++) {
                if (c[k].cascade) continue;
                c[k].state = TUNE_CAND_SLOW;
                c[k].round = 0;
            }
        }
    }
    return ANVIL_OK;
}

static anvil_status later_rounds(prof *p, tune_candidate *c, int n, uint64_t deadline) {
    prof_exec *ex = core_calloc((size_t)n, sizeof *ex);
    if (!ex) return ANVIL_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < n; i++)
        if (c[i].state == TUNE_CAND_ALIVE && exec_prepare(p, &c[i], &ex[i]) != ANVIL_OK)
            c[i].state = TUNE_CAND_FAILED;
    for (int round = 2;; round++) {
        bool more = false;
        for (int i = 0; i < n; i++) {
            tune_candidate *ci = &c[i];
            if (ci->state != TUNE_CAND_ALIVE || ci->reps >= p->o->max_reps) continue;
            double *times = p->times + (size_t)i * (size_t)p->o->max_reps, rse;
            summarize(ci, times, &rse);
            if (rse <= p->o->target_rse) continue;
            more = true;
            if (time_round(p, ci, &ex[i], times) != ANVIL_OK) {
                ci->state = TUNE_CAND_FAILED;
                continue;
            }
            summarize(ci, times, &rse);
        }
        if (round >= p->o->prune_after) prune_slow(c, n, p->o->prune_factor, round);
        if (p->o->progress) {
            int alive = 0;
            for (int i = 0; i < n; i++) alive += c[i].state == TUNE_CAND_ALIVE;
            p->o->progress(p->o->progress_arg, round, alive, best_alive(c, n));
        }
        if (!more || core_now_ns() > deadline) break;
    }
    for (int i = 0; i < n; i++) exec_release(c[i].v, &ex[i]);
    free(ex);
    return ANVIL_OK;
}

static void prof_free(prof *p) {
    if (!p->kn) return;
    for (int i = 0; p->in && i < p->kn->n_in; i++)
        if (!(p->kn->in[i].value)) free(p->in[i].data);
    for (int j = 0; p->out && j < p->kn->n_out; j++) {
        free(p->out[j].data);
        free(p->ref[j].data);
    }
    free(p->in);
    free(p->out);
    free(p->ref);
    free(p->inp);
    free(p->outp);
    free(p->times);
}

/* Inputs (constants as they are, the rest random), outputs, and the reference's outputs. */
static anvil_status prof_init(prof *p) {
    const kern_node *kn = p->kn;
    const ir_node *n = kn->node;
    int ni = kn->n_in, no = kn->n_out;
    p->in = core_calloc((size_t)ni + 1, sizeof *p->in);
    p->out = core_calloc((size_t)no + 1, sizeof *p->out);
    p->ref = core_calloc((size_t)no + 1, sizeof *p->ref);
    p->inp = core_calloc((size_t)ni + 1, sizeof *p->inp);
    p->outp = core_calloc((size_t)no + 1, sizeof *p->outp);
    if (!p->in || !p->out || !p->ref || !p->inp || !p->outp) return ANVIL_ERR_OUT_OF_MEMORY;
    uint64_t seed = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < ni; i++) {
        if (i < n->n_inputs && n->inputs[i] == IR_NONE) continue;
        if (kn->in[i].value) {
            p->in[i].dtype = kn->in[i].dtype;
            p->in[i].rank = kn->in[i].shape.rank;
            memcpy(p->in[i].dims, kn->in[i].shape.d, sizeof(int64_t) * (size_t)p->in[i].rank);
            p->in[i].data = (void *)kn->in[i].value;
        } else {
            if (!tensor_alloc(&p->in[i], &kn->in[i])) return ANVIL_ERR_OUT_OF_MEMORY;
            fill_random(&p->in[i], &seed);
        }
        p->inp[i] = &p->in[i];
    }
    for (int j = 0; j < no; j++) {
        if (j < n->n_outputs && n->outputs[j] == IR_NONE) continue;
        if (!tensor_alloc(&p->out[j], &kn->out[j]) || !tensor_alloc(&p->ref[j], &kn->out[j]))
            return ANVIL_ERR_OUT_OF_MEMORY;
        p->outp[j] = &p->ref[j];
    }
    /* The oracle: the reference kernel on all threads, into ref. */
    tune_candidate r = {.v = p->o->oracle ? p->o->oracle : kern_reference(n->op),
                        .threads = kn->threads > 0 ? kn->threads : 1};
    prof_exec e;
    anvil_status s = exec_prepare(p, &r, &e);
    if (s == ANVIL_OK) s = exec_run(p, &r, &e);
    exec_release(r.v, &e);
    if (s != ANVIL_OK) return s;
    for (int j = 0; j < no; j++)
        if (p->outp[j]) p->outp[j] = &p->out[j];
    return ANVIL_OK;
}

struct tune_profiler {
    prof p;
    tune_profile_opts o;
    uint64_t deadline;
};

anvil_status tune_profiler_create(const kern_node *kn, const tune_profile_opts *opts,
                                  tune_profiler **out) {
    *out = NULL;
    tune_profiler *t = core_calloc(1, sizeof *t);
    if (!t) return ANVIL_ERR_OUT_OF_MEMORY;
    t->o = *opts;
    tune_profile_defaults(&t->o);
    t->p.kn = kn;
    t->p.o = &t->o;
    t->deadline = core_now_ns() + (uint64_t)(t->o.max_seconds * 1e9);
    anvil_status s = prof_init(&t->p);
    if (s != ANVIL_OK) {
        tune_profiler_free(t);
        return s;
    }
    *out = t;
    return ANVIL_OK;
}

void tune_profiler_free(tune_profiler *t) {
    if (!t) return;
    prof_free(&t->p);
    free(t);
}

anvil_status tune_profiler_check(tune_profiler *t, tune_candidate *c) {
    prof_exec e;
    c->state = TUNE_CAND_ALIVE;
    c->max_err = 0;
    if (exec_prepare(&t->p, c, &e) != ANVIL_OK) {
        core_err_clear();
        c->state = TUNE_CAND_FAILED;
        return ANVIL_OK;
    }
    if (exec_run(&t->p, c, &e) != ANVIL_OK) {
        core_err_clear();
        c->state = TUNE_CAND_FAILED;
    } else {
        c->max_err = max_error(&t->p);
        if (!(c->max_err <= tolerance_of(&t->o, c))) c->state = TUNE_CAND_WRONG;
    }
    /* One more, warm, run: a first estimate of its time. */
    if (c->state == TUNE_CAND_ALIVE) {
        uint64_t t0 = core_now_ns();
        if (exec_run(&t->p, c, &e) != ANVIL_OK) {
            core_err_clear();
            c->state = TUNE_CAND_FAILED;
        }
        c->median_ns = (double)(core_now_ns() - t0);
    }
    exec_release(c->v, &e);
    return ANVIL_OK;
}

bool tune_profiler_expired(const tune_profiler *t) {
    return core_now_ns() > t->deadline;
}

anvil_status tune_profiler_run(tune_profiler *t, tune_candidate *c, int n, int *winner) {
    *winner = -1;
    prof *p = &t->p;
    free(p->times);
    if (!(p->times = core_calloc((size_t)n * (size_t)t->o.max_reps + 1, sizeof *p->times)))
        return ANVIL_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < n; i++) {
        c[i].state = TUNE_CAND_ALIVE;
        c[i].reps = 0;
        c[i].median_ns = c[i].spread = c[i].max_err = 0;
        c[i].round = 0;
    }
    anvil_status s = first_round(p, c, n, t->deadline);
    if (s == ANVIL_OK) {
        if (t->o.prune_after <= 1) prune_slow(c, n, t->o.prune_factor, 1);
        s = later_rounds(p, c, n, t->deadline);
    }
    if (s != ANVIL_OK) return s;
    /* The fastest; the cascade keeps its place unless something beats it by more than 1%, so
     * noise alone never changes what runs. */
    int best = -1, cascade = -1;
    for (int i = 0; i < n; i++) {
        if (c[i].state != TUNE_CAND_ALIVE || !c[i].reps) continue;
        if (c[i].cascade) cascade = i;
        if (best < 0 || c[i].median_ns < c[best].median_ns) best = i;
    }
    if (cascade >= 0 && best >= 0 && c[cascade].median_ns <= c[best].median_ns * 1.01)
        best = cascade;
    *winner = best;
    return ANVIL_OK;
}

anvil_status tune_profile(const kern_node *kn, tune_candidate *c, int n,
                          const tune_profile_opts *opts, int *winner) {
    *winner = -1;
    tune_profiler *t;
    CORE_TRY(tune_profiler_create(kn, opts, &t));
    anvil_status s = tune_profiler_run(t, c, n, winner);
    tune_profiler_free(t);
    return s;
}
