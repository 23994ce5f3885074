/* anvil_kbench: shared declarations of the kernel benchmark program (bench/kbench*.c and the ISA
 * files bench/peak_*.c). A benchmark, never a test: it prints tables and never fails on a time.
 *
 * The peak_* loops are compiled with their ISA's flags and may only be called after core_hw_get()
 * reported that ISA (kb_peak_available). */
#ifndef ANVIL_KBENCH_H
#define ANVIL_KBENCH_H

#include "kernels/kernels.h"
#include "runtime/runtime.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* ---- FMA peak loops (bench/peak_*.c) -----------------------------------------------------------
 * Each runs `iters` iterations of a block of independent multiply-accumulate chains and returns
 * the floating-point operations it performed, counted as the instruction does (an fp32 FMA on a
 * zmm is 16 lanes x 2 = 32 flops; a vdpbf16ps on a zmm is 32 bf16 pairs x 2 = 64 flops). The
 * accumulators are folded into *sink so the work cannot be optimised away. */
uint64_t kb_peak_avx512_f32(uint64_t iters, float *sink);
uint64_t kb_peak_avx2_f32(uint64_t iters, float *sink);
uint64_t kb_peak_avx512_bf16(uint64_t iters, float *sink);
uint64_t kb_peak_avx512_fp16(uint64_t iters, float *sink); /* 0 when not compiled in */
uint64_t kb_peak_amx_bf16(uint64_t iters, float *sink);    /* 0 when not compiled in */
/* Whether the build contains the fp16 / AMX loops (the compiler knew the flags). */
bool kb_peak_have_fp16(void);
bool kb_peak_have_amx(void);

/* ---- peak measurement (kbench_peak.c) ---------------------------------------------------------
 */

typedef enum kb_isa {
    KB_ISA_AVX512_F32,
    KB_ISA_AVX2_F32,
    KB_ISA_AVX512_BF16,
    KB_ISA_AVX512_FP16,
    KB_ISA_AMX_BF16,
    KB_ISA_COUNT
} kb_isa;

typedef struct kb_peak {
    bool measured;
    double gflops;     /* all threads together, flops / wall time */
    double gflops_cpu; /* the sum of each thread's flops / its own CPU time: what the cores do
                          while they run, unaffected by other processes taking turns on them */
    double ghz;        /* core clock from a dependent add chain over thread CPU time; 0 unknown */
} kb_peak;

const char *kb_isa_name(kb_isa isa);
/* Whether this CPU (as core_hw_get reports it) and this build can run isa's loop. */
bool kb_peak_available(kb_isa isa);
/* Runs isa's loop on `threads` threads at once for about seconds_target seconds. */
kb_peak kb_peak_measure(kb_isa isa, int threads, double seconds_target);
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
 * drawn from seed; the whole reference output is computed when the case has at most full_limit
 * flops. False on failure (a check or reference failure is said on stderr). Either way the caller
 * releases c with kb_case_free. */
bool kb_case_matmul(kb_case *c, int64_t m, int64_t n, int64_t k, uint64_t seed, double full_limit);
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
