/* anvil's fp32 GEMM: C[M,N] = epilogue(A[M,K] · B[K,N]).
 *
 * One template (gemm_ukernel.h) generates register-tile micro-kernels for each ISA; a kernel is a
 * (MR, NR, ISA) instance, named like "14x32_avx512". The driver (gemm.c) packs A into MR-row
 * panels (or, row-major, reads it in place) and B into NR-column panels, blocks for the caches
 * with (MC, KC, NC) chosen at run time, splits C among threads, and applies a fused epilogue to
 * each tile while it is still in L1.
 *
 * Operands are strided views, so transposed inputs cost nothing extra:
 *   A[i,k] = a[i*rs_a + k*cs_a],  B[k,j] = b[k*rs_b + j*cs_b],  C[i,j] = c[i*ldc + j].
 * Either operand may instead be packed once (gemm_pack_a / gemm_pack_b), e.g. the weights of a
 * MatMul or a convolution when a session is created. */
#ifndef ANVIL_KERNELS_GEMM_H
#define ANVIL_KERNELS_GEMM_H

#include "kernels/kernels.h"

#include <stddef.h>
#include <stdint.h>

/* C[i,j] = act(scale*acc[i,j] + row_bias[i] + col_bias[j] + beta*R[i*rs_r + j*cs_r]).
 * Every part is optional (NULL pointers; scale 1; beta ignored without R). R's strides may be 0
 * to broadcast (a Gemm's C of shape [N], [M,1] or scalar). All pointers borrowed.
 *
 * An int8 tile's (kpair 4) sums are int32: before anything above, acc[i,j] becomes the float
 * (float)(acc[i,j] + col_comp[j]) * col_scale[j] (the int32 addition wrapping), times
 * row_scale[i] where that is set. col_scale is set exactly when the tile is an int8 one (NULL for
 * every other tile); col_comp and row_scale are optional. */
typedef struct gemm_epilogue {
    float scale;
    const float *row_bias;
    const float *col_bias;
    const float *r;
    int64_t rs_r, cs_r;
    float beta;
    ir_act act;                    /* the fused activation (ir.h), applied last */
    float alpha, beta_act, lo, hi; /* parameters of act */
    /* Optional: applies act to n floats of one row in place with a vectorized kernel (the
     * eltwise family's, see kern_fusion_epilogue); NULL: the epilogue's own loop, which is
     * vectorized for Relu/Clip but calls libm per element for the transcendental ones. */
    void (*act_row)(const struct gemm_epilogue *ep, float *row, int64_t n);
    const float *col_scale; /* int8 tiles only, see above */
    const int32_t *col_comp;
    const float *row_scale;
} gemm_epilogue;

/* Whether a micro-kernel can apply ep to its accumulators: scale, biases and a residual with
 * unit or zero column stride, and the activation if it is ReLU or Clip (any other activation
 * then runs over the stored tile, alone; gemm_kernel.epilogue). */
bool gemm_epilogue_in_registers(const gemm_epilogue *ep);

/* The identity epilogue (scale 1, nothing else). */
gemm_epilogue gemm_epilogue_none(void);

/* Applies ep to rows [i0, i0+m) and columns [j0, j0+n) of C (c points at C[i0, j0]); scalar,
 * for the edges and for whole-matrix use by other kernels. */
void gemm_epilogue_apply(const gemm_epilogue *ep, float *c, int64_t ldc, int64_t i0, int64_t j0,
                         int64_t m, int64_t n);

/* Micro-kernel: C tile [MR, NR] (+)= A panel (kc × MR, k-major) · B panel (kc × NR, k-major).
 * accumulate == 0 overwrites the tile. Full tiles only: the driver handles edges. While it runs,
 * the kernel prefetches pf_n cache lines (pf_n <= kc), pf[16 * q] for q < pf_n, into L2: the
 * driver's way of bringing in the next B block while this one computes (pf_n 0: none).
 * ep non-NULL (only where gemm_epilogue_in_registers(ep)): the tile is C[i0.., j0..] and ep is
 * applied to the accumulators before the one store, so the tile is written once. */
typedef void (*gemm_ukernel_fn)(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                                int accumulate, const float *pf, int64_t pf_n,
                                const struct gemm_epilogue *ep, int64_t i0, int64_t j0);
/* The same on A read in place, row-major: A[i,p] at a[i*lda + p] (no packing of A). */
typedef void (*gemm_ukernel_rows_fn)(int64_t kc, const float *a, int64_t lda, const float *b,
                                     float *c, int64_t ldc, int accumulate, const float *pf,
                                     int64_t pf_n, const struct gemm_epilogue *ep, int64_t i0,
                                     int64_t j0);
/* The same on A read in place by columns (A[i,p] at a[p*lda + i]) are gemm_ukernel_rows_fn too,
 * with lda the distance between columns. */
/* The same on packed A and B read in place, row-major: B[p,j] at b[p*ldb + j]. */
typedef void (*gemm_ukernel_bcols_fn)(int64_t kc, const float *a, const float *b, int64_t ldb,
                                      float *c, int64_t ldc, int accumulate, const float *pf,
                                      int64_t pf_n, const struct gemm_epilogue *ep, int64_t i0,
                                      int64_t j0);
/* The same on an indirect A (gemm_problem.a_ind): rows[i] points at row i's first float of the
 * panel, and A[i,p] = rows[i][p] (the rows are anywhere; no packing of A). */
typedef void (*gemm_ukernel_ind_fn)(int64_t kc, const float *const *rows, const float *b, float *c,
                                    int64_t ldc, int accumulate, const float *pf, int64_t pf_n,
                                    const struct gemm_epilogue *ep, int64_t i0, int64_t j0);
/* Column kernel, for an edge tile of nn columns (nn < NR): the same product on a packed A
 * micro-panel of mr rows (mr <= the vector width) with vectors along the rows, so the edge costs
 * about nn FMAs per k step instead of a whole MR x NR tile: t[i*ldt + j] (+)= sum_p a[p*mr + i] *
 * b[p*ldb + j] for i < mr, j < nn. No epilogue (edge tiles take it after they are copied out). */
typedef void (*gemm_ukernel_cols_fn)(int64_t kc, const float *a, int mr, const float *b,
                                     int64_t ldb, int64_t nn, float *t, int64_t ldt,
                                     int accumulate);
/* Vectorized epilogue for a whole tile (same contract as gemm_epilogue_apply), or NULL. */
typedef void (*gemm_tile_epilogue_fn)(const gemm_epilogue *ep, float *c, int64_t ldc, int64_t i0,
                                      int64_t j0, int64_t m, int64_t n);

/* The most rows a register tile has (the template's limit, gemm_ukernel.h). */
#define GEMM_MR_MAX 16

typedef struct gemm_kernel {
    const char *name; /* "14x32_avx512" */
    int mr, nr;
    uint32_t needs; /* KERN_NEEDS_* */
    gemm_ukernel_fn ukernel;
    gemm_tile_epilogue_fn epilogue;
    gemm_ukernel_rows_fn ukernel_rows;   /* NULL: the driver always packs A */
    gemm_ukernel_bcols_fn ukernel_bcols; /* NULL: the driver always packs B */
    gemm_ukernel_cols_fn ukernel_cols;   /* NULL: edge tiles always use ukernel */
    /* Bit a set (1u << ir_act): the micro-kernels apply activation a to their accumulators
     * when given an epilogue; other activations run over the stored tile (epilogue). */
    uint32_t acts_in_registers;
    gemm_ukernel_rows_fn ukernel_acols; /* A by columns in place; NULL: the driver packs it */
    gemm_ukernel_ind_fn ukernel_aind;   /* indirect A in place; NULL: the driver packs it */
    /* A tile over bf16 (kpair 2, the *bf16 ISAs): each 32-bit slot of its packed panels holds
     * two bf16 values of consecutive k, so a panel of depth kc has (kc + 1) / 2 slots and the
     * micro-kernel (given the slot count as kc) multiplies pairs into fp32 accumulators. Its
     * panels can only be packed, by pack_a / pack_b (same contract as the driver's fp32
     * packers: fp32 in, rounded to nearest even, zero-padded in rows, columns and the odd k);
     * every in-place kernel above is NULL (an indirect A is gathered and then packed, see
     * gemm_takes_ind). 0 or 1: fp32 panels, the driver's packers. */
    int kpair;
    void (*pack_a)(int mr, const float *a, int64_t rs, int64_t cs, int64_t m, int64_t kc,
                   float *dst);
    void (*pack_b)(int nr, const float *b, int64_t rs, int64_t cs, int64_t kc, int64_t n,
                   float *dst);
    /* A bf16 tile's operands stored in bf16 (gemm_problem.a16, .c16; NULL for every other tile).
     * pack_a16: pack_a from a row-major bf16 A (A[i,p] at a[i*rs + p]), the same slots pack_a
     * makes of the fp32 values those bf16 ones were rounded from. store_c16: rows of fp32 C
     * (t[i*ldt + j], m x n) rounded to nearest even into c[i*ldc + j], by the instruction the
     * packers round with, so that a bf16 C read back by pack_a16 is bit for bit what pack_a
     * would have made of the fp32 C. */
    void (*pack_a16)(int mr, const uint16_t *a, int64_t rs, int64_t m, int64_t kc, float *dst);
    void (*store_c16)(const float *t, int64_t ldt, uint16_t *c, int64_t ldc, int64_t m, int64_t n);
    /* Optional (the AMX tile): called on a thread before it runs its part of a GEMM through this
     * tile (the tile configuration) and after (its release). NULL: nothing to do. */
    void (*begin)(void);
    void (*end)(void);
    /* A bf16 tile's micro-kernel on an a16 read in place (NULL: pack_a16 packs it): a row's
     * bf16 values of consecutive k are its pair slots already, so the kernel broadcasts them
     * from the rows themselves, row i's slot q at ((const uint32_t *)a)[i*lda + q] (lda in
     * slots, half a16's row stride; kc counts slots). An int8 tile's the same on an a8 (four
     * values per slot, lda a quarter of a8's row stride). */
    gemm_ukernel_rows_fn ukernel_rows_narrow;
    /* An int8 tile (kpair 4, the *vnni ISAs): each 32-bit slot of its panels holds four 8-bit
     * values of consecutive k, u8 in A's panels and s8 in B's, the micro-kernel sums their
     * products into int32 accumulators (vpdpbusd), and its epilogue starts by turning them into
     * floats (gemm_epilogue.col_scale). Its operands come stored in 8 bits only: A as
     * gemm_problem.a8 (read in place by ukernel_rows_narrow, four k per slot, where its rows hold
     * whole slots; else packed by pack_a8, zero past kc) and B pre-packed by gemm_pack_b8. NULL
     * for every other tile. */
    void (*pack_a8)(int mr, const uint8_t *a, int64_t rs, int64_t m, int64_t kc, float *dst);
} gemm_kernel;

/* The 32-bit slots a panel of depth kdim has on k: kdim, (kdim + 1) / 2 for a bf16 tile and
 * (kdim + 3) / 4 for an int8 one. */
static inline int64_t gemm_slots(const gemm_kernel *k, int64_t kdim) {
    return k->kpair > 1 ? (kdim + k->kpair - 1) / k->kpair : kdim;
}

/* The register tiles, as X(MR, NV, NR, ISA) (NV vectors, NR columns), in the order gemm_kernels
 * lists them: those of the ISA files, then gemm.c's portable one. Each is the gemm_kernel
 * gemm_kernel_<MR>x<NR>_<ISA>. */
#ifdef ANVIL_EMITTED
/* A library written by anvil compile instantiates only the tiles its plan runs: the emitter
 * writes them into gemm_tiles_emitted.h, in the same X(MR, NV, NR, ISA) form. */
#include "kernels/cpu/gemm/gemm_tiles_emitted.h"
#else
#define GEMM_TILES_AVX512(X)                                                                       \
    X(14, 2, 32, avx512)                                                                           \
    X(12, 2, 32, avx512)                                                                           \
    X(8, 3, 48, avx512)                                                                            \
    X(6, 4, 64, avx512)                                                                            \
    X(8, 2, 32, avx512)                                                                            \
    X(7, 3, 48, avx512)                                                                            \
    X(7, 2, 32, avx512)                                                                            \
    X(4, 4, 64, avx512)                                                                            \
    X(16, 1, 16, avx512)                                                                           \
    X(1, 4, 64, avx512)
#define GEMM_TILES_AVX2(X) X(6, 2, 16, avx2) X(4, 3, 24, avx2) X(8, 1, 8, avx2)
/* The bf16 tiles (gemm_avx512bf16.c): fp32 tile shapes whose vectors each hold 16 columns of bf16
 * pairs. Listed apart (gemm_kernels_bf16), so that nothing choosing among the fp32 tiles (the
 * convolutions' tile spaces, the defaults) can pick one. */
#define GEMM_TILES_AVX512BF16(X)                                                                   \
    X(14, 2, 32, avx512bf16)                                                                       \
    X(8, 3, 48, avx512bf16)                                                                        \
    X(6, 4, 64, avx512bf16)                                                                        \
    X(4, 4, 64, avx512bf16)                                                                        \
    X(16, 1, 16, avx512bf16)                                                                       \
    X(1, 4, 64, avx512bf16)
/* The fp16 tiles (gemm_avx512fp16.c): the bf16 tiles' shapes and panels, multiplied by
 * vfmadd231ph into fp16 sums that are widened to fp32 every few dozen k. Listed apart too
 * (gemm_kernels_fp16). */
#define GEMM_TILES_AVX512FP16(X)                                                                   \
    X(14, 2, 32, avx512fp16)                                                                       \
    X(8, 3, 48, avx512fp16)                                                                        \
    X(6, 4, 64, avx512fp16)                                                                        \
    X(4, 4, 64, avx512fp16)                                                                        \
    X(16, 1, 16, avx512fp16)                                                                       \
    X(1, 4, 64, avx512fp16)
/* The int8 tiles (gemm_avx512vnni.c): the fp32 tile shapes over slots of four u8 x s8 products
 * summed into int32 (vpdpbusd). Listed apart (gemm_kernels_i8), like the bf16 ones. */
#define GEMM_TILES_AVX512VNNI(X)                                                                   \
    X(14, 2, 32, avx512vnni)                                                                       \
    X(8, 3, 48, avx512vnni)                                                                        \
    X(6, 4, 64, avx512vnni)                                                                        \
    X(4, 4, 64, avx512vnni)                                                                        \
    X(16, 1, 16, avx512vnni)                                                                       \
    X(1, 4, 64, avx512vnni)
#endif
#define GEMM_TILES(X) GEMM_TILES_AVX512(X) GEMM_TILES_AVX2(X) X(4, 1, 8, portable)
/* The AMX-BF16 tile (gemm_amx.c): a bf16 tile (kpair 2) whose A panels hold rows instead of
 * k-major slots, so it takes A only packed by the driver per block (never pre-packed, never
 * indirect): the MatMul and Gemm variants use it, the convolutions do not. Not in any list above;
 * gemm_kernel_find_bf16 finds it. */
extern const gemm_kernel gemm_kernel_32x32_amx;
/* The AVX-512 bf16 tiles' B packer and bf16 C store (gemm_avx512bf16.c), which the AMX tile
 * shares: its B panels and its C rounding are theirs (and the grouped bf16 conv's rounding of an
 * fp32 X, conv_dw_nhwc.c). */
void gemm_bf16_pack_b(int nr, const float *b, int64_t rs, int64_t cs, int64_t kc, int64_t n,
                      float *dst);
void gemm_bf16_store_c16(const float *t, int64_t ldt, uint16_t *c, int64_t ldc, int64_t m,
                         int64_t n);
/* The KERN_NEEDS_* of a tile's ISA. */
#define GEMM_NEEDS_amx (KERN_NEEDS_AVX512 | KERN_NEEDS_AVX512_BF16 | KERN_NEEDS_AMX)
#define GEMM_NEEDS_avx512bf16 (KERN_NEEDS_AVX512 | KERN_NEEDS_AVX512_BF16)
#define GEMM_NEEDS_avx512fp16 (KERN_NEEDS_AVX512 | KERN_NEEDS_AVX512_FP16)
#define GEMM_NEEDS_avx512vnni (KERN_NEEDS_AVX512 | KERN_NEEDS_AVX512_VNNI)
#define GEMM_NEEDS_avx512 KERN_NEEDS_AVX512
#define GEMM_NEEDS_avx2 KERN_NEEDS_AVX2
#define GEMM_NEEDS_portable 0u

/* Cache blocking, in elements: MC rows of A (multiple of MR), KC depth, NC columns of B
 * (multiple of NR). */
typedef struct gemm_blocking {
    int64_t mc, kc, nc;
} gemm_blocking;

/* Every kernel instance, best first for large problems; NULL-terminated. Static data. */
extern const gemm_kernel *const gemm_kernels[];
/* The bf16 tiles (kpair 2), best first; NULL-terminated. Static data. */
extern const gemm_kernel *const gemm_kernels_bf16[];
/* The fp16 tiles (kpair 2), best first; NULL-terminated. Static data. */
extern const gemm_kernel *const gemm_kernels_fp16[];
/* The int8 tiles (kpair 4), best first; NULL-terminated. Static data. */
extern const gemm_kernel *const gemm_kernels_i8[];
/* Kernel by name ("14x32_avx512"); NULL if unknown. The fp32 tiles only: gemm_kernel_find_bf16
 * looks up the bf16 ones ("14x32_avx512bf16"). */
const gemm_kernel *gemm_kernel_find(const char *name);
const gemm_kernel *gemm_kernel_find_bf16(const char *name);
/* The same among the fp16 tiles ("14x32_avx512fp16") and the int8 ones ("14x32_avx512vnni"). */
const gemm_kernel *gemm_kernel_find_fp16(const char *name);
const gemm_kernel *gemm_kernel_find_i8(const char *name);
/* Whether hw can run k (and this build has its micro-kernel: the AMX tile needs a compiler that
 * knows AMX). */
bool gemm_kernel_usable(const gemm_kernel *k, const core_hw *hw);
/* Floats per vector of t's ISA (16 for the AVX-512 tiles, 8 otherwise). */
int64_t gemm_kernel_vl(const gemm_kernel *t);
/* Below how many columns an edge tile of t goes to its column kernel (see gemm_block). */
int64_t gemm_cols_kernel_below(const gemm_kernel *t);

/* ---- the default tile (gemm_default.c; not in emitted libraries, which pick none) --------- */

/* The default kernel for a problem on hw (never NULL: the portable 4x8 kernel is always usable):
 * the tile with the least padded work over its relative speed on full tiles. */
const gemm_kernel *gemm_kernel_default(int64_t m, int64_t n, int64_t k, const core_hw *hw);
/* The same among the bf16 tiles, whose speeds are measured on this machine (gemm_tile_speeds);
 * NULL where hw has none. */
const gemm_kernel *gemm_kernel_default_bf16(int64_t m, int64_t n, int64_t k, const core_hw *hw);
/* The same among the fp16 tiles; NULL where hw has none. */
const gemm_kernel *gemm_kernel_default_fp16(int64_t m, int64_t n, int64_t k, const core_hw *hw);
/* The same among the int8 tiles; NULL where hw has none. */
const gemm_kernel *gemm_kernel_default_i8(int64_t m, int64_t n, int64_t k, const core_hw *hw);
/* The relative speeds (GFLOP/s on one thread, over the best of the list's, on a 336x384x768 GEMM
 * every tile divides: see gemm_default.c) of the first GEMM_RATED_MAX tiles of list
 * (gemm_kernels_bf16 or gemm_kernels_fp16), indexed as the list; 1.0 where a tile could not be
 * timed. Measured on the calling thread the first time for a list and the set of its tiles hw can
 * run, then kept for the process (static storage; thread-safe). NULL when memory ran out. */
#define GEMM_RATED_MAX 8
const float *gemm_tile_speeds(const gemm_kernel *const *list, const core_hw *hw);
/* The tile "gemm_f32" runs for a MatMul or Gemm node: gemm_kernel_default of the GEMM's rows and
 * columns, a MatMul's batch folded into the rows where B is one matrix (gemm_variants.c). */
const gemm_kernel *gemm_node_default_kernel(const kern_node *kn);
/* Blocking for k from the cache sizes in hw. */
gemm_blocking gemm_blocking_default(const gemm_kernel *k, int64_t m, int64_t n, int64_t kdim,
                                    const core_hw *hw);

/* gemm_blocking_default with the ones of kc, mc, nc that are > 0 in place of its KC, MC, NC (a
 * tuner's configuration, kernels.h's kern_config; 0 keeps the default, and NC's default then
 * follows the configured KC). Any positive value is valid: mc is rounded up to a multiple of MR
 * and nc of NR, and each is clipped to the problem (kc to K, mc to M and nc to N rounded up). */
gemm_blocking gemm_blocking_config(const gemm_kernel *k, int64_t m, int64_t n, int64_t kdim,
                                   const core_hw *hw, int64_t kc, int64_t mc, int64_t nc);
/* gemm_blocking_config, then kn's knobs (kern_knobs.gemm_kc/mc/nc, > 0) in place of the blocks
 * that kc, mc, nc leave at the default, taken as they are (MC and NC rounded up to the tile).
 * What every GEMM-based variant's plan calls (gemm_variants.c; not in emitted libraries). */
gemm_blocking gemm_blocking_for(const kern_node *kn, const gemm_kernel *k, int64_t m, int64_t n,
                                int64_t kdim, const core_hw *hw, int64_t kc, int64_t mc,
                                int64_t nc);

/* A packed operand: A as ceil(M/MR) panels of K × MR, or B as ceil(N/NR) panels of K × NR,
 * zero-padded. Owned by whoever called gemm_pack_*; free with gemm_packed_free. */
typedef struct gemm_packed {
    const gemm_kernel *kernel;
    int64_t rows, cols; /* the logical operand: A is [M,K] (rows=M), B is [K,N] (cols=N) */
    float *data;
} gemm_packed;

anvil_status gemm_pack_a(const gemm_kernel *k, int64_t m, int64_t kdim, const float *a,
                         int64_t rs_a, int64_t cs_a, gemm_packed *out);
anvil_status gemm_pack_b(const gemm_kernel *k, int64_t kdim, int64_t n, const float *b,
                         int64_t rs_b, int64_t cs_b, gemm_packed *out);
void gemm_packed_free(gemm_packed *p);

/* B [kdim, n] of 8-bit integers (B[p,j] at b[p*rs_b + j*cs_b]; is_signed: int8, else uint8)
 * packed for an int8 tile as the s8 values B[p,j] - zp[j] (zp: n zero points, NULL: all 0),
 * and colsum[j] (n int32s, the caller's; NULL: not wanted) set to the sum over p of those values,
 * which the caller turns into the A zero point's compensation (-za * colsum[j]). ANVIL_ERR_
 * UNSUPPORTED where some B[p,j] - zp[j] is not in [-128, 127] (a uint8 weight far from its zero
 * point: the int8 tiles cannot multiply it). */
anvil_status gemm_pack_b8(const gemm_kernel *k, int64_t kdim, int64_t n, const void *b,
                          bool is_signed, int64_t rs_b, int64_t cs_b, const int32_t *zp,
                          int32_t *colsum, gemm_packed *out);

/* A [m, kdim] packed for k into the caller's memory: gemm_packed_a_bytes of it, 64-byte aligned;
 * out->data points into mem (not to be freed). For an A that changes every run but serves several
 * GEMMs in it (a training step's conv weights, once per image). */
size_t gemm_packed_a_bytes(const gemm_kernel *k, int64_t m, int64_t kdim);
void gemm_pack_a_into(const gemm_kernel *k, int64_t m, int64_t kdim, const float *a, int64_t rs_a,
                      int64_t cs_a, void *mem, gemm_packed *out);

/* One GEMM problem. a (or pa, or a_ind) and b (or pb): exactly one of each is set.
 *
 * a_ind is an implicit GEMM's A: each row is k / a_seg segments of a_seg consecutive floats that
 * may lie anywhere, A[i,p] = a_ind[i * (k / a_seg) + p / a_seg][p % a_seg]. A convolution over a
 * channels-last image has one segment per kernel tap (the pixel's cg channels at that offset, or
 * a segment of zeros where the tap falls in the padding), so it needs no im2col copy. k must be a
 * multiple of a_seg; the table and what it points to are borrowed. */
typedef struct gemm_problem {
    int64_t m, n, k;
    const float *a;
    int64_t rs_a, cs_a;
    const gemm_packed *pa;
    const float *const *a_ind;
    int64_t a_seg;
    const float *b;
    int64_t rs_b, cs_b;
    const gemm_packed *pb;
    float *c;
    int64_t ldc;
    gemm_epilogue ep;
    /* bf16 storage (a tile with pack_a16 / store_c16 only, gemm_takes_bf16): a16 in place of a,
     * row-major (cs_a 1, rs_a its row stride); c16 in place of c (ldc its row stride), written
     * once per element after the fp32 sums and the epilogue are complete. */
    const uint16_t *a16;
    uint16_t *c16;
    /* An int8 tile's A (its only form: row-major u8, cs_a 1, rs_a its row stride); its B is pb,
     * its C the fp32 c, with ep.col_scale set. */
    const uint8_t *a8;
} gemm_problem;

/* Whether k can read A (a16) and write C (c16) stored in bf16: a bf16 tile with their packers. */
bool gemm_takes_bf16(const gemm_kernel *k);

/* Whether k can run a problem whose indirect A has segments of a_seg floats: every tile, but a
 * bf16 one only with even segments (its K blocks must start on a pair of the packed B; the
 * driver then packs the indirect rows into pair slots). */
bool gemm_takes_ind(const gemm_kernel *k, int64_t a_seg);

/* Scratch bytes one thread needs to run problems of up to this blocking (packing buffers). */
size_t gemm_thread_workspace(const gemm_kernel *k, const gemm_blocking *b);
/* The same for problems whose C is stored in bf16 (c16), of up to n columns and depth kdim: a
 * K cut into several blocks keeps its partial sums in fp32 rows of the thread's (MC x N). */
size_t gemm_thread_workspace_c16(const gemm_kernel *k, const gemm_blocking *b, int64_t n,
                                 int64_t kdim);

/* Runs p on the calling thread only. ws: gemm_thread_workspace bytes, 64-byte aligned. Usable
 * from inside an op_parallel_for chunk (e.g. one GEMM per batch item per thread). */
void gemm_run_serial(const gemm_kernel *k, const gemm_blocking *b, const gemm_problem *p, void *ws);

/* The thread grid gemm_run splits p into on `threads` threads: C cut into *tm row parts x *tn
 * column parts of whole tiles (1 x 1 where it runs serially), each part then blocked by b. */
void gemm_thread_grid(const gemm_kernel *k, const gemm_blocking *b, const gemm_problem *p,
                      int threads, int *tm, int *tn);

/* Runs p split across ctx's threads (C divided into disjoint blocks, no synchronisation inside).
 * ws: threads * gemm_thread_workspace bytes. */
void gemm_run(const gemm_kernel *k, const gemm_blocking *b, const gemm_problem *p, void *ws,
              op_ctx *ctx);

/* ---- emitting (anvil compile, gemm_variants.c) -------------------------------------------- */

/* Marks the GEMM's source files as needed by the emitted library (for every variant that emits
 * gemm_run calls). */
anvil_status gemm_emit_files_need(kern_emit *e);
/* The text of gemm_tiles_emitted.h for a library whose code is `code`: the tiles it names
 * (gemm_kernel_<tile>), as the GEMM_TILES_AVX512 / GEMM_TILES_AVX2 lists. malloc'd (the caller
 * frees it); NULL when out of memory. */
char *gemm_emit_tiles_header(const char *code);
/* Writes `const gemm_kernel *VAR = &gemm_kernel_<tile>;` and `const gemm_blocking VAR_blk`. */
void gemm_emit_kernel(kern_emit *e, const char *var, const gemm_kernel *k, const gemm_blocking *b);

/* ---- parameter spaces (gemm_space.c): what the GEMM and the GEMM-based convolutions offer a
 * tuner (kernels.h's kern_space), shared so that they list and check values alike. ---------- */

/* The deepest K block the driver runs with b on depth kdim, i.e. the A micro-panel's depth in
 * L1 (a_seg: an indirect A's segment, gemm_problem.a_seg, whose blocks stay inside one segment;
 * 0: none). */
int64_t gemm_kc_max(const gemm_blocking *b, int64_t kdim, int64_t a_seg);
/* KC candidates for depth kdim (a_seg as above) into vals (at most cap; returns how many):
 * ascending, positive, and no two that the driver would run alike (values at or past K, or past
 * the segment, collapse into one). */
int gemm_kc_values(int64_t kdim, int64_t a_seg, int32_t *vals, int cap);
/* MC (multiples of MR, clipped to M) or NC (multiples of NR, clipped to N) candidates for k:
 * ascending, distinct; `part` (the rows or columns of one thread's part of C, 0: none) is added,
 * so that one block per thread is always a candidate. */
int gemm_mc_values(const gemm_kernel *k, int64_t m, int64_t part, int32_t *vals, int cap);
int gemm_nc_values(const gemm_kernel *k, int64_t n, int64_t part, int32_t *vals, int cap);

/* A tile parameter's values are 1 + an index into gemm_kernels (0: the variant's default). The
 * kernel value v names when hw can run it, else NULL (0, out of range, or not usable: the
 * caller then keeps its default, so no value fails). */
const gemm_kernel *gemm_kernel_of_param(int32_t v, const core_hw *hw);
/* The values of every tile hw can run, in gemm_kernels' order; returns how many (<= cap). */
int gemm_tile_values(const core_hw *hw, int32_t *vals, int cap);
/* The tile's name ("8x32_avx512") for value v, or NULL. Static. */
const char *gemm_tile_label(int32_t v);

/* L1d, L2 and L3 bytes of hw, with the driver's guesses where hw does not know them (32 KiB,
 * 1 MiB, and 2 MiB per core for L3). */
size_t gemm_l1_bytes(const core_hw *hw);
size_t gemm_l2_bytes(const core_hw *hw);
size_t gemm_l3_bytes(const core_hw *hw);
/* The rule "A panel fits L1": k's A micro-panel (MR x kc_max floats) fits hw's L1d. */
bool gemm_a_panel_fits_l1(const gemm_kernel *k, int64_t kc_max, const core_hw *hw);

#endif
