/* The machine's multiply-accumulate peak, measured rather than computed from a data sheet: each
 * ISA's loop of independent multiply-accumulate chains (the library's, kernels/cpu/peak/peak.h;
 * the library times them briefly on one thread, this longer) runs on 1..N threads at once, and the
 * core clock is read with a chain of dependent integer adds (one cycle each on every x86 core) so
 * the result can be stated in flops per cycle as well as GFLOP/s. The kernel benchmarks measure
 * this in the same run to express their numbers as a fraction of it. */
#include "kbench.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* 8 dependent register-register adds per iteration: 8 cycles, whatever the core's width (the
 * loop counter runs beside them). Register operands, so no core can eliminate the adds the way
 * some rename small immediates away. Best of three runs, to step around preemption. */
double kb_measure_ghz(void) {
    const uint64_t iters = 4000000;
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        uint64_t x = 0, one = 1, cnt = iters;
        double t0 = kb_thread_cpu_s();
        __asm__ volatile("1:\n\t"
                         "add %2, %0\n\t"
                         "add %2, %0\n\t"
                         "add %2, %0\n\t"
                         "add %2, %0\n\t"
                         "add %2, %0\n\t"
                         "add %2, %0\n\t"
                         "add %2, %0\n\t"
                         "add %2, %0\n\t"
                         "dec %1\n\t"
                         "jnz 1b\n\t"
                         : "+r"(x), "+r"(cnt)
                         : "r"(one)
                         : "cc");
        double dt = kb_thread_cpu_s() - t0;
        double ghz = (double)iters * 8.0 / dt * 1e-9;
        if (ghz > best && x == iters * 8) best = ghz;
    }
    return best;
}

typedef struct peak_job {
    peak_loop fn;
    uint64_t iters;
    pthread_barrier_t *start;
    double end_s, cpu_s;
    uint64_t flops;
    float sink;
} peak_job;

static void *peak_thread(void *p) {
    peak_job *j = p;
    pthread_barrier_wait(j->start);
    double c0 = kb_thread_cpu_s();
    j->flops = j->fn(j->iters, &j->sink);
    j->end_s = kb_now_s();
    j->cpu_s = kb_thread_cpu_s() - c0;
    return NULL;
}

kb_peak kb_peak_measure(peak_isa isa, int threads, double seconds_target) {
    kb_peak r = {0};
    peak_loop fn = peak_isa_loop(isa);
    if (!fn || threads < 1) return r;
    /* Calibrate the iteration count on one thread: grow until a run takes >= 20 ms. */
    float sink = 0;
    uint64_t iters = 1000;
    double dt = 0;
    for (;;) {
        double t0 = kb_now_s();
        fn(iters, &sink);
        dt = kb_now_s() - t0;
        if (dt >= 0.02 || iters > (1ull << 40)) break;
        iters *= 4;
    }
    iters = (uint64_t)((double)iters * seconds_target / dt) + 1;

    double ghz_before = kb_measure_ghz();
    peak_job *jobs = calloc((size_t)threads, sizeof *jobs);
    pthread_t *tids = calloc((size_t)threads, sizeof *tids);
    if (!jobs || !tids) {
        free(jobs);
        free(tids);
        return r;
    }
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads);
    int started = 1;
    for (int t = 0; t < threads; t++) {
        jobs[t] = (peak_job){fn, iters, &start, 0, 0, 0, 0};
    }
    for (int t = 1; t < threads; t++) {
        if (pthread_create(&tids[t], NULL, peak_thread, &jobs[t]) != 0) break;
        started++;
    }
    if (started != threads) {
        /* Threads already started wait at the barrier for ever: nothing sensible is left to do. */
        fprintf(stderr, "kbench: could not start %d threads\n", threads);
        exit(1);
    }
    /* The calling thread is thread 0; the clock starts when everybody passed the barrier. */
    pthread_barrier_wait(&start);
    double t0 = kb_now_s(), c0 = kb_thread_cpu_s();
    jobs[0].flops = fn(iters, &jobs[0].sink);
    jobs[0].end_s = kb_now_s();
    jobs[0].cpu_s = kb_thread_cpu_s() - c0;
    for (int t = 1; t < threads; t++) pthread_join(tids[t], NULL);
    pthread_barrier_destroy(&start);
    double end = 0;
    uint64_t flops = 0;
    for (int t = 0; t < threads; t++) {
        if (jobs[t].end_s > end) end = jobs[t].end_s;
        flops += jobs[t].flops;
        if (jobs[t].cpu_s > 0) r.gflops_cpu += (double)jobs[t].flops / jobs[t].cpu_s * 1e-9;
        sink += jobs[t].sink;
    }
    double ghz_after = kb_measure_ghz();
    r.measured = flops > 0;
    r.gflops = (double)flops / (end - t0) * 1e-9;
    r.ghz = 0.5 * (ghz_before + ghz_after);
    /* The sink is only there to keep results alive; a NaN would mean a broken loop. */
    if (sink != sink) r.measured = false;
    free(jobs);
    free(tids);
    return r;
}

static void peak_usage(void) {
    fprintf(stderr, "usage: anvil_kbench peak [--threads 1,2] [--seconds S] [--json F]\n"
                    "  --threads  thread counts (default: 1 and every logical core)\n"
                    "  --seconds  duration of each measurement (default 0.5)\n"
                    "  --json     also write every row to file F\n");
}

static const char *const format_names[PEAK_FORMAT_COUNT] = {"f32", "bf16", "fp16", "i8"};

/* One row of the JSON file: an ISA that is absent has no thread count and no rates. */
static void json_row(FILE *f, bool first, peak_isa isa, int threads, const kb_peak *p) {
    fprintf(f, "%s\n  {\"isa\": \"%s\", \"format\": \"%s\"", first ? "" : ",", peak_isa_name(isa),
            format_names[peak_isa_format(isa)]);
    if (!p) {
        fprintf(f, ", \"absent\": true}");
        return;
    }
    fprintf(f,
            ", \"absent\": false, \"threads\": %d, \"measured\": %s, \"gops\": %.3f, "
            "\"gops_cpu\": %.3f, \"ghz\": %.3f, \"ops_per_cycle_per_core\": %.3f}",
            threads, p->measured ? "true" : "false", p->gflops, p->gflops_cpu, p->ghz,
            p->ghz > 0 ? p->gflops_cpu / (p->ghz * threads) : 0.0);
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

int kb_cmd_peak(int argc, char **argv) {
    const core_hw *hw = core_hw_get();
    int threads[16] = {1, hw->logical_cores};
    int n_threads = hw->logical_cores > 1 ? 2 : 1;
    double seconds = 0.5;
    const char *json = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            n_threads = kb_parse_ints(argv[++i], threads, 16, 1, 1024);
            if (n_threads < 1) {
                peak_usage();
                return 2;
            }
        } else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
            seconds = atof(argv[++i]);
            if (!(seconds > 0)) {
                peak_usage();
                return 2;
            }
        } else if (!strcmp(argv[i], "--json") && i + 1 < argc) {
            json = argv[++i];
        } else {
            peak_usage();
            return !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h") ? 0 : 2;
        }
    }
    FILE *jf = NULL;
    if (json) {
        jf = fopen(json, "w");
        if (!jf) {
            fprintf(stderr, "kbench: cannot write %s\n", json);
            return 1;
        }
        fprintf(jf, "{\"cmd\": \"peak\", \"cpu\": ");
        json_str(jf, hw->cpu_model);
        fprintf(jf, ", \"logical_cores\": %d, \"seconds\": %g,\n \"peaks\": [", hw->logical_cores,
                seconds);
    }
    printf("# Multiply-accumulate peak: %s, %d logical cores\n\n", hw->cpu_model,
           hw->logical_cores);
    printf("| ISA | threads | GFLOP/s (wall) | GFLOP/s (CPU time) | GHz | flops/cycle/core |\n");
    printf("|---|---:|---:|---:|---:|---:|\n");
    bool first = true;
    for (int i = 0; i < PEAK_ISA_COUNT; i++) {
        peak_isa isa = (peak_isa)i;
        if (!peak_isa_loop(isa)) {
            printf("| %s | - | absent | | | |\n", peak_isa_name(isa));
            if (jf) json_row(jf, first, isa, 0, NULL);
            first = false;
            continue;
        }
        for (int ti = 0; ti < n_threads; ti++) {
            kb_peak p = kb_peak_measure(isa, threads[ti], seconds);
            if (jf) json_row(jf, first, isa, threads[ti], &p);
            first = false;
            if (!p.measured) {
                printf("| %s | %d | failed | | | |\n", peak_isa_name(isa), threads[ti]);
                continue;
            }
            if (p.ghz > 0)
                printf("| %s | %d | %.1f | %.1f | %.2f | %.1f |\n", peak_isa_name(isa), threads[ti],
                       p.gflops, p.gflops_cpu, p.ghz, p.gflops_cpu / (p.ghz * threads[ti]));
            else
                printf("| %s | %d | %.1f | %.1f | ? | ? |\n", peak_isa_name(isa), threads[ti],
                       p.gflops, p.gflops_cpu);
            fflush(stdout);
        }
    }
    if (jf) {
        fprintf(jf, "],\n \"load_average\": ");
        json_str(jf, kb_loadavg());
        fprintf(jf, "}\n");
        bool ok = !ferror(jf);
        if (fclose(jf) != 0 || !ok) {
            fprintf(stderr, "kbench: writing %s failed\n", json);
            return 1;
        }
    }
    printf(
        "\nGFLOP/s (wall): flops of all threads / elapsed time. GFLOP/s (CPU time): the sum of "
        "each\n"
        "thread's flops / its own CPU time, i.e. the cores' rate while they run, which other\n"
        "processes sharing the cores do not lower. GHz: core clock from a chain of dependent adds\n"
        "over thread CPU time, measured before and after each run; flops/cycle/core uses the CPU\n"
        "time rate. The int8 rows count operations the same way (a u8 x s8 multiply-add is 2):\n"
        "GOP/s. Load average now: %s\n",
        kb_loadavg());
    return 0;
}
