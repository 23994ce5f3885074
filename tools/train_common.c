/* The training set of `anvil train` and `anvil tune --train` (train_common.h). */
#include "train_common.h"

#include "api/api.h"
#include "core/core.h"

#include <stdlib.h>
#include <string.h>

void cli_dataset_free(cli_dataset *d) {
    npz_free(d->names, d->arrays, d->count);
    free(d->inputs);
}

/* Finds each model input and the labels in the archive; all must share the first dim. */
anvil_status cli_dataset_load(const char *path, const anvil_model *m, const char *labels,
                              cli_dataset *d) {
    memset(d, 0, sizeof *d);
    CORE_TRY(npz_read(path, &d->names, &d->arrays, &d->count));
    const size_t n_in = anvil_model_input_count(m);
    d->inputs = calloc(n_in + 1, sizeof *d->inputs);
    if (!d->inputs) return ANVIL_ERR_OUT_OF_MEMORY;
    d->samples = -1;
    for (size_t i = 0; i <= n_in; i++) {
        anvil_value_info vi = {0};
        if (i < n_in) CORE_TRY(anvil_model_input_info(m, i, &vi));
        const char *want = i < n_in ? vi.name : labels;
        for (size_t j = 0; j < d->count && !d->inputs[i]; j++)
            if (!strcmp(d->names[j], want)) d->inputs[i] = d->arrays[j];
        if (!d->inputs[i])
            return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                            "'%s' has no array named '%s' (%s); save it with numpy.savez(..., "
                            "%s=array)",
                            path, want, i < n_in ? "a model input" : "the targets", want);
        const anvil_tensor *t = d->inputs[i];
        const int64_t n = anvil_tensor_rank(t) > 0 ? anvil_tensor_dims(t)[0] : -1;
        if (n <= 0 || (d->samples >= 0 && n != d->samples))
            return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                            "'%s': array '%s' has %lld samples along its first dim, others %lld",
                            path, want, (long long)n, (long long)d->samples);
        d->samples = n;
    }
    return ANVIL_OK;
}

/* Copies samples idx[0..b) of every array into the batch tensors (created on first use). */
anvil_status cli_dataset_gather(const cli_dataset *d, size_t n_arrays, const int64_t *idx,
                                int64_t b, anvil_tensor **batch) {
    for (size_t i = 0; i < n_arrays; i++) {
        const anvil_tensor *src = d->inputs[i];
        int64_t dims[ANVIL_MAX_RANK];
        const int rank = anvil_tensor_rank(src);
        memcpy(dims, anvil_tensor_dims(src), sizeof(int64_t) * (size_t)rank);
        dims[0] = b;
        if (batch[i] && anvil_tensor_dims(batch[i])[0] != b) {
            anvil_tensor_free(batch[i]);
            batch[i] = NULL;
        }
        if (!batch[i])
            CORE_TRY(anvil_tensor_create(anvil_tensor_dtype(src), rank, dims, &batch[i]));
        const size_t row = anvil_tensor_bytes(src) / (size_t)anvil_tensor_dims(src)[0];
        const char *s = anvil_tensor_data((anvil_tensor *)src);
        char *o = anvil_tensor_data(batch[i]);
        for (int64_t k = 0; k < b; k++) memcpy(o + (size_t)k * row, s + (size_t)idx[k] * row, row);
    }
    return ANVIL_OK;
}

bool cli_parse_loss(const char *cmd, const char *name, anvil_loss *out) {
    if (!strcmp(name, "cross_entropy"))
        *out = ANVIL_LOSS_CROSS_ENTROPY;
    else if (!strcmp(name, "nll"))
        *out = ANVIL_LOSS_NLL;
    else if (!strcmp(name, "mse"))
        *out = ANVIL_LOSS_MSE;
    else
        return cli_usage_error(cmd, "--loss %s: use cross_entropy, nll or mse", name), false;
    return true;
}
