/* anvil bench MODEL: load time, first-run time and steady-state latency of a model.
 *
 * Inputs not given as files are filled with seeded pseudo-random data so that two runs of the
 * same command measure the same work (data-dependent kernels, e.g. Gather, see the same indices).
 * Integers are kept small and non-negative because integer inputs are usually indices or
 * lengths. Timing: the first run is reported separately (it includes planning), then `warmup`
 * untimed runs, then `iters` timed runs; statistics use the sorted samples with linear
 * interpolation for percentiles. */
#include "cli.h"

#include "api/api.h"
#include "core/core.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void cli_bench_usage(FILE *f) {
    fprintf(
        f,
        "usage: anvil bench MODEL.onnx [options]\n"
        "\n"
        "Measures the time to load the model, the first run (session creation + first\n"
        "inference, which includes planning) and the latency of further runs: min, median,\n"
        "mean, p90, p99 and throughput (inferences per second). Also reports the activation\n"
        "arena against the sum of all activations (memory saved by buffer reuse).\n"
        "\n"
        "Inputs not given with -i are filled with seeded random data of the declared shape:\n"
        "floats uniform in [-1,1], integers in [0,3], booleans random. Symbolic dims must be\n"
        "set with --shape, otherwise they are 1 (with a note on stderr).\n"
        "\n"
        "options:\n"
        "  -i, --input NAME=FILE.npy  use this tensor for input NAME (repeatable)\n"
        "  --shape NAME=DIMS          shape of a generated input, e.g. x=1x3x224x224\n"
        "  --warmup N                 untimed runs after the first one (default 5)\n"
        "  --iters N                  timed runs (default 50)\n"
        "  --threads T                worker threads, 1..1024 (0 or absent: all cores)\n"
        "  --json                     print one JSON object instead of text\n"
        "  --variant NODE_OR_OP=NAME  force an implementation for a node or an op type (repeat;\n"
        "                             --variant Conv=help lists the variants of Conv)\n"
        "  --opt-level N              graph rewrites: 0 none, 1 (default) fold BatchNorm into\n"
        "                             Conv and fuse bias/residual/activation "
        "epilogues\n" CLI_PASSES_HELP
        "  --profile FILE.json        write per-node timings of all runs as a Chrome trace\n"
        "  --explain                  list per node the implementation that ran and why\n"
        "                             (database, nearest, cascade, forced, "
        "dynamic)\n" CLI_TUNING_HELP "  -h, --help                 show this help\n");
}

enum {
    OPT_INPUT = 1,
    OPT_SHAPE,
    OPT_WARMUP,
    OPT_ITERS,
    OPT_THREADS,
    OPT_JSON,
    OPT_PROFILE,
    OPT_VARIANT,
    OPT_LEVEL,
    OPT_EXPLAIN,
    OPT_PASSES,
};

typedef struct bench_args {
    const char *model, *profile, *passes;
    long long warmup, iters, threads, opt_level;
    bool json, explain;
    cli_tuning tuning;
    cli_inputs inputs;
    cli_variants variants;
    cli_shapes shapes;
} bench_args;

typedef struct bench_stats {
    double min, median, mean, p90, p99, max, stddev;
} bench_stats;

static void args_free(bench_args *a) {
    cli_inputs_free(&a->inputs);
    cli_variants_free(&a->variants);
    cli_shapes_free(&a->shapes);
}

/* Returns -1 when parsing succeeded, else the exit code. */
static int parse_args(int argc, char **argv, bench_args *a) {
    static const cli_option opts[] = {{"input", 'i', true, OPT_INPUT},
                                      {"shape", 0, true, OPT_SHAPE},
                                      {"warmup", 0, true, OPT_WARMUP},
                                      {"iters", 0, true, OPT_ITERS},
                                      {"threads", 0, true, OPT_THREADS},
                                      {"json", 0, false, OPT_JSON},
                                      {"profile", 0, true, OPT_PROFILE},
                                      {"variant", 0, true, OPT_VARIANT},
                                      {"opt-level", 0, true, OPT_LEVEL},
                                      {"explain", 0, false, OPT_EXPLAIN},
                                      {"passes", 0, true, OPT_PASSES},
                                      CLI_TUNING_OPTIONS,
                                      {0}};
    cli_parser p;
    cli_parser_init(&p, "bench", argc, argv, opts);
    const char *val;
    for (int id; (id = cli_parser_next(&p, &val)) != CLI_ARG_END;) {
        switch (id) {
        case CLI_ARG_HELP:
            cli_bench_usage(stdout);
            return CLI_EXIT_OK;
        case CLI_ARG_ERROR:
            return CLI_EXIT_USAGE;
        case CLI_ARG_POSITIONAL:
            if (a->model)
                return cli_usage_error("bench", "unexpected argument '%s' (one model only)", val);
            a->model = val;
            break;
        case OPT_INPUT:
            if (!cli_inputs_add(&a->inputs, "bench", val)) return CLI_EXIT_USAGE;
            break;
        case OPT_SHAPE:
            if (!cli_shapes_add(&a->shapes, "bench", val)) return CLI_EXIT_USAGE;
            break;
        case OPT_WARMUP:
            if (!cli_parse_int("bench", "--warmup", val, 0, 1000000, &a->warmup))
                return CLI_EXIT_USAGE;
            break;
        case OPT_ITERS:
            if (!cli_parse_int("bench", "--iters", val, 1, 10000000, &a->iters))
                return CLI_EXIT_USAGE;
            break;
        case OPT_THREADS:
            if (!cli_parse_int("bench", "--threads", val, 0, 1024, &a->threads))
                return CLI_EXIT_USAGE;
            break;
        case OPT_JSON:
            a->json = true;
            break;
        case OPT_PROFILE:
            if (!val[0]) return cli_usage_error("bench", "--profile needs a file name");
            a->profile = val;
            break;
        case OPT_PASSES: {
            uint32_t off;
            if (!cli_parse_passes("bench", val, &off)) return CLI_EXIT_USAGE;
            a->passes = val;
            break;
        }
        case OPT_LEVEL:
            if (!cli_parse_int("bench", "--opt-level", val, 0, 3, &a->opt_level))
                return CLI_EXIT_USAGE;
            break;
        case OPT_VARIANT:
            if (!cli_variants_add(&a->variants, "bench", val)) return CLI_EXIT_USAGE;
            break;
        case OPT_EXPLAIN:
            a->explain = true;
            break;
        default:
            if (cli_tuning_option(&a->tuning, "bench", id, val) < 0) return CLI_EXIT_USAGE;
            break;
        }
    }
    if (!a->model) return cli_usage_error("bench", "missing the model file");
    return -1;
}

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

static bench_stats compute_stats(double *samples, size_t n) {
    bench_stats st = {0};
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

typedef struct bench_result {
    double load_ms, first_run_ms;
    bench_stats lat;
    double *samples; /* every timed run in run order (owned), for tests of significance */
    anvil_session_stats mem;
    int threads;
    cJSON *explain; /* --explain: one object per node (owned) */
    /* --tune online: the timed run after which no node was tuning any more (1-based; 0: still
     * tuning at the end, -1: nothing was tuning), and the median of the runs after it */
    long long locked_after;
    double locked_median;
} bench_result;

static anvil_status run_once(anvil_session *sess, size_t n_in, const char **names,
                             const anvil_tensor *const *ins, size_t n_out, anvil_tensor **outs) {
    anvil_status s = anvil_session_run(sess, n_in, names, ins, n_out, NULL, outs);
    if (s == ANVIL_OK)
        for (size_t i = 0; i < n_out; i++) {
            anvil_tensor_free(outs[i]);
            outs[i] = NULL;
        }
    return s;
}

/* Keeps what --explain reports: per node the variant, its parameters and where the choice came
 * from. */
static anvil_status explain(anvil_session *sess, bench_result *r) {
    size_t n;
    const anvil_node_choice *c;
    CORE_TRY(anvil_session_explain(sess, &n, &c));
    r->explain = cJSON_CreateArray();
    if (!r->explain) return ANVIL_ERR_OUT_OF_MEMORY;
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
            !cJSON_AddNumberToObject(o, "flops", (double)c[i].flops)) {
            cJSON_Delete(o);
            return ANVIL_ERR_OUT_OF_MEMORY;
        }
        cJSON_AddItemToArray(r->explain, o);
    }
    return ANVIL_OK;
}

static void print_explain(const cJSON *list) {
    static const char *const sources[] = {"database", "nearest", "cascade",
                                          "forced",   "online",  "dynamic"};
    int counts[6] = {0};
    printf("\n%-32s %-20s %-48s %-9s %s\n", "node", "op", "variant", "source", "params");
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
        printf("%-32.32s %-20.20s %-48.48s %-9s %s\n", len > 32 ? node + len - 32 : node,
               cJSON_GetObjectItem(o, "op")->valuestring, variant, src,
               note ? note->valuestring : cJSON_GetObjectItem(o, "params")->valuestring);
    }
    printf("nodes: %d from the database, %d nearest shape, %d cascade, %d forced, %d online, "
           "%d dynamic\n",
           counts[0], counts[1], counts[2], counts[3], counts[4], counts[5]);
}

/* --tune online: records run (1-based, the first run included) as the one after which no node
 * is tuning any more, if it is the first such. */
static anvil_status note_lock(anvil_session *sess, bench_result *r, long long run) {
    if (r->locked_after > 0) return ANVIL_OK;
    anvil_session_stats st;
    CORE_TRY(anvil_session_stats_get(sess, &st));
    r->locked_after = st.nodes_tuning == 0 ? run : 0;
    return ANVIL_OK;
}

static int measure(const bench_args *a, const anvil_model *m, const cli_model_input *bi,
                   size_t n_in, bench_result *r) {
    size_t n_out = anvil_model_output_count(m);
    const char **names = calloc(n_in + 1, sizeof *names);
    const anvil_tensor **ins = calloc(n_in + 1, sizeof *ins);
    anvil_tensor **outs = calloc(n_out + 1, sizeof *outs);
    double *samples = calloc((size_t)a->iters, sizeof *samples);
    anvil_options *opts = NULL;
    anvil_session *sess = NULL;
    int code = CLI_EXIT_OK;
    anvil_status s = ANVIL_OK;
    if (!names || !ins || !outs || !samples) {
        code = cli_fail(ANVIL_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n_in; i++) {
        names[i] = bi[i].name;
        ins[i] = bi[i].t;
    }
    r->threads = a->threads > 0 ? (int)a->threads : core_hw_get()->logical_cores;
    if ((s = anvil_options_create(&opts)) != ANVIL_OK ||
        (s = anvil_options_set_threads(opts, r->threads)) != ANVIL_OK ||
        (s = anvil_options_set_opt_level(opts, (int)a->opt_level)) != ANVIL_OK ||
        (s = anvil_options_set_passes(opts, a->passes)) != ANVIL_OK ||
        /* always: the slow-path shares come from the profile (two clock reads per node) */
        (s = anvil_options_set_profiling(opts, 1)) != ANVIL_OK ||
        (s = cli_variants_apply(&a->variants, opts)) != ANVIL_OK ||
        (s = cli_tuning_apply(&a->tuning, opts)) != ANVIL_OK)
        goto fail;

    uint64_t t0 = core_now_ns();
    if ((s = anvil_session_create(m, opts, &sess)) != ANVIL_OK ||
        (s = run_once(sess, n_in, names, ins, n_out, outs)) != ANVIL_OK)
        goto fail;
    r->first_run_ms = cli_ms(t0, core_now_ns());
    if (a->tuning.online && (s = note_lock(sess, r, 1)) != ANVIL_OK) goto fail;
    for (long long k = 0; k < a->warmup; k++) {
        if ((s = run_once(sess, n_in, names, ins, n_out, outs)) != ANVIL_OK) goto fail;
        if (a->tuning.online && (s = note_lock(sess, r, 2 + k)) != ANVIL_OK) goto fail;
    }
    for (long long k = 0; k < a->iters; k++) {
        uint64_t t = core_now_ns();
        s = anvil_session_run(sess, n_in, names, ins, n_out, NULL, outs);
        uint64_t t_end = core_now_ns();
        if (s != ANVIL_OK) goto fail;
        samples[k] = cli_ms(t, t_end);
        if (a->tuning.online && (s = note_lock(sess, r, 2 + a->warmup + k)) != ANVIL_OK) goto fail;
        for (size_t i = 0; i < n_out; i++) {
            anvil_tensor_free(outs[i]);
            outs[i] = NULL;
        }
    }
    r->samples = malloc((size_t)a->iters * sizeof *r->samples);
    if (!r->samples) {
        s = ANVIL_ERR_OUT_OF_MEMORY;
        goto fail;
    }
    memcpy(r->samples, samples, (size_t)a->iters * sizeof *samples);
    /* before the whole set is sorted: the runs after the lock, in run order */
    long long first_locked = r->locked_after - 1 - a->warmup; /* timed runs before the lock */
    if (r->locked_after > 0 && first_locked < a->iters) {
        if (first_locked < 0) first_locked = 0;
        bench_stats after =
            compute_stats(samples + first_locked, (size_t)(a->iters - first_locked));
        r->locked_median = after.median;
    }
    r->lat = compute_stats(samples, (size_t)a->iters);
    if ((s = anvil_session_stats_get(sess, &r->mem)) != ANVIL_OK) goto fail;
    if (a->profile && (s = anvil_session_write_profile(sess, a->profile)) != ANVIL_OK) goto fail;
    if (a->explain && (s = explain(sess, r)) != ANVIL_OK) goto fail;
    goto done;
fail:
    code = cli_fail_status(s);
done:
    anvil_session_free(sess);
    anvil_options_free(opts);
    free(names);
    free(ins);
    free(outs);
    free(samples);
    return code;
}

/* part / whole in percent; 0 when nothing was profiled */
static double share(uint64_t part, uint64_t whole) {
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static void print_text(const bench_args *a, const cli_model_input *bi, size_t n_in,
                       const bench_result *r) {
    char db[256], ab[32], vb[32];
    printf("model: %s\n", a->model);
    printf("threads: %d\n", r->threads);
    printf("inputs:\n");
    for (size_t i = 0; i < n_in; i++)
        printf("  %-24s %-8s %s (%s)\n", bi[i].name, anvil_dtype_name(anvil_tensor_dtype(bi[i].t)),
               cli_dims_str(anvil_tensor_rank(bi[i].t), anvil_tensor_dims(bi[i].t), db, sizeof db),
               bi[i].from_file ? "file" : "random");
    printf("load: %.3f ms\n", r->load_ms);
    printf("first run: %.3f ms (session create + first run)\n", r->first_run_ms);
    printf("latency over %lld runs (after %lld warmup): min %.3f ms, median %.3f ms, mean %.3f "
           "ms, p90 %.3f ms, p99 %.3f ms, max %.3f ms, stddev %.3f ms\n",
           a->iters, a->warmup, r->lat.min, r->lat.median, r->lat.mean, r->lat.p90, r->lat.p99,
           r->lat.max, r->lat.stddev);
    printf("throughput: %.2f inferences/s\n", r->lat.mean > 0 ? 1000.0 / r->lat.mean : 0.0);
    printf("memory: arena %s (%zu bytes) for %s of activations (%zu bytes)",
           cli_human_bytes((double)r->mem.arena_bytes, ab, sizeof ab), r->mem.arena_bytes,
           cli_human_bytes((double)r->mem.activation_bytes, vb, sizeof vb),
           r->mem.activation_bytes);
    if (r->mem.activation_bytes > 0)
        printf(", %.1f%% of no reuse",
               100.0 * (double)r->mem.arena_bytes / (double)r->mem.activation_bytes);
    printf("\n");
    printf("plan: %zu plans made, %zu nodes run, %zu folded at plan time\n", r->mem.plans_made,
           r->mem.nodes_run, r->mem.nodes_folded);
    printf("slow paths: %.1f%% of the time in reference kernels, %.1f%% in interpreted "
           "subgraphs%s\n",
           share(r->mem.reference_ns, r->mem.profiled_ns),
           share(r->mem.interpreted_ns, r->mem.profiled_ns),
           r->mem.reference_ns + r->mem.interpreted_ns > 0 && !r->explain
               ? " (--explain names the nodes)"
               : "");
    if (r->mem.subgraph_runs_compiled + r->mem.subgraph_runs_interpreted > 0)
        printf("subgraphs: %zu body runs compiled, %zu interpreted\n",
               r->mem.subgraph_runs_compiled, r->mem.subgraph_runs_interpreted);
    if (r->locked_after > 0)
        printf("online tuning: every node locked after run %lld (the first run counts as 1); "
               "median of the timed runs from then on %.3f ms\n",
               r->locked_after, r->locked_median);
    else if (r->locked_after == 0)
        printf("online tuning: still tuning after the last run (give more --iters)\n");
    if (r->explain) print_explain(r->explain);
}

/* Builds the JSON report; NULL on allocation failure. */
static cJSON *build_json(const bench_args *a, const cli_model_input *bi, size_t n_in,
                         const bench_result *r) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON *lat = cJSON_AddObjectToObject(o, "latency_ms");
    cJSON *ins = cJSON_AddArrayToObject(o, "inputs");
    bool ok = lat && ins && cJSON_AddStringToObject(o, "model", a->model) &&
              cJSON_AddStringToObject(o, "anvil_version", anvil_version()) &&
              cJSON_AddNumberToObject(o, "threads", r->threads) &&
              cJSON_AddNumberToObject(o, "iterations", (double)a->iters) &&
              cJSON_AddNumberToObject(o, "warmup", (double)a->warmup) &&
              cJSON_AddNumberToObject(o, "load_ms", r->load_ms) &&
              cJSON_AddNumberToObject(o, "first_run_ms", r->first_run_ms) &&
              cJSON_AddNumberToObject(lat, "min", r->lat.min) &&
              cJSON_AddNumberToObject(lat, "median", r->lat.median) &&
              cJSON_AddNumberToObject(lat, "mean", r->lat.mean) &&
              cJSON_AddNumberToObject(lat, "p90", r->lat.p90) &&
              cJSON_AddNumberToObject(lat, "p99", r->lat.p99) &&
              cJSON_AddNumberToObject(lat, "max", r->lat.max) &&
              cJSON_AddNumberToObject(lat, "stddev", r->lat.stddev) &&
              cJSON_AddNumberToObject(o, "throughput_per_s",
                                      r->lat.mean > 0 ? 1000.0 / r->lat.mean : 0.0) &&
              cJSON_AddNumberToObject(o, "arena_bytes", (double)r->mem.arena_bytes) &&
              cJSON_AddNumberToObject(o, "activation_bytes", (double)r->mem.activation_bytes) &&
              cJSON_AddNumberToObject(o, "plans_made", (double)r->mem.plans_made) &&
              cJSON_AddNumberToObject(o, "nodes_run", (double)r->mem.nodes_run) &&
              cJSON_AddNumberToObject(o, "nodes_folded", (double)r->mem.nodes_folded) &&
              cJSON_AddNumberToObject(o, "opt_level", (double)a->opt_level) &&
              cJSON_AddNumberToObject(o, "reference_share",
                                      share(r->mem.reference_ns, r->mem.profiled_ns) / 100) &&
              cJSON_AddNumberToObject(o, "interpreted_share",
                                      share(r->mem.interpreted_ns, r->mem.profiled_ns) / 100) &&
              cJSON_AddNumberToObject(o, "subgraph_runs_compiled",
                                      (double)r->mem.subgraph_runs_compiled) &&
              cJSON_AddNumberToObject(o, "subgraph_runs_interpreted",
                                      (double)r->mem.subgraph_runs_interpreted);
    if (ok) {
        cJSON *samples = cJSON_CreateDoubleArray(r->samples, (int)a->iters);
        ok = samples != NULL;
        if (samples) cJSON_AddItemToObject(lat, "samples", samples);
    }
    for (size_t i = 0; ok && i < n_in; i++) {
        cJSON *in = cJSON_CreateObject();
        ok = in != NULL;
        if (!in) break;
        cJSON_AddItemToArray(ins, in);
        cJSON *shape = cJSON_AddArrayToObject(in, "shape");
        ok = shape && cJSON_AddStringToObject(in, "name", bi[i].name) &&
             cJSON_AddStringToObject(in, "dtype", anvil_dtype_name(anvil_tensor_dtype(bi[i].t))) &&
             cJSON_AddStringToObject(in, "source", bi[i].from_file ? "file" : "random");
        const int64_t *dims = anvil_tensor_dims(bi[i].t);
        for (int d = 0; ok && d < anvil_tensor_rank(bi[i].t); d++) {
            cJSON *num = cJSON_CreateNumber((double)dims[d]);
            ok = num != NULL;
            if (num) cJSON_AddItemToArray(shape, num);
        }
    }
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static int print_json(const bench_args *a, const cli_model_input *bi, size_t n_in,
                      const bench_result *r) {
    cJSON *o = build_json(a, bi, n_in, r);
    if (o && r->explain) cJSON_AddItemReferenceToObject(o, "nodes", r->explain);
    if (o && r->locked_after >= 0) {
        cJSON_AddNumberToObject(o, "online_locked_after_run", (double)r->locked_after);
        cJSON_AddNumberToObject(o, "online_locked_median_ms", r->locked_median);
    }
    char *text = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!text) return cli_fail(ANVIL_ERR_OUT_OF_MEMORY, "out of memory building the JSON report");
    printf("%s\n", text);
    cJSON_free(text);
    return CLI_EXIT_OK;
}

int cli_bench_main(int argc, char **argv) {
    bench_args a = {.warmup = 5, .iters = 50, .opt_level = 1};
    int code = parse_args(argc, argv, &a);
    if (code >= 0) {
        args_free(&a);
        return code;
    }
    bench_result r = {.locked_after = -1};
    anvil_model *m = NULL;
    cli_model_input *bi = NULL;
    size_t n_in = 0;
    uint64_t t0 = core_now_ns();
    anvil_status s = anvil_model_load(a.model, &m);
    r.load_ms = cli_ms(t0, core_now_ns());
    if (s != ANVIL_OK) {
        code = cli_fail_status(s);
        goto done;
    }
    code = cli_inputs_resolve(m, &a.inputs);
    if (code) goto done;
    n_in = anvil_model_input_count(m);
    bi = calloc(n_in + 1, sizeof *bi);
    if (!bi) {
        code = cli_fail(ANVIL_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    code = cli_model_inputs(&a.inputs, &a.shapes, m, bi, n_in);
    if (!code) code = measure(&a, m, bi, n_in, &r);
    if (!code) {
        if (a.json)
            code = print_json(&a, bi, n_in, &r);
        else
            print_text(&a, bi, n_in, &r);
    }
done:
    for (size_t i = 0; bi && i < n_in; i++) anvil_tensor_free(bi[i].t);
    free(bi);
    free(r.samples);
    cJSON_Delete(r.explain);
    anvil_model_free(m);
    args_free(&a);
    return code;
}
