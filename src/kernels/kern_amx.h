/* What the AMX files share (compiled with AMX flags only: ANVIL_CC_AMX): the tile configuration
 * of palette 1 that they all use, eight tiles of 16 rows x 64 bytes, and the compiler barrier
 * around tile loads and stores.
 *
 * GCC 12 writes LDTILECFG, TILELOADD and TILESTORED as asm without memory operands: it dropped
 * all but the palette byte of a configuration built in a local (the first tile instruction then
 * faulted), and may sink the stores that fill a buffer past the tile load that reads it. Hence a
 * configuration in static storage, and KERN_AMX_BARRIER between plain stores and tile loads, and
 * between tile stores and plain loads, of the same memory. */
#ifndef ANVIL_KERN_AMX_H
#define ANVIL_KERN_AMX_H

#include <immintrin.h>
#include <stdint.h>

/* LDTILECFG's 64 bytes (Intel SDM). */
typedef struct kern_amx_cfg {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} kern_amx_cfg;

static const _Alignas(64) kern_amx_cfg kern_amx_tiles_16x64 = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

#define KERN_AMX_BARRIER() __asm__ volatile("" ::: "memory")

#endif
