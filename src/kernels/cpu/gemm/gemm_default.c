/* The default tile: what a GEMM runs when no tuning database names one.
 *
 * The default is the tile with the least padded work over its speed on full tiles. For the fp32
 * tiles those speeds are a table measured once (Zen 4); they tie within 3% on every CPU the
 * project has run on, except a 16x16 tile, and measuring them would cost every process. The
 * bf16 and fp16 tiles are timed here, once per process and ISA cap, the first time a default
 * among them is asked for: their order differs by machine (8x48 is 5-9% ahead of 4x64 on a
 * Zen 5 EPYC, 1% behind it on Zen 4; 16x16 is 0.72 of the best on Zen 4, 0.88 on a Xeon), and
 * a session in those formats has just paid for the peak loops (peak.c) anyway. */
#include "gemm.h"

#include "core/core.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

/* The tiles (gemm.c and the ISA files). */
extern const gemm_kernel gemm_kernel_4x8_portable;
#define KERNEL_DECL(MR, NV, NR, ISA) extern const gemm_kernel gemm_kernel_##MR##x##NR##_##ISA;
GEMM_TILES_AVX512(KERNEL_DECL)
GEMM_TILES_AVX2(KERNEL_DECL)

static int64_t round_up(int64_t x, int64_t m) {
    return (x + m - 1) / m * m;
}

/* Relative speed of each fp32 tile on full tiles (1 thread, Zen 4, KC from gemm_blocking_default,
 * anvil_kbench gemm --shape 336x1536x1024: every tile divides it, so no padding). Long-KC tiles
 * with few rows win: their A micro-panel lets KC reach 1024 (now up to 1536) inside L1. */
static const struct {
    const gemm_kernel *k;
    float speed;
} tile_speed[] = {
    {&gemm_kernel_6x64_avx512, 1.00f},  {&gemm_kernel_4x64_avx512, 1.00f},
    {&gemm_kernel_12x32_avx512, 0.99f}, {&gemm_kernel_8x48_avx512, 0.99f},
    {&gemm_kernel_8x32_avx512, 0.98f},  {&gemm_kernel_16x16_avx512, 0.98f},
    {&gemm_kernel_7x48_avx512, 0.99f},  {&gemm_kernel_7x32_avx512, 0.98f},
    {&gemm_kernel_14x32_avx512, 0.97f}, {&gemm_kernel_1x64_avx512, 0.45f},
    {&gemm_kernel_6x16_avx2, 1.00f},    {&gemm_kernel_4x24_avx2, 0.97f},
    {&gemm_kernel_8x8_avx2, 0.90f},
};

/* The columns of C that t computes for n, in units of its full tiles' columns: a column kernel's
 * nn FMAs per k step count as the nn * NR / (MR * NV) tile columns they would buy, plus a third. */
static double tile_columns(const gemm_kernel *t, int64_t n) {
    const int64_t edge = n % t->nr;
    if (edge == 0 || edge >= gemm_cols_kernel_below(t)) return (double)round_up(n, t->nr);
    return (double)(n - edge) +
           (double)edge * (double)gemm_kernel_vl(t) / (double)t->mr * 4.0 / 3.0;
}

const gemm_kernel *gemm_kernel_default(int64_t m, int64_t n, int64_t k, const core_hw *hw) {
    (void)k;
    const bool avx512 = gemm_kernel_usable(&gemm_kernel_6x64_avx512, hw);
    const gemm_kernel *best = &gemm_kernel_4x8_portable;
    double best_cost = -1.0;
    if (m < 1) m = 1;
    if (n < 1) n = 1;
    for (size_t i = 0; i < sizeof tile_speed / sizeof *tile_speed; i++) {
        const gemm_kernel *t = tile_speed[i].k;
        /* AVX2 tiles only where AVX-512 is missing: they tie on full tiles but the AVX-512
         * ones have the narrower edge handling per vector. */
        if (!gemm_kernel_usable(t, hw) || (avx512 && (t->needs & KERN_NEEDS_AVX2))) continue;
        double cost = (double)round_up(m, t->mr) * tile_columns(t, n) / tile_speed[i].speed;
        if (best_cost < 0 || cost < best_cost) {
            best_cost = cost;
            best = t;
        }
    }
    return best;
}

/* ---- measured speeds of the bf16 and fp16 tiles ------------------------------------------- */

static double thread_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The measuring GEMM: 336 rows, a multiple of every tile's MR (1, 4, 6, 8, 14, 16); 384 columns,
 * of every NR; the depth of a transformer's hidden size, so KC is what those models run. 0.2
 * GFLOP, about 0.4 ms on a 500 GFLOP/s core. */
enum { RATE_M = 336, RATE_N = 384, RATE_K = 768, RATE_ROUNDS = 6 };

/* rate[i]: the GFLOP/s of list[i] (i < count, where bit i of usable is set; 0 elsewhere or when
 * memory ran out) on the calling thread's CPU time, B pre-packed as a session packs weights and
 * no epilogue. The tiles take turns, a round each, so that a slow moment of a shared machine
 * falls on all of them; each keeps its best round but the first, which warms the caches and the
 * core's wide units. About 20 ms for the six bf16 tiles on a Zen 5 core. */
static void list_rates(const gemm_kernel *const *list, int count, unsigned usable,
                       const core_hw *hw, double *rate) {
    float *a = core_aligned_alloc(64, sizeof(float) * RATE_M * RATE_K);
    float *b = core_aligned_alloc(64, sizeof(float) * RATE_K * RATE_N);
    float *c = core_aligned_alloc(64, sizeof(float) * RATE_M * RATE_N);
    /* an int8 tile's operands (gemm_kernels_i8): the same values as bytes, and unit scales */
    uint8_t *a8 = core_aligned_alloc(64, (size_t)RATE_M * RATE_K);
    int8_t *b8 = core_aligned_alloc(64, (size_t)RATE_K * RATE_N);
    float *ones = core_aligned_alloc(64, sizeof(float) * RATE_N);
    gemm_packed pb[GEMM_RATED_MAX] = {{0}};
    gemm_blocking blk[GEMM_RATED_MAX];
    void *ws[GEMM_RATED_MAX] = {0};
    double best_s[GEMM_RATED_MAX] = {0};
    if (a && b && c && a8 && b8 && ones) {
        /* small exact values: neither denormals nor overflow may slow a run down */
        for (int64_t i = 0; i < (int64_t)RATE_M * RATE_K; i++) {
            a[i] = (float)(i % 7 - 3) * 0.125f;
            a8[i] = (uint8_t)(i % 7);
        }
        for (int64_t i = 0; i < (int64_t)RATE_K * RATE_N; i++) {
            b[i] = (float)(i % 5 - 2) * 0.25f;
            b8[i] = (int8_t)(i % 5 - 2);
        }
        for (int j = 0; j < RATE_N; j++) ones[j] = 1.0f;
        for (int i = 0; i < count; i++) {
            if (!(usable & (1u << i))) continue;
            blk[i] = gemm_blocking_default(list[i], RATE_M, RATE_N, RATE_K, hw);
            ws[i] =
                core_aligned_alloc(64, (gemm_thread_workspace(list[i], &blk[i]) + 63) / 64 * 64);
            const anvil_status packed =
                list[i]->kpair == 4
                    ? gemm_pack_b8(list[i], RATE_K, RATE_N, b8, true, RATE_N, 1, NULL, NULL, &pb[i])
                    : gemm_pack_b(list[i], RATE_K, RATE_N, b, RATE_N, 1, &pb[i]);
            if (!ws[i] || packed != ANVIL_OK) usable &= ~(1u << i);
        }
        for (int round = 0; round < RATE_ROUNDS; round++)
            for (int i = 0; i < count; i++) {
                if (!(usable & (1u << i))) continue;
                gemm_problem p = {.m = RATE_M,
                                  .n = RATE_N,
                                  .k = RATE_K,
                                  .a = a,
                                  .rs_a = RATE_K,
                                  .cs_a = 1,
                                  .pb = &pb[i]};
                p.c = c;
                p.ldc = RATE_N;
                p.ep = gemm_epilogue_none();
                if (list[i]->kpair == 4) {
                    p.a = NULL;
                    p.a8 = a8;
                    p.ep.col_scale = ones;
                }
                const double t0 = thread_cpu_s();
                gemm_run_serial(list[i], &blk[i], &p, ws[i]);
                const double t = thread_cpu_s() - t0;
                if (round > 0 && t > 0 && (best_s[i] == 0 || t < best_s[i])) best_s[i] = t;
            }
    }
    for (int i = 0; i < count; i++) {
        rate[i] = best_s[i] > 0 ? 2.0 * RATE_M * RATE_N * RATE_K / best_s[i] * 1e-9 : 0;
        gemm_packed_free(&pb[i]);
        free(ws[i]);
    }
    free(a);
    free(b);
    free(c);
    free(a8);
    free(b8);
    free(ones);
}

#define RATED_MAX GEMM_RATED_MAX

/* One list's relative speeds (its tiles' measured rates over the best of them), for the set of
 * its tiles hw could run when they were measured (a bit per list index): an ISA cap
 * (ANVIL_ISA, anvil_set_isa_cap) that hides some is another entry. Never freed: lookups hand
 * out pointers into them. */
typedef struct rated {
    const gemm_kernel *const *list;
    unsigned usable;
    float speed[RATED_MAX];
    struct rated *next;
} rated;

static pthread_mutex_t rated_lock = PTHREAD_MUTEX_INITIALIZER;
static rated *rated_cache;

const float *gemm_tile_speeds(const gemm_kernel *const *list, const core_hw *hw) {
    unsigned usable = 0;
    for (int i = 0; i < RATED_MAX && list[i]; i++)
        if (gemm_kernel_usable(list[i], hw)) usable |= 1u << i;
    pthread_mutex_lock(&rated_lock);
    rated *r = rated_cache;
    while (r && !(r->list == list && r->usable == usable)) r = r->next;
    if (!r && (r = calloc(1, sizeof *r)) != NULL) {
        r->list = list;
        r->usable = usable;
        int count = 0;
        while (count < RATED_MAX && list[count]) count++;
        double rate[RATED_MAX] = {0}, top = 0;
        list_rates(list, count, usable, hw, rate);
        for (int i = 0; i < count; i++)
            if (rate[i] > top) top = rate[i];
        /* a tile that could not be timed counts as the best: the choice then falls to padding */
        for (int i = 0; i < RATED_MAX; i++)
            r->speed[i] = top > 0 && rate[i] > 0 ? (float)(rate[i] / top) : 1.0f;
        r->next = rated_cache;
        rated_cache = r;
    }
    pthread_mutex_unlock(&rated_lock);
    return r ? r->speed : NULL;
}

/* Among list's usable tiles, the one with the least padded work over its speed (a narrow edge
 * counted at its column kernel's cost, as for the fp32 tiles). */
static const gemm_kernel *default_among(const gemm_kernel *const *list, int64_t m, int64_t n,
                                        const core_hw *hw) {
    const float *speed = gemm_tile_speeds(list, hw);
    const gemm_kernel *best = NULL;
    double best_cost = -1.0;
    if (m < 1) m = 1;
    if (n < 1) n = 1;
    for (int i = 0; i < RATED_MAX && list[i]; i++) {
        const gemm_kernel *t = list[i];
        if (!gemm_kernel_usable(t, hw)) continue;
        const double cost =
            (double)round_up(m, t->mr) * tile_columns(t, n) / (speed ? (double)speed[i] : 1.0);
        if (best_cost < 0 || cost < best_cost) {
            best_cost = cost;
            best = t;
        }
    }
    return best;
}

const gemm_kernel *gemm_kernel_default_bf16(int64_t m, int64_t n, int64_t k, const core_hw *hw) {
    (void)k;
    return default_among(gemm_kernels_bf16, m, n, hw);
}

const gemm_kernel *gemm_kernel_default_fp16(int64_t m, int64_t n, int64_t k, const core_hw *hw) {
    (void)k;
    return default_among(gemm_kernels_fp16, m, n, hw);
}

const gemm_kernel *gemm_kernel_default_i8(int64_t m, int64_t n, int64_t k, const core_hw *hw) {
    (void)k;
    return default_among(gemm_kernels_i8, m, n, hw);
}
