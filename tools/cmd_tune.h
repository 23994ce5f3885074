/* What `anvil tune`'s two modes share: the parsed arguments (cmd_tune.c parses them; the
 * --train mode lives in cmd_tune_train.c). */
#ifndef ANVIL_TOOLS_CMD_TUNE_H
#define ANVIL_TOOLS_CMD_TUNE_H

#include "cli.h"

typedef struct tune_args {
    const char *model, *db;
    const char *passes;    /* --passes as given (passes_off: parsed, for the checks) */
    const char *precision; /* --precision as given; NULL: the default */
    double tolerance;      /* --tolerance; 0: the default */
    long long threads, opt_level, runs, budget;
    uint32_t passes_off;
    bool retune, json, verbose, quiet;
    cli_inputs inputs;
    cli_shapes shapes;
    /* --train */
    bool train;
    const char *data, *labels, *output;
    long long batch;
    anvil_loss loss;
    const char *train_only, *infer_only; /* the first option seen that only the one mode takes */
} tune_args;

/* anvil tune --train (cmd_tune_train.c): the training graph of the first --batch rows of --data
 * tuned through the public training API, then the step times before and after; returns the
 * process exit code. db_path: the database in use (borrowed). */
int cli_tune_train(tune_args *a, const char *db_path);

#endif
