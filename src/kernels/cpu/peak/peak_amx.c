/* The AMX peak loops: tdpbf16ps and tdpbusd on full 16-row x 64-byte tiles.
 *   bf16: each instruction 16 x 16 fp32 outputs x 32 bf16 products = 8192 multiply-adds = 16384
 *         flops.
 *   int8: each instruction 16 x 16 int32 outputs x 64 u8 x s8 products = 16384 multiply-adds =
 *         32768 ops.
 * Four accumulator tiles share one A and one B tile so consecutive instructions are independent
 * (the instruction's latency is several times its issue interval). Compiled with -mamx-tile
 * -mamx-bf16 -mamx-int8 when the compiler knows them (ANVIL_CC_AMX, set by cmake/kernels.cmake),
 * else stubs. Called only after core_hw_get() reported AMX: that detection also asked Linux for
 * the tile state (arch_prctl), which every thread created afterwards inherits. */
#include "peak.h"

#ifdef ANVIL_CC_AMX
#include "kernels/kern_amx.h"

#include <string.h>

/* Tiles of 16 rows of 64 bytes: 0-3 the accumulators, 4 and 5 the multiplicands. */
static void amx_setup(void) {
    _tile_loadconfig(&kern_amx_tiles_16x64);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
}

bool peak_build_has_amx(void) {
    return true;
}

uint64_t peak_amx_bf16(uint64_t iters, float *sink) {
    amx_setup();
    /* bf16 0.5 = 0x3f00 and 0.001 ~ 0x3a83: small products, no overflow over any run length. */
    _Alignas(64) uint16_t a[16 * 32], b[16 * 32];
    for (int i = 0; i < 16 * 32; i++) {
        a[i] = 0x3f00;
        b[i] = 0x3a83;
    }
    KERN_AMX_BARRIER();
    _tile_loadd(4, a, 64);
    _tile_loadd(5, b, 64);
    for (uint64_t it = 0; it < iters; it++) {
        _tile_dpbf16ps(0, 4, 5);
        _tile_dpbf16ps(1, 4, 5);
        _tile_dpbf16ps(2, 4, 5);
        _tile_dpbf16ps(3, 4, 5);
    }
    _Alignas(64) float c[16 * 16];
    _tile_stored(0, c, 64);
    KERN_AMX_BARRIER();
    *sink += c[0];
    _tile_stored(3, c, 64);
    KERN_AMX_BARRIER();
    *sink += c[255];
    _tile_release();
    return iters * 4u * 16u * 16u * 32u * 2u;
}

uint64_t peak_amx_int8(uint64_t iters, float *sink) {
    amx_setup();
    /* u8 1 x s8 1: the int32 sums wrap on very long runs, which the hardware does silently. */
    _Alignas(64) uint8_t a[16 * 64];
    _Alignas(64) int8_t b[16 * 64];
    memset(a, 1, sizeof a);
    memset(b, 1, sizeof b);
    KERN_AMX_BARRIER();
    _tile_loadd(4, a, 64);
    _tile_loadd(5, b, 64);
    for (uint64_t it = 0; it < iters; it++) {
        _tile_dpbusd(0, 4, 5);
        _tile_dpbusd(1, 4, 5);
        _tile_dpbusd(2, 4, 5);
        _tile_dpbusd(3, 4, 5);
    }
    _Alignas(64) int32_t c[16 * 16];
    _tile_stored(0, c, 64);
    KERN_AMX_BARRIER();
    *sink += (float)c[0];
    _tile_stored(3, c, 64);
    KERN_AMX_BARRIER();
    *sink += (float)c[255];
    _tile_release();
    return iters * 4u * 16u * 16u * 64u * 2u;
}
#else
bool peak_build_has_amx(void) {
    return false;
}

uint64_t peak_amx_bf16(uint64_t iters, float *sink) {
    (void)iters;
    (void)sink;
    return 0;
}

uint64_t peak_amx_int8(uint64_t iters, float *sink) {
    (void)iters;
    (void)sink;
    return 0;
}
#endif
