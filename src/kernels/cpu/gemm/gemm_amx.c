/* The AMX-BF16 register tile of the GEMM: 32 x 32 of C in four 16 x 16 fp32 accumulator tiles,
 * each step of 32 along K two A tiles (16 rows x 32 bf16) and two B tiles (16 pair rows x 16
 * columns) into four TDPBF16PS. One instruction is 16 x 16 x 32 multiply-adds, so on a core that
 * issues one every 16 cycles the tile reaches 1,024 flops a cycle, eight times an AVX-512 FMA
 * pair's. The sums and the epilogue are fp32, as on every other tile.
 *
 * Panels: B is the bf16 tiles' (pair slots, k-major, gemm_avx512bf16.c's packer), so a B tile is
 * 16 of its slot rows, 64 bytes of a 128-byte row. A differs: a tile loads 16 rows of 64
 * contiguous bytes each, so an A panel holds each of its 32 rows' bf16 values in a row of its own
 * (row i at slot i * slots, where slots = (kc + 1) / 2), the same bytes as the other tiles'
 * panels laid out by rows. That is why the tile only takes A packed per block by the driver
 * (never gemm_pack_a's whole-K panels: the driver would step through them by k), and why the
 * convolutions, which pre-pack A, keep to the AVX-512 bf16 tiles.
 *
 * A K that is not a multiple of 32 ends with one step on zero-padded copies of the last slots
 * (16 x 16 of A's, 16 x 32 of B's), so no tile ever reads past a panel. The tile configuration
 * is loaded when a thread starts a block of the GEMM (gemm_kernel.begin) and released when it
 * ends it: other code on the same thread (oneDNN's AMX kernels, the peak loops) configures the
 * tiles its own way. Compiled with AMX and AVX-512 flags where the compiler knows AMX
 * (ANVIL_CC_AMX); elsewhere the tile exists without a micro-kernel and gemm_kernel_usable
 * refuses it. */
#include "gemm.h"

#include <string.h>

#ifdef ANVIL_CC_AMX
#include "gemm_vec_avx512.h"
#include "kernels/kern_amx.h"

/* Tiles 0-3: C (rows 0-15 / 16-31 x columns 0-15 / 16-31); 4, 5: A's rows 0-15 and 16-31; 6, 7:
 * B's columns 0-15 and 16-31. */
static void amx_begin(void) {
    _tile_loadconfig(&kern_amx_tiles_16x64);
}

static void amx_end(void) {
    _tile_release();
}

/* gemm_kernel.pack_a: rows of bf16 (rounded as the other tiles round, vcvtne2ps2bf16), row i of
 * each MR-row panel at slot i * slots; rows past m and the odd k zero. */
static void pack_a_amx(int mr, const float *a, int64_t rs, int64_t cs, int64_t m, int64_t kc,
                       float *dst) {
    const int64_t slots = (kc + 1) / 2;
    for (int64_t i0 = 0; i0 < m; i0 += mr, dst += slots * mr) {
        const int64_t rows = m - i0 < mr ? m - i0 : mr;
        for (int64_t i = 0; i < mr; i++) {
            uint32_t *d = (uint32_t *)dst + i * slots;
            if (i >= rows) {
                memset(d, 0, sizeof *d * (size_t)slots);
                continue;
            }
            const float *src = a + (i0 + i) * rs;
            for (int64_t p = 0; p < kc; p += 32) {
                const int64_t left = kc - p < 32 ? kc - p : 32;
                const int64_t nl = left < 16 ? left : 16, nh = left - nl;
                __m512 lo, hi;
                if (cs == 1) {
                    lo = _mm512_maskz_loadu_ps((__mmask16)((1u << nl) - 1u), src + p);
                    hi = _mm512_maskz_loadu_ps((__mmask16)((1u << nh) - 1u), src + p + 16);
                } else {
                    float t[32];
                    for (int64_t q = 0; q < 32; q++) t[q] = q < left ? src[(p + q) * cs] : 0.0f;
                    lo = _mm512_loadu_ps(t);
                    hi = _mm512_loadu_ps(t + 16);
                }
                const int64_t ns = (left + 1) / 2;
                _mm512_mask_storeu_epi32(d + p / 2, (__mmask16)((1u << ns) - 1u),
                                         (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
            }
        }
    }
}

/* gemm_kernel.pack_a16: a bf16 A's rows are the panel's rows already. */
static void pack_a16_amx(int mr, const uint16_t *a, int64_t rs, int64_t m, int64_t kc, float *dst) {
    const int64_t slots = (kc + 1) / 2;
    for (int64_t i0 = 0; i0 < m; i0 += mr, dst += slots * mr)
        for (int64_t i = 0; i < mr; i++) {
            uint16_t *d = (uint16_t *)((uint32_t *)dst + i * slots);
            if (i0 + i < m)
                memcpy(d, a + (i0 + i) * rs, sizeof *d * (size_t)kc);
            else
                memset(d, 0, sizeof *d * (size_t)kc);
            if (kc & 1) d[kc] = 0;
        }
}

GEMM_TILE_EPILOGUE(amx)

/* Rows of C per call of the register epilogue: 16 (32 accumulators) spilled around GELU's
 * temporaries; on one 32x32 tile at K = 768 with bias + GELU (erf / tanh), GFLOP/s of the
 * micro-kernel in L1: 16 rows 552 / 656, 4 520 / 706, 2 664 / 694, 1 629 / 710; no epilogue
 * 960-1070 (one run each, noisy). */
#define AMX_EP_ROWS 2
/* gemm_ukernel_fn on packed panels; kc counts slots (pairs). */
static void uk_32x32_amx(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                         int accumulate, const float *pf, int64_t pf_n, const gemm_epilogue *ep,
                         int64_t i0, int64_t j0) {
    /* no prefetch of the next B block (pf): it measured the same as none on 128x3072x768,
     * 128x768x3072, 512x3072x768 and BERT-base (Sapphire Rapids, 1 thread) */
    (void)pf;
    (void)pf_n;
    const size_t lda = (size_t)kc * 4, ldb = 32 * 4, ldcb = (size_t)ldc * 4;
    const char *ab = (const char *)a, *bb = (const char *)b;
    if (accumulate) {
        _tile_loadd(0, c, ldcb);
        _tile_loadd(1, c + 16, ldcb);
        _tile_loadd(2, c + 16 * ldc, ldcb);
        _tile_loadd(3, c + 16 * ldc + 16, ldcb);
    } else {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
    }
    const int64_t full = kc / 16 * 16;
    for (int64_t q = 0; q < full; q += 16) {
        _tile_loadd(4, ab + q * 4, lda);
        _tile_loadd(6, bb + q * ldb, ldb);
        _tile_loadd(7, bb + q * ldb + 64, ldb);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_loadd(5, ab + 16 * lda + q * 4, lda);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    if (full < kc) {
        /* the last slots, zero-padded to a whole step */
        const int64_t t = kc - full;
        _Alignas(64) uint32_t at[32 * 16], bt[16 * 32];
        memset(at, 0, sizeof at);
        memset(bt, 0, sizeof bt);
        for (int i = 0; i < 32; i++) memcpy(at + i * 16, ab + i * lda + full * 4, (size_t)t * 4);
        memcpy(bt, bb + full * ldb, (size_t)t * ldb);
        KERN_AMX_BARRIER();
        _tile_loadd(4, at, 64);
        _tile_loadd(5, at + 16 * 16, 64);
        _tile_loadd(6, bt, 128);
        _tile_loadd(7, bt + 16, 128);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, c, ldcb);
    _tile_stored(1, c + 16, ldcb);
    _tile_stored(2, c + 16 * ldc, ldcb);
    _tile_stored(3, c + 16 * ldc + 16, ldcb);
    KERN_AMX_BARRIER();
    if (!ep) return;
    /* The epilogue on the stored tile, AMX_EP_ROWS rows at a time in registers with the fp32
     * tiles' code (gemm_ukernel_epilogue) rather than tile_epilogue_amx's calls of the eltwise
     * function per 32-float row. GELU still costs: GPT-2's FFN GEMMs with it (128x3072x768)
     * take ~1.5 ms against ~0.7 for the one without (Sapphire Rapids, 1 thread). */
    for (int r0 = 0; r0 < 32; r0 += AMX_EP_ROWS) {
        gemm_v acc[GEMM_MR_MAX][GEMM_NV_MAX];
        for (int i = 0; i < AMX_EP_ROWS; i++) {
            acc[i][0] = GEMM_LOAD(c + (r0 + i) * ldc);
            acc[i][1] = GEMM_LOAD(c + (r0 + i) * ldc + 16);
        }
        gemm_ukernel_epilogue(acc, ep, i0 + r0, j0, AMX_EP_ROWS, 2);
        for (int i = 0; i < AMX_EP_ROWS; i++) {
            GEMM_STORE(c + (r0 + i) * ldc, acc[i][0]);
            GEMM_STORE(c + (r0 + i) * ldc + 16, acc[i][1]);
        }
    }
}

#define AMX_UKERNEL uk_32x32_amx
#define AMX_ACTS GEMM_ACTS_IN_REGISTERS
#define AMX_EPILOGUE tile_epilogue_amx
#define AMX_PACK_A pack_a_amx
#define AMX_PACK_A16 pack_a16_amx
#define AMX_BEGIN amx_begin
#define AMX_END amx_end
#else
#define AMX_UKERNEL NULL
#define AMX_ACTS 0u
#define AMX_EPILOGUE NULL
#define AMX_PACK_A NULL
#define AMX_PACK_A16 NULL
#define AMX_BEGIN NULL
#define AMX_END NULL
#endif

/* Applies in registers what the AVX-512 tiles do (GEMM_ACTS_IN_REGISTERS); the driver runs any
 * other activation over the stored tile (tile_epilogue_amx). */
const gemm_kernel gemm_kernel_32x32_amx = {"32x32_amx",
                                           32,
                                           32,
                                           GEMM_NEEDS_amx,
                                           AMX_UKERNEL,
                                           AMX_EPILOGUE,
                                           NULL,
                                           NULL,
                                           NULL,
                                           AMX_ACTS,
                                           NULL,
                                           NULL,
                                           2,
                                           AMX_PACK_A,
                                           gemm_bf16_pack_b,
                                           AMX_PACK_A16,
                                           gemm_bf16_store_c16,
                                           AMX_BEGIN,
                                           AMX_END,
                                           NULL,
                                           NULL};
