/* anvil_kbench: shared declarations of the kernel benchmark program (bench/kbench*.c). A
 * benchmark, never a test: it prints tables and never fails on a time. */
#ifndef ANVIL_KBENCH_H
#define ANVIL_KBENCH_H

#include "kernels/cpu/peak/peak.h"
#include "kernels/kernels.h"
#include "runtime/runtime.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* ---- peak measurement (kbench_peak.c) ---------------------------------------------------------
 * The loops are the library's (kernels/cpu/peak/peak.h); this times them longer than the library
 * does and on several threads at once. */

typedef struct kb_peak {
    bool measured;
    double gflops;     /* all threads together, flops (int8: ops) / wall time */
    double gflops_cpu; /* the sum of each thread's flops / its own CPU time: what the cores do
                          while they run, unaffected by other processes taking turns on them */
    double ghz;        /* core clock from a dependent add chain over thread CPU time; 0 unknown */
} kb_peak;

/* Runs isa's loop on `threads` threads at once for about seconds_target seconds; not measured
 * when this CPU (as core_hw_get reports it) or this build cannot run it (peak_isa_loop). */
kb_peak kb_peak_measure(peak_isa isa, int threads, double seconds_target);
/* The core clock in GHz from a chain of dependent register adds (1 cycle each), over the calling
 * thread's CPU time (so time slices given to other processes do not count). */
double kb_measure_ghz(void);
/* The `peak` command. */
int kb_cmd_peak(int argc, char **argv);

/* ---- shared helpers (kbench_util.c)
 * -----------------------------------------------------------------
 */

/* Parses "1,2,4" into out (at most cap values, each in [lo, hi]); returns the count or -1. */
int kb_parse_ints(const char *s, int *out, int cap, int lo, int hi);
/* Whether `name` is in the comma-separated list (NULL list: everything). */
bool kb_in_list(const char *list, const char *name);
/* Monotonic time in seconds. */
double kb_now_s(void);
/* CPU time of the calling thread / of the whole process, in seconds. */
double kb_thread_cpu_s(void);
double kb_process_cpu_s(void);
/* The 1/5/15-minute load averages from /proc/loadavg ("?" if unreadable). Static storage. */
const char *kb_loadavg(void);

/* ---- the cases: one node, its data and its check (kbench_cases.c) ------------------------------
 */

#define KB_MAX_IN 3

typedef enum kb_case_kind { KB_CASE_MATMUL, KB_CASE_CONV } kb_case_kind;

/* One conv layer (batch 1, square kernel/stride/pad, dilation 1). count: how often the network
 * has it. */
typedef struct kb_conv_layer {
    const char *net;
    int cin, h, w, cout, k, stride, pad, group, count;
} kb_conv_layer;

/* One benchmark case: a graph holding the one node, its inputs (owned) and what the check needs. */
typedef struct kb_case {
    kb_case_kind kind;
    char label[96];
    int64_t m, n, k; /* MatMul: [m,k] x [k,n] */
    kb_conv_layer conv;
    bool nhwc; /* conv: anvil.ConvNhwc, X [1, h, w, cin] and Y [1, ho, wo, cout] */
    int64_t ho, wo;
    double flops;
    ir_graph *g;
    int32_t node;
    int n_in;
    op_tensor in[KB_MAX_IN];
    op_tinfo tin[KB_MAX_IN];
    op_tinfo tout;
    size_t out_bytes;
    float *ref; /* the reference kernel's output, or NULL: checks are sampled */
} kb_case;

/* A named set of conv layers (a network's distinct layers). */
typedef struct kb_conv_set {
    const char *name;
    const kb_conv_layer *layers;
    size_t n;
} kb_conv_set;
extern const kb_conv_set kb_conv_sets[]; /* resnet50, vgg16, mobilenetv2_dw, efficientnet_dw */
extern const int kb_conv_set_count;

/* Builds c (its old contents are overwritten, not freed) as [m,k] x [k,n] / as layer l, inputs
 * drawn from seed, B a constant (packed once in prepare) unless var_b (a training step's operand,
 * packed by every run); the whole reference output is computed when the case has at most full_limit
 * flops. False on failure (a check or reference failure is said on stderr). Either way the caller
 * releases c with kb_case_free. */
bool kb_case_matmul(kb_case *c, int64_t m, int64_t n, int64_t k, bool var_b, uint64_t seed,
                    double full_limit);
bool kb_case_conv(kb_case *c, const kb_conv_layer *l, bool nhwc, uint64_t seed, double full_limit);
void kb_case_free(kb_case *c);
/* The case's node (inside c->g). */
ir_node *kb_case_node(kb_case *c);
/* Largest error of got (the case's output) relative to max|ref|; infinity for any NaN. */
double kb_case_error(const kb_case *c, const float *got);
/* "256x28x28>256 k3 s2"-style label of a layer. */
void kb_conv_label(const kb_conv_layer *l, char *buf, size_t size);

/* ---- the GEMM / Conv benchmark (kbench_ops.c) ---------------------------------------------------
 */

int kb_cmd_gemm(int argc, char **argv);
int kb_cmd_conv(int argc, char **argv);

#endif
