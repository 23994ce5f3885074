/* A scratch folder for the unit tests that write files: tmpdir_setup and tmpdir_remove are cmocka
 * group setup and teardown functions (a fresh /tmp/anvil_test_XXXXXX, removed with everything in
 * it), tmp_path names a file in it. Include it in one test file; everything is static. */
#ifndef ANVIL_TEST_TMPDIR_H
#define ANVIL_TEST_TMPDIR_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char tmpdir[64];

static int tmpdir_setup(void **state) {
    (void)state;
    strcpy(tmpdir, "/tmp/anvil_test_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int tmpdir_remove(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* A path in the folder; each call returns its own buffer (up to four live at once). */
static const char *tmp_path(const char *name) {
    static char bufs[4][160];
    static int next;
    char *b = bufs[next++ % 4];
    snprintf(b, sizeof bufs[0], "%s/%s", tmpdir, name);
    return b;
}

#endif
