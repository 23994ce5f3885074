/* Runs a libFuzzer target over files without libFuzzer, so that every build (gcc included) can
 * replay the fuzz seeds and the inputs that once crashed or hung anvil (tests/fuzz/regressions).
 * Arguments are files or folders (read recursively). Prints each file before running it, so a
 * crash or hang names its input. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return 1;
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            cap *= 2;
            uint8_t *p = realloc(buf, cap);
            if (!p) free(buf);
            buf = p;
        }
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "out of memory reading %s\n", path);
        return 1;
    }
    fprintf(stderr, "replay %s (%zu bytes)\n", path, n);
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 0;
}

static int run_path(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "cannot stat %s\n", path);
        return 1;
    }
    if (!S_ISDIR(st.st_mode)) return S_ISREG(st.st_mode) ? run_file(path) : 0;
    struct dirent **list;
    int n = scandir(path, &list, NULL, alphasort);
    if (n < 0) return 1;
    int bad = 0;
    for (int i = 0; i < n; i++) {
        const char *name = list[i]->d_name;
        if (strcmp(name, ".") && strcmp(name, "..")) {
            size_t len = strlen(path) + strlen(name) + 2;
            char *child = malloc(len);
            if (child) {
                snprintf(child, len, "%s/%s", path, name);
                bad |= run_path(child);
                free(child);
            }
        }
        free(list[i]);
    }
    free(list);
    return bad;
}

int main(int argc, char **argv) {
    int bad = 0;
    for (int i = 1; i < argc; i++) bad |= run_path(argv[i]);
    return bad;
}
