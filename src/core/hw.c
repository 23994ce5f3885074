/* Hardware detection at run time (never at build time): cpuid for ISA bits, xgetbv for the OS
 * enabling the register state, sysfs for caches and cores. AMX additionally needs the process to
 * request the tile state from Linux (arch_prctl ARCH_REQ_XCOMP_PERM), done here once. */
#include "core.h"

#include <cpuid.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* as detected; as core_hw_get reports it (with the cap applied) */
static core_hw hw_detected, hw_capped;
static core_isa_cap hw_cap;
static const core_hw *hw_current;

static uint64_t xgetbv0(void) {
    uint32_t eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((uint64_t)edx << 32) | eax;
}

static size_t read_size_file(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char buf[64] = {0};
    size_t v = 0;
    if (fgets(buf, sizeof buf, f)) {
        char *end;
        unsigned long long n = strtoull(buf, &end, 10);
        if (*end == 'K')
            n *= 1024;
        else if (*end == 'M')
            n *= 1024 * 1024;
        v = (size_t)n;
    }
    fclose(f);
    return v;
}

static void detect_caches(core_hw *h) {
    char path[128];
    for (int i = 0; i < 8; i++) {
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        size_t level = read_size_file(path);
        if (!level) break;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        FILE *f = fopen(path, "r");
        char type[32] = {0};
        if (f) {
            if (!fgets(type, sizeof type, f)) type[0] = 0;
            fclose(f);
        }
        if (!strncmp(type, "Instruction", 11)) continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        size_t sz = read_size_file(path);
        if (level == 1)
            h->l1d_bytes = sz;
        else if (level == 2)
            h->l2_bytes = sz;
        else if (level == 3)
            h->l3_bytes = sz;
    }
}

static void detect(core_hw *h) {
    memset(h, 0, sizeof *h);
    unsigned a, b, c, d;
    unsigned max_leaf = __get_cpuid_max(0, NULL);
    if ((unsigned)__get_cpuid_max(0x80000000, NULL) >= 0x80000004u) {
        unsigned *w = (unsigned *)(void *)h->cpu_model;
        for (unsigned leaf = 0; leaf < 3; leaf++) {
            __cpuid(0x80000002 + leaf, w[leaf * 4], w[leaf * 4 + 1], w[leaf * 4 + 2],
                    w[leaf * 4 + 3]);
        }
        h->cpu_model[48] = '\0';
        /* trim leading spaces some vendors pad with */
        char *s = h->cpu_model;
        while (*s == ' ') s++;
        memmove(h->cpu_model, s, strlen(s) + 1);
    } else {
        strcpy(h->cpu_model, "unknown x86-64");
    }
    bool osxsave = false;
    if (max_leaf >= 1) {
        __cpuid(1, a, b, c, d);
        h->sse42 = c & (1u << 20);
        h->fma = c & (1u << 12);
        h->f16c = c & (1u << 29);
        osxsave = c & (1u << 27);
        h->avx = (c & (1u << 28)) != 0;
    }
    uint64_t xcr0 = osxsave ? xgetbv0() : 0;
    bool os_avx = (xcr0 & 0x6) == 0x6;
    h->os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;
    bool os_amx_xcr = (xcr0 & 0x60000) == 0x60000;
    if (!os_avx) h->avx = h->fma = h->f16c = false;
    if (max_leaf >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        h->avx2 = os_avx && (b & (1u << 5));
        if (h->os_avx512) {
            h->avx512f = b & (1u << 16);
            h->avx512dq = b & (1u << 17);
            h->avx512cd = b & (1u << 28);
            h->avx512bw = b & (1u << 30);
            h->avx512vl = b & (1u << 31);
            h->avx512_vnni = c & (1u << 11);
            h->avx512_fp16 = d & (1u << 23);
        }
        bool amx_bf16 = d & (1u << 22), amx_tile = d & (1u << 24), amx_int8 = d & (1u << 25);
        __cpuid_count(7, 1, a, b, c, d);
        h->avx_vnni = os_avx && (a & (1u << 4));
        if (h->os_avx512) h->avx512_bf16 = a & (1u << 5);
        bool amx_fp16 = a & (1u << 21);
        if (amx_tile && os_amx_xcr) {
            /* ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 */
            h->os_amx = syscall(SYS_arch_prctl, 0x1023, 18) == 0;
        }
        if (h->os_amx) {
            h->amx_tile = amx_tile;
            h->amx_bf16 = amx_bf16;
            h->amx_int8 = amx_int8;
            h->amx_fp16 = amx_fp16;
        }
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    h->logical_cores = n > 0 ? (int)n : 1;
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list", "r");
    int siblings = 1;
    if (f) {
        char buf[64] = {0};
        if (fgets(buf, sizeof buf, f)) {
            for (char *p = buf; *p; p++)
                if (*p == ',' || *p == '-') siblings++;
        }
        fclose(f);
    }
    h->physical_cores = h->logical_cores / siblings > 0 ? h->logical_cores / siblings : 1;
    detect_caches(h);
}

/* The features above cap switched off in h. */
static void apply_cap(core_hw *h, core_isa_cap cap) {
    if (cap == CORE_ISA_AVX2 || cap == CORE_ISA_SCALAR) {
        h->avx512f = h->avx512bw = h->avx512vl = h->avx512dq = h->avx512cd = false;
        h->avx512_vnni = h->avx512_bf16 = h->avx512_fp16 = false;
        h->amx_tile = h->amx_bf16 = h->amx_int8 = h->amx_fp16 = false;
        /* AVX-VNNI is a VEX (AVX2-era) extension: the avx2 cap keeps it, scalar does not. */
        if (cap == CORE_ISA_SCALAR) h->avx = h->avx2 = h->fma = h->f16c = h->avx_vnni = false;
    } else if (cap == CORE_ISA_AVX512) {
        h->amx_tile = h->amx_bf16 = h->amx_int8 = h->amx_fp16 = false;
    }
}

static pthread_once_t detect_once_flag = PTHREAD_ONCE_INIT;

static void detect_once(void) {
    detect(&hw_detected);
    hw_capped = hw_detected;
    apply_cap(&hw_capped, hw_cap);
}

const core_hw *core_hw_get(void) {
    pthread_once(&detect_once_flag, detect_once);
    return hw_current ? hw_current : &hw_capped;
}

void core_hw_set_cap(core_isa_cap cap) {
    pthread_once(&detect_once_flag, detect_once);
    if (cap == hw_cap) return;
    hw_cap = cap;
    hw_capped = hw_detected;
    apply_cap(&hw_capped, cap);
}

core_isa_cap core_hw_cap(void) {
    return hw_cap;
}

static const char *const cap_names[] = {"none", "avx512", "avx2", "scalar"};

const char *core_isa_cap_name(core_isa_cap cap) {
    return (unsigned)cap < sizeof cap_names / sizeof cap_names[0] ? cap_names[cap] : "none";
}

core_isa_cap core_isa_cap_parse(const char *name) {
    for (int c = CORE_ISA_AVX512; c <= CORE_ISA_SCALAR; c++)
        if (name && !strcmp(name, cap_names[c])) return (core_isa_cap)c;
    return CORE_ISA_NATIVE;
}

void core_hw_override(const core_hw *hw) {
    static core_hw copy;
    if (hw) {
        copy = *hw;
        hw_current = &copy;
    } else {
        hw_current = NULL;
    }
}

uint64_t core_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
