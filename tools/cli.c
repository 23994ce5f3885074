/* Helpers shared by the anvil subcommands: error reporting and exit codes, option parsing,
 * shapes, the -i NAME=FILE.npy list, output file names and directories.
 *
 * The option parser is hand-written rather than getopt_long because getopt keeps global state
 * (optind) across subcommands, prints its own messages in its own format, and cannot report
 * "option --x does not take a value" for "--x=1"; every subcommand here wants the same exact
 * messages and exit code 2 for any usage problem. */
#include "cli.h"

#include "api/api.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- errors -----------------------------------------------------------------------------------
 */

int cli_exit_code(anvil_status s) {
    if (s == ANVIL_OK) return CLI_EXIT_OK;
    if ((int)s >= 1 && (int)s <= 9) return CLI_EXIT_STATUS_BASE + (int)s;
    return CLI_EXIT_FAIL;
}

int cli_fail_status(anvil_status s) {
    const char *msg = anvil_last_error();
    fprintf(stderr, "anvil: error: %s: %s\n", anvil_status_name(s),
            msg && msg[0] ? msg : "(no message)");
    return cli_exit_code(s);
}

int cli_fail(anvil_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "anvil: error: %s: ", anvil_status_name(s));
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return cli_exit_code(s);
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "anvil %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nrun 'anvil %s -h' for usage\n", cmd);
    va_end(ap);
    return CLI_EXIT_USAGE;
}

void cli_note(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "anvil: note: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---- argument parsing -------------------------------------------------------------------------
 */

void cli_parser_init(cli_parser *p, const char *cmd, int argc, char **argv,
                     const cli_option *opts) {
    p->cmd = cmd;
    p->argc = argc;
    p->argv = argv;
    p->next = 1;
    p->only_positional = false;
    p->opts = opts;
}

/* Finds the option for "--name" (name_len chars) or "-c". */
static const cli_option *find_long(const cli_option *opts, const char *name, size_t name_len) {
    for (const cli_option *o = opts; o->id; o++)
        if (strlen(o->long_name) == name_len && !strncmp(o->long_name, name, name_len)) return o;
    return NULL;
}

static const cli_option *find_short(const cli_option *opts, char c) {
    for (const cli_option *o = opts; o->id; o++)
        if (o->short_name && o->short_name == c) return o;
    return NULL;
}

int cli_parser_next(cli_parser *p, const char **value) {
    *value = NULL;
    if (p->next >= p->argc) return CLI_ARG_END;
    const char *a = p->argv[p->next++];
    if (p->only_positional || a[0] != '-' || a[1] == '\0') {
        *value = a;
        return CLI_ARG_POSITIONAL;
    }
    if (!strcmp(a, "--")) {
        p->only_positional = true;
        return cli_parser_next(p, value);
    }
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) return CLI_ARG_HELP;

    const cli_option *o;
    const char *inline_value = NULL;
    if (a[1] == '-') {
        const char *name = a + 2;
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        o = find_long(p->opts, name, len);
        if (!o) {
            cli_usage_error(p->cmd, "unknown option '--%.*s'", (int)len, name);
            return CLI_ARG_ERROR;
        }
        if (eq) inline_value = eq + 1;
        if (eq && !o->takes_value) {
            cli_usage_error(p->cmd, "option '--%s' does not take a value", o->long_name);
            return CLI_ARG_ERROR;
        }
    } else {
        o = find_short(p->opts, a[1]);
        if (!o) {
            cli_usage_error(p->cmd, "unknown option '%s'", a);
            return CLI_ARG_ERROR;
        }
        if (a[2] != '\0') {
            if (!o->takes_value) {
                cli_usage_error(p->cmd, "unknown option '%s' (option '-%c' takes no value)", a,
                                o->short_name);
                return CLI_ARG_ERROR;
            }
            inline_value = a + 2;
        }
    }
    if (o->takes_value) {
        if (inline_value) {
            *value = inline_value;
        } else if (p->next < p->argc) {
            *value = p->argv[p->next++];
        } else {
            cli_usage_error(p->cmd, "option '%s' needs a value", a);
            return CLI_ARG_ERROR;
        }
    }
    return o->id;
}

bool cli_parse_passes(const char *cmd, const char *spec, uint32_t *off) {
    if (api_passes_parse(spec, off) == ANVIL_OK) return true;
    cli_usage_error(cmd, "--passes: %s", anvil_last_error());
    return false;
}

bool cli_parse_precision(const char *cmd, const char *s) {
    static const char *const names[] = {"fp32", "bf16", "fp16", "auto", "int8"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(s, names[i])) return true;
    cli_usage_error(cmd, "--precision must be fp32, bf16, fp16, auto or int8, got '%s'", s);
    return false;
}

bool cli_parse_tolerance(const char *cmd, const char *s, double *out) {
    char *end = NULL;
    errno = 0;
    double v = *s ? strtod(s, &end) : 0;
    if (!*s || *end != '\0' || errno == ERANGE || !isfinite(v) || v <= 0) {
        cli_usage_error(cmd, "--tolerance must be a positive number (e.g. 0.01), got '%s'", s);
        return false;
    }
    *out = v;
    return true;
}

anvil_status cli_precision_apply(const char *precision, double tolerance, anvil_options *opts) {
    if (precision) CORE_TRY(anvil_options_set_precision(opts, precision));
    if (tolerance > 0) CORE_TRY(anvil_options_set_tolerance(opts, tolerance));
    return ANVIL_OK;
}

bool cli_parse_int(const char *cmd, const char *what, const char *s, long long lo, long long hi,
                   long long *out) {
    char *end = NULL;
    errno = 0;
    long long v = s && *s ? strtoll(s, &end, 10) : 0;
    if (!s || !*s || *end != '\0' || errno == ERANGE) {
        cli_usage_error(cmd, "%s must be a whole number, got '%s'", what, s ? s : "");
        return false;
    }
    if (v < lo || v > hi) {
        cli_usage_error(cmd, "%s must be between %lld and %lld, got %lld", what, lo, hi, v);
        return false;
    }
    *out = v;
    return true;
}

bool cli_split_assign(const char *cmd, const char *what, const char *s, char **name,
                      const char **value) {
    const char *eq = strrchr(s, '=');
    if (!eq || eq == s || eq[1] == '\0') {
        cli_usage_error(cmd, "%s must look like NAME=VALUE, got '%s'", what, s);
        return false;
    }
    size_t len = (size_t)(eq - s);
    char *n = malloc(len + 1);
    if (!n) {
        cli_fail(ANVIL_ERR_OUT_OF_MEMORY, "out of memory parsing arguments");
        return false;
    }
    memcpy(n, s, len);
    n[len] = '\0';
    *name = n;
    *value = eq + 1;
    return true;
}

bool cli_variants_add(cli_variants *v, const char *cmd, const char *arg) {
    if (v->n == CLI_MAX_VARIANTS) {
        cli_usage_error(cmd, "more than %d --variant options", CLI_MAX_VARIANTS);
        return false;
    }
    if (!cli_split_assign(cmd, "--variant", arg, &v->keys[v->n], &v->names[v->n])) return false;
    v->n++;
    return true;
}

anvil_status cli_variants_apply(const cli_variants *v, anvil_options *opts) {
    for (size_t i = 0; i < v->n; i++) {
        anvil_status s = anvil_options_set_variant(opts, v->keys[i], v->names[i]);
        if (s != ANVIL_OK) return s;
    }
    return ANVIL_OK;
}

void cli_variants_free(cli_variants *v) {
    for (size_t i = 0; i < v->n; i++) free(v->keys[i]);
    v->n = 0;
}

bool cli_parse_shape(const char *cmd, const char *s, int *rank, int64_t dims[ANVIL_MAX_RANK]) {
    *rank = 0;
    if (!strcmp(s, "scalar")) return true;
    const char *p = s;
    while (*p) {
        if (*rank == ANVIL_MAX_RANK) {
            cli_usage_error(cmd, "shape '%s' has more than %d dimensions", s, ANVIL_MAX_RANK);
            return false;
        }
        char *end;
        errno = 0;
        long long d = (*p >= '0' && *p <= '9') ? strtoll(p, &end, 10) : -1;
        if (d < 0 || errno == ERANGE || end == p || (*end && *end != 'x' && *end != ',')) {
            cli_usage_error(cmd,
                            "shape '%s' must be dimensions separated by 'x' (e.g. 1x3x224x224)", s);
            return false;
        }
        dims[(*rank)++] = d;
        p = end;
        if (*p) {
            p++;
            if (!*p) {
                cli_usage_error(cmd, "shape '%s' ends with a separator", s);
                return false;
            }
        }
    }
    return true;
}

/* ---- shapes -----------------------------------------------------------------------------------
 */

const char *cli_value_shape(const anvil_value_info *vi, char *buf, size_t cap) {
    if (vi->rank < 0) {
        snprintf(buf, cap, "[?]");
        return buf;
    }
    size_t len = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < vi->rank && i < ANVIL_MAX_RANK && len < cap; i++) {
        const char *sep = i ? "," : "";
        if (vi->dims[i] >= 0)
            len += (size_t)snprintf(buf + len, cap - len, "%s%lld", sep, (long long)vi->dims[i]);
        else if (vi->dim_names[i] && vi->dim_names[i][0])
            len += (size_t)snprintf(buf + len, cap - len, "%s%s", sep, vi->dim_names[i]);
        else
            len += (size_t)snprintf(buf + len, cap - len, "%s?", sep);
    }
    if (len < cap) snprintf(buf + len, cap - len, "]");
    return buf;
}

const char *cli_dims_str(int rank, const int64_t *dims, char *buf, size_t cap) {
    size_t len = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < rank && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? "," : "", (long long)dims[i]);
    if (len < cap) snprintf(buf + len, cap - len, "]");
    return buf;
}

/* ---- inputs -----------------------------------------------------------------------------------
 */

bool cli_inputs_add(cli_inputs *in, const char *cmd, const char *arg) {
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || !strrchr(arg, '=')[1]) {
        cli_usage_error(cmd, "-i needs NAME=FILE.npy, got '%s'", arg);
        return false;
    }
    if (in->n == in->cap) {
        size_t cap = in->cap ? in->cap * 2 : 8;
        cli_input_arg *items = realloc(in->items, cap * sizeof *items);
        if (!items) {
            cli_fail(ANVIL_ERR_OUT_OF_MEMORY, "out of memory parsing arguments");
            return false;
        }
        in->items = items;
        in->cap = cap;
    }
    in->items[in->n++] = (cli_input_arg){.arg = arg};
    return true;
}

void cli_inputs_free(cli_inputs *in) {
    for (size_t i = 0; i < in->n; i++) free(in->items[i].name);
    free(in->items);
    in->items = NULL;
    in->n = in->cap = 0;
}

static bool model_has_input(const anvil_model *model, const char *name, size_t len) {
    size_t n = anvil_model_input_count(model);
    for (size_t i = 0; i < n; i++) {
        anvil_value_info vi;
        if (anvil_model_input_info(model, i, &vi) != ANVIL_OK) continue;
        if (strlen(vi.name) == len && !strncmp(vi.name, name, len)) return true;
    }
    return false;
}

static void list_model_inputs(const anvil_model *model) {
    size_t n = anvil_model_input_count(model);
    fprintf(stderr, "the model's inputs are:");
    if (n == 0) fprintf(stderr, " (none)");
    for (size_t i = 0; i < n; i++) {
        anvil_value_info vi;
        char sb[256];
        if (anvil_model_input_info(model, i, &vi) != ANVIL_OK) continue;
        fprintf(stderr, "%s '%s' %s %s", i ? "," : "", vi.name, anvil_dtype_name(vi.dtype),
                cli_value_shape(&vi, sb, sizeof sb));
    }
    fputc('\n', stderr);
}

int cli_inputs_resolve(const anvil_model *model, cli_inputs *in) {
    for (size_t i = 0; i < in->n; i++) {
        cli_input_arg *it = &in->items[i];
        const char *split = NULL;
        for (const char *eq = strchr(it->arg, '='); eq; eq = strchr(eq + 1, '='))
            if (eq[1] && model_has_input(model, it->arg, (size_t)(eq - it->arg))) {
                split = eq;
                break;
            }
        if (!split) {
            const char *eq = strchr(it->arg, '=');
            int code =
                cli_fail(ANVIL_ERR_INVALID_ARGUMENT, "-i %s: the model has no input named '%.*s'",
                         it->arg, (int)(eq - it->arg), it->arg);
            list_model_inputs(model);
            return code;
        }
        size_t len = (size_t)(split - it->arg);
        it->name = malloc(len + 1);
        if (!it->name) return cli_fail(ANVIL_ERR_OUT_OF_MEMORY, "out of memory");
        memcpy(it->name, it->arg, len);
        it->name[len] = '\0';
        it->path = split + 1;
        for (size_t j = 0; j < i; j++)
            if (!strcmp(in->items[j].name, it->name))
                return cli_fail(ANVIL_ERR_INVALID_ARGUMENT,
                                "input '%s' is given twice (-i %s and -i %s); give each input "
                                "once",
                                it->name, in->items[j].arg, it->arg);
    }
    return CLI_EXIT_OK;
}

int cli_inputs_read(const cli_inputs *in, anvil_tensor **tensors) {
    for (size_t i = 0; i < in->n; i++) tensors[i] = NULL;
    for (size_t i = 0; i < in->n; i++) {
        anvil_status s = npy_read(in->items[i].path, &tensors[i]);
        if (s != ANVIL_OK) {
            fprintf(stderr, "anvil: error: %s: input '%s': %s\n", anvil_status_name(s),
                    in->items[i].name, anvil_last_error());
            for (size_t j = 0; j < i; j++) {
                anvil_tensor_free(tensors[j]);
                tensors[j] = NULL;
            }
            return cli_exit_code(s);
        }
    }
    return CLI_EXIT_OK;
}

/* ---- files ------------------------------------------------------------------------------------
 */

void cli_sanitize_name(const char *name, char *buf, size_t cap) {
    if (cap == 0) return;
    size_t k = 0;
    for (const char *p = name; *p && k + 1 < cap; p++) {
        char c = *p;
        bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
        buf[k++] = keep ? c : '_';
    }
    buf[k] = '\0';
    if (k == 0) snprintf(buf, cap, "output");
}

int cli_mkdirs(const char *path) {
    size_t len = strlen(path);
    char *p = malloc(len + 1);
    if (!p) return cli_fail(ANVIL_ERR_OUT_OF_MEMORY, "out of memory");
    memcpy(p, path, len + 1);
    /* create each prefix ending before a '/', then the whole path */
    for (size_t i = 1; i <= len; i++) {
        if (i < len && p[i] != '/') continue;
        char saved = p[i];
        p[i] = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            int e = errno;
            int code = cli_fail(ANVIL_ERR_IO, "cannot create directory '%s': %s", p, strerror(e));
            free(p);
            return code;
        }
        p[i] = saved;
    }
    struct stat st;
    int code = CLI_EXIT_OK;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        code = cli_fail(ANVIL_ERR_IO, "'%s' exists and is not a directory", path);
    free(p);
    return code;
}

const char *cli_human_si(double v, char *buf, size_t cap) {
    static const char *const prefix[] = {"", " K", " M", " G", " T", " P", " E"};
    size_t k = 0;
    while (v >= 999.5 && k + 1 < sizeof prefix / sizeof *prefix) {
        v /= 1000.0;
        k++;
    }
    snprintf(buf, cap, k ? "%.3g%s" : "%.0f%s", v, prefix[k]);
    return buf;
}

const char *cli_human_bytes(double bytes, char *buf, size_t cap) {
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    size_t k = 0;
    while (bytes >= 999.5 && k + 1 < sizeof unit / sizeof *unit) {
        bytes /= 1024.0;
        k++;
    }
    snprintf(buf, cap, k ? "%.3g %s" : "%.0f %s", bytes, unit[k]);
    return buf;
}

double cli_ms(uint64_t t0, uint64_t t1) {
    return (double)(t1 - t0) / 1e6;
}

int cli_tuning_option(cli_tuning *t, const char *cmd, int id, const char *val) {
    switch (id) {
    case CLI_OPT_DB:
        if (!val[0]) {
            cli_usage_error(cmd, "--db needs a file name");
            return -1;
        }
        t->db = val;
        return 1;
    case CLI_OPT_NO_DB:
        t->no_db = true;
        return 1;
    case CLI_OPT_TUNE:
        if (strcmp(val, "online") && strcmp(val, "off")) {
            cli_usage_error(cmd,
                            "--tune takes 'online' or 'off', got '%s' (offline tuning is "
                            "`anvil tune MODEL`)",
                            val);
            return -1;
        }
        t->online = !strcmp(val, "online");
        return 1;
    case CLI_OPT_TUNE_ROUNDS:
        return cli_parse_int(cmd, "--tune-rounds", val, 1, 1000, &t->rounds) ? 1 : -1;
    }
    return 0;
}

anvil_status cli_tuning_apply(const cli_tuning *t, anvil_options *opts) {
    if (t->db || t->no_db) CORE_TRY(anvil_options_set_tuning_db(opts, t->no_db ? "" : t->db));
    if (t->online)
        CORE_TRY(anvil_options_set_online_tuning(opts, t->rounds > 0 ? (int)t->rounds : 3, 0, 0));
    return ANVIL_OK;
}

int cli_tuning_db_path(const char *given, char *buf, size_t cap) {
    if (given) {
        if ((size_t)snprintf(buf, cap, "%s", given) >= cap)
            return cli_fail(ANVIL_ERR_LIMIT, "--db path is too long");
        return 0;
    }
    anvil_status s = anvil_tuning_db_default_path(buf, cap, 1);
    if (s != ANVIL_OK) return cli_fail_status(s);
    if (!buf[0])
        return cli_fail(ANVIL_ERR_INVALID_ARGUMENT,
                        "$ANVIL_TUNING_DB is 'off': name the database with --db FILE");
    return 0;
}
