/* A program outside the project that uses anvil only through its installed copy
 * (tests/install.cmake builds it with pkg-config and with CMake). It checks that the header and
 * the library it links are the same version, then loads MODEL (tests/unit/data/api_small.onnx:
 * z = Relu(x + b), s = Shape(z), x is [N, 4]), runs it on a [2, 4] input and checks z.
 *
 *   consumer MODEL      prints "consumer: anvil VERSION ok" and exits 0 when everything holds */
#include <anvil.h>

#include <stdio.h>
#include <string.h>

static int fail(const char *what, anvil_status s) {
    fprintf(stderr, "consumer: %s failed: %s: %s\n", what, anvil_status_name(s),
            anvil_last_error());
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: consumer MODEL\n");
        return 2;
    }
    char header_version[32];
    snprintf(header_version, sizeof header_version, "%d.%d.%d", ANVIL_VERSION_MAJOR,
             ANVIL_VERSION_MINOR, ANVIL_VERSION_PATCH);
    if (strcmp(anvil_version(), header_version) != 0) {
        fprintf(stderr, "consumer: the library is anvil %s, the header %s\n", anvil_version(),
                header_version);
        return 1;
    }

    anvil_model *model = NULL;
    anvil_options *opts = NULL;
    anvil_session *session = NULL;
    anvil_tensor *x = NULL, *z = NULL;
    anvil_status s;
    int rc = 1;
    if ((s = anvil_model_load(argv[1], &model)) != ANVIL_OK) return fail("anvil_model_load", s);
    if ((s = anvil_options_create(&opts)) != ANVIL_OK) {
        rc = fail("anvil_options_create", s);
        goto done;
    }
    if ((s = anvil_options_set_threads(opts, 1)) != ANVIL_OK) {
        rc = fail("anvil_options_set_threads", s);
        goto done;
    }
    if ((s = anvil_session_create(model, opts, &session)) != ANVIL_OK) {
        rc = fail("anvil_session_create", s);
        goto done;
    }

    float xs[8] = {-3.0f, 0.5f, 1.0f, 2.0f, 0.25f, 4.0f, -1.0f, 0.0f};
    const float b[4] = {1.0f, -1.0f, 0.5f, -0.5f};
    const int64_t dims[2] = {2, 4};
    if ((s = anvil_tensor_wrap(ANVIL_DTYPE_FLOAT32, 2, dims, xs, &x)) != ANVIL_OK) {
        rc = fail("anvil_tensor_wrap", s);
        goto done;
    }
    const char *in_names[1] = {"x"};
    const anvil_tensor *ins[1] = {x};
    const char *out_names[1] = {"z"};
    if ((s = anvil_session_run(session, 1, in_names, ins, 1, out_names, &z)) != ANVIL_OK) {
        rc = fail("anvil_session_run", s);
        goto done;
    }
    if (anvil_tensor_dtype(z) != ANVIL_DTYPE_FLOAT32 || anvil_tensor_element_count(z) != 8) {
        fprintf(stderr, "consumer: z is %s with %zu elements, expected FLOAT with 8\n",
                anvil_dtype_name(anvil_tensor_dtype(z)), anvil_tensor_element_count(z));
        goto done;
    }
    const float *zs = anvil_tensor_data(z);
    printf("consumer: z =");
    for (int i = 0; i < 8; i++) {
        float t = xs[i] + b[i % 4];
        float want = t > 0.0f ? t : 0.0f;
        printf(" %g", (double)zs[i]);
        if (zs[i] != want) {
            printf("\n");
            fprintf(stderr, "consumer: z[%d] = %g, expected %g\n", i, (double)zs[i], (double)want);
            goto done;
        }
    }
    printf("\nconsumer: anvil %s ok\n", anvil_version());
    rc = 0;
done:
    anvil_tensor_free(z);
    anvil_tensor_free(x);
    anvil_session_free(session);
    anvil_options_free(opts);
    anvil_model_free(model);
    return rc;
}
