/* Every environment variable anvil reads, read here and nowhere else (env.h). The rows below are
 * the table the README's "Environment variables" section mirrors (a test compares them). Values
 * a variable does not take are refused with a message where they would change what runs
 * (ANVIL_LAYOUT), and ignored, as they always were, where they only tune an experiment. */
#include "api/env.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- parsers: one per session variable ------------------------------------------------------ */

/* A positive block size up to 2^20; anything else leaves the variant's own. */
static int32_t block_of(const char *v) {
    char *end;
    long long x = strtoll(v, &end, 10);
    return !*v || *end || x <= 0 || x > (1 << 20) ? 0 : (int32_t)x;
}

static anvil_status set_gemm_kc(rt_session_config *c, const char *v) {
    c->knobs.gemm_kc = block_of(v);
    return ANVIL_OK;
}

static anvil_status set_gemm_mc(rt_session_config *c, const char *v) {
    c->knobs.gemm_mc = block_of(v);
    return ANVIL_OK;
}

static anvil_status set_gemm_nc(rt_session_config *c, const char *v) {
    c->knobs.gemm_nc = block_of(v);
    return ANVIL_OK;
}

static anvil_status set_wino_rows(rt_session_config *c, const char *v) {
    c->knobs.wino_rows = !*v ? 0 : *v == '1' ? 1 : 2;
    return ANVIL_OK;
}

static anvil_status set_name(char *dst, const char *var, const char *v) {
    if (strlen(v) >= KERN_KNOB_NAME)
        return core_err(ANVIL_ERR_INVALID_ARGUMENT, "%s is '%s': not a GEMM kernel name", var, v);
    snprintf(dst, KERN_KNOB_NAME, "%s", v);
    return ANVIL_OK;
}

static anvil_status set_conv_tile(rt_session_config *c, const char *v) {
    return set_name(c->knobs.conv_tile, "ANVIL_CONV_TILE", v);
}

static anvil_status set_deconv_tile(rt_session_config *c, const char *v) {
    return set_name(c->knobs.deconv_tile, "ANVIL_DECONV_TILE", v);
}

static anvil_status set_conv_im2col(rt_session_config *c, const char *v) {
    c->knobs.conv_im2col = atoi(v) == 1;
    return ANVIL_OK;
}

static anvil_status set_layout(rt_session_config *c, const char *v) {
    if (!strcmp(v, "auto") || !*v)
        c->layout = PASS_LAYOUT_AUTO;
    else if (!strcmp(v, "nchw"))
        c->layout = PASS_LAYOUT_NCHW;
    else if (!strcmp(v, "nhwc"))
        c->layout = PASS_LAYOUT_NHWC;
    else
        return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                        "ANVIL_LAYOUT is '%s'; it must be auto, nchw or nhwc", v);
    return ANVIL_OK;
}

static anvil_status set_fuse_chain(rt_session_config *c, const char *v) {
    const uint32_t bit = 1u << PASS_FUSE_CHAIN;
    if (!strcmp(v, "off") || !strcmp(v, "0"))
        c->passes_off |= bit;
    else
        c->passes_off &= ~bit;
    return ANVIL_OK;
}

/* "fused" / "separate" force a measured rewrite's choice; anything else leaves it decided. */
static int force_of(const char *v) {
    return !strcmp(v, "fused")      ? PASS_FORCE_FUSED
           : !strcmp(v, "separate") ? PASS_FORCE_SEPARATE
                                    : PASS_FORCE_NONE;
}

static anvil_status set_parallel_gemm(rt_session_config *c, const char *v) {
    c->parallel_gemm = force_of(v);
    return ANVIL_OK;
}

static anvil_status set_b2b(rt_session_config *c, const char *v) {
    c->b2b = force_of(v);
    return ANVIL_OK;
}

/* The names a precision goes by, in kern_precision's order. */
static const char *const precision_names[] = {"fp32", "bf16", "fp16", "auto", "int8"};

const char *api_precision_name(int precision) {
    return precision >= 0 && precision < (int)(sizeof precision_names / sizeof *precision_names)
               ? precision_names[precision]
               : "?";
}

anvil_status api_precision_parse(const char *what, const char *name, int *out) {
    int found = -1;
    for (int i = 0; name && i < (int)(sizeof precision_names / sizeof *precision_names); i++)
        if (!strcmp(name, precision_names[i])) found = i;
    if (found < 0)
        return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                        "%s: '%s' is not a precision; use fp32, bf16, fp16, auto or int8", what,
                        name ? name : "(null)");
    *out = found;
    return ANVIL_OK;
}

static anvil_status set_precision(rt_session_config *c, const char *v) {
    return api_precision_parse("ANVIL_PRECISION", v, &c->knobs.precision);
}

static anvil_status set_bf16_storage(rt_session_config *c, const char *v) {
    c->fp32_storage = !strcmp(v, "0") || !strcmp(v, "off");
    return ANVIL_OK;
}

/* ---- the table ------------------------------------------------------------------------------ */

static const api_env_var vars[] = {
    /* process-wide: read once, handed to core */
    {"ANVIL_ISA", "caps the ISA features anvil uses: avx512 (no AMX), avx2 (no AVX-512), scalar",
     "the CPU's", NULL},
    {"ANVIL_LOG", "the log level on stderr: error, warn, info, debug", "warn", NULL},
    {"ANVIL_MAX_TENSOR_BYTES", "the largest tensor anvil allocates, in bytes", "17179869184", NULL},
    /* where the tuning database lives */
    {"ANVIL_TUNING_DB", "the tuning database file; off: none", "$XDG_CACHE_HOME/anvil/tuning.db",
     NULL},
    {"XDG_CACHE_HOME", "the folder of the default tuning database", "$HOME/.cache", NULL},
    {"HOME", "the same, where XDG_CACHE_HOME is unset", "", NULL},
    /* a session's: the passes */
    {"ANVIL_LAYOUT", "the conv layout pass: auto, nchw (none channels-last), nhwc (every conv)",
     "auto", set_layout},
    {"ANVIL_FUSE_CHAIN", "off or 0 turns the fuse_chain pass off", "on", set_fuse_chain},
    {"ANVIL_PARALLEL_GEMM", "fused or separate forces fuse_parallel's choice", "measured or rule",
     set_parallel_gemm},
    {"ANVIL_B2B", "fused or separate forces fuse_pair's (back-to-back GEMM/conv) choice",
     "measured or rule", set_b2b},
    /* a session's: the kernels */
    {"ANVIL_GEMM_KC", "the GEMM's KC block where the tuner's configuration sets none",
     "from the L1 size", set_gemm_kc},
    {"ANVIL_GEMM_MC", "the GEMM's MC block (rounded to the tile)", "from the L3 bound",
     set_gemm_mc},
    {"ANVIL_GEMM_NC", "the GEMM's NC block (rounded to the tile)", "from the L2 size", set_gemm_nc},
    {"ANVIL_WINO_ROWS", "1: Winograd's tiles as its GEMM's rows; 0: as its columns", "the rule",
     set_wino_rows},
    {"ANVIL_CONV_TILE", "the GEMM-based convs' register tile, by kernel name (8x32_avx512)",
     "the conv's choice", set_conv_tile},
    {"ANVIL_CONV_IM2COL", "1: the NHWC GEMM conv always copies its input (no indirect rows)", "0",
     set_conv_im2col},
    {"ANVIL_DECONV_TILE", "ConvTranspose's register tile, by kernel name", "the GEMM's default",
     set_deconv_tile},
    {"ANVIL_PRECISION",
     "the arithmetic a session accepts: fp32, bf16, fp16, auto or int8 (training refuses fp16 and "
     "int8)",
     "fp32", set_precision},
    {"ANVIL_BF16_STORAGE",
     "0 or off keeps every activation in fp32 where bf16 nodes could pass it "
     "on in bf16",
     "on", set_bf16_storage},
};

const api_env_var *api_env_vars(size_t *n) {
    *n = sizeof vars / sizeof vars[0];
    return vars;
}

/* ---- process-wide -----------------------------------------------------------------------------
 */

static void init_once(void) {
    const char *isa = getenv("ANVIL_ISA");
    if (isa) core_hw_set_cap(core_isa_cap_parse(isa));
    const char *log = getenv("ANVIL_LOG");
    if (log)
        core_log_set_level(!strcmp(log, "error")   ? CORE_LOG_ERROR
                           : !strcmp(log, "info")  ? CORE_LOG_INFO
                           : !strcmp(log, "debug") ? CORE_LOG_DEBUG
                                                   : CORE_LOG_WARN);
    const char *max = getenv("ANVIL_MAX_TENSOR_BYTES");
    if (max) core_max_tensor_bytes_set((size_t)strtoull(max, NULL, 10));
}

void api_env_init(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_once);
}

/* ---- a session's ------------------------------------------------------------------------------
 */

anvil_status api_knob_set(rt_session_config *cfg, const char *name, const char *value) {
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (vars[i].set && !strcmp(vars[i].name, name)) return vars[i].set(cfg, value);
    char list[512];
    size_t at = 0;
    list[0] = '\0';
    for (size_t i = 0; i < sizeof vars / sizeof vars[0] && at < sizeof list; i++)
        if (vars[i].set)
            at +=
                (size_t)snprintf(list + at, sizeof list - at, "%s%s", at ? ", " : "", vars[i].name);
    return core_err(ANVIL_ERR_INVALID_ARGUMENT, "'%s' is not a session setting; they are: %s", name,
                    list);
}

anvil_status api_env_session(rt_session_config *cfg) {
    api_env_init();
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = vars[i].set ? getenv(vars[i].name) : NULL;
        if (v) CORE_TRY(vars[i].set(cfg, v));
    }
    return ANVIL_OK;
}

tune_path_env api_env_tune_paths(void) {
    return (tune_path_env){.tuning_db = getenv("ANVIL_TUNING_DB"),
                           .xdg_cache_home = getenv("XDG_CACHE_HOME"),
                           .home = getenv("HOME")};
}
