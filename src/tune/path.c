/* Where the tuning database lives when nobody says: one file per user, shared by every session
 * and every `anvil tune`, so what one measured the others use. */
#include "tune/tune.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* mkdir -p for the cache folder; an existing folder is fine. */
static anvil_status make_dirs(char *path) {
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char c = *p;
        *p = '\0';
        int r = mkdir(path, 0755);
        int e = errno;
        *p = c;
        if (r != 0 && e != EEXIST)
            return core_err(ANVIL_ERR_IO,
                            "cannot create the folder '%.*s' for the tuning database: "
                            "%s (name the file with --db or $ANVIL_TUNING_DB)",
                            (int)(p - path), path, strerror(e));
        if (c == '\0') return ANVIL_OK;
    }
}

anvil_status tune_db_default_path(const tune_path_env *e, char *buf, size_t cap, bool create) {
    const char *env = e->tuning_db;
    if (env && env[0]) {
        if (!strcmp(env, "off")) {
            if (cap) buf[0] = '\0';
            return ANVIL_OK;
        }
        if ((size_t)snprintf(buf, cap, "%s", env) >= cap)
            return core_err(ANVIL_ERR_LIMIT, "$ANVIL_TUNING_DB is too long");
        return ANVIL_OK;
    }
    char dir[4096];
    const char *xdg = e->xdg_cache_home, *home = e->home;
    int n;
    if (xdg && xdg[0])
        n = snprintf(dir, sizeof dir, "%s/anvil", xdg);
    else if (home && home[0])
        n = snprintf(dir, sizeof dir, "%s/.cache/anvil", home);
    else
        return core_err(ANVIL_ERR_INVALID_ARGUMENT, "neither $XDG_CACHE_HOME nor $HOME is set: "
                                                    "name the tuning database with --db FILE or "
                                                    "$ANVIL_TUNING_DB");
    if (n < 0 || (size_t)n >= sizeof dir || (size_t)snprintf(buf, cap, "%s/tuning.db", dir) >= cap)
        return core_err(ANVIL_ERR_LIMIT, "the default tuning database path is too long");
    return create ? make_dirs(dir) : ANVIL_OK;
}
