/* anvil_bench_model: load time, first-run time and steady-state latency of a model, and the
 * report `anvil bench` prints (text or JSON).
 *
 * Timing: the first run is reported separately (it includes planning), then `warmup` untimed
 * runs, then `iters` timed runs; statistics use the sorted samples with linear interpolation for
 * percentiles. The session always profiles (two clock reads per node): the report's slow-path
 * shares come from the profile. With `check`, one more run's outputs are compared with an fp32
 * session's on the same inputs, so a reduced precision's speed is reported beside what it costs
 * in accuracy, measured on the model itself rather than promised per kernel. The caller gives every
 * input; `anvil bench` fills the ones not given on its command line with seeded random data
 * (tools/model_inputs.c). */
#include "api.h"
#include "env.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct bench_lat {
    double min, median, mean, p90, p99, max, stddev;
} bench_lat;

/* One input as the report describes it. */
typedef struct bench_input {
    char *name, *source; /* owned */
    anvil_dtype dtype;
    int rank;
    int64_t dims[ANVIL_MAX_RANK];
} bench_input;

/* check: one output against the fp32 session's */
typedef struct bench_check {
    char *output; /* its name, owned */
    double max_rel, mean_rel;
    double top1;  /* the share of rows whose argmax agrees; -1: not a classifier's output */
    int64_t rows; /* the rows top1 counts */
} bench_check;

struct anvil_bench_report {
    char *label;         /* owned */
    int precision;       /* the measured session's (kern_precision) */
    bench_check *checks; /* n_checks, owned; NULL without check */
    size_t n_checks;
    bool checked;
    int warmup, iters, threads, opt_level;
    double load_ms, first_run_ms;
    bench_lat lat;
    double *samples; /* every timed run in run order (owned), for tests of significance */
    anvil_session_stats mem;
    bench_input *inputs; /* n_inputs, owned */
    size_t n_inputs;
    cJSON *explain; /* explain: one object per node (owned) */
    /* online tuning: the run after which no node was tuning any more (1-based; 0: still tuning
     * at the end, -1: nothing was tuning), and the median of the timed runs from then on */
    long long locked_after;
    double locked_median;
    char *text, *json; /* the two renderings, made once the numbers are in (owned) */
};

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Percentile q in [0,1] of sorted samples, interpolating between neighbours. */
static double percentile(const double *s, size_t n, double q) {
    double pos = q * (double)(n - 1);
    size_t lo = (size_t)pos;
    if (lo + 1 >= n) return s[n - 1];
    double frac = pos - (double)lo;
    return s[lo] + (s[lo + 1] - s[lo]) * frac;
}

/* Sorts samples in place. */
static bench_lat compute_stats(double *samples, size_t n) {
    bench_lat st = {0};
    qsort(samples, n, sizeof *samples, cmp_double);
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += samples[i];
    st.mean = sum / (double)n;
    double var = 0;
    for (size_t i = 0; i < n; i++) var += (samples[i] - st.mean) * (samples[i] - st.mean);
    st.stddev = n > 1 ? sqrt(var / (double)(n - 1)) : 0;
    st.min = samples[0];
    st.max = samples[n - 1];
    st.median = percentile(samples, n, 0.5);
    st.p90 = percentile(samples, n, 0.9);
    st.p99 = percentile(samples, n, 0.99);
    return st;
}

static double ms_between(uint64_t t0, uint64_t t1) {
    return (double)(t1 - t0) / 1e6;
}

/* part / whole in percent; 0 when nothing was profiled */
static double share(uint64_t part, uint64_t whole) {
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static double throughput(const bench_lat *lat) {
    return lat->mean > 0 ? 1000.0 / lat->mean : 0.0;
}

static void free_outputs(anvil_tensor **outs, size_t n_out) {
    for (size_t i = 0; i < n_out; i++) {
        anvil_tensor_free(outs[i]);
        outs[i] = NULL;
    }
}

/* Keeps what explain reports: per node the variant, its parameters and where the choice came
 * from. */
static anvil_status explain(anvil_session *sess, anvil_bench_report *r) {
    size_t n;
    const anvil_node_choice *c;
    CORE_TRY(anvil_session_explain(sess, &n, &c));
    r->explain = cJSON_CreateArray();
    if (!r->explain) return core_err(ANVIL_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddStringToObject(o, "node", c[i].node) ||
            !cJSON_AddStringToObject(o, "op", c[i].op) ||
            !cJSON_AddStringToObject(o, "variant", c[i].variant) ||
            !cJSON_AddStringToObject(o, "params", c[i].params) ||
            (c[i].runs && !cJSON_AddStringToObject(o, "runs", c[i].runs)) ||
            !cJSON_AddStringToObject(o, "source", c[i].source) ||
            (c[i].scope && !cJSON_AddStringToObject(o, "scope", c[i].scope)) ||
            (c[i].note && !cJSON_AddStringToObject(o, "note", c[i].note)) ||
            !cJSON_AddNumberToObject(o, "bytes", (double)c[i].bytes) ||
            !cJSON_AddNumberToObject(o, "flops", (double)c[i].flops) ||
            !cJSON_AddStringToObject(o, "compute", c[i].compute) ||
            !cJSON_AddStringToObject(o, "storage", c[i].storage) ||
            !cJSON_AddNumberToObject(o, "region", c[i].region)) {
            cJSON_Delete(o);
            return core_err(ANVIL_ERR_OUT_OF_MEMORY, "out of memory");
        }
        cJSON_AddItemToArray(r->explain, o);
    }
    return ANVIL_OK;
}

/* Online tuning: records run (1-based, the first run included) as the one after which no node
 * is tuning any more, if it is the first such. */
static anvil_status note_lock(anvil_session *sess, anvil_bench_report *r, long long run) {
    if (r->locked_after > 0) return ANVIL_OK;
    anvil_session_stats st;
    CORE_TRY(anvil_session_stats_get(sess, &st));
    r->locked_after = st.nodes_tuning == 0 ? run : 0;
    return ANVIL_OK;
}

/* The session's runs: fills r's times, statistics and (with e) explain list. samples: iters.
 * keep: one more, untimed run whose outputs stay in outs (the caller's to free), for check. */
static anvil_status measure(const anvil_model *m, const anvil_options *opts, bool online, bool e,
                            bool keep, const char *profile, size_t n_in, const char *const *names,
                            const anvil_tensor *const *ins, anvil_tensor **outs, double *samples,
                            anvil_bench_report *r) {
    size_t n_out = anvil_model_output_count(m);
    anvil_session *sess = NULL;
    anvil_status s;
    uint64_t t0 = core_now_ns();
    if ((s = anvil_session_create(m, opts, &sess)) != ANVIL_OK ||
        (s = anvil_session_run(sess, n_in, names, ins, n_out, NULL, outs)) != ANVIL_OK)
        goto done;
    free_outputs(outs, n_out);
    r->first_run_ms = ms_between(t0, core_now_ns());
    if (online && (s = note_lock(sess, r, 1)) != ANVIL_OK) goto done;
    for (long long k = 0; k < r->warmup; k++) {
        if ((s = anvil_session_run(sess, n_in, names, ins, n_out, NULL, outs)) != ANVIL_OK)
            goto done;
        free_outputs(outs, n_out);
        if (online && (s = note_lock(sess, r, 2 + k)) != ANVIL_OK) goto done;
    }
    for (long long k = 0; k < r->iters; k++) {
        uint64_t t = core_now_ns();
        s = anvil_session_run(sess, n_in, names, ins, n_out, NULL, outs);
        uint64_t t_end = core_now_ns();
        if (s != ANVIL_OK) goto done;
        samples[k] = ms_between(t, t_end);
        if (online && (s = note_lock(sess, r, 2 + r->warmup + k)) != ANVIL_OK) goto done;
        free_outputs(outs, n_out);
    }
    memcpy(r->samples, samples, (size_t)r->iters * sizeof *samples);
    /* before the whole set is sorted: the runs after the lock, in run order */
    long long first_locked = r->locked_after - 1 - r->warmup; /* timed runs before the lock */
    if (r->locked_after > 0 && first_locked < r->iters) {
        if (first_locked < 0) first_locked = 0;
        bench_lat after = compute_stats(samples + first_locked, (size_t)(r->iters - first_locked));
        r->locked_median = after.median;
    }
    r->lat = compute_stats(samples, (size_t)r->iters);
    if ((s = anvil_session_stats_get(sess, &r->mem)) != ANVIL_OK) goto done;
    if (profile && (s = anvil_session_write_profile(sess, profile)) != ANVIL_OK) goto done;
    if (e && (s = explain(sess, r)) != ANVIL_OK) goto done;
    if (keep) s = anvil_session_run(sess, n_in, names, ins, n_out, NULL, outs);
done:
    if (s != ANVIL_OK || !keep) free_outputs(outs, n_out);
    anvil_session_free(sess);
    return s;
}

/* ---- check: the outputs against fp32 ------------------------------------------------------ */

/* Element i of t as a double, for the dtypes a model's numeric outputs take; false for others. */
static bool elem_at(const anvil_tensor *t, size_t i, double *v) {
    const void *d = t->data;
    switch (t->dtype) {
    case ANVIL_DTYPE_FLOAT32:
        *v = ((const float *)d)[i];
        return true;
    case ANVIL_DTYPE_FLOAT64:
        *v = ((const double *)d)[i];
        return true;
    case ANVIL_DTYPE_INT64:
        *v = (double)((const int64_t *)d)[i];
        return true;
    case ANVIL_DTYPE_INT32:
        *v = ((const int32_t *)d)[i];
        return true;
    case ANVIL_DTYPE_INT8:
        *v = ((const int8_t *)d)[i];
        return true;
    case ANVIL_DTYPE_UINT8:
    case ANVIL_DTYPE_BOOL:
        *v = ((const uint8_t *)d)[i];
        return true;
    default:
        return false;
    }
}

/* Rows and classes of a classifier's output: float, [N, C] or [N, C, 1, 1] with C >= 2; false for
 * any other shape. */
static bool classifier_shape(const anvil_tensor *t, int64_t *rows, int64_t *classes) {
    if (t->dtype != ANVIL_DTYPE_FLOAT32 && t->dtype != ANVIL_DTYPE_FLOAT64) return false;
    bool ok = t->rank == 2 || (t->rank == 4 && t->dims[2] == 1 && t->dims[3] == 1);
    if (!ok || t->dims[1] < 2 || t->dims[0] < 1) return false;
    *rows = t->dims[0];
    *classes = t->dims[1];
    return true;
}

/* The first largest element of row r (c classes); NaN counts as smallest. */
static int64_t argmax_row(const anvil_tensor *t, int64_t r, int64_t c) {
    int64_t best = 0;
    double bv = -INFINITY;
    for (int64_t k = 0; k < c; k++) {
        double v;
        if (elem_at(t, (size_t)(r * c + k), &v) && v > bv) {
            bv = v;
            best = k;
        }
    }
    return best;
}

/* Errors relative to the reference's scale: max|y - ref| / max|ref| and mean|y - ref| /
 * mean|ref|, each over 1 where the reference is all zeros (then the error is absolute). A
 * non-finite difference makes both infinite. Returns false for a dtype elem_at does not read. */
static bool compare(const anvil_tensor *y, const anvil_tensor *ref, bench_check *c) {
    size_t n = anvil_tensor_element_count(ref);
    double max_d = 0, max_r = 0, sum_d = 0, sum_r = 0;
    bool finite = true;
    for (size_t i = 0; i < n; i++) {
        double a, b;
        if (!elem_at(y, i, &a) || !elem_at(ref, i, &b)) return false;
        double d = fabs(a - b);
        if (!isfinite(d)) finite = false;
        if (d > max_d) max_d = d;
        if (fabs(b) > max_r) max_r = fabs(b);
        sum_d += d;
        sum_r += fabs(b);
    }
    c->max_rel = !finite ? INFINITY : max_d / (max_r > 0 ? max_r : 1);
    c->mean_rel = !finite ? INFINITY : n ? sum_d / (sum_r > 0 ? sum_r : 1) : 0;
    c->top1 = -1;
    c->rows = 0;
    int64_t rows, classes;
    if (classifier_shape(ref, &rows, &classes)) {
        int64_t agree = 0;
        for (int64_t r = 0; r < rows; r++)
            agree += argmax_row(y, r, classes) == argmax_row(ref, r, classes);
        c->top1 = (double)agree / (double)rows;
        c->rows = rows;
    }
    return true;
}

/* Runs the model once on the fp32 reference of the measured session's options
 * (api_options_reference) and keeps per output how far the measured session's outputs (outs,
 * freed here) are from its. Outputs of a dtype compare() cannot read are left out. */
static anvil_status check(const anvil_model *m, const anvil_options *opts, size_t n_in,
                          const char *const *names, const anvil_tensor *const *ins,
                          anvil_tensor **outs, anvil_bench_report *r) {
    size_t n_out = anvil_model_output_count(m);
    anvil_tensor **ref = core_calloc(n_out + 1, sizeof *ref);
    anvil_options *ro = NULL;
    anvil_session *rsess = NULL;
    anvil_status s = ANVIL_ERR_OUT_OF_MEMORY;
    r->checks = core_calloc(n_out + 1, sizeof *r->checks);
    if (!ref || !r->checks) goto done;
    if ((s = api_options_reference(opts, &ro)) != ANVIL_OK ||
        (s = anvil_session_create(m, ro, &rsess)) != ANVIL_OK ||
        (s = anvil_session_run(rsess, n_in, names, ins, n_out, NULL, ref)) != ANVIL_OK)
        goto done;
    for (size_t j = 0; j < n_out; j++) {
        anvil_value_info vi;
        if ((s = anvil_model_output_info(m, j, &vi)) != ANVIL_OK) goto done;
        const anvil_tensor *y = outs[j], *y32 = ref[j];
        if (y->dtype != y32->dtype || y->rank != y32->rank ||
            memcmp(y->dims, y32->dims, (size_t)y->rank * sizeof *y->dims)) {
            s = core_err(ANVIL_ERR_INTERNAL,
                         "anvil_bench_model: output '%s' has another dtype or shape under "
                         "precision %s than under fp32",
                         vi.name, api_precision_name(r->precision));
            goto done;
        }
        bench_check *c = &r->checks[r->n_checks];
        if (!compare(y, y32, c)) continue;
        if (!(c->output = core_strdup(vi.name))) {
            s = ANVIL_ERR_OUT_OF_MEMORY;
            goto done;
        }
        r->n_checks++;
    }
    r->checked = true;
done:
    if (ref) free_outputs(ref, n_out);
    free(ref);
    free_outputs(outs, n_out);
    anvil_session_free(rsess);
    anvil_options_free(ro);
    return s;
}

static void print_checks(FILE *f, const anvil_bench_report *r) {
    fprintf(f, "\naccuracy of precision %s against fp32 (one run of each on the same inputs):\n",
            api_precision_name(r->precision));
    fprintf(f, "%-32s %12s %12s  %s\n", "output", "max rel err", "mean rel err", "top-1 agreement");
    for (size_t i = 0; i < r->n_checks; i++) {
        const bench_check *c = &r->checks[i];
        size_t len = strlen(c->output);
        fprintf(f, "%-32.32s %12.3e %12.3e  ", len > 32 ? c->output + len - 32 : c->output,
                c->max_rel, c->mean_rel);
        if (c->top1 >= 0)
            fprintf(f, "%.1f%% of %lld rows\n", 100 * c->top1, (long long)c->rows);
        else
            fprintf(f, "-\n");
    }
}

/* ---- the text report --------------------------------------------------------------------- */

static const char *human_bytes(double bytes, char *buf, size_t cap) {
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    size_t k = 0;
    for (; bytes >= 999.5 && k + 1 < sizeof unit / sizeof *unit; k++) bytes /= 1024.0;
    snprintf(buf, cap, k ? "%.3g %s" : "%.0f %s", bytes, unit[k]);
    return buf;
}

static void print_dims(FILE *f, int rank, const int64_t *dims) {
    fputc('[', f);
    for (int i = 0; i < rank; i++) fprintf(f, "%s%lld", i ? "," : "", (long long)dims[i]);
    fputc(']', f);
}

static void print_explain(FILE *f, const cJSON *list) {
    static const char *const sources[] = {"database", "nearest", "cascade",
                                          "forced",   "online",  "dynamic"};
    int counts[6] = {0};
    fprintf(f, "\n%-32s %-20s %-48s %-7s %-11s %-6s %-9s %s\n", "node", "op", "variant", "compute",
            "storage", "region", "source", "params");
    const cJSON *o;
    cJSON_ArrayForEach(o, list) {
        const char *src = cJSON_GetObjectItem(o, "source")->valuestring;
        for (int k = 0; k < 6; k++) counts[k] += !strcmp(src, sources[k]);
        /* a node inside a body shows as <body>/<node>, keeping its end when it is too long */
        const cJSON *scope = cJSON_GetObjectItem(o, "scope"),
                    *note = cJSON_GetObjectItem(o, "note");
        char node[512];
        snprintf(node, sizeof node, "%s%s%s", scope ? scope->valuestring : "", scope ? "/" : "",
                 cJSON_GetObjectItem(o, "node")->valuestring);
        size_t len = strlen(node);
        /* a cascade that hands the node on shows what runs it: "conv_f32 > conv_1x1_gemm" */
        const cJSON *runs = cJSON_GetObjectItem(o, "runs");
        char variant[256];
        snprintf(variant, sizeof variant, "%s%s%s", cJSON_GetObjectItem(o, "variant")->valuestring,
                 runs ? " > " : "", runs ? runs->valuestring : "");
        /* 0: outside every bf16 region */
        int region = (int)cJSON_GetObjectItem(o, "region")->valuedouble;
        char rb[16] = "-";
        if (region) snprintf(rb, sizeof rb, "%d", region);
        fprintf(f, "%-32.32s %-20.20s %-48.48s %-7s %-11s %-6s %-9s %s\n",
                len > 32 ? node + len - 32 : node, cJSON_GetObjectItem(o, "op")->valuestring,
                variant, cJSON_GetObjectItem(o, "compute")->valuestring,
                cJSON_GetObjectItem(o, "storage")->valuestring, rb, src,
                note ? note->valuestring : cJSON_GetObjectItem(o, "params")->valuestring);
    }
    fprintf(f,
            "nodes: %d from the database, %d nearest shape, %d cascade, %d forced, %d online, "
            "%d dynamic\n",
            counts[0], counts[1], counts[2], counts[3], counts[4], counts[5]);
}

static void print_text(FILE *f, const anvil_bench_report *r) {
    char ab[32], vb[32];
    fprintf(f, "model: %s\n", r->label);
    fprintf(f, "threads: %d\n", r->threads);
    fprintf(f, "precision: %s\n", api_precision_name(r->precision));
    fprintf(f, "inputs:\n");
    for (size_t i = 0; i < r->n_inputs; i++) {
        const bench_input *in = &r->inputs[i];
        fprintf(f, "  %-24s %-8s ", in->name, anvil_dtype_name(in->dtype));
        print_dims(f, in->rank, in->dims);
        fprintf(f, " (%s)\n", in->source);
    }
    fprintf(f, "load: %.3f ms\n", r->load_ms);
    fprintf(f, "first run: %.3f ms (session create + first run)\n", r->first_run_ms);
    fprintf(f,
            "latency over %d runs (after %d warmup): min %.3f ms, median %.3f ms, mean %.3f "
            "ms, p90 %.3f ms, p99 %.3f ms, max %.3f ms, stddev %.3f ms\n",
            r->iters, r->warmup, r->lat.min, r->lat.median, r->lat.mean, r->lat.p90, r->lat.p99,
            r->lat.max, r->lat.stddev);
    fprintf(f, "throughput: %.2f inferences/s\n", throughput(&r->lat));
    fprintf(f, "memory: arena %s (%zu bytes) for %s of activations (%zu bytes)",
            human_bytes((double)r->mem.arena_bytes, ab, sizeof ab), r->mem.arena_bytes,
            human_bytes((double)r->mem.activation_bytes, vb, sizeof vb), r->mem.activation_bytes);
    if (r->mem.activation_bytes > 0)
        fprintf(f, ", %.1f%% of no reuse",
                100.0 * (double)r->mem.arena_bytes / (double)r->mem.activation_bytes);
    fprintf(f, "\n");
    fprintf(f, "plan: %zu plans made, %zu nodes run, %zu folded at plan time\n", r->mem.plans_made,
            r->mem.nodes_run, r->mem.nodes_folded);
    fprintf(f,
            "slow paths: %.1f%% of the time in reference kernels, %.1f%% in interpreted "
            "subgraphs%s\n",
            share(r->mem.reference_ns, r->mem.profiled_ns),
            share(r->mem.interpreted_ns, r->mem.profiled_ns),
            r->mem.reference_ns + r->mem.interpreted_ns > 0 && !r->explain
                ? " (--explain names the nodes)"
                : "");
    if (r->mem.subgraph_runs_compiled + r->mem.subgraph_runs_interpreted > 0)
        fprintf(f, "subgraphs: %zu body runs compiled, %zu interpreted\n",
                r->mem.subgraph_runs_compiled, r->mem.subgraph_runs_interpreted);
    if (r->locked_after > 0)
        fprintf(f,
                "online tuning: every node locked after run %lld (the first run counts as 1); "
                "median of the timed runs from then on %.3f ms\n",
                r->locked_after, r->locked_median);
    else if (r->locked_after == 0)
        fprintf(f, "online tuning: still tuning after the last run (give more --iters)\n");
    if (r->checked) print_checks(f, r);
    if (r->explain) print_explain(f, r->explain);
}

/* r->text, from the numbers. */
static anvil_status render_text(anvil_bench_report *r) {
    size_t len;
    FILE *f = open_memstream(&r->text, &len);
    if (!f) return core_err(ANVIL_ERR_OUT_OF_MEMORY, "out of memory building the report");
    print_text(f, r);
    if (fclose(f) != 0 || !r->text) {
        free(r->text);
        r->text = NULL;
        return core_err(ANVIL_ERR_OUT_OF_MEMORY, "out of memory building the report");
    }
    return ANVIL_OK;
}

/* ---- the JSON report --------------------------------------------------------------------- */

/* "check": {"reference": "fp32", "outputs": [{"name", "max_rel_err", "mean_rel_err" and, for a
 * classifier's output, "top1_agreement" and "rows"}]}. False when out of memory. */
static bool add_checks(cJSON *o, const anvil_bench_report *r) {
    cJSON *chk = cJSON_AddObjectToObject(o, "check");
    cJSON *outs = chk ? cJSON_AddArrayToObject(chk, "outputs") : NULL;
    bool ok = outs && cJSON_AddStringToObject(chk, "reference", "fp32");
    for (size_t i = 0; ok && i < r->n_checks; i++) {
        const bench_check *c = &r->checks[i];
        cJSON *e = cJSON_CreateObject();
        if (!e) return false;
        cJSON_AddItemToArray(outs, e);
        ok = cJSON_AddStringToObject(e, "name", c->output) &&
             cJSON_AddNumberToObject(e, "max_rel_err", c->max_rel) &&
             cJSON_AddNumberToObject(e, "mean_rel_err", c->mean_rel) &&
             (c->top1 < 0 || (cJSON_AddNumberToObject(e, "top1_agreement", c->top1) &&
                              cJSON_AddNumberToObject(e, "rows", (double)c->rows)));
    }
    return ok;
}

/* The JSON report; NULL on allocation failure. */
static cJSON *build_json(const anvil_bench_report *r) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON *lat = cJSON_AddObjectToObject(o, "latency_ms");
    cJSON *ins = cJSON_AddArrayToObject(o, "inputs");
    bool ok = lat && ins && cJSON_AddStringToObject(o, "model", r->label) &&
              cJSON_AddStringToObject(o, "anvil_version", anvil_version()) &&
              cJSON_AddNumberToObject(o, "threads", r->threads) &&
              cJSON_AddStringToObject(o, "precision", api_precision_name(r->precision)) &&
              cJSON_AddNumberToObject(o, "iterations", r->iters) &&
              cJSON_AddNumberToObject(o, "warmup", r->warmup) &&
              cJSON_AddNumberToObject(o, "load_ms", r->load_ms) &&
              cJSON_AddNumberToObject(o, "first_run_ms", r->first_run_ms) &&
              cJSON_AddNumberToObject(lat, "min", r->lat.min) &&
              cJSON_AddNumberToObject(lat, "median", r->lat.median) &&
              cJSON_AddNumberToObject(lat, "mean", r->lat.mean) &&
              cJSON_AddNumberToObject(lat, "p90", r->lat.p90) &&
              cJSON_AddNumberToObject(lat, "p99", r->lat.p99) &&
              cJSON_AddNumberToObject(lat, "max", r->lat.max) &&
              cJSON_AddNumberToObject(lat, "stddev", r->lat.stddev) &&
              cJSON_AddNumberToObject(o, "throughput_per_s", throughput(&r->lat)) &&
              cJSON_AddNumberToObject(o, "arena_bytes", (double)r->mem.arena_bytes) &&
              cJSON_AddNumberToObject(o, "activation_bytes", (double)r->mem.activation_bytes) &&
              cJSON_AddNumberToObject(o, "plans_made", (double)r->mem.plans_made) &&
              cJSON_AddNumberToObject(o, "nodes_run", (double)r->mem.nodes_run) &&
              cJSON_AddNumberToObject(o, "nodes_folded", (double)r->mem.nodes_folded) &&
              cJSON_AddNumberToObject(o, "opt_level", r->opt_level) &&
              cJSON_AddNumberToObject(o, "reference_share",
                                      share(r->mem.reference_ns, r->mem.profiled_ns) / 100) &&
              cJSON_AddNumberToObject(o, "interpreted_share",
                                      share(r->mem.interpreted_ns, r->mem.profiled_ns) / 100) &&
              cJSON_AddNumberToObject(o, "subgraph_runs_compiled",
                                      (double)r->mem.subgraph_runs_compiled) &&
              cJSON_AddNumberToObject(o, "subgraph_runs_interpreted",
                                      (double)r->mem.subgraph_runs_interpreted);
    if (ok) {
        cJSON *samples = cJSON_CreateDoubleArray(r->samples, r->iters);
        ok = samples != NULL;
        if (samples) cJSON_AddItemToObject(lat, "samples", samples);
    }
    for (size_t i = 0; ok && i < r->n_inputs; i++) {
        const bench_input *bi = &r->inputs[i];
        cJSON *in = cJSON_CreateObject();
        ok = in != NULL;
        if (!in) break;
        cJSON_AddItemToArray(ins, in);
        cJSON *shape = cJSON_AddArrayToObject(in, "shape");
        ok = shape && cJSON_AddStringToObject(in, "name", bi->name) &&
             cJSON_AddStringToObject(in, "dtype", anvil_dtype_name(bi->dtype)) &&
             cJSON_AddStringToObject(in, "source", bi->source);
        for (int d = 0; ok && d < bi->rank; d++) {
            cJSON *num = cJSON_CreateNumber((double)bi->dims[d]);
            ok = num != NULL;
            if (num) cJSON_AddItemToArray(shape, num);
        }
    }
    if (ok && r->explain) ok = cJSON_AddItemReferenceToObject(o, "nodes", r->explain);
    if (ok && r->checked) ok = add_checks(o, r);
    if (ok && r->locked_after >= 0)
        ok = cJSON_AddNumberToObject(o, "online_locked_after_run", (double)r->locked_after) &&
             cJSON_AddNumberToObject(o, "online_locked_median_ms", r->locked_median);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* r->json, from the numbers: one line. */
static anvil_status render_json(anvil_bench_report *r) {
    cJSON *o = build_json(r);
    char *text = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    size_t len = text ? strlen(text) : 0;
    if (text && (r->json = malloc(len + 2))) {
        memcpy(r->json, text, len);
        memcpy(r->json + len, "\n", 2);
    }
    cJSON_free(text);
    if (!r->json) return core_err(ANVIL_ERR_OUT_OF_MEMORY, "out of memory building the report");
    return ANVIL_OK;
}

/* ---- the API ------------------------------------------------------------------------------ */

/* Refuses inputs that are not exactly the model's: each given once, by a name it has. */
static anvil_status check_inputs(const anvil_model *m, size_t n_in, const char *const *names,
                                 const anvil_tensor *const *ins) {
    size_t want = anvil_model_input_count(m);
    API_CHECK(n_in == want, "anvil_bench_model: the model has %zu inputs, %zu given", want, n_in);
    API_CHECK(n_in == 0 || (names && ins), "anvil_bench_model: names or inputs is NULL");
    for (size_t i = 0; i < n_in; i++) {
        API_CHECK(names[i] && ins[i], "anvil_bench_model: input %zu has no name or no tensor", i);
        bool known = false;
        for (size_t k = 0; k < want && !known; k++) {
            anvil_value_info vi;
            CORE_TRY(anvil_model_input_info(m, k, &vi));
            known = !strcmp(vi.name, names[i]);
        }
        API_CHECK(known, "anvil_bench_model: the model has no input '%s'", names[i]);
        for (size_t j = 0; j < i; j++)
            API_CHECK(strcmp(names[j], names[i]), "anvil_bench_model: input '%s' given twice",
                      names[i]);
    }
    return ANVIL_OK;
}

/* Copies what the report says of the inputs. */
static anvil_status describe_inputs(anvil_bench_report *r, size_t n_in, const char *const *names,
                                    const anvil_tensor *const *ins, const char *const *sources) {
    r->inputs = core_calloc(n_in + 1, sizeof *r->inputs);
    if (!r->inputs) return ANVIL_ERR_OUT_OF_MEMORY;
    r->n_inputs = n_in;
    for (size_t i = 0; i < n_in; i++) {
        bench_input *in = &r->inputs[i];
        in->name = core_strdup(names[i]);
        in->source = core_strdup(sources && sources[i] ? sources[i] : "given");
        if (!in->name || !in->source) return ANVIL_ERR_OUT_OF_MEMORY;
        in->dtype = anvil_tensor_dtype(ins[i]);
        in->rank = anvil_tensor_rank(ins[i]);
        memcpy(in->dims, anvil_tensor_dims(ins[i]), (size_t)in->rank * sizeof *in->dims);
    }
    return ANVIL_OK;
}

anvil_status anvil_bench_model(const anvil_model *m, const anvil_bench_options *o, size_t n_inputs,
                               const char *const *names, const anvil_tensor *const *inputs,
                               anvil_bench_report **out) {
    API_CHECK(out, "anvil_bench_model: out is NULL");
    *out = NULL;
    API_CHECK(m, "anvil_bench_model: model is NULL");
    CORE_TRY(check_inputs(m, n_inputs, names, inputs));
    anvil_bench_options def = {.warmup = -1, .iters = -1};
    if (!o) o = &def;
    api_options_summary sum;
    api_options_summarize(o->session, &sum);
    rt_session_config cfg;
    CORE_TRY(api_session_config(o->session, &cfg));

    anvil_bench_report *r = core_calloc(1, sizeof *r);
    if (!r) return ANVIL_ERR_OUT_OF_MEMORY;
    r->warmup = o->warmup < 0 ? 5 : o->warmup;
    r->iters = o->iters < 1 ? 50 : o->iters;
    r->threads = sum.threads > 0 ? sum.threads : core_hw_get()->logical_cores;
    r->opt_level = sum.opt_level;
    r->precision = cfg.knobs.precision;
    r->load_ms = o->load_ms;
    r->locked_after = sum.online ? 0 : -1;
    size_t n_out = anvil_model_output_count(m);
    anvil_tensor **outs = core_calloc(n_out + 1, sizeof *outs);
    double *samples = core_calloc((size_t)r->iters, sizeof *samples);
    r->samples = core_calloc((size_t)r->iters, sizeof *r->samples);
    r->label = core_strdup(o->model_label ? o->model_label : "");
    anvil_options *opts = NULL;
    anvil_status s = ANVIL_ERR_OUT_OF_MEMORY;
    if (outs && samples && r->samples && r->label &&
        (s = describe_inputs(r, n_inputs, names, inputs, o->input_sources)) == ANVIL_OK &&
        (s = api_options_copy(o->session, &opts)) == ANVIL_OK &&
        (s = anvil_options_set_threads(opts, r->threads)) == ANVIL_OK &&
        (s = anvil_options_set_profiling(opts, 1)) == ANVIL_OK &&
        (s = measure(m, opts, sum.online, o->explain != 0, o->check != 0, o->profile_path, n_inputs,
                     names, inputs, outs, samples, r)) == ANVIL_OK &&
        (!o->check || (s = check(m, opts, n_inputs, names, inputs, outs, r)) == ANVIL_OK) &&
        (s = render_text(r)) == ANVIL_OK)
        s = render_json(r);
    anvil_options_free(opts);
    free(outs);
    free(samples);
    if (s != ANVIL_OK) {
        anvil_bench_report_free(r);
        return s;
    }
    *out = r;
    return ANVIL_OK;
}

anvil_status anvil_bench_report_stats(const anvil_bench_report *r, anvil_bench_stats *out) {
    API_CHECK(r && out, "anvil_bench_report_stats: report or out is NULL");
    *out = (anvil_bench_stats){
        .load_ms = r->load_ms,
        .first_run_ms = r->first_run_ms,
        .min_ms = r->lat.min,
        .median_ms = r->lat.median,
        .mean_ms = r->lat.mean,
        .p90_ms = r->lat.p90,
        .p99_ms = r->lat.p99,
        .max_ms = r->lat.max,
        .stddev_ms = r->lat.stddev,
        .per_second = throughput(&r->lat),
        .iters = r->iters,
        .warmup = r->warmup,
        .threads = r->threads,
        .arena_bytes = r->mem.arena_bytes,
        .activation_bytes = r->mem.activation_bytes,
        .online_locked_after = r->locked_after,
        .online_locked_median_ms = r->locked_median,
    };
    return ANVIL_OK;
}

size_t anvil_bench_report_check_count(const anvil_bench_report *r) {
    return r ? r->n_checks : 0;
}

anvil_status anvil_bench_report_check(const anvil_bench_report *r, size_t i,
                                      anvil_bench_check *out) {
    API_CHECK(r && out, "anvil_bench_report_check: report or out is NULL");
    API_CHECK(i < r->n_checks,
              "anvil_bench_report_check: output %zu of %zu compared (the bench ran without check, "
              "or the output's dtype is not numeric)",
              i, r->n_checks);
    const bench_check *c = &r->checks[i];
    *out = (anvil_bench_check){.output = c->output,
                               .max_rel_err = c->max_rel,
                               .mean_rel_err = c->mean_rel,
                               .top1_agreement = c->top1,
                               .rows = c->rows};
    return ANVIL_OK;
}

const char *anvil_bench_report_text(const anvil_bench_report *r) {
    return r ? r->text : "";
}

const char *anvil_bench_report_json(const anvil_bench_report *r) {
    return r ? r->json : "";
}

void anvil_bench_report_free(anvil_bench_report *r) {
    if (!r) return;
    for (size_t i = 0; r->inputs && i < r->n_inputs; i++) {
        free(r->inputs[i].name);
        free(r->inputs[i].source);
    }
    free(r->inputs);
    for (size_t i = 0; i < r->n_checks; i++) free(r->checks[i].output);
    free(r->checks);
    free(r->samples);
    cJSON_Delete(r->explain);
    free(r->label);
    free(r->text);
    free(r->json);
    free(r);
}
