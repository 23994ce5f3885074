/* The runner program of an emitted library (anvil compile ships it as src/run_main.h; NET_run.c
 * defines the LIB_* names for its library and includes it). It takes `anvil run`'s arguments:
 *
 *   NET_run [-i NAME=FILE.npy ...] [-o OUTDIR] [--threads T] [--weights FILE] [--bench N]
 *
 * writes each output to OUTDIR/<file>.npy with anvil run's file names, and with --bench runs N
 * times (inputs from -i, else random) and prints the latency statistics. Inputs are checked
 * against the library's fixed dtypes and shapes; errors name the input and what was wrong. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int fail(const char *fmt, const char *a, const char *b) {
    fprintf(stderr, "%s_run: error: ", LIB_NAME);
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
    return 1;
}

/* numpy's descr of an ONNX dtype name, or NULL. */
static const char *npy_descr(const char *dtype) {
    static const char *const map[][2] = {{"FLOAT", "<f4"},  {"DOUBLE", "<f8"}, {"FLOAT16", "<f2"},
                                         {"INT64", "<i8"},  {"INT32", "<i4"},  {"INT16", "<i2"},
                                         {"INT8", "|i1"},   {"UINT64", "<u8"}, {"UINT32", "<u4"},
                                         {"UINT16", "<u2"}, {"UINT8", "|u1"},  {"BOOL", "|b1"}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(map[i][0], dtype)) return map[i][1];
    return NULL;
}

/* Reads FILE.npy into buf (info->bytes), checking descr and shape. */
static int read_npy(const char *path, const LIB_INFO *info, void *buf) {
    FILE *f = fopen(path, "rb");
    if (!f) return fail("%s: %s", path, strerror(errno));
    unsigned char pre[10];
    int rc = 0;
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6)) {
        rc = fail("%s: not a .npy file%s", path, "");
    } else {
        size_t hl = pre[6] == 1 ? (size_t)(pre[8] | pre[9] << 8) : 0;
        if (pre[6] >= 2) {
            unsigned char more[2];
            if (fread(more, 1, 2, f) != 2) hl = 0;
            hl = (size_t)(pre[8] | pre[9] << 8 | more[0] << 16 | (size_t)more[1] << 24);
        }
        char *h = hl && hl < 65536 ? calloc(1, hl + 1) : NULL;
        if (!h || fread(h, 1, hl, f) != hl) {
            rc = fail("%s: bad .npy header%s", path, "");
        } else {
            char want[256];
            int w = snprintf(want, sizeof want, "(");
            for (int d = 0; d < info->rank && w < (int)sizeof want - 24; d++)
                w += snprintf(want + w, sizeof want - (size_t)w, "%s%lld%s", d ? "," : "",
                              (long long)info->dims[d], info->rank == 1 ? "," : "");
            char shape[256] = "";
            const char *s = strstr(h, "'shape':");
            const char *e = s ? strchr(s, ')') : NULL;
            if (s && e) {
                s = strchr(s, '(');
                size_t k = 0;
                for (const char *q = s; q && q <= e && k + 1 < sizeof shape; q++)
                    if (*q != ' ' && *q != ')') shape[k++] = *q;
                shape[k] = '\0';
                /* "(1,10," and "(1,10" are the same shape */
                if (k > 1 && shape[k - 1] == ',' && info->rank != 1) shape[k - 1] = '\0';
            }
            const char *descr = npy_descr(info->dtype);
            if (!descr || !strstr(h, descr))
                rc = fail("%s: dtype differs from the input's (%s)", path, info->dtype);
            else if (strstr(h, "'fortran_order': True"))
                rc = fail("%s: Fortran order; save it in C order%s", path, "");
            else if (strcmp(shape, want))
                rc = fail("%s: shape %s) differs from the input's fixed shape", path, shape);
            else if (fread(buf, 1, info->bytes, f) != info->bytes)
                rc = fail("%s: fewer bytes than the shape needs%s", path, "");
        }
        free(h);
    }
    fclose(f);
    return rc;
}

static int write_npy(const char *path, const LIB_INFO *info, const void *buf) {
    char h[512];
    int w = snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     npy_descr(info->dtype) ? npy_descr(info->dtype) : "|u1");
    for (int d = 0; d < info->rank; d++)
        w += snprintf(h + w, sizeof h - (size_t)w, "%lld,%s", (long long)info->dims[d],
                      d + 1 < info->rank ? " " : "");
    if (info->rank > 1) w--; /* "(1, 10)" but "(10,)" */
    w += snprintf(h + w, sizeof h - (size_t)w, "), }");
    size_t total = 10 + (size_t)w + 1, pad = (64 - total % 64) % 64;
    FILE *f = fopen(path, "wb");
    if (!f) return fail("%s: %s", path, strerror(errno));
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0};
    size_t hl = (size_t)w + pad + 1;
    pre[8] = (unsigned char)(hl & 0xff);
    pre[9] = (unsigned char)(hl >> 8);
    fwrite(pre, 1, 10, f);
    fwrite(h, 1, (size_t)w, f);
    for (size_t i = 0; i < pad; i++) fputc(' ', f);
    fputc('\n', f);
    size_t put = fwrite(buf, 1, info->bytes, f);
    if (fclose(f) != 0 || put != info->bytes) return fail("%s: write failed%s", path, "");
    return 0;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The weights file beside the executable, when --weights is not given. */
static void default_weights(char *buf, size_t cap) {
    char exe[2048]; /* well under the caller's 4096, so the path always fits */
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        snprintf(buf, cap, "%s.weights", LIB_NAME);
        return;
    }
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
    snprintf(buf, cap, "%s/%s.weights", slash ? exe : ".", LIB_NAME);
}

int main(int argc, char **argv) {
    const char *files[LIB_N_INPUTS + 1] = {0}, *outdir = NULL, *weights = NULL;
    int threads = 0, bench = 0;
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a], *val = a + 1 < argc ? argv[a + 1] : NULL;
        if ((!strcmp(arg, "-i") || !strcmp(arg, "--input")) && val) {
            const char *eq = strchr(val, '=');
            int k = -1;
            for (int i = 0; eq && i < LIB_N_INPUTS; i++)
                if (strlen(LIB_INPUTS[i].name) == (size_t)(eq - val) &&
                    !strncmp(LIB_INPUTS[i].name, val, (size_t)(eq - val)))
                    k = i;
            if (k < 0) return fail("-i %s: no input of that name (see %s.h)", val, LIB_NAME);
            files[k] = eq + 1;
            a++;
        } else if ((!strcmp(arg, "-o") || !strcmp(arg, "--output-dir")) && val) {
            outdir = val;
            a++;
        } else if (!strcmp(arg, "--threads") && val) {
            threads = atoi(val);
            a++;
        } else if (!strcmp(arg, "--weights") && val) {
            weights = val;
            a++;
        } else if (!strcmp(arg, "--bench") && val) {
            bench = atoi(val);
            a++;
        } else {
            fprintf(stderr,
                    "usage: %s_run [-i NAME=FILE.npy ...] [-o OUTDIR] [--threads T] "
                    "[--weights FILE] [--bench N]\n",
                    LIB_NAME);
            return 2;
        }
    }
    char wpath[4096];
    if (!weights) {
        default_weights(wpath, sizeof wpath);
        weights = wpath;
    }
    void *in[LIB_N_INPUTS + 1], *out[LIB_N_OUTPUTS + 1];
    int rc = 0;
    srand(1);
    for (int i = 0; i < LIB_N_INPUTS; i++) {
        in[i] = calloc(1, LIB_INPUTS[i].bytes + 64);
        if (!in[i]) return fail("out of memory%s%s", "", "");
        if (files[i]) {
            if ((rc = read_npy(files[i], &LIB_INPUTS[i], in[i]))) return rc;
        } else if (!bench) {
            return fail("input '%s' missing: give it with -i %s=FILE.npy", LIB_INPUTS[i].name,
                        LIB_INPUTS[i].name);
        } else if (!strcmp(LIB_INPUTS[i].dtype, "FLOAT")) {
            float *p = in[i];
            for (size_t k = 0; k < LIB_INPUTS[i].bytes / 4; k++) p[k] = (float)rand() / RAND_MAX;
        }
    }
    for (int j = 0; j < LIB_N_OUTPUTS; j++)
        if (!(out[j] = calloc(1, LIB_OUTPUTS[j].bytes + 64)))
            return fail("out of memory%s%s", "", "");
    lib_t *net;
    if (lib_create(weights, threads, NULL, &net)) return fail("%s%s", lib_last_error(), "");
    if (lib_run(net, (const void *const *)in, out)) return fail("%s%s", lib_last_error(), "");
    if (bench > 0) {
        double *t = calloc((size_t)bench, sizeof *t), sum = 0;
        for (int r = 0; t && r < bench; r++) {
            double t0 = now_ms();
            lib_run(net, (const void *const *)in, out);
            t[r] = now_ms() - t0;
            sum += t[r];
        }
        if (t) {
            qsort(t, (size_t)bench, sizeof *t, cmp_double);
            printf("%s: %d runs: min %.3f ms, median %.3f ms, mean %.3f ms, p90 %.3f ms, "
                   "max %.3f ms\n",
                   LIB_NAME, bench, t[0], t[bench / 2], sum / bench, t[(bench * 9) / 10],
                   t[bench - 1]);
        }
        free(t);
    }
    if (outdir) {
        mkdir(outdir, 0777);
        for (int j = 0; j < LIB_N_OUTPUTS && !rc; j++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s.npy", outdir, LIB_OUTPUT_FILES[j]);
            rc = write_npy(path, &LIB_OUTPUTS[j], out[j]);
            if (!rc) printf("%s -> %s %s\n", LIB_OUTPUTS[j].name, path, LIB_OUTPUTS[j].dtype);
        }
    }
    lib_free(net);
    for (int i = 0; i < LIB_N_INPUTS; i++) free(in[i]);
    for (int j = 0; j < LIB_N_OUTPUTS; j++) free(out[j]);
    return rc;
}
