/* The AMX-BF16 peak loop: tdpbf16ps on full 16x64-byte tiles, each instruction 16 x 16 fp32
 * outputs x 32 bf16 products = 8192 multiply-adds = 16384 flops. Four accumulator tiles share one
 * A and one B tile so consecutive instructions are independent (the instruction's latency is
 * several times its issue interval). Compiled with -mamx-tile -mamx-bf16 when the compiler knows
 * them (KB_HAVE_AMX, set by bench/CMakeLists.txt), else a stub. Called only after core_hw_get()
 * reported AMX: that detection also asked Linux for the tile state (arch_prctl), which every
 * thread created afterwards inherits. */
#include "kbench.h"

#ifdef KB_HAVE_AMX
#include <immintrin.h>
#include <string.h>

/* The 64-byte tile configuration of palette 1 (Intel SDM, LDTILECFG). */
typedef struct amx_cfg {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_cfg;

bool kb_peak_have_amx(void) {
    return true;
}

uint64_t kb_peak_amx_bf16(uint64_t iters, float *sink) {
    _Alignas(64) amx_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 6; t++) {
        cfg.colsb[t] = 64;
        cfg.rows[t] = 16;
    }
    _tile_loadconfig(&cfg);
    /* bf16 0.5 = 0x3f00 and 0.001 ~ 0x3a83: small products, no overflow over any run length. */
    _Alignas(64) uint16_t a[16 * 32], b[16 * 32];
    for (int i = 0; i < 16 * 32; i++) {
        a[i] = 0x3f00;
        b[i] = 0x3a83;
    }
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
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
    *sink += c[0];
    _tile_stored(3, c, 64);
    *sink += c[255];
    _tile_release();
    return iters * 4u * 16u * 16u * 32u * 2u;
}
#else
bool kb_peak_have_amx(void) {
    return false;
}

uint64_t kb_peak_amx_bf16(uint64_t iters, float *sink) {
    (void)iters;
    (void)sink;
    return 0;
}
#endif
