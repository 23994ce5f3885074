/* anvil_load_rss: loads a model through the public API and reports, as one JSON object on
 * stdout, how long the load took and the process's peak resident memory afterwards. With --run it
 * then creates a session and runs the model once on zero-filled inputs (symbolic dims set to 1),
 * timing both and reporting the peak again.
 *
 *   anvil_load_rss MODEL [--run]
 *
 * Used by bench/load_rss.py, which compares the numbers with ONNX Runtime's. The point of the
 * measurement: anvil maps the model file and never copies weights at load, so the peak after
 * loading should stay near the process's own baseline, far below the file size. RssAnon (heap)
 * and RssFile (mapped file pages the kernel has put in our page tables) are reported apart, since
 * only the former would show a copy. */
#include "anvil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define MAX_IO 64

/* A field such as "VmHWM:" of /proc/self/status, in KiB; -1 if unavailable. */
static long status_kb(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long kb = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0) {
            kb = strtol(line + n, NULL, 10);
            break;
        }
    fclose(f);
    return kb;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Prints the JSON string s with quotes and the escapes JSON needs. */
static void json_str(const char *s) {
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static int fail(const char *what, anvil_status s) {
    printf("{\"error\": ");
    char msg[1024];
    snprintf(msg, sizeof msg, "%s: %s: %s", what, anvil_status_name(s), anvil_last_error());
    json_str(msg);
    printf("}\n");
    return 1;
}

/* Inside the open object: a "run_error" field instead of the run timings. */
static int run_fail(const char *what, anvil_status s) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s: %s: %s", what, anvil_status_name(s), anvil_last_error());
    printf(", \"run_error\": ");
    json_str(msg);
    return 1;
}

/* Creates a session, runs once on zero inputs; prints the run fields (no braces). */
static int first_run(anvil_model *model) {
    size_t n_in = anvil_model_input_count(model), n_out = anvil_model_output_count(model);
    if (n_in > MAX_IO || n_out > MAX_IO) {
        printf(", \"run_error\": \"more than %d inputs or outputs\"", MAX_IO);
        return 1;
    }
    anvil_tensor *in[MAX_IO] = {0}, *out[MAX_IO] = {0};
    const char *names[MAX_IO];
    anvil_session *sess = NULL;
    int rc = 1;
    anvil_status s = ANVIL_OK;
    size_t made = 0;
    for (; made < n_in; made++) {
        anvil_value_info info;
        s = anvil_model_input_info(model, made, &info);
        if (s != ANVIL_OK) break;
        int64_t dims[ANVIL_MAX_RANK];
        int rank = info.rank < 0 ? 0 : info.rank;
        for (int d = 0; d < rank; d++) dims[d] = info.dims[d] < 0 ? 1 : info.dims[d];
        s = anvil_tensor_create(info.dtype, rank, dims, &in[made]);
        if (s != ANVIL_OK) break;
        names[made] = info.name;
    }
    if (s != ANVIL_OK) {
        run_fail("inputs", s);
        goto done;
    }
    double t0 = now_ms();
    s = anvil_session_create(model, NULL, &sess);
    double t1 = now_ms();
    if (s != ANVIL_OK) {
        run_fail("session", s);
        goto done;
    }
    s = anvil_session_run(sess, n_in, names, (const anvil_tensor *const *)in, n_out, NULL, out);
    double t2 = now_ms();
    if (s != ANVIL_OK) {
        run_fail("run", s);
        goto done;
    }
    printf(", \"session_create_ms\": %.3f, \"first_run_ms\": %.3f, \"peak_rss_kb_after_run\": %ld",
           t1 - t0, t2 - t1, status_kb("VmHWM:"));
    for (size_t i = 0; i < n_out; i++) anvil_tensor_free(out[i]);
    rc = 0;
done:
    anvil_session_free(sess);
    for (size_t i = 0; i < made; i++) anvil_tensor_free(in[i]);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "--run") != 0)) {
        fprintf(stderr, "usage: anvil_load_rss MODEL [--run]\n");
        return 2;
    }
    const char *path = argv[1];
    struct stat st;
    if (stat(path, &st) != 0) {
        perror(path);
        return 2;
    }
    long base_kb = status_kb("VmHWM:");
    double t0 = now_ms();
    anvil_model *model = NULL;
    anvil_status s = anvil_model_load(path, &model);
    double t1 = now_ms();
    if (s != ANVIL_OK) return fail("load", s);
    printf("{\"model\": ");
    json_str(path);
    printf(", \"file_bytes\": %lld, \"baseline_peak_rss_kb\": %ld, \"load_ms\": %.3f, "
           "\"peak_rss_kb_after_load\": %ld, \"rss_kb_after_load\": %ld, "
           "\"rss_anon_kb_after_load\": %ld, \"rss_file_kb_after_load\": %ld",
           (long long)st.st_size, base_kb, t1 - t0, status_kb("VmHWM:"), status_kb("VmRSS:"),
           status_kb("RssAnon:"), status_kb("RssFile:"));
    int rc = 0;
    if (argc == 3) {
        rc = first_run(model);
    }
    printf("}\n");
    anvil_model_free(model);
    return rc;
}
