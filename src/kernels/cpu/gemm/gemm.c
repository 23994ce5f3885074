/* The GEMM driver: kernel list, packing, cache blocking and threading (see gemm.h).
 *
 * Loop nest per thread, over its own block of C (the micro-kernel broadcasts A and loads B as
 * vectors, so B is the "streamed" operand and A the one kept in L1):
 *
 *   for ic in M step MC:            A block (MC x KC) packed once per (ic, pc), lives in L3/L2
 *     for pc in K step KC:          (a row-major A is not packed: the kernel reads it in place)
 *       for jc in N step NC:        B block (KC x NC) packed, lives in L2
 *         for ir in MC step MR:     A micro-panel (MR x KC) stays in L1
 *           for jr in NC step NR:   B micro-panels stream from L2; the kernels prefetch the
 *                                   next pre-packed B block into L2 meanwhile
 *             micro-kernel; on the last pc the epilogue runs on the tile while it is in L1
 *
 * Threads never share a C block, so there is no barrier inside a GEMM: the split (rows or
 * columns) is the one that packs least, since a row split repacks B in every thread and a column
 * split repacks A. Pre-packed operands (weights packed once per session) skip their packing. */
#include "gemm.h"
#include "gemm_epilogue.h"

#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif
#if defined(MADV_HUGEPAGE)
#define HAVE_MADV_HUGEPAGE 1
#else
#define HAVE_MADV_HUGEPAGE 0
#endif

/* ---- the portable kernel: always usable, also the oracle for the template's edge handling --- */

static void uk_4x8_portable(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                            int accumulate, const float *pf, int64_t pf_n, const gemm_epilogue *ep,
                            int64_t i0, int64_t j0) {
    (void)pf;
    (void)pf_n;
    float acc[4][8];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 8; j++) acc[i][j] = accumulate ? c[i * ldc + j] : 0.0f;
    for (int64_t p = 0; p < kc; p++, a += 4, b += 8)
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 8; j++) acc[i][j] += a[i] * b[j];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 8; j++) c[i * ldc + j] = acc[i][j];
    if (ep) gemm_epilogue_apply(ep, c, ldc, i0, j0, 4, 8);
}

/* applies every activation itself (the scalar epilogue after its store) */
/* Not static: code emitted by anvil compile names it like the ISA files' tiles. */
const gemm_kernel gemm_kernel_4x8_portable = {"4x8_portable",
                                              4,
                                              8,
                                              0,
                                              uk_4x8_portable,
                                              gemm_epilogue_apply,
                                              NULL,
                                              NULL,
                                              NULL,
                                              0xffffffffu,
                                              NULL,
                                              NULL,
                                              1,
                                              NULL,
                                              NULL,
                                              NULL,
                                              NULL,
                                              NULL,
                                              NULL,
                                              NULL,
                                              NULL};

/* The ISA files' kernels (gemm_avx512.c, gemm_avx2.c). */
#define KERNEL_DECL(MR, NV, NR, ISA) extern const gemm_kernel gemm_kernel_##MR##x##NR##_##ISA;
GEMM_TILES_AVX512(KERNEL_DECL)
GEMM_TILES_AVX2(KERNEL_DECL)

GEMM_TILES_AVX512BF16(KERNEL_DECL)
GEMM_TILES_AVX512FP16(KERNEL_DECL)
GEMM_TILES_AVX512VNNI(KERNEL_DECL)

#define KERNEL_REF(MR, NV, NR, ISA) &gemm_kernel_##MR##x##NR##_##ISA,
const gemm_kernel *const gemm_kernels[] = {GEMM_TILES(KERNEL_REF) NULL};
const gemm_kernel *const gemm_kernels_bf16[] = {GEMM_TILES_AVX512BF16(KERNEL_REF) NULL};
const gemm_kernel *const gemm_kernels_fp16[] = {GEMM_TILES_AVX512FP16(KERNEL_REF) NULL};
const gemm_kernel *const gemm_kernels_i8[] = {GEMM_TILES_AVX512VNNI(KERNEL_REF) NULL};

static const gemm_kernel *find_in(const gemm_kernel *const *list, const char *name) {
    for (const gemm_kernel *const *k = list; *k; k++)
        if (!strcmp((*k)->name, name)) return *k;
    return NULL;
}

const gemm_kernel *gemm_kernel_find(const char *name) {
    return find_in(gemm_kernels, name);
}

const gemm_kernel *gemm_kernel_find_bf16(const char *name) {
#ifndef ANVIL_EMITTED /* a library anvil compile writes never runs the AMX tile */
    if (!strcmp(name, gemm_kernel_32x32_amx.name)) return &gemm_kernel_32x32_amx;
#endif
    return find_in(gemm_kernels_bf16, name);
}

const gemm_kernel *gemm_kernel_find_fp16(const char *name) {
    return find_in(gemm_kernels_fp16, name);
}

const gemm_kernel *gemm_kernel_find_i8(const char *name) {
    return find_in(gemm_kernels_i8, name);
}

bool gemm_kernel_usable(const gemm_kernel *k, const core_hw *hw) {
    return k->ukernel && kern_isa_ok(k->needs, hw);
}

static int64_t round_up(int64_t x, int64_t m);

int64_t gemm_kernel_vl(const gemm_kernel *t) {
    return t->needs & KERN_NEEDS_AVX512 ? 16 : 8;
}

int64_t gemm_cols_kernel_below(const gemm_kernel *t) {
    return t->ukernel_cols ? (int64_t)t->mr * (t->nr / gemm_kernel_vl(t)) * 3 / 4 : 0;
}

static int64_t round_up(int64_t x, int64_t m) {
    return (x + m - 1) / m * m;
}

/* The blocking for k; kc_set, mc_set, nc_set > 0 replace the computed KC, MC, NC (a tuner's
 * configuration: gemm_blocking_config), and the values derived from them follow: NC from the
 * configured KC. All zero is the default. */
static gemm_blocking blocking(const gemm_kernel *k, int64_t m, int64_t n, int64_t kdim,
                              const core_hw *hw, int64_t kc_set, int64_t mc_set, int64_t nc_set) {
    size_t l1 = hw->l1d_bytes ? hw->l1d_bytes : 32u << 10;
    size_t l2 = hw->l2_bytes ? hw->l2_bytes : 1u << 20;
    gemm_blocking b;
    /* KC: the A micro-panel (MR x KC) stays in three quarters of L1 while B panels stream past
     * it; the longer KC, the fewer times each C tile is loaded and stored (measured on Zen 4,
     * 1024^3 with 6x64: KC 384 -> 89%, 1024 -> 92% of peak). K is then cut into even blocks
     * rather than full ones and a ragged tail. With 4x64 that makes KC 1152 at K = 2304 and 1536
     * at K = 3072 (was 1024 + 1024 + 256 and 3 x 1024), and NC (below) one panel: +0.9 to +1.5%
     * at 512x2304x2304, 512x2304x3072, 512x3072x2304, within +-0.4% on the other transformer
     * shapes and 1024^3, 2048^3 (1 thread, 3 interleaved runs of each). A configured KC is taken
     * as it is (clipped to K), so the tuner times exactly the blocks it names. */
    /* A bf16 tile's panels take half the bytes per k, so its KC and NC go twice as far (an int8
     * tile's four times). */
    const int64_t pair = k->kpair > 1 ? k->kpair : 1;
    int64_t kc = (int64_t)(l1 * 3 / 4 / sizeof(float)) * pair / k->mr;
    kc = kc / 16 * 16;
    if (kc < 128) kc = 128;
    if (kc > 2048 * pair) kc = 2048 * pair;
    if (kc_set > 0) {
        /* every block but the last must hold whole bf16 pairs (int8 quads) */
        kc_set = round_up(kc_set, pair);
        b.kc = kc_set < kdim ? kc_set : (kdim > 0 ? kdim : 1);
    } else if (kdim <= kc) {
        b.kc = kdim > 0 ? kdim : 1;
    } else {
        const int64_t blocks = (kdim + kc - 1) / kc;
        b.kc = ((kdim + blocks - 1) / blocks + 15) / 16 * 16;
    }
    /* NC: the B block (KC x NC) takes half of L2, leaving room for C tiles and A. */
    int64_t nc = (int64_t)(l2 / 2 / sizeof(float)) * pair / b.kc;
    nc = nc / k->nr * k->nr;
    if (nc < k->nr) nc = k->nr;
    const int64_t n_all = round_up(n > 0 ? n : 1, k->nr);
    b.nc = n < nc ? n_all : nc;
    if (nc_set > 0) {
        b.nc = round_up(nc_set, k->nr);
        if (b.nc > n_all) b.nc = n_all;
    }
    /* MC: large, so B is repacked rarely; bounded to keep the A block in L3 (by bytes: a bf16
     * tile's rows take half, so it gets twice the rows; a training step's 1024-row GEMM then
     * packs its changing B once instead of for 960 rows and again for 64). */
    int64_t mc = 960 * pair / k->mr * k->mr;
    const int64_t m_all = round_up(m > 0 ? m : 1, k->mr);
    b.mc = m < mc ? m_all : mc;
    if (mc_set > 0) {
        b.mc = round_up(mc_set, k->mr);
        if (b.mc > m_all) b.mc = m_all;
    }
    return b;
}

gemm_blocking gemm_blocking_default(const gemm_kernel *k, int64_t m, int64_t n, int64_t kdim,
                                    const core_hw *hw) {
    return blocking(k, m, n, kdim, hw, 0, 0, 0);
}

gemm_blocking gemm_blocking_config(const gemm_kernel *k, int64_t m, int64_t n, int64_t kdim,
                                   const core_hw *hw, int64_t kc, int64_t mc, int64_t nc) {
    return blocking(k, m, n, kdim, hw, kc, mc, nc);
}

/* ---- packing ------------------------------------------------------------------------------ */

/* A[i0.., p0..] (m x kc) into MR-row panels, k-major, zero rows past m; panel stride kc*MR. */
static void pack_a_block(const gemm_kernel *k, const float *a, int64_t rs, int64_t cs, int64_t m,
                         int64_t kc, float *dst) {
    const int mr = k->mr;
    for (int64_t i0 = 0; i0 < m; i0 += mr, dst += kc * mr) {
        int64_t rows = m - i0 < mr ? m - i0 : mr;
        if (rows < mr)
            for (int64_t p = 0; p < kc; p++)
                for (int64_t i = rows; i < mr; i++) dst[p * mr + i] = 0.0f;
        if (rs == 1) {
            /* A stored by columns (Winograd's V with the tiles as rows, a transposed operand):
             * each k step's rows are consecutive, so copy them in k order. By rows this read
             * every column mr times at a stride and took a sixth of ResNet-50's 128-channel
             * stride-2 Winograd at 2 threads. */
            for (int64_t p = 0; p < kc; p++) {
                const float *src = a + i0 + p * cs;
                for (int64_t i = 0; i < rows; i++) dst[p * mr + i] = src[i];
            }
            continue;
        }
        for (int64_t i = 0; i < rows; i++) {
            const float *src = a + (i0 + i) * rs;
            for (int64_t p = 0; p < kc; p++) dst[p * mr + i] = src[p * cs];
        }
    }
}

/* Rows [i0, i0+m) of an indirect A (gemm_problem.a_ind) at depth [pc, pc+kc), a block inside
 * one segment, into MR-row panels like pack_a_block. A bf16 tile's panels are its pair slots:
 * each panel is gathered in fp32 into tmp (MR x kc floats) and then paired by the tile's own
 * packer, from L1. */
static void pack_a_ind(const gemm_kernel *k, const gemm_problem *p, int64_t i0, int64_t m,
                       int64_t pc, int64_t kc, float *dst, float *tmp) {
    const int mr = k->mr;
    const int64_t segs = p->k / p->a_seg, s = pc / p->a_seg, o = pc % p->a_seg;
    float *panel = k->pack_a ? tmp : dst;
    for (int64_t r0 = 0; r0 < m; r0 += mr) {
        const int64_t rows = m - r0 < mr ? m - r0 : mr;
        for (int64_t i = 0; i < mr; i++) {
            const float *src = i < rows ? p->a_ind[(i0 + r0 + i) * segs + s] + o : NULL;
            for (int64_t q = 0; q < kc; q++) panel[q * mr + i] = src ? src[q] : 0.0f;
        }
        if (k->pack_a) {
            k->pack_a(mr, panel, 1, mr, mr, kc, dst);
            dst += gemm_slots(k, kc) * mr;
        } else {
            panel = dst += kc * mr;
        }
    }
}

/* The depth of the K block starting at pc: KC, except that an indirect A's blocks stay inside
 * one segment (a micro-kernel call follows one pointer per row), a segment longer than KC being
 * cut into equal pieces (512 channels at KC 384: 256 + 256, not 384 + 128). A bf16 tile's
 * pieces are even, so that every block starts on a pair of a pre-packed B (gemm_takes_ind). */
static int64_t block_kc(const gemm_kernel *k, const gemm_blocking *blk, const gemm_problem *p,
                        int64_t pc) {
    const int64_t left = p->k - pc;
    if (!p->a_ind) return left < blk->kc ? left : blk->kc;
    const int64_t seg = p->a_seg, pieces = (seg + blk->kc - 1) / blk->kc;
    int64_t piece = (seg + pieces - 1) / pieces;
    if (k->kpair > 1) piece = round_up(piece, k->kpair);
    const int64_t in_seg = seg - pc % seg;
    return in_seg < piece ? in_seg : piece;
}

bool gemm_takes_ind(const gemm_kernel *k, int64_t a_seg) {
    return k->kpair == 4 ? false : k->kpair != 2 || a_seg % 2 == 0;
}

int64_t gemm_kc_max(const gemm_blocking *b, int64_t kdim, int64_t a_seg) {
    if (kdim <= 0) return 0;
    if (a_seg <= 0) return kdim < b->kc ? kdim : b->kc;
    const int64_t pieces = (a_seg + b->kc - 1) / b->kc;
    return (a_seg + pieces - 1) / pieces;
}

/* B[p0.., j0..] (kc x n) into NR-column panels, k-major, zero columns past n; stride kc*NR. */
static void pack_b_block(const gemm_kernel *k, const float *b, int64_t rs, int64_t cs, int64_t kc,
                         int64_t n, float *dst) {
    const int nr = k->nr;
    for (int64_t j0 = 0; j0 < n; j0 += nr, dst += kc * nr) {
        int64_t cols = n - j0 < nr ? n - j0 : nr;
        const float *src = b + j0 * cs;
        if (cs == 1 && cols == nr) {
            for (int64_t p = 0; p < kc; p++) memcpy(dst + p * nr, src + p * rs, sizeof(float) * nr);
            continue;
        }
        for (int64_t p = 0; p < kc; p++) {
            float *d = dst + p * nr;
            const float *s = src + p * rs;
            for (int64_t j = 0; j < cols; j++) d[j] = s[j * cs];
            for (int64_t j = cols; j < nr; j++) d[j] = 0.0f;
        }
    }
}

/* A block of A or B into panels with k's packer: its own for a bf16 tile, else the fp32 one. */
static void pack_a_any(const gemm_kernel *k, const float *a, int64_t rs, int64_t cs, int64_t m,
                       int64_t kc, float *dst) {
    if (k->pack_a)
        k->pack_a(k->mr, a, rs, cs, m, kc, dst);
    else
        pack_a_block(k, a, rs, cs, m, kc, dst);
}

static void pack_b_any(const gemm_kernel *k, const float *b, int64_t rs, int64_t cs, int64_t kc,
                       int64_t n, float *dst) {
    if (k->pack_b)
        k->pack_b(k->nr, b, rs, cs, kc, n, dst);
    else
        pack_b_block(k, b, rs, cs, kc, n, dst);
}

static anvil_status packed_alloc(const gemm_kernel *k, int64_t panels, int64_t width, int64_t kdim,
                                 gemm_packed *out) {
    memset(out, 0, sizeof *out);
    size_t elems, bytes;
    const int64_t slots = gemm_slots(k, kdim);
    if (!core_mul_size((size_t)panels, (size_t)width, &elems) ||
        !core_mul_size(elems, (size_t)(slots > 0 ? slots : 1), &elems) ||
        !core_mul_size(elems, sizeof(float), &bytes))
        return core_err(ANVIL_ERR_LIMIT, "packed GEMM operand of %lld panels is too large",
                        (long long)panels);
    out->kernel = k;
    /* A packed operand of 2 MiB or more goes on transparent huge pages (where the OS offers
     * them on request): with 4 KiB pages the B block's lines land in L2 sets by the luck of
     * physical placement (and cost TLB misses), huge pages place them evenly. Without: 108.3 vs
     * 112.9 GFLOP/s at 128x3072x3072, 110.9 vs 113.3 at 512x768x3072, 112.1 vs 114.0 at
     * 512x3072x3072 (1 thread, medians of 3 interleaved runs). Only whole 2 MiB pages of the
     * buffer are advised, so no memory is added beyond the alignment's untouched lead. */
    const size_t huge = (size_t)2 << 20;
    const bool use_huge = HAVE_MADV_HUGEPAGE && bytes >= huge;
    out->data = core_aligned_alloc(use_huge ? huge : 64, bytes ? bytes : 64);
    if (!out->data) return ANVIL_ERR_OUT_OF_MEMORY;
#if HAVE_MADV_HUGEPAGE
    if (use_huge) (void)madvise(out->data, bytes / huge * huge, MADV_HUGEPAGE);
#endif
    return ANVIL_OK;
}

/* gemm_pack_a (is_a: src is A [rows, cols], in MR-row panels) and gemm_pack_b (src is B
 * [rows, cols], in NR-column panels). */
static anvil_status pack_operand(const gemm_kernel *k, bool is_a, int64_t rows, int64_t cols,
                                 const float *src, int64_t rs, int64_t cs, gemm_packed *out) {
    const int64_t width = is_a ? k->mr : k->nr, across = is_a ? rows : cols;
    anvil_status st = packed_alloc(k, (across + width - 1) / width, width, is_a ? cols : rows, out);
    if (st != ANVIL_OK) return st;
    out->rows = rows;
    out->cols = cols;
    if (is_a)
        pack_a_any(k, src, rs, cs, rows, cols, out->data);
    else
        pack_b_any(k, src, rs, cs, rows, cols, out->data);
    return ANVIL_OK;
}

anvil_status gemm_pack_a(const gemm_kernel *k, int64_t m, int64_t kdim, const float *a,
                         int64_t rs_a, int64_t cs_a, gemm_packed *out) {
    return pack_operand(k, true, m, kdim, a, rs_a, cs_a, out);
}

anvil_status gemm_pack_b(const gemm_kernel *k, int64_t kdim, int64_t n, const float *b,
                         int64_t rs_b, int64_t cs_b, gemm_packed *out) {
    return pack_operand(k, false, kdim, n, b, rs_b, cs_b, out);
}

size_t gemm_packed_a_bytes(const gemm_kernel *k, int64_t m, int64_t kdim) {
    const int64_t slots = gemm_slots(k, kdim);
    return (size_t)round_up(m > 0 ? m : 1, k->mr) * (size_t)(slots > 0 ? slots : 1) * sizeof(float);
}

void gemm_pack_a_into(const gemm_kernel *k, int64_t m, int64_t kdim, const float *a, int64_t rs_a,
                      int64_t cs_a, void *mem, gemm_packed *out) {
    out->kernel = k;
    out->rows = m;
    out->cols = kdim;
    out->data = mem;
    pack_a_any(k, a, rs_a, cs_a, m, kdim, out->data);
}

anvil_status gemm_pack_b8(const gemm_kernel *k, int64_t kdim, int64_t n, const void *b,
                          bool is_signed, int64_t rs_b, int64_t cs_b, const int32_t *zp,
                          int32_t *colsum, gemm_packed *out) {
    if (k->kpair != 4)
        return core_err(ANVIL_ERR_INVALID_ARGUMENT, "gemm_pack_b8: tile %s is not an int8 one",
                        k->name);
    const int nr = k->nr;
    const int64_t slots = gemm_slots(k, kdim);
    CORE_TRY(packed_alloc(k, (n + nr - 1) / nr, nr, kdim, out));
    out->rows = kdim;
    out->cols = n;
    int8_t *dst = (int8_t *)out->data;
    const int8_t *bs = b;
    const uint8_t *bu = b;
    for (int64_t j0 = 0; j0 < n; j0 += nr)
        for (int64_t j = j0; j < j0 + nr; j++) {
            int32_t sum = 0;
            int8_t *col = dst + (j0 / nr) * slots * nr * 4 + (j - j0) * 4;
            for (int64_t p = 0; p < slots * 4; p++) {
                int32_t v = 0;
                if (j < n && p < kdim) {
                    const int64_t at = p * rs_b + j * cs_b;
                    v = (is_signed ? (int32_t)bs[at] : (int32_t)bu[at]) - (zp ? zp[j] : 0);
                    if (v < -128 || v > 127) {
                        gemm_packed_free(out);
                        return core_err(ANVIL_ERR_UNSUPPORTED,
                                        "an 8-bit B value %d away from its zero point (column "
                                        "%lld) does not fit the int8 tiles' signed operand",
                                        v, (long long)j);
                    }
                }
                col[(p / 4) * nr * 4 + p % 4] = (int8_t)v;
                sum += v;
            }
            if (colsum && j < n) colsum[j] = sum;
        }
    return ANVIL_OK;
}

void gemm_packed_free(gemm_packed *p) {
    if (!p) return;
    free(p->data);
    memset(p, 0, sizeof *p);
}

/* ---- the driver ----------------------------------------------------------------------------- */

static size_t align64(size_t x) {
    return (x + 63) & ~(size_t)63;
}

size_t gemm_thread_workspace(const gemm_kernel *k, const gemm_blocking *b) {
    size_t a = (size_t)round_up(b->mc, k->mr) * (size_t)b->kc * sizeof(float);
    size_t bb = (size_t)round_up(b->nc, k->nr) * (size_t)b->kc * sizeof(float);
    size_t tile = (size_t)k->mr * (size_t)k->nr * sizeof(float);
    /* a bf16 tile's fp32 panel of an indirect A (pack_a_ind) */
    size_t ind = k->pack_a ? (size_t)k->mr * (size_t)b->kc * sizeof(float) : 0;
    return align64(a) + align64(bb) + align64(tile) + align64(ind);
}

/* A K of one block needs no partial sums: each tile goes from the micro-kernel through the
 * tile scratch into C. */
static bool c16_partials(const gemm_blocking *b, int64_t kdim) {
    return kdim > b->kc;
}

size_t gemm_thread_workspace_c16(const gemm_kernel *k, const gemm_blocking *b, int64_t n,
                                 int64_t kdim) {
    size_t rows = c16_partials(b, kdim)
                      ? (size_t)round_up(b->mc, k->mr) * (size_t)round_up(n, k->nr) * sizeof(float)
                      : 0;
    return gemm_thread_workspace(k, b) + align64(rows);
}

bool gemm_takes_bf16(const gemm_kernel *k) {
    return k->kpair == 2 && k->pack_a16 && k->store_c16;
}

static bool epilogue_is_none(const gemm_epilogue *ep) {
    return !ep->col_scale && ep->scale == 1.0f && !ep->row_bias && !ep->col_bias && !ep->r &&
           ep->act == IR_ACT_NONE;
}

bool gemm_epilogue_in_registers(const gemm_epilogue *ep) {
    return !ep->r || ep->cs_r == 0 || ep->cs_r == 1;
}

gemm_epilogue gemm_epilogue_none(void) {
    gemm_epilogue ep;
    memset(&ep, 0, sizeof ep);
    ep.scale = 1.0f;
    ep.beta = 1.0f;
    return ep;
}

void gemm_epilogue_apply(const gemm_epilogue *ep, float *c, int64_t ldc, int64_t i0, int64_t j0,
                         int64_t m, int64_t n) {
    gemm_epilogue_body(ep, c, ldc, i0, j0, m, n);
}

/* The most of an MR-row micro-panel's rows that share an L1 set (64-byte lines, 4 KiB per way):
 * rows lda floats apart that collide (lda*4 a multiple of 4 KiB collides all of them) evict
 * one another from an 8-way L1 while B streams through it. */
static int rows_set_conflicts(int mr, int64_t lda) {
    int most = 0;
    for (int i = 0; i < mr; i++) {
        int same = 0;
        for (int j = 0; j < mr; j++) {
            int64_t d = (int64_t)(j - i) * lda * (int64_t)sizeof(float) % 4096;
            if (d < 0) d += 4096;
            same += d < 64 || d > 4096 - 64;
        }
        if (same > most) most = same;
    }
    return most;
}

/* Row-major A is read in place rather than packed: packing cost 6% of the GEMM's time at
 * 512x768x3072 (perf, 1 thread), and the packed copy was read back from L3 anyway. Packed
 * instead: 107.9 vs 113.3 GFLOP/s at 512x768x3072, 112.2 vs 112.9 at 128x3072x3072, 112.9
 * vs 114.0 at 512x3072x3072 (4x64, medians of 3 interleaved runs) ... unless too many of its
 * rows share an L1 set: at K = 3072 (rows 12 KiB apart, all in one set) 14x32 fell from 107 to
 * 79 GFLOP/s and 12x32 from 110 to 100 read in place (512x3072x3072); 4 rows per set kept every
 * tile at its packed speed or better. */
static bool reads_a_in_place(const gemm_kernel *k, const gemm_problem *p) {
    return !p->pa && !p->a_ind && p->cs_a == 1 && k->ukernel_rows &&
           rows_set_conflicts(k->mr, p->rs_a) <= 4;
}

/* A bf16 A (a16) is read in place by a tile with the kernel for it where its rows hold whole
 * pairs: an even depth and row stride and 4-byte alignment (an odd k's partner would be the next
 * row's first value), and rows not crowding one L1 set (as reads_a_in_place). Packing it was
 * what kept a bf16 1x1 conv of few output channels from its tile's speed: at N = 24 each value of
 * A serves 24 products, and the copy cost as much as they did (EfficientNet-B0's projections). */
static bool reads_a16_in_place(const gemm_kernel *k, const gemm_problem *p) {
    return p->a16 && k->ukernel_rows_narrow && p->k % 2 == 0 && p->rs_a % 2 == 0 &&
           (uintptr_t)p->a16 % 4 == 0 && rows_set_conflicts(k->mr, p->rs_a / 2) <= 4;
}

/* An int8 A (a8) the same, its rows in whole slots of four. */
static bool reads_a8_in_place(const gemm_kernel *k, const gemm_problem *p) {
    return p->a8 && k->ukernel_rows_narrow && p->k % 4 == 0 && p->rs_a % 4 == 0 &&
           (uintptr_t)p->a8 % 4 == 0 && rows_set_conflicts(k->mr, p->rs_a / 4) <= 4;
}

/* A stored by columns (A[i,p] at a[i + p*cs_a]: Winograd's V with the tiles as rows, a Gemm with
 * transA) is read in place too, MR rows of one column per k step, unless its kc columns crowd
 * into few L1 sets (a column stride near a multiple of 4 KiB): up to 4 lines per set beyond an
 * even spread are kept (Winograd's 49-tile classes at 256 channels have 7 where 4 is even; in
 * place they ran 2-4% faster than packed). Packed instead, the copy took a tenth of ResNet-50's
 * 128-channel stride-2 Winograd, whose GEMMs have only Cout = 128 columns to reuse each packed
 * value over. */
static bool reads_a_by_cols(const gemm_kernel *k, const gemm_problem *p, int64_t kc) {
    if (p->pa || p->a_ind || p->rs_a != 1 || p->cs_a < k->mr || !k->ukernel_acols) return false;
    int count[64] = {0}, most = 0;
    for (int64_t q = 0; q < kc && q < 512; q++) {
        const int set = (int)((q * p->cs_a * (int64_t)sizeof(float)) / 64 % 64);
        if (++count[set] > most) most = count[set];
    }
    return most <= (kc + 63) / 64 + 4;
}

/* An indirect A (an implicit GEMM's pointer table) is read in place wherever the kernel has the
 * micro-kernel for it; otherwise its panels are packed (pack_a_ind). */
static bool reads_a_indirect(const gemm_kernel *k, const gemm_problem *p) {
    return p->a_ind && k->ukernel_aind;
}

/* With A pre-packed (a convolution's weights), a row-major B (the image, pixels in a row) is
 * read in place too, panel by panel; only a partial last panel is packed. */
static bool reads_b_in_place(const gemm_kernel *k, const gemm_problem *p) {
    return p->pa && !p->pb && p->cs_b == 1 && k->ukernel_bcols;
}

/* The next pre-packed B block, to be prefetched into L2 by the kernels of the current one: it
 * is the NR panels' pieces of kc rows ("segments", seg_lines cache lines each, panel_stride
 * apart), and each of the current block's calls takes `per` lines of it in turn. Without this
 * the first A panel against a new B block runs at memory speed: B (36 MB at K = N = 3072) is
 * read once from DRAM, and with M = 128 that first pass is 1/32 of each block's work. Without
 * it: 111.0 vs 112.9 GFLOP/s at 128x3072x3072, 112.6 vs 113.3 at 512x768x3072, 113.2 vs 114.0
 * at 512x3072x3072 (1 thread, medians of 3 interleaved runs). A prefetch of the current B
 * panel into L1 (4 lines per k step, 8 or 16 steps ahead) lost 1-4% instead. */
typedef struct pf_plan {
    const float *base;
    int64_t panel_stride, seg_lines, lines, per;
} pf_plan;

static pf_plan next_b_block(const gemm_kernel *k, const gemm_blocking *blk, const gemm_problem *p,
                            int64_t m1, int64_t n0, int64_t n1, int64_t ic, int64_t pc, int64_t kc,
                            int64_t jc, int64_t mc, int64_t nc) {
    pf_plan pf = {0};
    const int64_t nr = k->nr, mr = k->mr;
    /* The loop order is ic, pc, jc: step jc, else pc, else ic (which starts B over). */
    int64_t njc = jc + blk->nc, npc = pc, nic = ic;
    if (njc >= n1) {
        njc = n0;
        npc = pc + kc;
        if (npc >= p->k) {
            npc = 0;
            nic = ic + blk->mc;
        }
    }
    if (nic >= m1) return pf;
    const int64_t nkc = block_kc(k, blk, p, npc);
    const int64_t nnc = n1 - njc < blk->nc ? n1 - njc : blk->nc;
    pf.base = p->pb->data + (njc / nr) * gemm_slots(k, p->k) * nr + gemm_slots(k, npc) * nr;
    pf.panel_stride = gemm_slots(k, p->k) * nr;
    pf.seg_lines = (gemm_slots(k, nkc) * nr + 15) / 16;
    pf.lines = (nnc + nr - 1) / nr * pf.seg_lines;
    const int64_t calls = (mc + mr - 1) / mr * ((nc + nr - 1) / nr);
    pf.per = (pf.lines + calls - 1) / calls;
    /* at most a line per k step; the rest comes on demand */
    if (pf.per > gemm_slots(k, kc)) pf.per = gemm_slots(k, kc);
    return pf;
}

/* Call number `call`'s share of the plan: a run of lines inside one segment (cut at its end).
 * Returns where it starts and sets *n; with nothing to fetch, n is 0 and the pointer is `none`. */
static const float *pf_range(const pf_plan *pf, int64_t call, const float *none, int64_t *n) {
    const int64_t g = call * pf->per;
    *n = 0;
    if (!pf->base || g >= pf->lines) return none;
    const int64_t s = g / pf->seg_lines, o = g % pf->seg_lines;
    *n = pf->seg_lines - o < pf->per ? pf->seg_lines - o : pf->per;
    return pf->base + s * pf->panel_stride + o * 16;
}

/* Rows [m0, m1) and columns [n0, n1) of p, on this thread. */
static void gemm_block_run(const gemm_kernel *k, const gemm_blocking *blk, const gemm_problem *p,
                           int64_t m0, int64_t m1, int64_t n0, int64_t n1, void *ws) {
    const int mr = k->mr, nr = k->nr;
    const int64_t kdim = p->k;
    char *w = ws;
    float *abuf = (float *)w;
    w += align64((size_t)round_up(blk->mc, mr) * (size_t)blk->kc * sizeof(float));
    float *bbuf = (float *)w;
    w += align64((size_t)round_up(blk->nc, nr) * (size_t)blk->kc * sizeof(float));
    float *tile = (float *)w;
    w += align64((size_t)mr * (size_t)nr * sizeof(float));
    float *ind_panel = k->pack_a ? (float *)w : NULL;
    w += k->pack_a ? align64((size_t)mr * (size_t)blk->kc * sizeof(float)) : 0;
    /* A bf16 C: the partial sums of every K block but the last in fp32 rows of this thread's
     * (acc, MC x its columns); the last block's tile goes through `tile`, takes the epilogue
     * there and is rounded into C once. */
    float *acc = p->c16 && c16_partials(blk, p->k) ? (float *)w : NULL;
    const int64_t ld_acc = n1 - n0;
    const bool ep_none = epilogue_is_none(&p->ep);
    /* Full tiles of the last K block take the epilogue in registers where it can be; an
     * activation the micro-kernel lacks (Gelu, Sigmoid, ...) then runs alone over the stored
     * tile (ep_act). Edge tiles take the whole epilogue after the store. */
    const gemm_epilogue *ep_reg = !ep_none && gemm_epilogue_in_registers(&p->ep) ? &p->ep : NULL;
    gemm_epilogue ep_act = p->ep;
    ep_act.scale = 1.0f;
    ep_act.row_bias = ep_act.col_bias = ep_act.r = NULL;
    ep_act.col_scale = ep_act.row_scale = NULL;
    ep_act.col_comp = NULL;
    const bool act_after = ep_reg && !(k->acts_in_registers >> p->ep.act & 1u);
    const bool direct_a = reads_a_in_place(k, p), direct_b = reads_b_in_place(k, p);
    const bool direct_at = !direct_a && reads_a_by_cols(k, p, blk->kc);
    const bool direct_ind = reads_a_indirect(k, p);
    const bool direct_a16 = reads_a16_in_place(k, p) || reads_a8_in_place(k, p);
    const int64_t segs = p->a_ind ? p->k / p->a_seg : 0;
    /* the kernel for full row panels of an A read in place, and its distance between them */
    const gemm_ukernel_rows_fn uk_a_in_place = direct_a ? k->ukernel_rows : k->ukernel_acols;
    const int64_t lda_in_place = direct_a ? p->rs_a : p->cs_a;
    /* An edge tile of fewer columns than this goes to the column kernel: nn FMAs per k step
     * there against MR x NV for the whole tile, counted at 3/4 as the column kernel's masked
     * loads and transposed write-back cost a little more per FMA. A 1x1 conv over a 7x7 image
     * has 49 columns, so 16x16 spent a full tile on the 49th (and 14x32 one on the last 17). */
    const int64_t cols_below = gemm_cols_kernel_below(k);

    if (kdim == 0 && p->c16) {
        for (int64_t i = m0; i < m1; i++)
            for (int64_t j = n0; j < n1; j += nr) {
                const int64_t nn = n1 - j < nr ? n1 - j : nr;
                memset(tile, 0, sizeof(float) * (size_t)nn);
                if (!ep_none) gemm_epilogue_apply(&p->ep, tile, nr, i, j, 1, nn);
                k->store_c16(tile, nr, p->c16 + i * p->ldc + j, p->ldc, 1, nn);
            }
        return;
    }
    if (kdim == 0) {
        for (int64_t i = m0; i < m1; i++)
            memset(p->c + i * p->ldc + n0, 0, sizeof(float) * (n1 - n0));
        if (!ep_none)
            gemm_epilogue_apply(&p->ep, p->c + m0 * p->ldc + n0, p->ldc, m0, n0, m1 - m0, n1 - n0);
        return;
    }
    /* Panel offsets and micro-kernel depths count 32-bit slots: k itself for fp32, bf16 pairs
     * for a bf16 tile (every K block but the last is even, so pc / 2 slots precede block pc). */
    const int64_t ks = gemm_slots(k, kdim);
    for (int64_t ic = m0; ic < m1; ic += blk->mc) {
        const int64_t mc = m1 - ic < blk->mc ? m1 - ic : blk->mc;
        for (int64_t pc = 0, kc; pc < kdim; pc += kc) {
            kc = block_kc(k, blk, p, pc);
            const int64_t kcs = gemm_slots(k, kc), pcs = gemm_slots(k, pc);
            const bool first = pc == 0, last = pc + kc == kdim;
            const float *ap;
            int64_t a_stride; /* between MR panels */
            /* Full rows of a row-major A (rows up to a_direct) go to the micro-kernel in place;
             * only a partial last panel is packed (zero-padded) into abuf. */
            int64_t a_direct = 0;
            if (p->pa) {
                /* ic is a multiple of MR: row splits and MC are in whole panels. */
                ap = p->pa->data + (ic / mr) * ks * mr + pcs * mr;
                a_stride = ks * mr;
            } else if (p->a_ind) {
                a_direct = direct_ind ? mc / mr * mr : 0;
                if (a_direct < mc)
                    pack_a_ind(k, p, ic + a_direct, mc - a_direct, pc, kc, abuf, ind_panel);
                ap = abuf;
                a_stride = kcs * mr;
            } else if (direct_a || direct_at) {
                a_direct = mc / mr * mr;
                if (a_direct < mc)
                    pack_a_block(k, p->a + (ic + a_direct) * p->rs_a + pc * p->cs_a, p->rs_a,
                                 p->cs_a, mc - a_direct, kc, abuf);
                ap = abuf; /* the panel of rows a_direct.. */
                a_stride = kc * mr;
            } else if (direct_a16 && p->a8) {
                a_direct = mc / mr * mr;
                if (a_direct < mc)
                    k->pack_a8(mr, p->a8 + (ic + a_direct) * p->rs_a + pc, p->rs_a, mc - a_direct,
                               kc, abuf);
                ap = abuf;
                a_stride = kcs * mr;
            } else if (direct_a16) {
                a_direct = mc / mr * mr;
                if (a_direct < mc)
                    k->pack_a16(mr, p->a16 + (ic + a_direct) * p->rs_a + pc, p->rs_a, mc - a_direct,
                                kc, abuf);
                ap = abuf;
                a_stride = kcs * mr;
            } else if (p->a8) {
                k->pack_a8(mr, p->a8 + ic * p->rs_a + pc, p->rs_a, mc, kc, abuf);
                ap = abuf;
                a_stride = kcs * mr;
            } else if (p->a16) {
                k->pack_a16(mr, p->a16 + ic * p->rs_a + pc, p->rs_a, mc, kc, abuf);
                ap = abuf;
                a_stride = kcs * mr;
            } else {
                pack_a_any(k, p->a + ic * p->rs_a + pc * p->cs_a, p->rs_a, p->cs_a, mc, kc, abuf);
                ap = abuf;
                a_stride = kcs * mr;
            }
            for (int64_t jc = n0; jc < n1; jc += blk->nc) {
                const int64_t nc = n1 - jc < blk->nc ? n1 - jc : blk->nc;
                const float *bp;
                int64_t b_stride;
                int64_t b_direct = 0; /* columns of this block read in place */
                if (p->pb) {
                    bp = p->pb->data + (jc / nr) * ks * nr + pcs * nr;
                    b_stride = ks * nr;
                } else if (direct_b) {
                    b_direct = nc / nr * nr;
                    if (b_direct < nc)
                        pack_b_block(k, p->b + pc * p->rs_b + (jc + b_direct), p->rs_b, 1, kc,
                                     nc - b_direct, bbuf);
                    bp = bbuf; /* the panel of columns b_direct.. */
                    b_stride = kc * nr;
                } else {
                    pack_b_any(k, p->b + pc * p->rs_b + jc * p->cs_b, p->rs_b, p->cs_b, kc, nc,
                               bbuf);
                    bp = bbuf;
                    b_stride = kcs * nr;
                }
                pf_plan pf = {0};
                if (p->pb) pf = next_b_block(k, blk, p, m1, n0, n1, ic, pc, kc, jc, mc, nc);
                int64_t call = 0;
                for (int64_t ir = 0; ir < mc; ir += mr) {
                    const int64_t mm = mc - ir < mr ? mc - ir : mr;
                    const bool in_place = ir < a_direct;
                    const float *a_panel =
                        !in_place  ? ap + ((ir - a_direct) / mr) * a_stride
                        : p->a_ind ? NULL
                        : p->a16   ? (const float *)(p->a16 + (ic + ir) * p->rs_a + pc)
                        : p->a8    ? (const float *)(p->a8 + (ic + ir) * p->rs_a + pc)
                                   : p->a + (ic + ir) * p->rs_a + pc * p->cs_a;
                    const float *rows[GEMM_MR_MAX];
                    if (in_place && p->a_ind)
                        for (int i = 0; i < mr; i++)
                            rows[i] =
                                p->a_ind[(ic + ir + i) * segs + pc / p->a_seg] + pc % p->a_seg;
                    for (int64_t jr = 0; jr < nc; jr += nr) {
                        const int64_t nn = nc - jr < nr ? nc - jr : nr;
                        const bool b_in_place = jr < b_direct;
                        const float *b_panel = b_in_place ? p->b + pc * p->rs_b + jc + jr
                                                          : bp + ((jr - b_direct) / nr) * b_stride;
                        const int64_t gi = ic + ir, gj = jc + jr;
                        /* c: where the tile's fp32 sums live between K blocks (a bf16 C's in
                         * acc; NULL where it has a single block) */
                        const int64_t ldc = p->c16 ? ld_acc : p->ldc;
                        float *c = p->c16 ? (acc ? acc + ir * ld_acc + (gj - n0) : NULL)
                                          : p->c + gi * p->ldc + gj;
                        float *ct = c;
                        int64_t ldt = ldc;
                        if (mm < mr || nn < nr || (p->c16 && last)) {
                            /* Edge tile (or a bf16 C's last block): compute the full tile in
                             * scratch, copy the valid part. */
                            ct = tile;
                            ldt = nr;
                            if (!first)
                                for (int64_t i = 0; i < mm; i++)
                                    memcpy(tile + i * nr, c + i * ldc, sizeof(float) * nn);
                        }
                        int64_t pf_n;
                        const float *pf_at = pf_range(&pf, call++, b_panel, &pf_n);
                        const bool whole = mm == mr && nn == nr;
                        const gemm_epilogue *ep =
                            last && (ct == c || (p->c16 && whole)) ? ep_reg : NULL;
                        if (ct == tile && nn < cols_below && !in_place)
                            k->ukernel_cols(kcs, a_panel, mr, b_panel, b_in_place ? p->rs_b : nr,
                                            nn, tile, nr, !first);
                        else if (b_in_place)
                            k->ukernel_bcols(kc, a_panel, b_panel, p->rs_b, ct, ldt, !first, pf_at,
                                             pf_n, ep, gi, gj);
                        else if (in_place && (p->a16 || p->a8))
                            k->ukernel_rows_narrow(kcs, a_panel, p->rs_a / k->kpair, b_panel, ct,
                                                   ldt, !first, pf_at, pf_n, ep, gi, gj);
                        else if (in_place && p->a_ind)
                            k->ukernel_aind(kc, rows, b_panel, ct, ldt, !first, pf_at, pf_n, ep, gi,
                                            gj);
                        else if (in_place)
                            uk_a_in_place(kc, a_panel, lda_in_place, b_panel, ct, ldt, !first,
                                          pf_at, pf_n, ep, gi, gj);
                        else
                            k->ukernel(kcs, a_panel, b_panel, ct, ldt, !first, pf_at, pf_n, ep, gi,
                                       gj);
                        if (p->c16 && last) {
                            if (!ep_none && !ep)
                                k->epilogue(&p->ep, tile, nr, gi, gj, mm, nn);
                            else if (ep && act_after)
                                k->epilogue(&ep_act, tile, nr, gi, gj, mm, nn);
                            k->store_c16(tile, nr, p->c16 + gi * p->ldc + gj, p->ldc, mm, nn);
                            continue;
                        }
                        if (ct == tile) {
                            for (int64_t i = 0; i < mm; i++)
                                memcpy(c + i * ldc, tile + i * nr, sizeof(float) * nn);
                        }
                        if (last && !ep_none && !ep)
                            k->epilogue(&p->ep, c, ldc, gi, gj, mm, nn);
                        else if (ep && act_after)
                            k->epilogue(&ep_act, c, ldc, gi, gj, mm, nn);
                    }
                }
            }
        }
    }
}

/* gemm_block_run between the tile's begin and end (the AMX tile's configuration). */
static void gemm_block(const gemm_kernel *k, const gemm_blocking *blk, const gemm_problem *p,
                       int64_t m0, int64_t m1, int64_t n0, int64_t n1, void *ws) {
    if (k->begin) k->begin();
    gemm_block_run(k, blk, p, m0, m1, n0, n1, ws);
    if (k->end) k->end();
}

void gemm_run_serial(const gemm_kernel *k, const gemm_blocking *b, const gemm_problem *p,
                     void *ws) {
    if (p->m <= 0 || p->n <= 0) return;
    gemm_block(k, b, p, 0, p->m, 0, p->n, ws);
}

typedef struct {
    const gemm_kernel *k;
    const gemm_blocking *b;
    const gemm_problem *p;
    char *ws;
    size_t ws_stride;
    int tm, tn; /* thread grid: tm row blocks x tn column blocks */
} par_job;

/* Splits `units` whole tiles into `parts` near-equal runs; returns [begin, end) of part i. */
static void split_units(int64_t units, int parts, int i, int64_t *b, int64_t *e) {
    int64_t base = units / parts, rem = units % parts;
    *b = i * base + (i < rem ? i : rem);
    *e = *b + base + (i < rem ? 1 : 0);
}

static void par_chunk(void *arg, size_t begin, size_t end) {
    par_job *j = arg;
    for (size_t t = begin; t < end; t++) {
        int ti = (int)t / j->tn, tj = (int)t % j->tn;
        int64_t mu = (j->p->m + j->k->mr - 1) / j->k->mr, nu = (j->p->n + j->k->nr - 1) / j->k->nr;
        int64_t mb, me, nb, ne;
        split_units(mu, j->tm, ti, &mb, &me);
        split_units(nu, j->tn, tj, &nb, &ne);
        mb *= j->k->mr;
        me = me * j->k->mr < j->p->m ? me * j->k->mr : j->p->m;
        nb *= j->k->nr;
        ne = ne * j->k->nr < j->p->n ? ne * j->k->nr : j->p->n;
        if (mb < me && nb < ne)
            gemm_block(j->k, j->b, j->p, mb, me, nb, ne, j->ws + t * j->ws_stride);
    }
}

/* The grid cost's exchange rate: output FMAs (per k) per operand float read. Its first value, 64,
 * let reads decide nearly alone, so a 1x1 conv at 14x14 (N = 196: four 48-column tiles and an
 * edge of 4) split its columns 144 | 52 instead of its rows in halves. At 8: MobileNetV2, 2
 * threads, medians of 400 runs alternating, 4.23/4.35/4.23/4.26 -> 4.07/4.16/4.06/4.21 ms (per
 * node, 384>64 at 14x14 64 -> 51 us, 32>192 at 28x28 72 -> 58 us, 576>96 at 14x14 128 -> 109
 * us); 4 measured the same as 8, 16 in between; the transformer GEMMs within noise. */
#define GRID_FMA_PER_READ 8.0
void gemm_thread_grid(const gemm_kernel *k, const gemm_blocking *b, const gemm_problem *p,
                      int threads, int *tm, int *tn) {
    int64_t mu = (p->m + k->mr - 1) / k->mr, nu = (p->n + k->nr - 1) / k->nr;
    *tm = *tn = 1;
    if (threads <= 1 || mu * nu < 2) return;
    /* Choose the grid tm x tn = threads whose busiest thread costs least: it reads its rows of
     * A (m_t*K) and its columns of B (K*n_t) whatever happens to them, packs its rows of A once
     * (unless pre-packed or read in place, see gemm_block) and its columns of B once per MC
     * block of its rows (unless pre-packed or read in place), and computes its outputs, counted
     * at GRID_FMA_PER_READ per float read. Reading was left out before, so where neither operand is
     * packed (a 1x1 conv: weights pre-packed, image read in place) a 7x7 image's 49 columns were
     * split between the threads and both streamed all 960 rows of weights. */
    const bool pack_a = !p->pa && !reads_a_indirect(k, p) && !reads_a_in_place(k, p) &&
                        !reads_a_by_cols(k, p, b->kc) && !reads_a16_in_place(k, p) &&
                        !reads_a8_in_place(k, p);
    const bool pack_b = !p->pb && !reads_b_in_place(k, p);
    int best_tm = 1;
    double best_cost = -1.0;
    for (int tm = 1; tm <= threads; tm++) {
        if (threads % tm) continue;
        int tn = threads / tm;
        if (tm > mu || tn > nu) continue;
        double mt = (double)((mu + tm - 1) / tm * k->mr), nt = (double)((nu + tn - 1) / tn * k->nr);
        /* the busiest thread's outputs: whole tiles, except that the matrix ends where it ends
         * (its edge goes to the column kernel, so a 4-column edge tile costs 4 columns) */
        double rows = mt < (double)p->m ? mt : (double)p->m;
        double cols = nt < (double)p->n ? nt : (double)p->n;
        double cost = (mt + nt) * (double)p->k + (pack_a ? mt * (double)p->k : 0.0) +
                      (pack_b ? (double)p->k * nt * (double)((int64_t)mt / b->mc + 1) : 0.0) +
                      rows * cols * (double)p->k / GRID_FMA_PER_READ;
        if (best_cost < 0 || cost < best_cost) {
            best_cost = cost;
            best_tm = tm;
        }
    }
    /* No grid fits both dims (e.g. 3 threads, 1x2 tiles): split columns; empty parts idle. */
    if (best_cost < 0) best_tm = 1;
    *tm = best_tm;
    *tn = threads / best_tm;
}

void gemm_run(const gemm_kernel *k, const gemm_blocking *b, const gemm_problem *p, void *ws,
              op_ctx *ctx) {
    if (p->m <= 0 || p->n <= 0) return;
    int threads = op_ctx_threads(ctx);
    int64_t mu = (p->m + k->mr - 1) / k->mr, nu = (p->n + k->nr - 1) / k->nr;
    if (threads <= 1 || mu * nu < 2) {
        gemm_run_serial(k, b, p, ws);
        return;
    }
    int tm, tn;
    gemm_thread_grid(k, b, p, threads, &tm, &tn);
    par_job j = {k,
                 b,
                 p,
                 ws,
                 p->c16 ? gemm_thread_workspace_c16(k, b, p->n, p->k) : gemm_thread_workspace(k, b),
                 tm,
                 tn};
    op_parallel_for(ctx, (size_t)(j.tm * j.tn), par_chunk, &j);
}
