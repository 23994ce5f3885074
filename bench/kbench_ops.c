/* The MatMul and Conv benchmarks: one node per shape, built with the IR API as a session would see
 * it (weights constant, so every variant packs them once in prepare), run through every variant
 * of the op that applies here (rt_variant_exec: the same prepare, workspace and thread pool a plan
 * gives a variant).
 *
 * Per shape and thread count: each variant's output is first checked against the reference
 * (the reference kernel's full output for small shapes, double-precision dot products at sampled
 * positions, edges included, for large ones, where the reference kernel would take minutes); a
 * variant off by more than 1e-3 relative to max|ref| is reported WRONG and not timed. The others
 * are timed round-robin (A B C A B C ...) so drift in clock or load spreads over all of them, and
 * reported by median, p90 and best time against the FMA peak measured at the start of the same
 * run. */
#include "kbench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_THREADS 16
#define TOLERANCE 1e-3
/* bf16 variants round both operands to 8 significant bits: K products of relative error up to
 * 2^-8 each, which on these random operands stays near 1e-2 of the output's largest value. The
 * dynamic int8 ones (7 bits and a sign per row and column) stay near 5e-3 on them. */
#define TOLERANCE_BF16 3e-2

/* ---- options --------------------------------------------------------------------------------- */

typedef struct kb_opts {
    const char *cmd;      /* "gemm" or "conv" */
    const char *set;      /* shapes / layer set */
    const char *custom;   /* gemm: explicit "MxNxK,..." list instead of the set */
    const char *variants; /* comma list or NULL: all */
    const char *json;
    const char *baseline; /* the vendor variant ratios are taken against */
    int threads[MAX_THREADS];
    int n_threads;
    int reps;          /* 0: adaptive */
    double budget_s;   /* adaptive reps: time per variant per shape */
    double full_limit; /* full reference check up to this many flops */
    bool big;
    bool var_b; /* gemm: B an input, not a constant */
    uint64_t seed;
    int kernel;        /* conv: only layers with this kernel size (0: all) */
    const char *layer; /* conv: only layers whose label contains this (NULL: all) */
    bool nhwc;         /* conv: anvil.ConvNhwc (channels-last) instead of Conv */
    kern_knobs knobs;  /* the session settings the variants see: --precision */
} kb_opts;

/* ---- results --------------------------------------------------------------------------------- */

enum { RES_OK, RES_WRONG, RES_FAILED };

typedef struct kb_result {
    int case_idx, threads;
    const kern_variant *v;
    int status;
    bool is_default, is_vendor;
    double maxrel, prep_ms, med_ms, p90_ms, min_ms;
    double cpu_share; /* median of process CPU time / (wall time x threads) over the reps */
    int reps;
} kb_result;

typedef struct kb_run {
    kb_result *r;
    size_t n, cap;
    /* per thread-count slot: [0] avx512 f32, [1] avx2 f32, [2] avx512 bf16 and [3] AMX bf16
     * (--precision bf16), [4] avx512 fp16 (--precision fp16), [5] avx512 vnni int8 (--precision
     * int8) */
    kb_peak peak[MAX_THREADS][6];
} kb_run;

static kb_result *result_push(kb_run *run) {
    if (run->n == run->cap) {
        size_t cap = run->cap ? run->cap * 2 : 64;
        kb_result *r = realloc(run->r, cap * sizeof *r);
        if (!r) {
            fprintf(stderr, "kbench: out of memory\n");
            exit(1);
        }
        run->r = r;
        run->cap = cap;
    }
    kb_result *r = &run->r[run->n++];
    memset(r, 0, sizeof *r);
    return r;
}

static bool is_vendor(const kern_variant *v) {
    for (const kern_variant *const *p = kern_family_vendor; *p; p++)
        if (*p == v) return true;
    return false;
}

/* The fp32 peak a variant is held against: its own ISA's, or the best one for variants that
 * need none (portable code and vendor libraries, which pick their ISA themselves). */
static double peak_for(const kb_run *run, int ti, const kern_variant *v) {
    const kb_peak *p = run->peak[ti];
    if (v->needs & KERN_NEEDS_AMX) return p[3].gflops_cpu;
    if ((v->needs & KERN_BF16_BEST_ISA) && p[3].gflops_cpu > p[2].gflops_cpu)
        return p[3].gflops_cpu;
    if (v->needs & KERN_ROUNDS_BF16) return p[2].gflops_cpu;
    if (v->needs & KERN_ROUNDS_FP16) return p[4].gflops_cpu;
    if (v->needs & KERN_ROUNDS_INT8) return p[5].gflops_cpu;
    if (v->needs & KERN_NEEDS_AVX512) return p[0].gflops_cpu;
    if (v->needs & KERN_NEEDS_AVX2) return p[1].gflops_cpu;
    return p[0].measured ? p[0].gflops_cpu : p[1].gflops_cpu;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ---- measuring one case on one thread count -------------------------------------------------- */

typedef struct slot {
    const kern_variant *v;
    rt_variant_exec *e;
    size_t res; /* index in run->r (which may move as it grows) */
    double *times, *share;
    int reps;
} slot;

static void bench_case(kb_run *run, kb_case *c, int ci, int threads, const kb_opts *o) {
    const core_hw *hw = core_hw_get();
    kern_node kn = {kb_case_node(c), c->tin, c->n_in, &c->tout, 1, threads, NULL, NULL, &o->knobs};
    const kern_variant *def = NULL;
    if (kern_select(&kn, NULL, &def) != ANVIL_OK) def = NULL;
    size_t count;
    const kern_variant *const *list = kern_variants(kb_case_node(c)->op, &count);
    slot *slots = calloc(count, sizeof *slots);
    float *out = core_aligned_alloc(64, c->out_bytes + 64);
    /* One pool for all of anvil's variants: with one each, the idle workers of the variant that
     * just ran spin beside the next one's and take its CPUs (2 threads ran at 1 thread's speed
     * in about half the runs). */
    core_pool *pool = NULL;
    if (!slots || !out || core_pool_create(threads, &pool) != ANVIL_OK) {
        fprintf(stderr, "kbench: out of memory\n");
        exit(1);
    }
    op_tensor y = {c->tout.dtype, c->tout.shape.rank, {0}, out};
    for (int d = 0; d < y.rank; d++) y.dims[d] = c->tout.shape.d[d];
    const op_tensor *ins[KB_MAX_IN];
    for (int i = 0; i < c->n_in; i++) ins[i] = &c->in[i];
    op_tensor *outs[1] = {&y};
    const ir_node *node = kb_case_node(c);

    int n_slots = 0, max_reps = 0;
    for (size_t vi = 0; vi < count; vi++) {
        const kern_variant *v = list[vi];
        /* The reference kernel only when asked for by name: it is the oracle, not a contender. */
        if (vi == 0 && !(o->variants && kb_in_list(o->variants, v->name))) continue;
        if (!kb_in_list(o->variants, v->name) || !kern_applies(v, &kn, hw)) continue;
        slot *s = &slots[n_slots++];
        s->v = v;
        kb_result *r = result_push(run);
        s->res = run->n - 1;
        r->case_idx = ci;
        r->threads = threads;
        r->v = v;
        r->is_default = v == def;
        r->is_vendor = is_vendor(v);
        double t0 = kb_now_s();
        if (rt_variant_exec_create(v, &kn, pool, &s->e) != ANVIL_OK) {
            fprintf(stderr, "kbench: %s %s: prepare failed: %s\n", c->label, v->name,
                    anvil_last_error());
            r->status = RES_FAILED;
            continue;
        }
        r->prep_ms = (kb_now_s() - t0) * 1e3;
        /* NaN-filled, so an output the variant never writes shows as an error. */
        memset(out, 0xff, c->out_bytes);
        if (rt_variant_exec_run(s->e, node, ins, c->n_in, outs, 1) != ANVIL_OK) {
            fprintf(stderr, "kbench: %s %s: run failed: %s\n", c->label, v->name,
                    anvil_last_error());
            r->status = RES_FAILED;
            continue;
        }
        r->maxrel = kb_case_error(c, out);
        if (!(r->maxrel <=
              (v->needs & (KERN_ROUNDS_REDUCED | KERN_ROUNDS_INT8) ? TOLERANCE_BF16 : TOLERANCE))) {
            r->status = RES_WRONG;
            continue;
        }
        /* A second (warm) run sizes the repetitions for the time budget. */
        t0 = kb_now_s();
        rt_variant_exec_run(s->e, node, ins, c->n_in, outs, 1);
        double est = kb_now_s() - t0;
        if (o->reps > 0) {
            s->reps = o->reps;
        } else {
            double want = o->budget_s / (est > 1e-7 ? est : 1e-7);
            s->reps = want < 3 ? 3 : want > 200 ? 200 : (int)want;
        }
        if (s->reps > max_reps) max_reps = s->reps;
        s->times = malloc((size_t)s->reps * sizeof(double));
        s->share = malloc((size_t)s->reps * sizeof(double));
        if (!s->times || !s->share) {
            fprintf(stderr, "kbench: out of memory\n");
            exit(1);
        }
    }
    /* Round-robin: one run of each variant in turn, so slow drifts hit them all alike. */
    for (int rep = 0; rep < max_reps; rep++)
        for (int i = 0; i < n_slots; i++) {
            slot *s = &slots[i];
            if (!s->times || rep >= s->reps) continue;
            double t0 = kb_now_s(), c0 = kb_process_cpu_s();
            rt_variant_exec_run(s->e, node, ins, c->n_in, outs, 1);
            double dt = kb_now_s() - t0, dc = kb_process_cpu_s() - c0;
            s->times[rep] = dt;
            s->share[rep] = dt > 0 ? dc / (dt * threads) : 1;
        }
    for (int i = 0; i < n_slots; i++) {
        slot *s = &slots[i];
        if (s->times) {
            qsort(s->times, (size_t)s->reps, sizeof(double), cmp_double);
            kb_result *r = &run->r[s->res];
            r->reps = s->reps;
            r->min_ms = s->times[0] * 1e3;
            r->med_ms = (s->reps % 2 ? s->times[s->reps / 2]
                                     : 0.5 * (s->times[s->reps / 2 - 1] + s->times[s->reps / 2])) *
                        1e3;
            int p90 = (int)ceil(0.9 * s->reps) - 1;
            r->p90_ms = s->times[p90 < 0 ? 0 : p90] * 1e3;
            qsort(s->share, (size_t)s->reps, sizeof(double), cmp_double);
            r->cpu_share = s->share[s->reps / 2];
        }
        free(s->times);
        free(s->share);
        rt_variant_exec_free(s->e);
    }
    core_pool_free(pool);
    free(slots);
    free(out);
}

/* What a report needs of a case after the case itself was freed. */
typedef struct case_info {
    char label[96];
    double flops;
    int count; /* occurrences in the network (conv), 1 for GEMM shapes */
    int64_t dims[9];
} case_info;

/* The case list of a command: fills infos (NULL: count only) and returns how many. */
static int case_list(const kb_opts *o, case_info *infos) {
    int n = 0;
    if (!strcmp(o->cmd, "gemm") && o->custom) {
        /* "MxNxK,MxNxK,..." */
        const char *p = o->custom;
        while (*p) {
            long long m, nn, k;
            int used = 0;
            if (sscanf(p, "%lldx%lldx%lld%n", &m, &nn, &k, &used) != 3 || m < 1 || nn < 1 || k < 1)
                return -1;
            if (infos) infos[n] = (case_info){"", 0, 1, {m, nn, k}};
            n++;
            p += used;
            if (*p == ',')
                p++;
            else if (*p)
                return -1;
        }
        return n;
    }
    if (!strcmp(o->cmd, "gemm")) {
        bool sq = !strcmp(o->set, "squares") || !strcmp(o->set, "all");
        bool tr = !strcmp(o->set, "transformer") || !strcmp(o->set, "all");
        if (sq)
            for (int64_t s = 256; s <= (o->big ? 4096 : 2048); s *= 2) {
                if (infos) infos[n] = (case_info){"", 0, 1, {s, s, s}};
                n++;
            }
        static const int64_t nk[] = {768, 2304, 3072};
        if (tr)
            for (int64_t m = 128; m <= 512; m *= 4)
                for (int ni = 0; ni < 3; ni++)
                    for (int ki = 0; ki < 3; ki++) {
                        if (infos) infos[n] = (case_info){"", 0, 1, {m, nk[ni], nk[ki]}};
                        n++;
                    }
        return n;
    }
    for (int s = 0; s < kb_conv_set_count; s++) {
        const kb_conv_set *set = &kb_conv_sets[s];
        if (strcmp(o->set, "all") && strcmp(o->set, set->name)) continue;
        for (size_t i = 0; i < set->n; i++) {
            const kb_conv_layer *l = &set->layers[i];
            if (o->kernel && l->k != o->kernel) continue;
            if (o->layer) {
                char label[96];
                kb_conv_label(l, label, sizeof label);
                if (!strstr(label, o->layer)) continue;
            }
            if (infos) infos[n] = (case_info){"", 0, l->count, {(int64_t)s, (int64_t)i}};
            n++;
        }
    }
    return n;
}

static bool case_build(const kb_opts *o, case_info *info, int ci, kb_case *c) {
    uint64_t seed = o->seed + (uint64_t)ci * 7919u;
    bool ok;
    if (!strcmp(o->cmd, "gemm")) {
        ok = kb_case_matmul(c, info->dims[0], info->dims[1], info->dims[2], o->var_b, seed,
                            o->full_limit);
    } else {
        ok = kb_case_conv(c, &kb_conv_sets[info->dims[0]].layers[info->dims[1]], o->nhwc, seed,
                          o->full_limit);
    }
    memcpy(info->label, c->label, sizeof info->label);
    info->flops = c->flops;
    return ok;
}

/* ---- reporting ------------------------------------------------------------------------------- */

static const kb_result *find_result(const kb_run *run, int ci, int threads, const kern_variant *v) {
    for (size_t i = 0; i < run->n; i++) {
        const kb_result *r = &run->r[i];
        if (r->case_idx == ci && r->threads == threads && r->v == v) return r;
    }
    return NULL;
}

static const kb_result *find_named(const kb_run *run, int ci, int threads, const char *name) {
    for (size_t i = 0; i < run->n; i++) {
        const kb_result *r = &run->r[i];
        if (r->case_idx == ci && r->threads == threads && r->status == RES_OK &&
            !strcmp(r->v->name, name))
            return r;
    }
    return NULL;
}

static double gflops_of(const case_info *info, double ms) {
    return ms > 0 ? info->flops / (ms * 1e-3) * 1e-9 : 0;
}

/* "name | GFLOP/s | " of a result, or "- | - | ". */
static void print_named_rate(const case_info *info, const kb_result *r) {
    if (r)
        printf("%s | %.3g | ", r->v->name, gflops_of(info, r->med_ms));
    else
        printf("- | - | ");
}

static void print_tables(const kb_run *run, const case_info *infos, int n_cases, const kb_opts *o) {
    const char *opname = !strcmp(o->cmd, "gemm") ? "MatMul" : o->nhwc ? "ConvNhwc" : "Conv";
    for (int ti = 0; ti < o->n_threads; ti++) {
        int T = o->threads[ti];
        printf("\n## %s, %d thread%s (fp32 peak: avx512 %.1f, avx2 %.1f GFLOP/s", opname, T,
               T > 1 ? "s" : "", run->peak[ti][0].gflops_cpu, run->peak[ti][1].gflops_cpu);
        if (run->peak[ti][2].measured)
            printf("; bf16 peak: avx512_bf16 %.1f, the %% peak of the bf16 variants",
                   run->peak[ti][2].gflops_cpu);
        if (run->peak[ti][3].measured)
            printf(" (amx_bf16 %.1f, the AMX ones')", run->peak[ti][3].gflops_cpu);
        if (run->peak[ti][4].measured)
            printf("; fp16 peak: avx512_fp16 %.1f, the %% peak of the fp16 variants",
                   run->peak[ti][4].gflops_cpu);
        if (run->peak[ti][5].measured)
            printf("; int8 peak: avx512_vnni %.1f GOP/s, the %% peak of the int8 variants",
                   run->peak[ti][5].gflops_cpu);
        printf(")\n\n");
        printf("| shape | GFLOP | variant | reps | median ms | p90 ms | min ms | GFLOP/s | best "
               "GFLOP/s | %% peak | vs %s | max rel err | prep ms | cpu share |\n",
               o->baseline);
        printf("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for (size_t i = 0; i < run->n; i++) {
            const kb_result *r = &run->r[i];
            if (r->threads != T) continue;
            const case_info *info = &infos[r->case_idx];
            printf("| %s | %.4g | %s%s | ", info->label, info->flops * 1e-9, r->v->name,
                   r->is_default ? " *" : "");
            if (r->status == RES_FAILED) {
                printf("FAILED | | | | | | | | | | |\n");
                continue;
            }
            if (r->status == RES_WRONG) {
                printf("WRONG | | | | | | | | %.2e | %.1f | |\n", r->maxrel, r->prep_ms);
                continue;
            }
            double gf = gflops_of(info, r->med_ms), peak = peak_for(run, ti, r->v);
            printf("%d | %.4g | %.4g | %.4g | %.3g | %.3g | ", r->reps, r->med_ms, r->p90_ms,
                   r->min_ms, gf, gflops_of(info, r->min_ms));
            if (peak > 0)
                printf("%.1f | ", 100.0 * gf / peak);
            else
                printf("- | ");
            const kb_result *b = find_named(run, r->case_idx, T, o->baseline);
            if (b)
                printf("%.2f | ", b->med_ms / r->med_ms);
            else
                printf("- | ");
            printf("%.2e | %.1f | %.2f |\n", r->maxrel, r->prep_ms, r->cpu_share);
        }

        /* Per shape: the default choice, anvil's best and the vendors' best. */
        printf("\n### %s, %d thread%s: summary (by median)\n\n", opname, T, T > 1 ? "s" : "");
        printf("| shape | default | GFLOP/s | best anvil | GFLOP/s | %% peak | best vendor | "
               "GFLOP/s | anvil / vendor | anvil / %s |\n",
               o->baseline);
        printf("|---|---|---:|---|---:|---:|---|---:|---:|---:|\n");
        int n_vs = 0, n_ge = 0;
        /* Per network (conv: case_info.dims[0] is the layer set). */
        enum { NETS = 4 };
        double tot_def[NETS] = {0}, tot_anvil[NETS] = {0}, tot_base[NETS] = {0};
        bool totals[NETS] = {true, true, true, true}, present[NETS] = {false};
        for (int ci = 0; ci < n_cases; ci++) {
            const case_info *info = &infos[ci];
            const kb_result *def = NULL, *anvil = NULL, *vendor = NULL;
            for (size_t i = 0; i < run->n; i++) {
                const kb_result *r = &run->r[i];
                if (r->case_idx != ci || r->threads != T || r->status != RES_OK) continue;
                if (r->is_default) def = r;
                if (!strcmp(r->v->name, "reference")) continue;
                const kb_result **best = r->is_vendor ? &vendor : &anvil;
                if (!*best || r->med_ms < (*best)->med_ms) *best = r;
            }
            const kb_result *base = find_named(run, ci, T, o->baseline);
            printf("| %s | ", info->label);
            print_named_rate(info, def);
            print_named_rate(info, anvil);
            double peak = anvil ? peak_for(run, ti, anvil->v) : 0;
            if (peak > 0)
                printf("%.1f | ", 100.0 * gflops_of(info, anvil->med_ms) / peak);
            else
                printf("- | ");
            print_named_rate(info, vendor);
            if (anvil && vendor)
                printf("%.2f | ", vendor->med_ms / anvil->med_ms);
            else
                printf("- | ");
            if (anvil && base) {
                printf("%.2f |\n", base->med_ms / anvil->med_ms);
                n_vs++;
                n_ge += base->med_ms >= anvil->med_ms;
            } else {
                printf("- |\n");
            }
            int net = !strcmp(o->cmd, "conv") ? (int)info->dims[0] : 0;
            present[net] = true;
            if (def && anvil && base) {
                tot_def[net] += info->count * def->med_ms;
                tot_anvil[net] += info->count * anvil->med_ms;
                tot_base[net] += info->count * base->med_ms;
            } else {
                totals[net] = false;
            }
        }
        if (n_vs)
            printf("\nBest anvil variant >= 1.0x %s on %d of %d shapes.\n", o->baseline, n_ge,
                   n_vs);
        static const char *const nets[NETS] = {"ResNet-50", "VGG-16", "MobileNetV2 (depthwise)",
                                               "EfficientNet-B0 (depthwise)"};
        for (int net = 0; net < NETS && !strcmp(o->cmd, "conv"); net++)
            if (present[net] && totals[net])
                printf("%s, sum of each distinct layer's median x its count in the network: "
                       "default %.2f ms, best anvil %.2f ms, %s %.2f ms.\n",
                       nets[net], tot_def[net], tot_anvil[net], o->baseline, tot_base[net]);
    }

    /* Thread scaling: t(1 thread) / t(T threads), per variant and shape. */
    int t1 = -1;
    for (int ti = 0; ti < o->n_threads; ti++)
        if (o->threads[ti] == 1) t1 = ti;
    if (t1 < 0 || o->n_threads < 2) return;
    printf("\n## %s thread scaling: median time at 1 thread / at T threads\n\n", opname);
    printf("| shape | variant |");
    for (int ti = 0; ti < o->n_threads; ti++)
        if (ti != t1) printf(" speedup %dT |", o->threads[ti]);
    printf("\n|---|---|");
    for (int ti = 0; ti < o->n_threads; ti++)
        if (ti != t1) printf("---:|");
    printf("\n");
    for (size_t i = 0; i < run->n; i++) {
        const kb_result *r = &run->r[i];
        if (r->threads != 1 || r->status != RES_OK) continue;
        printf("| %s | %s |", infos[r->case_idx].label, r->v->name);
        for (int ti = 0; ti < o->n_threads; ti++) {
            if (ti == t1) continue;
            const kb_result *q = find_result(run, r->case_idx, o->threads[ti], r->v);
            if (q && q->status == RES_OK)
                printf(" %.2f |", r->med_ms / q->med_ms);
            else
                printf(" - |");
        }
        printf("\n");
    }
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", *s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

static bool write_json(const kb_run *run, const case_info *infos, const kb_opts *o) {
    FILE *f = fopen(o->json, "w");
    if (!f) {
        fprintf(stderr, "kbench: cannot write %s\n", o->json);
        return false;
    }
    fprintf(f, "{\"command\": ");
    json_str(f, o->cmd);
    fprintf(f, ", \"set\": ");
    json_str(f, o->set);
    fprintf(f, ", \"cpu\": ");
    json_str(f, core_hw_get()->cpu_model);
    fprintf(f, ",\n \"peaks\": [");
    static const char *const peak_names[] = {"avx512_f32", "avx2_f32",    "avx512_bf16",
                                             "amx_bf16",   "avx512_fp16", "avx512_vnni_i8"};
    for (int ti = 0; ti < o->n_threads; ti++)
        for (int k = 0; k < 6; k++) {
            const kb_peak *p = &run->peak[ti][k];
            if (k > 1 && !p->measured) continue;
            fprintf(f,
                    "%s\n  {\"isa\": \"%s\", \"threads\": %d, \"measured\": %s, \"gflops\": %.3f, "
                    "\"gflops_cpu\": %.3f, \"ghz\": %.3f}",
                    ti || k ? "," : "", peak_names[k], o->threads[ti],
                    p->measured ? "true" : "false", p->gflops, p->gflops_cpu, p->ghz);
        }
    fprintf(f, "],\n \"results\": [");
    for (size_t i = 0; i < run->n; i++) {
        const kb_result *r = &run->r[i];
        const case_info *info = &infos[r->case_idx];
        int ti = 0;
        while (ti < o->n_threads - 1 && o->threads[ti] != r->threads) ti++;
        const kb_result *b = find_named(run, r->case_idx, r->threads, o->baseline);
        double gf = r->status == RES_OK ? gflops_of(info, r->med_ms) : 0;
        double peak = peak_for(run, ti, r->v);
        fprintf(f, "%s\n  {\"shape\": ", i ? "," : "");
        json_str(f, info->label);
        fprintf(f, ", \"flops\": %.0f, \"count\": %d, \"threads\": %d, \"variant\": ", info->flops,
                info->count, r->threads);
        json_str(f, r->v->name);
        fprintf(f,
                ", \"default\": %s, \"vendor\": %s, \"status\": \"%s\", \"max_rel_err\": %.3e, "
                "\"prep_ms\": %.3f, \"reps\": %d, \"median_ms\": %.4f, \"p90_ms\": %.4f, "
                "\"min_ms\": %.4f, \"cpu_share\": %.3f, \"gflops\": %.2f, \"gflops_best\": %.2f, "
                "\"pct_peak\": %.2f, "
                "\"vs_baseline\": %.3f}",
                r->is_default ? "true" : "false", r->is_vendor ? "true" : "false",
                r->status == RES_OK      ? "ok"
                : r->status == RES_WRONG ? "wrong"
                                         : "failed",
                isfinite(r->maxrel) ? r->maxrel : -1.0, r->prep_ms, r->reps, r->med_ms, r->p90_ms,
                r->min_ms, r->cpu_share, gf, r->status == RES_OK ? gflops_of(info, r->min_ms) : 0,
                peak > 0 ? 100.0 * gf / peak : 0,
                b && r->status == RES_OK ? b->med_ms / r->med_ms : 0);
    }
    fprintf(f, "\n ],\n \"baseline\": ");
    json_str(f, o->baseline);
    fprintf(f, "}\n");
    return fclose(f) == 0;
}

/* ---- the commands ---------------------------------------------------------------------------- */

static void ops_usage(const char *cmd) {
    bool gemm = !strcmp(cmd, "gemm");
    fprintf(stderr,
            "usage: anvil_kbench %s [options]\n"
            "  %s\n"
            "  --threads 1,2       thread counts (default: 1 and 2 when there are 2+ cores)\n"
            "  --variants a,b      only these variants (names as in the table; 'reference' adds\n"
            "                      the reference kernel)\n"
            "  --reps N            timed runs per variant (default: adaptive, 3..200, about\n"
            "                      --budget seconds per variant and shape)\n"
            "  --budget S          adaptive repetition budget in seconds (default 0.25)\n"
            "  --baseline NAME     ratio column against this variant (default %s)\n"
            "  --full-check GFLOP  full reference check up to this size, sampled above\n"
            "                      (default 1)\n"
            "  --seed N            data seed (default 1)\n"
            "  --json FILE         also write every result as JSON\n"
            "  --precision P       fp32 (default), bf16, fp16 or int8: bf16 (fp16, int8) also\n"
            "                      times the variants that round to it (gemm_bf16*, gemm_fp16*,\n"
            "                      gemm_i8_dynamic), against its peak\n"
            "%s",
            cmd,
            gemm ? "--shapes squares|transformer|all (default all); --big adds 4096^3;\n"
                   "  --shape MxNxK,...   these shapes instead (A is MxK, constant B is KxN)\n"
                   "  --var-b             B an input packed by every run (a training step's\n"
                   "                      weights and gradients), not a constant"
                 : "--set resnet50|vgg16|mobilenetv2_dw|efficientnet_dw|all (default all)",
            gemm ? "dnnl_matmul" : "dnnl_conv",
            gemm ? ""
                 : "  --kernel K          only the layers with a KxK kernel (e.g. 3)\n"
                   "  --layer TEXT        only the layers whose label contains TEXT\n"
                   "                      (e.g. '512x14x14>512')\n"
                   "  --layout nchw|nhwc  Conv (default) or channels-last anvil.ConvNhwc\n");
}

static int cmd_ops(const char *cmd, int argc, char **argv) {
    const core_hw *hw = core_hw_get();
    kb_opts o = {0};
    o.cmd = cmd;
    o.set = "all";
    o.baseline = !strcmp(cmd, "gemm") ? "dnnl_matmul" : "dnnl_conv";
    o.threads[0] = 1;
    o.threads[1] = 2;
    o.n_threads = hw->logical_cores > 1 ? 2 : 1;
    o.budget_s = 0.25;
    o.full_limit = 1e9;
    o.seed = 1;
    bool gemm = !strcmp(cmd, "gemm");
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        if (((gemm && !strcmp(a, "--shapes")) || (!gemm && !strcmp(a, "--set"))) && has) {
            o.set = argv[++i];
        } else if (gemm && !strcmp(a, "--shape") && has) {
            o.custom = argv[++i];
        } else if (!gemm && !strcmp(a, "--kernel") && has) {
            o.kernel = atoi(argv[++i]);
            if (o.kernel < 1) goto bad;
        } else if (!gemm && !strcmp(a, "--layer") && has) {
            o.layer = argv[++i];
        } else if (!gemm && !strcmp(a, "--layout") && has) {
            const char *l = argv[++i];
            if (strcmp(l, "nchw") && strcmp(l, "nhwc")) goto bad;
            o.nhwc = !strcmp(l, "nhwc");
        } else if (gemm && !strcmp(a, "--big")) {
            o.big = true;
        } else if (gemm && !strcmp(a, "--var-b")) {
            o.var_b = true;
        } else if (!strcmp(a, "--threads") && has) {
            o.n_threads = kb_parse_ints(argv[++i], o.threads, MAX_THREADS, 1, 1024);
            if (o.n_threads < 1) goto bad;
        } else if (!strcmp(a, "--variants") && has) {
            o.variants = argv[++i];
        } else if (!strcmp(a, "--reps") && has) {
            o.reps = atoi(argv[++i]);
            if (o.reps < 1) goto bad;
        } else if (!strcmp(a, "--budget") && has) {
            o.budget_s = atof(argv[++i]);
            if (!(o.budget_s > 0)) goto bad;
        } else if (!strcmp(a, "--baseline") && has) {
            o.baseline = argv[++i];
        } else if (!strcmp(a, "--full-check") && has) {
            o.full_limit = atof(argv[++i]) * 1e9;
        } else if (!strcmp(a, "--seed") && has) {
            o.seed = strtoull(argv[++i], NULL, 10);
        } else if (!strcmp(a, "--json") && has) {
            o.json = argv[++i];
        } else if (!strcmp(a, "--precision") && has) {
            const char *p = argv[++i];
            if (strcmp(p, "fp32") && strcmp(p, "bf16") && strcmp(p, "fp16") && strcmp(p, "int8"))
                goto bad;
            o.knobs.precision = !strcmp(p, "bf16")   ? KERN_PREC_BF16
                                : !strcmp(p, "fp16") ? KERN_PREC_FP16
                                : !strcmp(p, "int8") ? KERN_PREC_INT8
                                                     : KERN_PREC_F32;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            ops_usage(cmd);
            return 0;
        } else {
            goto bad;
        }
    }
    int n_cases = case_list(&o, NULL);
    if (n_cases <= 0 && !gemm && (o.kernel || o.layer)) {
        fprintf(stderr,
                "kbench: no layer of --set %s matches --kernel %d --layer '%s' (0: any kernel); "
                "leave out --kernel / --layer to run every layer\n",
                o.set, o.kernel, o.layer ? o.layer : "");
        return 2;
    }
    if (n_cases <= 0) goto bad;
    case_info *infos = calloc((size_t)n_cases, sizeof *infos);
    kb_run run = {0};
    if (!infos) return 1;
    case_list(&o, infos);

    /* The peaks first, in the same run, for each thread count: the % peak column's denominator. */
    printf("# anvil_kbench %s: %s, %d logical cores\n\n", cmd, hw->cpu_model, hw->logical_cores);
    printf("Load average at start: %s\n\n", kb_loadavg());
    printf("| fp32 FMA peak | threads | GFLOP/s (wall) | GFLOP/s (CPU time) | GHz |\n"
           "|---|---:|---:|---:|---:|\n");
    for (int ti = 0; ti < o.n_threads; ti++)
        for (int k = 0; k < 6; k++) {
            static const peak_isa isas[] = {PEAK_AVX512_F32, PEAK_AVX2_F32,    PEAK_AVX512_BF16,
                                            PEAK_AMX_BF16,   PEAK_AVX512_FP16, PEAK_AVX512_VNNI_I8};
            if ((k == 2 || k == 3) && o.knobs.precision != KERN_PREC_BF16) continue;
            if (k == 4 && o.knobs.precision != KERN_PREC_FP16) continue;
            if (k == 5 && o.knobs.precision != KERN_PREC_INT8) continue;
            peak_isa isa = isas[k];
            run.peak[ti][k] = kb_peak_measure(isa, o.threads[ti], 0.3);
            if (run.peak[ti][k].measured)
                printf("| %s | %d | %.1f | %.1f | %.2f |\n", peak_isa_name(isa), o.threads[ti],
                       run.peak[ti][k].gflops, run.peak[ti][k].gflops_cpu, run.peak[ti][k].ghz);
        }
    fflush(stdout);

    double t_start = kb_now_s();
    for (int ci = 0; ci < n_cases; ci++) {
        kb_case c;
        if (!case_build(&o, &infos[ci], ci, &c)) {
            fprintf(stderr, "kbench: could not build case %d\n", ci);
            kb_case_free(&c);
            return 1;
        }
        for (int ti = 0; ti < o.n_threads; ti++) {
            fprintf(stderr, "[kbench %6.1fs] %d/%d %s, %d thread%s%s\n", kb_now_s() - t_start,
                    ci + 1, n_cases, c.label, o.threads[ti], o.threads[ti] > 1 ? "s" : "",
                    c.ref ? "" : " (sampled check)");
            size_t before = run.n;
            bench_case(&run, &c, ci, o.threads[ti], &o);
            if (run.n == before)
                fprintf(stderr,
                        "[kbench] %s: no variant applies besides the reference (add "
                        "'--variants reference' to time that)\n",
                        c.label);
        }
        kb_case_free(&c);
    }
    print_tables(&run, infos, n_cases, &o);
    printf(
        "\n`*` marks the variant the default cascade picks for the node. Total time %.0f s; load "
        "average at the end: %s.\n",
        kb_now_s() - t_start, kb_loadavg());
    int rc = 0;
    if (o.json && !write_json(&run, infos, &o)) rc = 1;
    free(run.r);
    free(infos);
    return rc;
bad:
    ops_usage(cmd);
    return 2;
}

int kb_cmd_gemm(int argc, char **argv) {
    return cmd_ops("gemm", argc, argv);
}

int kb_cmd_conv(int argc, char **argv) {
    return cmd_ops("conv", argc, argv);
}
