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

/* ---- shared helpers (kbench.c) -----------------------------------------------------------------
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

/* ---- the GEMM / Conv benchmark (kbench_ops.c) ---------------------------------------------------
 */

int kb_cmd_gemm(int argc, char **argv);
int kb_cmd_conv(int argc, char **argv);

#endif
