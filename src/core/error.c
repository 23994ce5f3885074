/* Thread-local last-error buffer and stderr logging. Messages are formatted once at the failure
 * site; callers up the stack may prepend context with core_err_prefix. */
#include "core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CORE_ERR_CAP 2048

static _Thread_local char err_buf[CORE_ERR_CAP];

anvil_status core_err(anvil_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_buf, sizeof err_buf, fmt, ap);
    va_end(ap);
    return s;
}

anvil_status core_err_prefix(anvil_status s, const char *fmt, ...) {
    char prefix[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    if (n < 0) return s;
    /* shift the old message right and put the prefix in front; truncate at the end */
    size_t plen = strlen(prefix), olen = strlen(err_buf);
    if (plen + 2 >= sizeof err_buf) plen = sizeof err_buf - 3;
    if (plen + 2 + olen >= sizeof err_buf) olen = sizeof err_buf - plen - 3;
    memmove(err_buf + plen + 2, err_buf, olen);
    err_buf[plen + 2 + olen] = '\0';
    memcpy(err_buf, prefix, plen);
    err_buf[plen] = ':';
    err_buf[plen + 1] = ' ';
    return s;
}

void core_err_clear(void) {
    err_buf[0] = '\0';
}

const char *core_err_message(void) {
    return err_buf;
}

static core_log_level log_level = CORE_LOG_WARN;

void core_log_set_level(core_log_level lvl) {
    log_level = lvl;
}

void core_log(core_log_level lvl, const char *fmt, ...) {
    static const char *names[] = {"error", "warn", "info", "debug"};
    if (lvl > log_level) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "anvil %s: ", names[lvl]);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

const char *core_status_name(anvil_status s) {
    switch (s) {
    case ANVIL_OK:
        return "ANVIL_OK";
    case ANVIL_ERR_INVALID_ARGUMENT:
        return "ANVIL_ERR_INVALID_ARGUMENT";
    case ANVIL_ERR_INVALID_MODEL:
        return "ANVIL_ERR_INVALID_MODEL";
    case ANVIL_ERR_UNSUPPORTED:
        return "ANVIL_ERR_UNSUPPORTED";
    case ANVIL_ERR_SHAPE:
        return "ANVIL_ERR_SHAPE";
    case ANVIL_ERR_OUT_OF_MEMORY:
        return "ANVIL_ERR_OUT_OF_MEMORY";
    case ANVIL_ERR_IO:
        return "ANVIL_ERR_IO";
    case ANVIL_ERR_LIMIT:
        return "ANVIL_ERR_LIMIT";
    case ANVIL_ERR_RUNTIME:
        return "ANVIL_ERR_RUNTIME";
    case ANVIL_ERR_INTERNAL:
        return "ANVIL_ERR_INTERNAL";
    }
    return "ANVIL_ERR_UNKNOWN";
}
