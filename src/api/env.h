/* api/env.c: the one place that reads anvil's environment variables (the table is there; the
 * README lists them). Kernels, passes, tune and core never call getenv: the values reach them
 * through the core setters (process-wide settings) and through rt_session_config (a session's).
 *
 * Precedence, everywhere: an explicit option (anvil_options_set_knob, a CLI flag, a field of
 * rt_session_config that a caller set) overrides the environment, and the environment overrides
 * the defaults. */
#ifndef ANVIL_API_ENV_H
#define ANVIL_API_ENV_H

#include "runtime/runtime.h"
#include "tune/tune.h"

/* Reads the process-wide variables (ANVIL_ISA, ANVIL_LOG, ANVIL_MAX_TENSOR_BYTES) once and hands
 * them to core (core_hw_set_cap, core_log_set_level, core_max_tensor_bytes_set). Every public
 * entry point that loads, plans or reports calls it; later calls do nothing. Thread-safe. */
void api_env_init(void);

/* Sets one session variable of the table (name as the environment spells it, "ANVIL_LAYOUT";
 * value as the variable takes it) in cfg. INVALID_ARGUMENT naming the variable for a name that
 * is not a session variable or a value it does not take. name and value borrowed. */
anvil_status api_knob_set(rt_session_config *cfg, const char *name, const char *value);

/* Applies the session variables that are set in the environment to cfg (api_knob_set each), over
 * cfg's defaults; the caller applies its explicit options after. Calls api_env_init. */
anvil_status api_env_session(rt_session_config *cfg);

/* A precision by name ("fp32", "bf16", "fp16", "auto") as kern_precision into *out. what (e.g.
 * "ANVIL_PRECISION") starts the message: INVALID_ARGUMENT listing the names for NULL or another
 * name; UNSUPPORTED for "fp16", which no kernel implements yet. name and what borrowed. */
anvil_status api_precision_parse(const char *what, const char *name, int *out);
/* kern_precision's name ("fp32", ...); "?" outside the enum. Static. */
const char *api_precision_name(int precision);

/* The variables that place the default tuning database (tune_db_default_path's inputs). The
 * strings belong to the environment; NULL where unset. */
tune_path_env api_env_tune_paths(void);

/* One row of the table, for tests (the README's table must list every row): name, what it sets,
 * its default. */
typedef struct api_env_var {
    const char *name;
    const char *sets;
    const char *def;
    /* a session variable's parser (api_knob_set); NULL for the process-wide ones and the paths */
    anvil_status (*set)(rt_session_config *cfg, const char *value);
} api_env_var;
/* The table; *n set. Static data. */
const api_env_var *api_env_vars(size_t *n);

#endif
