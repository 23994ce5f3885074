/* The machine's multiply-accumulate peaks, measured: per ISA a loop of independent accumulator
 * chains (enough of them to cover the instruction's latency x throughput, so the loop is bound by
 * throughput alone), and per number format the best of those loops on one core.
 *
 * The runtime reads peak_rates_get() to choose between formats (fp32 or bf16, ...) by what the
 * cores actually do rather than by CPUID bits; anvil_kbench's `peak` command times the same loops
 * longer and on several threads (bench/kbench_peak.c).
 *
 * Each loop is compiled with its ISA's flags (cmake/kernels.cmake, by the file's suffix) and is
 * only handed out by peak_isa_loop after core_hw_get() reported the ISA, so ANVIL_ISA caps it. */
#ifndef ANVIL_KERNELS_CPU_PEAK_H
#define ANVIL_KERNELS_CPU_PEAK_H

#include <stdbool.h>
#include <stdint.h>

/* The loops, in the order anvil_kbench lists them. */
typedef enum peak_isa {
    PEAK_AVX512_F32,     /* vfmadd231ps zmm: 16 lanes x 2 = 32 flops */
    PEAK_AVX2_F32,       /* vfmadd231ps ymm: 8 x 2 = 16 flops */
    PEAK_SSE_F32,        /* mulps + addps xmm (baseline x86-64): 4 + 4 = 8 flops */
    PEAK_AVX512_BF16,    /* vdpbf16ps zmm: 32 bf16 pairs x 2 = 64 flops */
    PEAK_AVX512_FP16,    /* vfmadd231ph zmm: 32 x 2 = 64 flops */
    PEAK_AMX_BF16,       /* tdpbf16ps, 16x64-byte tiles: 16 x 16 x 32 x 2 = 16384 flops */
    PEAK_AVX512_VNNI_I8, /* vpdpbusd zmm: 64 u8 x s8 products x 2 = 128 ops */
    PEAK_AVX_VNNI_I8,    /* {vex} vpdpbusd ymm: 32 x 2 = 64 ops */
    PEAK_AMX_INT8,       /* tdpbusd, 16x64-byte tiles: 16 x 16 x 64 x 2 = 32768 ops */
    PEAK_ISA_COUNT
} peak_isa;

/* The number format a loop multiplies in. */
typedef enum peak_format {
    PEAK_FORMAT_F32,
    PEAK_FORMAT_BF16,
    PEAK_FORMAT_FP16,
    PEAK_FORMAT_I8,
    PEAK_FORMAT_COUNT
} peak_format;

/* Runs `iters` iterations of a block of independent multiply-accumulate chains and returns the
 * operations performed, counted as the instruction does (see peak_isa). The accumulators are
 * folded into *sink (caller-owned) so that the work cannot be optimised away. */
typedef uint64_t (*peak_loop)(uint64_t iters, float *sink);

/* The ISA's name as the tables print it ("avx512_f32", "amx_int8"): static storage. */
const char *peak_isa_name(peak_isa isa);
peak_format peak_isa_format(peak_isa isa);
/* The loop of isa when this CPU (as core_hw_get() reports it now) and this build can run it,
 * else NULL (the ISA is absent). */
peak_loop peak_isa_loop(peak_isa isa);
/* The rate of isa's loop on the calling thread in GFLOP/s (GOP/s for int8): operations over the
 * thread's own CPU time, so other processes taking turns on the core do not lower it. Runs for
 * about `seconds` of CPU time; 0 when the ISA is absent or the loop misbehaved. */
double peak_isa_measure(peak_isa isa, double seconds);

/* Per format, the best loop's rate on one core (0 when no loop for the format can run) and that
 * loop's name (peak_isa_name; NULL when absent). GFLOP/s, GOP/s for i8. `isa`: every loop's own
 * rate (0 where absent): a format's instructions may differ by far (a Sapphire Rapids core:
 * vdpbf16ps 103, AMX's tdpbf16ps 2,960 GFLOP/s), and a kernel runs on one of them. */
typedef struct peak_rates {
    double f32, bf16, fp16, i8;
    const char *f32_isa, *bf16_isa, *fp16_isa, *i8_isa;
    double isa[PEAK_ISA_COUNT];
} peak_rates;

/* The rates under the ISA features core_hw_get() reports now, measured on the calling thread the
 * first time they are asked for (about 10-20 ms per available loop) and kept for the life of the
 * process: later calls return the same pointer (static storage, never freed). A different ISA cap
 * (ANVIL_ISA, anvil_set_isa_cap) is a different set of loops, measured once on its first call.
 * Thread-safe: concurrent first calls wait for one measurement. */
const peak_rates *peak_rates_get(void);

/* The loops (peak_*.c): call them only through peak_isa_loop, which checks the CPU. The fp16,
 * AVX-VNNI and AMX ones return 0 when the compiler lacked the ISA's flags (peak_build_has). */
uint64_t peak_avx512_f32(uint64_t iters, float *sink);
uint64_t peak_avx2_f32(uint64_t iters, float *sink);
uint64_t peak_sse_f32(uint64_t iters, float *sink);
uint64_t peak_avx512_bf16(uint64_t iters, float *sink);
uint64_t peak_avx512_fp16(uint64_t iters, float *sink);
uint64_t peak_amx_bf16(uint64_t iters, float *sink);
uint64_t peak_avx512_vnni_i8(uint64_t iters, float *sink);
uint64_t peak_avx_vnni_i8(uint64_t iters, float *sink);
uint64_t peak_amx_int8(uint64_t iters, float *sink);
/* Whether the build compiled a real loop for these ISAs (the compiler knew the flags). */
bool peak_build_has_fp16(void);
bool peak_build_has_avx_vnni(void);
bool peak_build_has_amx(void);

#endif
