/* The ISA and backend bits a variant or a GEMM tile needs (kernels.h). A header of its own, with
 * only core_hw.h as include, because `anvil compile` ships it verbatim beside the kernels it emits
 * (src/runtime/emit.c). */
#ifndef ANVIL_KERNELS_KERN_ISA_H
#define ANVIL_KERNELS_KERN_ISA_H

#include "core/core_hw.h"

#include <stdint.h>

/* ISA / backend requirements, checked against core_hw before `supports`. */
enum {
    KERN_NEEDS_AVX2 = 1u << 0,   /* AVX2 + FMA */
    KERN_NEEDS_AVX512 = 1u << 1, /* AVX-512 F/BW/VL/DQ */
    KERN_NEEDS_AVX512_FP16 = 1u << 2,
    KERN_NEEDS_AVX512_BF16 = 1u << 3,
    KERN_NEEDS_AMX = 1u << 4,
    /* Not a requirement but a property: the variant runs a thread pool of its own beside anvil's
     * (a vendor library's OpenMP). Its idle threads keep spinning after it returns and take the
     * CPUs of the nodes that run next, a cost that timing the variant alone cannot see (on Zen 4,
     * one oneDNN MatMul at the end of ResNet-18 on 2 threads made the whole run 1.6x slower). The
     * tuner offers such variants only to single-threaded sessions. */
    KERN_OWN_THREADS = 1u << 5,
    /* A property too: the variant rounds its operands to bf16 (fp32 accumulators, fp32 in and
     * out of memory), so its results differ from fp32 by bf16's 8-bit mantissa. Offered only to
     * sessions whose precision accepts it (kern_knobs.precision, kern_applies). */
    KERN_ROUNDS_BF16 = 1u << 6,
    /* A property of a KERN_ROUNDS_BF16 variant that leaves the instruction to a vendor library:
     * it multiplies on AMX tiles where the CPU has them, else with AVX512-BF16's dot product
     * (oneDNN does; kern_cascade_may_pick then weighs the faster of the two rates). */
    KERN_BF16_BEST_ISA = 1u << 7,
    /* The same property for IEEE half: the variant rounds its operands to fp16 (and keeps short
     * runs of its sums in fp16, widened to fp32 every few dozen k), so its results differ from
     * fp32 by about fp16's 11-bit mantissa. Offered only to sessions that accept fp16. */
    KERN_ROUNDS_FP16 = 1u << 8,
    /* AVX512-VNNI's vpdpbusd (u8 x s8 dot products of 4 into int32), beside KERN_NEEDS_AVX512. */
    KERN_NEEDS_AVX512_VNNI = 1u << 9,
    /* A property: the variant quantizes fp32 operands to 8 bits while it runs (dynamic int8), so
     * its results differ from fp32 by that rounding. Offered only to sessions of precision int8. */
    KERN_ROUNDS_INT8 = 1u << 10,
};

/* Either reduced-precision property: the variant's results are not fp32's. */
#define KERN_ROUNDS_REDUCED (KERN_ROUNDS_BF16 | KERN_ROUNDS_FP16)

/* Whether hw has everything a KERN_NEEDS_* mask asks for. */
static inline bool kern_isa_ok(uint32_t needs, const core_hw *hw) {
    if ((needs & KERN_NEEDS_AVX2) && !(hw->avx2 && hw->fma)) return false;
    if ((needs & KERN_NEEDS_AVX512) &&
        !(hw->avx512f && hw->avx512bw && hw->avx512vl && hw->avx512dq && hw->os_avx512))
        return false;
    if ((needs & KERN_NEEDS_AVX512_FP16) && !hw->avx512_fp16) return false;
    if ((needs & KERN_NEEDS_AVX512_BF16) && !hw->avx512_bf16) return false;
    if ((needs & KERN_NEEDS_AVX512_VNNI) && !hw->avx512_vnni) return false;
    if ((needs & KERN_NEEDS_AMX) && !(hw->amx_tile && hw->amx_bf16 && hw->os_amx)) return false;
    return true;
}

#endif
