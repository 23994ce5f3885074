/* The attention family (kernels/cpu/attn): anvil.Sdpa (ops/sdpa_common.h) as one tiled pass per
 * block of queries with an online softmax, so no score matrix larger than one block exists.
 *
 * attn_variants.c checks the node and plans it (attn_state); attn_run.c cuts the work into jobs
 * (batch x head x query block) and splits them across threads; the per-ISA files (attn_avx512.c,
 * attn_avx2.c) instantiate attn_tmpl.h, which computes one job. Pointers in attn_prob are borrowed
 * for the run. Everything here but attn_variants.c is IR-free: `anvil compile` copies it into the
 * libraries it emits (against src/emit/shim), so they run the very code anvil runs. */
#ifndef ANVIL_KERNELS_ATTN_H
#define ANVIL_KERNELS_ATTN_H

#include "ops/sdpa_geom.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One run of a node: its geometry and data. k's and v's head-size stride is 1 (supports()). */
typedef struct attn_prob {
    sdpa_geom g;
    const float *q, *k, *v, *mask;
    const bool *keep;
    float *o;
    float scale, fill;
    bool invert; /* keep[...] == invert drops the score */
    bool causal; /* key j > query i + coff dropped (sdpa_causal_offset) */
    int64_t coff;
    float softcap; /* > 0: scores capped by softcap * tanh(s / softcap) before the masks */
    int64_t kb;    /* keys per block: a multiple of the ISA's key tile (attn_isa.key_tile) */
} attn_prob;

typedef struct attn_isa {
    int mb;       /* queries per block: the vector lanes times the vectors a tile holds */
    int narrow;   /* queries per narrow block (one vector), for a sequence's last queries */
    int nb;       /* keys per block by default (the tuner may pick another multiple of key_tile) */
    int key_tile; /* keys per register tile of the scores */
    int rows;     /* head-size rows of the output's register tile: the output's transposed rows
                   * are padded to a multiple of it */
    /* 1: both products take pairs of 16-bit values: bf16 (vdpbf16ps, fp32 sums;
     * attn_avx512bf16.c) or fp16 (vfmadd231ph, fp16 sums widened per tile; attn_avx512fp16.c),
     * q and k rounded along the head size, the softmax's weights and v along the keys; the
     * scores, the softmax and the output stay fp32. 0: fp32 throughout. */
    int bf16;
    /* Computes queries [i0, i0 + mb) of (b, h). ws: attn_ws_floats(isa, p) floats, 64-byte
     * aligned, owned by the caller. */
    void (*block)(const attn_prob *p, int64_t b, int64_t h, int64_t i0, float *ws);
    /* The same for queries [i0, i0 + narrow), in the same workspace. */
    void (*block_narrow)(const attn_prob *p, int64_t b, int64_t h, int64_t i0, float *ws);
} attn_isa;

/* Scratch one job needs with kb keys per block: q's block transposed (d x mb), one block of
 * scores (kb x mb), the output block transposed (dv rounded up to rows, x mb), and three vectors
 * of mb (running max, running sum, rescale factors). */
static inline size_t attn_ws_floats(const attn_isa *isa, const sdpa_geom *g, int64_t kb) {
    const size_t dvp = (size_t)((g->dv + isa->rows - 1) / isa->rows * isa->rows);
    size_t n = (size_t)isa->mb * ((size_t)g->d + (size_t)kb + dvp + 3);
    if (isa->bf16) {
        /* the pair buffers (attn_tmpl.h), each rounded up to a vector: q's and the weights'
         * (head-size pairs x mb, key pairs x mb), k's block (kb x head-size pairs) and v's
         * (key pairs x dvp) */
        const size_t d2 = ((size_t)g->d + 1) / 2, k2 = ((size_t)kb + 1) / 2;
        n += (size_t)isa->mb * (d2 + k2) + ((size_t)kb * d2 + 15) / 16 * 16 +
             (k2 * dvp + 15) / 16 * 16;
    }
    return n;
}

extern const attn_isa attn_isa_avx512;
extern const attn_isa attn_isa_avx2;
extern const attn_isa attn_isa_avx512bf16;
/* block NULL where the compiler had no AVX512-FP16 (sdpa_fp16 then does not apply) */
extern const attn_isa attn_isa_avx512fp16;

/* A node as its prepare planned it: what attn_exec needs besides the tensors. */
typedef struct attn_state {
    const attn_isa *isa;
    attn_prob p;           /* geometry, scale, fill; pointers set per run */
    int64_t jobs, qblocks; /* qblocks per (batch, head): wide ones, then narrow ones */
    int64_t wide;          /* wide blocks per (batch, head) */
    size_t ws_floats;      /* per thread, rounded up to 16 */
    int threads;           /* slices the workspace holds */
} attn_state;

typedef struct op_ctx op_ctx;

/* Computes the node into o (out_numel floats) from q, k, v and the optional masks (NULL where
 * absent), their tensors' first elements (the views' offsets are added here). ws: s->threads
 * slices of s->ws_floats floats, 64-byte aligned. */
void attn_exec(const attn_state *s, const float *q, const float *k, const float *v,
               const float *mask, const bool *keep, float *o, size_t out_numel, float *ws,
               op_ctx *ctx);

#endif
