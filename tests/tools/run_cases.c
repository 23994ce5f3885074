/* anvil_run_cases: runs test cases in the ONNX backend-test layout through the public API and
 * compares every output with the expected one.
 *
 *   anvil_run_cases [--rtol R] [--atol A] [--atol-scale S] [--filter SUBSTR] [--threads T]
 *                   [--opt-level N] [--quiet] [--exclude FILE] [--expect-fail FILE] DIR...
 *
 * A DIR holding model.onnx is one case; any other DIR is scanned (sorted) for subfolders that
 * hold model.onnx, so the same runner takes tests/ops output, generated models and the official
 * ONNX node suite. A case has any number of test_data_set_<k>/ folders with input_<i>.pb (graph
 * inputs in declaration order) and output_<i>.pb (outputs in order). An optional tolerance.txt in
 * the case folder overrides the tolerances with lines "rtol R", "atol A", "atol_scale S".
 *
 * Comparison: dtype and shape exactly, then per element |got - want| <= atol + rtol * |want| for
 * floating types (NaN matches NaN, infinities must match exactly); integers and bools exactly.
 * With an atol scale S, atol for an output is S * max|want| of that output, for models whose
 * outputs have no fixed scale.
 *
 * --exclude FILE and --expect-fail FILE name cases by folder name, one per line in the first
 * tab-separated column ('#' starts a comment line): excluded cases are not run at all (the ONNX
 * suite's training, sequence, string ... tests; see tests/onnx/classify.py), expected failures are
 * run and must fail. With an expected-failures list the verdict is about the list staying true:
 * an unlisted case that fails, a listed case that passes, and (without --filter) a listed name
 * that matches no case are each reported and make the exit status 1.
 *
 * Prints "PASS name", "FAIL name: reason" or "UNSUPPORTED name: message" per case (a listed
 * expected failure prints "XFAIL" instead of FAIL / UNSUPPORTED, a listed case that passes
 * "XPASS"; --quiet drops PASS and XFAIL lines), then the unsupported ones again (only their number
 * with --expect-fail), then a summary closing with "N passed, N failed" (unsupported counts as
 * failed). Exit status 0 only if every case passed (with --expect-fail: if every outcome was the
 * expected one); 2 on a usage error or when no case was found. */
#include "anvil.h"
#include "core/core.h"
#include "api/api.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_IO 64

typedef struct tolerance {
    double rtol, atol, atol_scale; /* atol_scale <= 0: unused */
} tolerance;

/* A sorted set of case names read from a list file; used[i] marks names that matched a case. */
typedef struct name_set {
    char **names; /* malloc'd, sorted */
    bool *used;
    size_t n;
} name_set;

typedef struct runner {
    tolerance tol;
    const char *filter;
    int threads;
    int opt_level; /* graph rewrites (anvil_options_set_opt_level); default 1 */
    bool quiet;
    size_t passed, failed, excluded;
    char **unsupported; /* names, malloc'd */
    size_t n_unsupported;
    name_set exclude, expect_fail;
    bool have_expect_fail;
    size_t xfail, unexpected_fail, unexpected_pass;
    char **unexpected; /* "name (why)" lines for the closing summary, malloc'd */
    size_t n_unexpected;
} runner;

/* ---- small helpers ------------------------------------------------------------------------- */

static bool is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* path = a + "/" + b; aborts the runner on absurd lengths rather than truncating silently. */
static void join(char *out, size_t cap, const char *a, const char *b) {
    int n = snprintf(out, cap, "%s/%s", a, b);
    if (n < 0 || (size_t)n >= cap) {
        fprintf(stderr, "anvil_run_cases: path too long: %s/%s\n", a, b);
        exit(2);
    }
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names of entries of dir for which keep(full path) holds. Caller frees each and the
 * array. */
static char **list_dir(const char *dir, bool (*keep)(const char *dir, const char *name),
                       size_t *count) {
    *count = 0;
    DIR *d = opendir(dir);
    if (!d) return NULL;
    size_t cap = 0;
    char **names = NULL;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || !keep(dir, e->d_name)) continue;
        if (*count == cap) {
            cap = cap ? cap * 2 : 64;
            char **grown = realloc(names, cap * sizeof *names);
            if (!grown) {
                perror("anvil_run_cases");
                exit(2);
            }
            names = grown;
        }
        names[(*count)++] = strdup(e->d_name);
    }
    closedir(d);
    if (*count) qsort(names, *count, sizeof *names, cmp_str);
    return names;
}

static void free_list(char **names, size_t n) {
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
}

static void *xrealloc(void *p, size_t size) {
    void *q = realloc(p, size);
    if (!q) {
        perror("anvil_run_cases");
        exit(2);
    }
    return q;
}

/* Reads the first tab-separated column of every non-comment, non-blank line of path. */
static bool read_name_set(const char *path, name_set *set) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "anvil_run_cases: cannot open %s: %s\n", path, strerror(errno));
        return false;
    }
    char line[4096];
    size_t cap = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\t\r\n")] = '\0';
        if (line[0] == '#' || line[0] == '\0') continue;
        if (set->n == cap) {
            cap = cap ? cap * 2 : 256;
            set->names = xrealloc(set->names, cap * sizeof *set->names);
        }
        set->names[set->n++] = strdup(line);
    }
    fclose(f);
    if (set->n) qsort(set->names, set->n, sizeof *set->names, cmp_str);
    set->used = calloc(set->n ? set->n : 1, sizeof *set->used);
    if (!set->used) {
        perror("anvil_run_cases");
        exit(2);
    }
    return true;
}

/* Whether name is in set; marks it used. */
static bool in_name_set(name_set *set, const char *name) {
    if (!set->n) return false;
    char **hit = bsearch(&name, set->names, set->n, sizeof *set->names, cmp_str);
    if (!hit) return false;
    set->used[hit - set->names] = true;
    return true;
}

static void free_name_set(name_set *set) {
    free_list(set->names, set->n);
    free(set->used);
}

static void note_unexpected(runner *r, const char *name, const char *what) {
    char line[1200];
    snprintf(line, sizeof line, "%s (%s)", name, what);
    r->unexpected = xrealloc(r->unexpected, (r->n_unexpected + 1) * sizeof *r->unexpected);
    r->unexpected[r->n_unexpected++] = strdup(line);
}

static bool keep_case_dir(const char *dir, const char *name) {
    char p[4096], m[4096];
    join(p, sizeof p, dir, name);
    join(m, sizeof m, p, "model.onnx");
    return is_dir(p) && is_file(m);
}

static bool keep_data_set(const char *dir, const char *name) {
    char p[4096];
    join(p, sizeof p, dir, name);
    return strncmp(name, "test_data_set_", 14) == 0 && is_dir(p);
}

/* Reads tolerance.txt if the case has one; unknown keys are an error so typos are not ignored. */
static bool read_tolerance(const char *case_dir, tolerance *tol, char *why, size_t cap) {
    char p[4096];
    join(p, sizeof p, case_dir, "tolerance.txt");
    FILE *f = fopen(p, "r");
    if (!f) return true;
    char key[32];
    double v;
    bool ok = true;
    int r;
    while ((r = fscanf(f, "%31s %lf", key, &v)) == 2) {
        if (strcmp(key, "rtol") == 0)
            tol->rtol = v;
        else if (strcmp(key, "atol") == 0)
            tol->atol = v;
        else if (strcmp(key, "atol_scale") == 0)
            tol->atol_scale = v;
        else {
            snprintf(why, cap, "tolerance.txt: unknown key '%s'", key);
            ok = false;
            break;
        }
    }
    if (ok && r != EOF) {
        snprintf(why, cap, "tolerance.txt: expected lines of 'rtol|atol|atol_scale <number>'");
        ok = false;
    }
    fclose(f);
    return ok;
}

/* ---- comparison ------------------------------------------------------------------------------ */

static void dims_str(const anvil_tensor *t, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "[");
    int r = anvil_tensor_rank(t);
    for (int i = 0; i < r && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, i ? ",%lld" : "%lld",
                              (long long)anvil_tensor_dims(t)[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

static bool close_enough(double g, double w, double atol, double rtol) {
    if (isnan(w) || isnan(g)) return isnan(w) && isnan(g);
    if (isinf(w) || isinf(g)) return g == w;
    return fabs(g - w) <= atol + rtol * fabs(w);
}

/* Compares one output; on mismatch writes the reason into why and returns false. */
static bool compare(const char *oname, anvil_tensor *got, anvil_tensor *want, const tolerance *tol,
                    char *why, size_t cap) {
    anvil_dtype dt = anvil_tensor_dtype(want);
    if (anvil_tensor_dtype(got) != dt) {
        snprintf(why, cap, "output '%s': dtype %s, expected %s", oname,
                 anvil_dtype_name(anvil_tensor_dtype(got)), anvil_dtype_name(dt));
        return false;
    }
    char gs[160], ws[160];
    dims_str(got, gs, sizeof gs);
    dims_str(want, ws, sizeof ws);
    if (strcmp(gs, ws) != 0) {
        snprintf(why, cap, "output '%s': shape %s, expected %s", oname, gs, ws);
        return false;
    }
    size_t n = anvil_tensor_element_count(want);
    const void *g = anvil_tensor_data(got), *w = anvil_tensor_data(want);
    if (!core_dtype_is_float(dt)) {
        /* Integers and bools: exact, byte for byte per element. */
        size_t es = anvil_dtype_size(dt);
        for (size_t i = 0; i < n; i++) {
            if (memcmp((const char *)g + i * es, (const char *)w + i * es, es) != 0) {
                size_t bad = 0;
                for (size_t j = i; j < n; j++)
                    bad += memcmp((const char *)g + j * es, (const char *)w + j * es, es) != 0;
                snprintf(why, cap,
                         "output '%s': %zu of %zu elements differ; first at %zu: got %lld, "
                         "expected %lld",
                         oname, bad, n, i, (long long)core_load_i64(dt, g, i),
                         (long long)core_load_i64(dt, w, i));
                return false;
            }
        }
        return true;
    }
    double atol = tol->atol;
    if (tol->atol_scale > 0) {
        double mx = 0;
        for (size_t i = 0; i < n; i++) {
            double v = fabs(core_load_f64(dt, w, i));
            if (isfinite(v) && v > mx) mx = v;
        }
        atol = tol->atol_scale * mx;
    }
    size_t bad = 0, first = 0;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double gv = core_load_f64(dt, g, i), wv = core_load_f64(dt, w, i);
        if (close_enough(gv, wv, atol, tol->rtol)) continue;
        if (!bad++) first = i;
        double d = fabs(gv - wv);
        if (!(d <= worst)) worst = d; /* also takes NaN */
    }
    if (bad) {
        snprintf(why, cap,
                 "output '%s': %zu of %zu elements differ (rtol %g, atol %g); first at %zu: got "
                 "%.9g, expected %.9g; max |diff| %.3g",
                 oname, bad, n, tol->rtol, atol, first, core_load_f64(dt, g, first),
                 core_load_f64(dt, w, first), worst);
        return false;
    }
    return true;
}

/* ---- one case ------------------------------------------------------------------------------ */

typedef enum { RESULT_PASS, RESULT_FAIL, RESULT_UNSUPPORTED } result;

static result api_failure(anvil_status s, const char *what, char *why, size_t cap) {
    snprintf(why, cap, "%s: %s: %s", what, anvil_status_name(s), anvil_last_error());
    return s == ANVIL_ERR_UNSUPPORTED ? RESULT_UNSUPPORTED : RESULT_FAIL;
}

/* Counts the leading <prefix><i>.pb files of a data set. */
static size_t count_pb(const char *ds, const char *prefix) {
    size_t n = 0;
    for (;; n++) {
        char name[64], p[4096];
        snprintf(name, sizeof name, "%s%zu.pb", prefix, n);
        join(p, sizeof p, ds, name);
        if (!is_file(p)) return n;
    }
}

static void free_tensors(anvil_tensor **t, size_t n) {
    for (size_t i = 0; i < n; i++) anvil_tensor_free(t[i]);
}

static result run_data_set(anvil_model *model, anvil_session *sess, const char *ds,
                           const tolerance *tol, char *why, size_t cap) {
    size_t n_in = count_pb(ds, "input_"), n_out = count_pb(ds, "output_");
    size_t model_in = anvil_model_input_count(model), model_out = anvil_model_output_count(model);
    if (n_in > MAX_IO || model_out > MAX_IO) {
        snprintf(why, cap, "more than %d inputs or outputs", MAX_IO);
        return RESULT_FAIL;
    }
    if (n_in != model_in) {
        snprintf(why, cap, "%zu input files but the model has %zu inputs", n_in, model_in);
        return RESULT_FAIL;
    }
    if (n_out == 0 || n_out > model_out) {
        snprintf(why, cap, "%zu expected outputs but the model has %zu outputs", n_out, model_out);
        return RESULT_FAIL;
    }

    anvil_tensor *inputs[MAX_IO] = {0}, *outputs[MAX_IO] = {0}, *want[MAX_IO] = {0};
    const char *in_names[MAX_IO];
    result res = RESULT_FAIL;
    size_t loaded_in = 0, loaded_want = 0;
    for (; loaded_in < n_in; loaded_in++) {
        char name[64], p[4096];
        snprintf(name, sizeof name, "input_%zu.pb", loaded_in);
        join(p, sizeof p, ds, name);
        anvil_value_info info;
        anvil_status s = anvil_model_input_info(model, loaded_in, &info);
        if (s == ANVIL_OK) s = api_tensor_read_pb(p, &inputs[loaded_in]);
        if (s != ANVIL_OK) {
            api_failure(s, name, why, cap);
            goto done;
        }
        in_names[loaded_in] = info.name;
    }
    for (; loaded_want < n_out; loaded_want++) {
        char name[64], p[4096];
        snprintf(name, sizeof name, "output_%zu.pb", loaded_want);
        join(p, sizeof p, ds, name);
        anvil_status s = api_tensor_read_pb(p, &want[loaded_want]);
        if (s != ANVIL_OK) {
            api_failure(s, name, why, cap);
            goto done;
        }
    }

    anvil_status s = anvil_session_run(sess, n_in, in_names, (const anvil_tensor *const *)inputs,
                                       model_out, NULL, outputs);
    if (s != ANVIL_OK) {
        res = api_failure(s, "run", why, cap);
        goto done;
    }
    res = RESULT_PASS;
    for (size_t i = 0; i < n_out; i++) {
        anvil_value_info info;
        const char *oname = anvil_model_output_info(model, i, &info) == ANVIL_OK ? info.name : "?";
        if (!compare(oname, outputs[i], want[i], tol, why, cap)) {
            res = RESULT_FAIL;
            break;
        }
    }
    free_tensors(outputs, model_out);
done:
    free_tensors(inputs, loaded_in);
    free_tensors(want, loaded_want);
    return res;
}

static result run_case(const runner *r, const char *dir, char *why, size_t cap) {
    tolerance tol = r->tol;
    if (!read_tolerance(dir, &tol, why, cap)) return RESULT_FAIL;
    size_t n_ds;
    char **sets = list_dir(dir, keep_data_set, &n_ds);
    if (n_ds == 0) {
        snprintf(why, cap, "no test_data_set_* folder");
        free_list(sets, n_ds);
        return RESULT_FAIL;
    }

    char mp[4096];
    join(mp, sizeof mp, dir, "model.onnx");
    anvil_model *model = NULL;
    anvil_options *opts = NULL;
    anvil_session *sess = NULL;
    result res;
    anvil_status s = anvil_model_load(mp, &model);
    if (s != ANVIL_OK) {
        res = api_failure(s, "load", why, cap);
        goto done;
    }
    s = anvil_options_create(&opts);
    if (s == ANVIL_OK) s = anvil_options_set_threads(opts, r->threads);
    if (s == ANVIL_OK) s = anvil_options_set_opt_level(opts, r->opt_level);
    if (s != ANVIL_OK) {
        res = api_failure(s, "options", why, cap);
        goto done;
    }
    s = anvil_session_create(model, opts, &sess);
    if (s != ANVIL_OK) {
        res = api_failure(s, "session", why, cap);
        goto done;
    }
    res = RESULT_PASS;
    for (size_t k = 0; k < n_ds && res == RESULT_PASS; k++) {
        char dp[4096];
        join(dp, sizeof dp, dir, sets[k]);
        res = run_data_set(model, sess, dp, &tol, why, cap);
        if (res != RESULT_PASS && n_ds > 1) {
            /* Say which data set when there are several. */
            char tmp[2048];
            snprintf(tmp, sizeof tmp, "%s: %s", sets[k], why);
            snprintf(why, cap, "%s", tmp);
        }
    }
done:
    anvil_session_free(sess);
    anvil_options_free(opts);
    anvil_model_free(model);
    free_list(sets, n_ds);
    return res;
}

static void report(runner *r, const char *dir, const char *name) {
    if (r->filter && !strstr(name, r->filter)) return;
    if (in_name_set(&r->exclude, name)) {
        r->excluded++;
        return;
    }
    bool expect_fail = in_name_set(&r->expect_fail, name);
    char why[2048] = "";
    result res = run_case(r, dir, why, sizeof why);
    /* Messages may hold newlines; keep one line per case for the log and for grep. */
    for (char *c = why; *c; c++)
        if (*c == '\n') *c = ' ';
    if (res == RESULT_PASS) {
        r->passed++;
        if (expect_fail) {
            r->unexpected_pass++;
            note_unexpected(r, name, "passes but is listed as an expected failure");
            printf("XPASS %s\n", name);
        } else if (!r->quiet) {
            printf("PASS %s\n", name);
        }
        fflush(stdout);
        return;
    }
    r->failed++;
    const char *tag = res == RESULT_UNSUPPORTED ? "UNSUPPORTED" : "FAIL";
    if (expect_fail) {
        r->xfail++;
        if (!r->quiet) printf("XFAIL %s: %s\n", name, why);
    } else {
        printf("%s %s: %s\n", tag, name, why);
        if (r->have_expect_fail) {
            r->unexpected_fail++;
            note_unexpected(r, name, "fails and is not listed as an expected failure");
        }
    }
    if (res == RESULT_UNSUPPORTED) {
        r->unsupported = xrealloc(r->unsupported, (r->n_unsupported + 1) * sizeof *r->unsupported);
        r->unsupported[r->n_unsupported++] = strdup(name);
    }
    fflush(stdout);
}

/* Runs DIR as one case, or every case folder inside it. Returns the number of cases found. */
static size_t run_dir(runner *r, const char *dir) {
    char mp[4096];
    join(mp, sizeof mp, dir, "model.onnx");
    if (is_file(mp)) {
        const char *base = strrchr(dir, '/');
        char name[1024];
        snprintf(name, sizeof name, "%s", base && base[1] ? base + 1 : dir);
        report(r, dir, name);
        return 1;
    }
    size_t n;
    char **cases = list_dir(dir, keep_case_dir, &n);
    for (size_t i = 0; i < n; i++) {
        char p[4096];
        join(p, sizeof p, dir, cases[i]);
        report(r, p, cases[i]);
    }
    free_list(cases, n);
    return n;
}

static void usage(void) {
    fprintf(stderr,
            "usage: anvil_run_cases [--rtol R] [--atol A] [--atol-scale S] [--filter SUBSTR]\n"
            "                       [--threads T] [--opt-level N] [--quiet] [--exclude FILE]\n"
            "                       [--expect-fail FILE]\n"
            "                       DIR...\n"
            "  DIR: a case folder (model.onnx + test_data_set_*/) or a folder of them\n"
            "  FILE: case names in the first tab-separated column, '#' comments\n"
            "  defaults: rtol 1e-3, atol 1e-7, threads 0 (all cores), opt-level 1\n");
}

static bool parse_double(const char *s, double *out) {
    char *end;
    errno = 0;
    *out = strtod(s, &end);
    return s[0] && !*end && !errno && *out >= 0;
}

static void runner_free(runner *r) {
    free_list(r->unsupported, r->n_unsupported);
    free_list(r->unexpected, r->n_unexpected);
    free_name_set(&r->exclude);
    free_name_set(&r->expect_fail);
}

int main(int argc, char **argv) {
    runner r = {.tol = {.rtol = 1e-3, .atol = 1e-7, .atol_scale = 0}, .opt_level = 1};
    int first_dir = argc;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_val = i + 1 < argc;
        if (!strcmp(a, "--rtol") && has_val && parse_double(argv[i + 1], &r.tol.rtol)) {
            i++;
        } else if (!strcmp(a, "--atol") && has_val && parse_double(argv[i + 1], &r.tol.atol)) {
            i++;
        } else if (!strcmp(a, "--atol-scale") && has_val &&
                   parse_double(argv[i + 1], &r.tol.atol_scale)) {
            i++;
        } else if (!strcmp(a, "--filter") && has_val) {
            r.filter = argv[++i];
        } else if (!strcmp(a, "--threads") && has_val) {
            char *end;
            long t = strtol(argv[++i], &end, 10);
            if (*end || t < 0 || t > 1024) {
                usage();
                return 2;
            }
            r.threads = (int)t;
        } else if (!strcmp(a, "--opt-level") && has_val) {
            char *end;
            long t = strtol(argv[++i], &end, 10);
            if (*end || t < 0 || t > 3) {
                usage();
                return 2;
            }
            r.opt_level = (int)t;
        } else if (!strcmp(a, "--exclude") && has_val) {
            if (!read_name_set(argv[++i], &r.exclude)) {
                runner_free(&r);
                return 2;
            }
        } else if (!strcmp(a, "--expect-fail") && has_val) {
            if (!read_name_set(argv[++i], &r.expect_fail)) {
                runner_free(&r);
                return 2;
            }
            r.have_expect_fail = true;
        } else if (!strcmp(a, "--quiet")) {
            r.quiet = true;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage();
            runner_free(&r);
            return 0;
        } else if (a[0] == '-') {
            fprintf(stderr, "anvil_run_cases: bad option or value: %s\n", a);
            usage();
            runner_free(&r);
            return 2;
        } else {
            first_dir = i;
            break;
        }
    }
    if (first_dir >= argc) {
        usage();
        runner_free(&r);
        return 2;
    }
    size_t found = 0;
    for (int i = first_dir; i < argc; i++) {
        if (!is_dir(argv[i])) {
            fprintf(stderr, "anvil_run_cases: not a folder: %s\n", argv[i]);
            runner_free(&r);
            return 2;
        }
        found += run_dir(&r, argv[i]);
    }
    if (found == 0) {
        fprintf(stderr, "anvil_run_cases: no case folders (with model.onnx) found\n");
        runner_free(&r);
        return 2;
    }
    if (r.n_unsupported) {
        /* With an expected-failures list the names are there already (with reasons). */
        printf("%zu unsupported (counted as failed)%s", r.n_unsupported,
               r.have_expect_fail ? "" : ":");
        for (size_t i = 0; i < r.n_unsupported && !r.have_expect_fail; i++)
            printf(" %s", r.unsupported[i]);
        printf("\n");
    }
    if (r.have_expect_fail && !r.filter) {
        /* A listed name that matched no case is a stale entry (renamed or removed test). */
        for (size_t i = 0; i < r.expect_fail.n; i++)
            if (!r.expect_fail.used[i] && !in_name_set(&r.exclude, r.expect_fail.names[i]))
                note_unexpected(&r, r.expect_fail.names[i],
                                "listed as an expected failure but no such case was found");
    }
    for (size_t i = 0; i < r.n_unexpected; i++) printf("UNEXPECTED %s\n", r.unexpected[i]);
    if (r.excluded) printf("%zu excluded\n", r.excluded);
    if (r.have_expect_fail)
        printf("%zu expected failures, %zu unexpected failures, %zu unexpected passes\n", r.xfail,
               r.unexpected_fail, r.unexpected_pass);
    printf("%zu passed, %zu failed\n", r.passed, r.failed);
    bool ok = r.have_expect_fail ? r.n_unexpected == 0 : r.failed == 0;
    ok = ok && (r.passed > 0 || r.xfail > 0);
    runner_free(&r);
    return ok ? 0 : 1;
}
