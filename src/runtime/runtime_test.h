/* runtime: hooks for anvil's own tests, never for a session's configuration (rt_session_config)
 * or the API. Only tests include this header. */
#ifndef ANVIL_RUNTIME_TEST_H
#define ANVIL_RUNTIME_TEST_H

#include "runtime/runtime.h"

/* Online tuning on s (borrowed) tries every candidate that passes the check, without the
 * plan-time cut on its check-run time, which makes how many candidates a node has depend on the
 * machine. Set it before s's first run. */
void rt_test_online_keep_all(rt_session *s, bool on);

#endif
