/* The hardware fingerprint of tuning records. A measurement only says something about the machine
 * and the build that made it: a different CPU, cache, core count, anvil version or set of kernel
 * variants can change which variant wins, so all of them go into the text that records are keyed
 * by, and records of any other fingerprint are never used (tune_db_prune removes them). */
#include "tune/tune.h"

#include "kernels/kernels.h"

#include <inttypes.h>
#include <string.h>

#define TUNE_STR2(x) #x
#define TUNE_STR(x) TUNE_STR2(x)

/* FNV-1a over the variant names, a NUL after each so that "ab","c" and "a","bc" differ. */
static uint64_t tune_kernel_hash(void) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int op = 0; op < IR_OP_COUNT; op++) {
        size_t count = 0;
        const kern_variant *const *vs = kern_variants((ir_op)op, &count);
        for (size_t i = 0; i < count; i++) {
            const char *name = vs[i] && vs[i]->name ? vs[i]->name : "";
            for (const unsigned char *p = (const unsigned char *)name;; p++) {
                h ^= *p;
                h *= 0x100000001b3ull;
                if (*p == 0) break;
            }
        }
    }
    return h;
}

/* Appends name (with a '+' before all but the first) when on; the ISA as one short token. */
static void tune_flag(char *buf, size_t cap, bool on, const char *name) {
    if (!on) return;
    size_t len = strlen(buf);
    snprintf(buf + len, cap - len, "%s%s", len ? "+" : "", name);
}

anvil_status tune_fingerprint(char *buf, size_t cap) {
    if (!buf || cap == 0)
        return core_err(ANVIL_ERR_INVALID_ARGUMENT, "tune_fingerprint: no buffer");
    const core_hw *hw = core_hw_get();
    char isa[256] = "";
    /* AVX-512 and AMX count only where the OS saves their state. */
    const bool z = hw->os_avx512, t = hw->os_amx;
    const struct {
        bool on;
        const char *name;
    } flags[] = {
        {hw->sse42, "sse42"},
        {hw->avx, "avx"},
        {hw->avx2, "avx2"},
        {hw->fma, "fma"},
        {hw->f16c, "f16c"},
        {hw->avx_vnni, "avxvnni"},
        {hw->avx512f && z, "avx512f"},
        {hw->avx512bw && z, "bw"},
        {hw->avx512vl && z, "vl"},
        {hw->avx512dq && z, "dq"},
        {hw->avx512cd && z, "cd"},
        {hw->avx512_vnni && z, "vnni"},
        {hw->avx512_bf16 && z, "bf16"},
        {hw->avx512_fp16 && z, "fp16"},
        {hw->amx_tile && t, "amx"},
        {hw->amx_bf16 && t, "amxbf16"},
        {hw->amx_int8 && t, "amxint8"},
        {hw->amx_fp16 && t, "amxfp16"},
    };
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++)
        tune_flag(isa, sizeof isa, flags[i].on, flags[i].name);
    if (!isa[0]) snprintf(isa, sizeof isa, "scalar");

    int n = snprintf(
        buf, cap, "cpu=%s|isa=%s|l1d=%zu|l2=%zu|l3=%zu|cores=%d|anvil=%s.%s.%s|kern=%016" PRIx64,
        hw->cpu_model[0] ? hw->cpu_model : "unknown", isa, hw->l1d_bytes, hw->l2_bytes,
        hw->l3_bytes, hw->logical_cores, TUNE_STR(ANVIL_VERSION_MAJOR),
        TUNE_STR(ANVIL_VERSION_MINOR), TUNE_STR(ANVIL_VERSION_PATCH), tune_kernel_hash());
    if (n < 0 || (size_t)n >= cap) {
        buf[0] = 0;
        return core_err(ANVIL_ERR_LIMIT,
                        "tune_fingerprint: the fingerprint needs %d bytes, the buffer has %zu; "
                        "pass a buffer of TUNE_FINGERPRINT_MAX bytes",
                        n + 1, cap);
    }
    return ANVIL_OK;
}
