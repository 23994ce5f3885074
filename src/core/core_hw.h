/* What the hardware can do, as core_hw_get (core.h) detects it. A header of its own, with only
 * libc includes, because `anvil compile` ships it verbatim beside the kernels it emits
 * (src/runtime/emit.c), whose blocking rules read the cache sizes. */
#ifndef ANVIL_CORE_HW_H
#define ANVIL_CORE_HW_H

#include <stdbool.h>
#include <stddef.h>

typedef struct core_hw {
    char cpu_model[64];
    int logical_cores;
    int physical_cores;
    size_t l1d_bytes, l2_bytes, l3_bytes; /* per core for L1/L2, total for L3; 0 if unknown */
    bool sse42, avx, avx2, fma, f16c;
    bool avx_vnni; /* the VEX-encoded (ymm) vpdpbusd of AVX2-era CPUs, CPUID 7.1 EAX bit 4 */
    bool avx512f, avx512bw, avx512vl, avx512dq, avx512cd;
    bool avx512_vnni, avx512_bf16, avx512_fp16;
    bool amx_tile, amx_bf16, amx_int8, amx_fp16;
    bool os_avx512, os_amx; /* the OS saves the state (XCR0; AMX also needs arch_prctl) */
} core_hw;

#endif
