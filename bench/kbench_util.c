/* anvil_kbench's helpers that every command uses (clocks, load average, option lists); kbench.c's
 * main dispatches to the commands, which call these and nothing in kbench.c. */
#include "kbench.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

double kb_now_s(void) {
    return (double)core_now_ns() * 1e-9;
}

static double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double kb_thread_cpu_s(void) {
    return clock_s(CLOCK_THREAD_CPUTIME_ID);
}

double kb_process_cpu_s(void) {
    return clock_s(CLOCK_PROCESS_CPUTIME_ID);
}

const char *kb_loadavg(void) {
    static char buf[64];
    strcpy(buf, "?");
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f) return buf;
    float a, b, c;
    if (fscanf(f, "%f %f %f", &a, &b, &c) == 3)
        snprintf(buf, sizeof buf, "%.2f %.2f %.2f", (double)a, (double)b, (double)c);
    fclose(f);
    return buf;
}

int kb_parse_ints(const char *s, int *out, int cap, int lo, int hi) {
    int n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < lo || v > hi || n == cap) return -1;
        out[n++] = (int)v;
        if (*end == ',')
            p = end + 1;
        else if (*end == '\0')
            p = end;
        else
            return -1;
    }
    return n > 0 ? n : -1;
}

bool kb_in_list(const char *list, const char *name) {
    if (!list) return true;
    size_t len = strlen(name);
    const char *p = list;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (n == len && !strncmp(p, name, n)) return true;
        if (!comma) break;
        p = comma + 1;
    }
    return false;
}
