/* The per-core peaks the runtime reads (peak.h): which loop may run comes from core_hw_get() and
 * from what the compiler could build; the rate is operations over the thread's CPU time, because
 * the machines this runs on are shared and the wall clock would measure the neighbours too.
 *
 * The rates are cached per set of runnable loops rather than once per process, so that a cap set
 * after the first call (anvil_set_isa_cap, a test's core_hw_override) gets rates that match the
 * ISAs it leaves, while each set is still measured only once. */
#include "peak.h"

#include "core/core.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

typedef struct peak_entry {
    const char *name;
    peak_format format;
    peak_loop loop;
} peak_entry;

static const peak_entry peak_table[PEAK_ISA_COUNT] = {
    [PEAK_AVX512_F32] = {"avx512_f32", PEAK_FORMAT_F32, peak_avx512_f32},
    [PEAK_AVX2_F32] = {"avx2_f32", PEAK_FORMAT_F32, peak_avx2_f32},
    [PEAK_SSE_F32] = {"sse_f32", PEAK_FORMAT_F32, peak_sse_f32},
    [PEAK_AVX512_BF16] = {"avx512_bf16", PEAK_FORMAT_BF16, peak_avx512_bf16},
    [PEAK_AVX512_FP16] = {"avx512_fp16", PEAK_FORMAT_FP16, peak_avx512_fp16},
    [PEAK_AMX_BF16] = {"amx_bf16", PEAK_FORMAT_BF16, peak_amx_bf16},
    [PEAK_AVX512_VNNI_I8] = {"avx512_vnni_i8", PEAK_FORMAT_I8, peak_avx512_vnni_i8},
    [PEAK_AVX_VNNI_I8] = {"avx_vnni_i8", PEAK_FORMAT_I8, peak_avx_vnni_i8},
    [PEAK_AMX_INT8] = {"amx_int8", PEAK_FORMAT_I8, peak_amx_int8},
};

const char *peak_isa_name(peak_isa isa) {
    return (unsigned)isa < PEAK_ISA_COUNT ? peak_table[isa].name : "?";
}

peak_format peak_isa_format(peak_isa isa) {
    return (unsigned)isa < PEAK_ISA_COUNT ? peak_table[isa].format : PEAK_FORMAT_COUNT;
}

/* The features each loop's instructions need, the set-up code the compiler generates for its
 * flags included (the int8 broadcasts are AVX512-BW instructions, for instance). */
static bool peak_cpu_has(const core_hw *hw, peak_isa isa) {
    switch (isa) {
    case PEAK_AVX512_F32:
        return hw->avx512f;
    case PEAK_AVX2_F32:
        return hw->avx2 && hw->fma;
    case PEAK_SSE_F32:
        return true;
    case PEAK_AVX512_BF16:
        return hw->avx512f && hw->avx512_bf16;
    case PEAK_AVX512_FP16:
        return hw->avx512f && hw->avx512bw && hw->avx512_fp16 && peak_build_has_fp16();
    case PEAK_AMX_BF16:
        return hw->amx_tile && hw->amx_bf16 && peak_build_has_amx();
    case PEAK_AVX512_VNNI_I8:
        return hw->avx512f && hw->avx512bw && hw->avx512_vnni;
    case PEAK_AVX_VNNI_I8:
        return hw->avx2 && hw->avx_vnni && peak_build_has_avx_vnni();
    case PEAK_AMX_INT8:
        return hw->amx_tile && hw->amx_int8 && peak_build_has_amx();
    default:
        return false;
    }
}

peak_loop peak_isa_loop(peak_isa isa) {
    if ((unsigned)isa >= PEAK_ISA_COUNT || !peak_cpu_has(core_hw_get(), isa)) return NULL;
    return peak_table[isa].loop;
}

static double peak_thread_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double peak_isa_measure(peak_isa isa, double seconds) {
    peak_loop loop = peak_isa_loop(isa);
    if (!loop || !(seconds > 0)) return 0;
    /* Grow the count until one run takes a millisecond: long enough for the clock's resolution
     * and the core's frequency change on the first wide instructions, short next to `seconds`. */
    float sink = 0;
    uint64_t iters = 64;
    double dt = 0;
    for (;;) {
        double t0 = peak_thread_cpu_s();
        if (loop(iters, &sink) == 0) return 0;
        dt = peak_thread_cpu_s() - t0;
        if (dt >= 1e-3 || iters >= (1ull << 40)) break;
        iters *= 4;
    }
    /* Then the best of two runs of half the time each, which steps around an interrupt. */
    uint64_t run = (uint64_t)((double)iters * (0.5 * seconds) / (dt > 0 ? dt : 1e-3)) + 1;
    double best = 0;
    for (int rep = 0; rep < 2; rep++) {
        double t0 = peak_thread_cpu_s();
        uint64_t ops = loop(run, &sink);
        double t = peak_thread_cpu_s() - t0;
        if (t > 0 && (double)ops / t > best) best = (double)ops / t;
    }
    /* The sink only keeps the results alive; a NaN would mean a broken loop. */
    return sink == sink ? best * 1e-9 : 0;
}

/* One measured set of rates, for the set of runnable loops (a bit per peak_isa) it was made
 * under. Entries are never freed: peak_rates_get hands out pointers into them. */
typedef struct peak_cached {
    unsigned loops;
    peak_rates rates;
    struct peak_cached *next;
} peak_cached;

static pthread_mutex_t peak_lock = PTHREAD_MUTEX_INITIALIZER;
static peak_cached *peak_cache;
/* What a failed allocation returns: every format absent. */
static const peak_rates peak_none;

/* CPU time of each measurement: 10-20 ms per loop with the calibration. */
#define PEAK_RATES_SECONDS 0.012

static void peak_rates_measure(unsigned loops, peak_rates *r) {
    double rate[PEAK_FORMAT_COUNT] = {0}, by_isa[PEAK_ISA_COUNT] = {0};
    const char *name[PEAK_FORMAT_COUNT] = {0};
    for (int isa = 0; isa < PEAK_ISA_COUNT; isa++) {
        if (!(loops & (1u << isa))) continue;
        double g = by_isa[isa] = peak_isa_measure((peak_isa)isa, PEAK_RATES_SECONDS);
        peak_format f = peak_table[isa].format;
        /* A loop replaces an earlier one of its format (the table puts the widest vectors
         * first) only when 3% faster, so that two loops the core runs equally fast (Zen 4's zmm
         * and ymm FMAs) do not swap names from one run to the next on noise. */
        if (g > (name[f] ? 1.03 : 1.0) * rate[f]) {
            rate[f] = g;
            name[f] = peak_table[isa].name;
        }
    }
    *r = (peak_rates){rate[PEAK_FORMAT_F32],  rate[PEAK_FORMAT_BF16], rate[PEAK_FORMAT_FP16],
                      rate[PEAK_FORMAT_I8],   name[PEAK_FORMAT_F32],  name[PEAK_FORMAT_BF16],
                      name[PEAK_FORMAT_FP16], name[PEAK_FORMAT_I8],   {0}};
    for (int isa = 0; isa < PEAK_ISA_COUNT; isa++) r->isa[isa] = by_isa[isa];
}

const peak_rates *peak_rates_get(void) {
    const core_hw *hw = core_hw_get();
    unsigned loops = 0;
    for (int isa = 0; isa < PEAK_ISA_COUNT; isa++)
        if (peak_cpu_has(hw, (peak_isa)isa)) loops |= 1u << isa;
    pthread_mutex_lock(&peak_lock);
    peak_cached *c = peak_cache;
    while (c && c->loops != loops) c = c->next;
    if (!c) {
        c = calloc(1, sizeof *c);
        if (c) {
            c->loops = loops;
            peak_rates_measure(loops, &c->rates);
            c->next = peak_cache;
            peak_cache = c;
        }
    }
    pthread_mutex_unlock(&peak_lock);
    return c ? &c->rates : &peak_none;
}
