/* What `anvil train` and `anvil tune --train` share: a training set from an .npz archive,
 * matched to a model's inputs and its targets, the batches gathered from it, and the --loss
 * names. */
#ifndef ANVIL_TRAIN_COMMON_H
#define ANVIL_TRAIN_COMMON_H

#include "cli.h"

/* --batch when none is given */
#define CLI_TRAIN_BATCH 32

typedef struct cli_dataset {
    char **names;          /* owned: every array's name in the archive */
    anvil_tensor **arrays; /* owned: every array */
    size_t count;
    const anvil_tensor **inputs; /* owned array: per model input, then the labels (borrowed from
                                    arrays) */
    int64_t samples;
} cli_dataset;

/* Reads the archive at path (borrowed) and finds an array for each model input (by its name)
 * and the targets (the array named labels); all must share the first dim, the samples. d is
 * filled (free it with cli_dataset_free, also after a failure); model borrowed. */
anvil_status cli_dataset_load(const char *path, const anvil_model *m, const char *labels,
                              cli_dataset *d);
void cli_dataset_free(cli_dataset *d);

/* Copies samples idx[0..b) of the first n_arrays of d->inputs into batch[0..n_arrays) (tensors
 * owned by the caller, created on first use and made again when their batch dim differs). */
anvil_status cli_dataset_gather(const cli_dataset *d, size_t n_arrays, const int64_t *idx,
                                int64_t b, anvil_tensor **batch);

/* --loss NAME: cross_entropy, nll or mse; false after a usage error naming cmd. */
bool cli_parse_loss(const char *cmd, const char *name, anvil_loss *out);

#endif
