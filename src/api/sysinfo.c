/* anvil_sysinfo: the machine as anvil sees it, as "key = value" lines.
 *
 * The text is produced here, in the library, so that the CLI, the Python package and bug reports
 * all show the same thing. It reports what core_hw_get() says anvil will use, i.e. after the
 * ANVIL_ISA cap and after the OS-support checks; ISA feature lines use the bare upper-case feature
 * name so scripts can grep for "AVX512F = 1".
 *
 * The multiply-accumulate peaks are the ones the runtime itself measures and decides by
 * (peak_rates_get): per format, one core's rate over its own CPU time and the loop that gave it,
 * so what a user sees is what the runtime saw. The first call pays for the measurement (about
 * 10-20 ms per loop the CPU has); the rates are kept for the process. */
#include "api.h"
#include "core/core.h"
#include "env.h"
#include "kernels/cpu/gemm/gemm.h"
#include "kernels/cpu/peak/peak.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Appends to buf like snprintf, but keeps counting the length needed once buf is full. */
typedef struct sysinfo_out {
    char *buf;
    size_t cap, len;
} sysinfo_out;

static void out_line(sysinfo_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out_line(sysinfo_out *o, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *dst = o->len < o->cap ? o->buf + o->len : NULL;
    size_t room = o->len < o->cap ? o->cap - o->len : 0;
    int w = vsnprintf(dst, room, fmt, ap);
    va_end(ap);
    if (w > 0) o->len += (size_t)w;
}

static void out_cache(sysinfo_out *o, const char *key, size_t bytes) {
    if (bytes == 0)
        out_line(o, "%s = unknown\n", key);
    else if (bytes % (1024 * 1024) == 0)
        out_line(o, "%s = %zu MiB\n", key, bytes / (1024 * 1024));
    else
        out_line(o, "%s = %zu KiB\n", key, bytes / 1024);
}

size_t anvil_sysinfo(char *buf, size_t cap) {
    sysinfo_out o = {buf, buf ? cap : 0, 0};
    api_env_init();
    const core_hw *h = core_hw_get();

    out_line(&o, "anvil.version = %d.%d.%d\n", ANVIL_VERSION_MAJOR, ANVIL_VERSION_MINOR,
             ANVIL_VERSION_PATCH);
    out_line(&o, "cpu.model = %s\n", h->cpu_model[0] ? h->cpu_model : "unknown");
    out_line(&o, "cpu.logical_cores = %d\n", h->logical_cores);
    out_line(&o, "cpu.physical_cores = %d\n", h->physical_cores);
    out_cache(&o, "cache.l1d", h->l1d_bytes);
    out_cache(&o, "cache.l2", h->l2_bytes);
    out_cache(&o, "cache.l3", h->l3_bytes);

    const struct {
        const char *name;
        bool on;
    } isa[] = {
        {"SSE4_2", h->sse42},
        {"AVX", h->avx},
        {"AVX2", h->avx2},
        {"FMA", h->fma},
        {"F16C", h->f16c},
        {"AVX_VNNI", h->avx_vnni},
        {"AVX512F", h->avx512f},
        {"AVX512BW", h->avx512bw},
        {"AVX512VL", h->avx512vl},
        {"AVX512DQ", h->avx512dq},
        {"AVX512CD", h->avx512cd},
        {"AVX512_VNNI", h->avx512_vnni},
        {"AVX512_BF16", h->avx512_bf16},
        {"AVX512_FP16", h->avx512_fp16},
        {"AMX_TILE", h->amx_tile},
        {"AMX_BF16", h->amx_bf16},
        {"AMX_INT8", h->amx_int8},
        {"AMX_FP16", h->amx_fp16},
        {"OS_AVX512", h->os_avx512},
        {"OS_AMX", h->os_amx},
    };
    for (size_t i = 0; i < sizeof isa / sizeof *isa; i++)
        out_line(&o, "%s = %d\n", isa[i].name, isa[i].on ? 1 : 0);

    out_line(&o, "isa.cap = %s\n", core_isa_cap_name(core_hw_cap()));

    const peak_rates *pk = peak_rates_get();
    const struct {
        const char *format, *unit;
        double rate;
        const char *isa;
    } peaks[] = {
        {"fp32", "gflops", pk->f32, pk->f32_isa},
        {"bf16", "gflops", pk->bf16, pk->bf16_isa},
        {"fp16", "gflops", pk->fp16, pk->fp16_isa},
        {"int8", "gops", pk->i8, pk->i8_isa},
    };
    for (size_t i = 0; i < sizeof peaks / sizeof *peaks; i++) {
        out_line(&o, "peak.%s.%s = %.1f\n", peaks[i].format, peaks[i].unit, peaks[i].rate);
        out_line(&o, "peak.%s.isa = %s\n", peaks[i].format, peaks[i].isa ? peaks[i].isa : "none");
    }

    /* The reduced-precision tiles' measured speeds, relative to the best: what the default tile
     * of a GEMM or convolution in that format weighs against padding (gemm_default.c). */
    const struct {
        const char *format;
        const gemm_kernel *const *list;
    } tiles[] = {{"bf16", gemm_kernels_bf16}, {"fp16", gemm_kernels_fp16}};
    for (size_t f = 0; f < sizeof tiles / sizeof *tiles; f++) {
        bool any = false;
        for (int i = 0; i < GEMM_RATED_MAX && tiles[f].list[i]; i++)
            any = any || gemm_kernel_usable(tiles[f].list[i], h);
        const float *speed = any ? gemm_tile_speeds(tiles[f].list, h) : NULL;
        for (int i = 0; speed && i < GEMM_RATED_MAX && tiles[f].list[i]; i++)
            if (gemm_kernel_usable(tiles[f].list[i], h))
                out_line(&o, "tile.%s.%s = %.2f\n", tiles[f].format, tiles[f].list[i]->name,
                         speed[i]);
    }

    out_line(&o, "backend.cpu = 1\n");
#ifdef ANVIL_WITH_CUDA
    out_line(&o, "backend.cuda = 1\n");
#else
    out_line(&o, "backend.cuda = 0\n");
#endif
    /* the vendor libraries the build found (their variants load them when first used) */
#ifdef ANVIL_HAVE_DNNL
    out_line(&o, "vendor.onednn = 1\n");
#else
    out_line(&o, "vendor.onednn = 0\n");
#endif
#ifdef ANVIL_HAVE_OPENBLAS
    out_line(&o, "vendor.openblas = 1\n");
#else
    out_line(&o, "vendor.openblas = 0\n");
#endif
#ifdef ANVIL_HAVE_BLIS
    out_line(&o, "vendor.blis = 1\n");
#else
    out_line(&o, "vendor.blis = 0\n");
#endif
    out_line(&o, "onnx.parser = nanopb\n");
#if defined(__clang__)
    out_line(&o, "build.compiler = %s\n", __VERSION__);
#elif defined(__GNUC__)
    out_line(&o, "build.compiler = gcc %s\n", __VERSION__);
#else
    out_line(&o, "build.compiler = unknown\n");
#endif
#if defined(__SANITIZE_ADDRESS__)
    out_line(&o, "build.sanitizers = address,undefined\n");
#else
    out_line(&o, "build.sanitizers = none\n");
#endif

    if (buf && cap > 0 && o.len >= cap) buf[cap - 1] = '\0';
    return o.len + 1;
}

anvil_status anvil_set_isa_cap(const char *isa) {
    api_env_init(); /* so that a later first use does not put $ANVIL_ISA's cap over this one */
    if (!isa || !strcmp(isa, "none") || !strcmp(isa, "native")) {
        core_hw_set_cap(CORE_ISA_NATIVE);
        return ANVIL_OK;
    }
    const core_isa_cap cap = core_isa_cap_parse(isa);
    API_CHECK(cap != CORE_ISA_NATIVE,
              "anvil_set_isa_cap: '%s' is not an ISA cap; give avx512, avx2, scalar or none", isa);
    core_hw_set_cap(cap);
    return ANVIL_OK;
}

const char *anvil_isa_cap(void) {
    api_env_init();
    return core_isa_cap_name(core_hw_cap());
}
