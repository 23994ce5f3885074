/* Inputs for a model run from the command line: files given with -i, the rest generated.
 *
 * Generated inputs are seeded pseudo-random data so that two runs of the same command measure
 * the same work (data-dependent kernels, e.g. Gather, see the same indices). Integers are kept
 * small and non-negative because integer inputs are usually indices or lengths. Shared by bench
 * and tune, which must time the same tensors. */
#include "cli.h"

#include "core/core.h"

#include <stdlib.h>
#include <string.h>

void cli_shapes_free(cli_shapes *a) {
    for (size_t i = 0; i < a->n; i++) free(a->items[i].name);
    free(a->items);
    a->items = NULL;
    a->n = 0;
}

bool cli_shapes_add(cli_shapes *a, const char *cmd, const char *arg) {
    char *name;
    const char *dims;
    if (!cli_split_assign(cmd, "--shape", arg, &name, &dims)) return false;
    for (size_t i = 0; i < a->n; i++) {
        if (!strcmp(a->items[i].name, name)) {
            cli_usage_error(cmd, "--shape for '%s' is given twice", name);
            free(name);
            return false;
        }
    }
    cli_shape *s = realloc(a->items, (a->n + 1) * sizeof *s);
    if (!s) {
        free(name);
        cli_fail(ANVIL_ERR_OUT_OF_MEMORY, "out of memory");
        return false;
    }
    a->items = s;
    cli_shape *sh = &a->items[a->n];
    sh->name = name;
    a->n++;
    return cli_parse_shape(cmd, dims, &sh->rank, sh->dims);
}

/* splitmix64: tiny, fast and good enough for filling tensors reproducibly. */
static uint64_t next_random(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void fill_random(anvil_tensor *t, uint64_t seed) {
    anvil_dtype dt = anvil_tensor_dtype(t);
    size_t n = anvil_tensor_element_count(t);
    void *data = anvil_tensor_data(t);
    uint64_t state = seed;
    for (size_t i = 0; i < n; i++) {
        uint64_t r = next_random(&state);
        if (core_dtype_is_float(dt)) {
            double u = (double)(r >> 11) * (1.0 / 9007199254740992.0); /* [0,1) */
            core_store_f64(dt, data, i, 2.0 * u - 1.0);
        } else if (dt == ANVIL_DTYPE_BOOL) {
            core_store_i64(dt, data, i, (int64_t)(r & 1));
        } else {
            core_store_i64(dt, data, i, (int64_t)(r % 4));
        }
    }
}

static const cli_shape *find_shape(const cli_shapes *a, const char *name) {
    for (size_t i = 0; i < a->n; i++)
        if (!strcmp(a->items[i].name, name)) return &a->items[i];
    return NULL;
}

/* Works out the dims of a generated input from --shape or the declaration. */
static int generated_dims(const anvil_value_info *vi, const cli_shape *sh, int *rank,
                          int64_t *dims) {
    char sb[256], gb[256];
    if (sh) {
        if (vi->rank >= 0 && sh->rank != vi->rank)
            return cli_fail(ANVIL_ERR_INVALID_ARGUMENT,
                            "--shape %s=%s has rank %d but the model declares %s (rank %d)",
                            vi->name, cli_dims_str(sh->rank, sh->dims, gb, sizeof gb), sh->rank,
                            cli_value_shape(vi, sb, sizeof sb), vi->rank);
        for (int d = 0; vi->rank >= 0 && d < vi->rank; d++)
            if (vi->dims[d] >= 0 && vi->dims[d] != sh->dims[d])
                return cli_fail(ANVIL_ERR_INVALID_ARGUMENT,
                                "--shape %s=%s: dimension %d is fixed to %lld by the model (%s)",
                                vi->name, cli_dims_str(sh->rank, sh->dims, gb, sizeof gb), d,
                                (long long)vi->dims[d], cli_value_shape(vi, sb, sizeof sb));
        *rank = sh->rank;
        memcpy(dims, sh->dims, sizeof(int64_t) * (size_t)sh->rank);
        return CLI_EXIT_OK;
    }
    if (vi->rank < 0)
        return cli_fail(ANVIL_ERR_INVALID_ARGUMENT,
                        "input '%s' has no declared rank; give its shape with --shape %s=DIMS or "
                        "a file with -i %s=FILE.npy",
                        vi->name, vi->name, vi->name);
    *rank = vi->rank;
    for (int d = 0; d < vi->rank; d++) {
        dims[d] = vi->dims[d] >= 0 ? vi->dims[d] : 1;
        if (vi->dims[d] < 0)
            cli_note("input '%s' dimension %d (%s) is symbolic; using 1 (set it with --shape "
                     "%s=DIMS)",
                     vi->name, d, vi->dim_names[d] && vi->dim_names[d][0] ? vi->dim_names[d] : "?",
                     vi->name);
    }
    return CLI_EXIT_OK;
}

int cli_model_inputs(const cli_inputs *files_in, const cli_shapes *shapes, const anvil_model *m,
                     cli_model_input *bi, size_t n) {
    anvil_tensor **files = calloc(files_in->n + 1, sizeof *files);
    if (!files) return cli_fail(ANVIL_ERR_OUT_OF_MEMORY, "out of memory");
    int code = cli_inputs_read(files_in, files);
    for (size_t i = 0; i < n && !code; i++) {
        anvil_value_info vi;
        anvil_status s = anvil_model_input_info(m, i, &vi);
        if (s != ANVIL_OK) {
            code = cli_fail_status(s);
            break;
        }
        bi[i].name = vi.name;
        for (size_t k = 0; k < files_in->n; k++) {
            if (strcmp(files_in->items[k].name, vi.name) != 0) continue;
            bi[i].t = files[k];
            bi[i].from_file = true;
            files[k] = NULL;
        }
        const cli_shape *sh = find_shape(shapes, vi.name);
        if (bi[i].from_file) {
            if (sh)
                code = cli_fail(ANVIL_ERR_INVALID_ARGUMENT,
                                "input '%s' is given both as a file and with --shape; the file "
                                "fixes its shape, drop --shape",
                                vi.name);
            continue;
        }
        if (!core_dtype_supported(vi.dtype)) {
            code = cli_fail(ANVIL_ERR_UNSUPPORTED,
                            "input '%s' has dtype %s, which anvil cannot generate; give it "
                            "with -i",
                            vi.name, anvil_dtype_name(vi.dtype));
            break;
        }
        int rank = 0;
        int64_t dims[ANVIL_MAX_RANK];
        code = generated_dims(&vi, sh, &rank, dims);
        if (code) break;
        s = anvil_tensor_create(vi.dtype, rank, dims, &bi[i].t);
        if (s != ANVIL_OK) {
            code = cli_fail_status(s);
            break;
        }
        fill_random(bi[i].t, 0x616e76696cull + i);
    }
    for (size_t k = 0; k < files_in->n; k++) anvil_tensor_free(files[k]);
    free(files);
    for (size_t k = 0; k < shapes->n && !code; k++) {
        bool known = false;
        for (size_t i = 0; i < n && !known; i++) known = !strcmp(bi[i].name, shapes->items[k].name);
        if (!known)
            code = cli_fail(ANVIL_ERR_INVALID_ARGUMENT,
                            "--shape names '%s', which is not an input of the model",
                            shapes->items[k].name);
    }
    return code;
}

void cli_model_inputs_free(cli_model_input *bi, size_t n) {
    for (size_t i = 0; bi && i < n; i++) anvil_tensor_free(bi[i].t);
    free(bi);
}
