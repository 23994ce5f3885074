/* anvil tune MODEL --train: the problems of the model's training graph (forward, loss and
 * backward nodes, and each conv layer's grouped choice) for the batch shapes of a training set,
 * measured through anvil_train_tune as `anvil train --tune offline` measures them; then training
 * steps timed without and with the database. */
#include "cmd_tune.h"

#include "api/api.h"
#include "train_common.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- --train: the training graph ------------------------------------------------------------ */

/* The grouped choices' records (src/runtime/train_groups.c) are keyed
 * "rewrite|train_conv|<the forward Conv's problem>|t=<threads>". */
static const char group_prefix[] = "rewrite|train_conv|";

static bool is_group(const anvil_tuning_record *r) {
    return !strncmp(r->key, group_prefix, sizeof group_prefix - 1);
}

/* A record kept past anvil_tuning_db_foreach's call (strings owned). */
typedef struct saved_record {
    char *key, *variant, *params;
    double median_ns, max_err;
    bool group;
} saved_record;

/* What this run wrote: the records of this machine that were not in the database before it,
 * or have changed (the training API reports a count, not the records). A record is known by a
 * hash of its key, time and median. */
typedef struct train_records {
    const char *fingerprint;
    uint64_t *before; /* owned, sorted: the hashes before the run */
    size_t n_before, cap_before;
    bool after;
    saved_record *recs; /* owned: what the run wrote */
    int n, cap, groups;
} train_records;

static uint64_t record_hash(const anvil_tuning_record *r) {
    uint64_t h = 1469598103934665603ull, bits;
    for (const char *p = r->key; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    memcpy(&bits, &r->median_ns, sizeof bits);
    h = (h ^ bits) * 1099511628211ull;
    return (h ^ (uint64_t)r->unix_time) * 1099511628211ull;
}

static int cmp_u64(const void *x, const void *y) {
    const uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

static anvil_status collect_record(const anvil_tuning_record *r, void *arg) {
    train_records *c = arg;
    if (strcmp(r->fingerprint, c->fingerprint)) return ANVIL_OK;
    uint64_t h = record_hash(r);
    if (!c->after) {
        if (c->n_before == c->cap_before) {
            const size_t cap = c->cap_before ? 2 * c->cap_before : 256;
            uint64_t *p = realloc(c->before, cap * sizeof *p);
            if (!p) return ANVIL_ERR_OUT_OF_MEMORY;
            c->before = p;
            c->cap_before = cap;
        }
        c->before[c->n_before++] = h;
        return ANVIL_OK;
    }
    if (c->n_before && bsearch(&h, c->before, c->n_before, sizeof h, cmp_u64)) return ANVIL_OK;
    if (c->n == c->cap) {
        const int cap = c->cap ? 2 * c->cap : 64;
        saved_record *p = realloc(c->recs, (size_t)cap * sizeof *p);
        if (!p) return ANVIL_ERR_OUT_OF_MEMORY;
        c->recs = p;
        c->cap = cap;
    }
    saved_record *k = &c->recs[c->n];
    *k = (saved_record){strdup(r->key), strdup(r->variant), strdup(r->params),
                        r->median_ns,   r->max_err,         is_group(r)};
    if (!k->key || !k->variant || !k->params) {
        free(k->key);
        free(k->variant);
        free(k->params);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    c->n++;
    c->groups += k->group;
    return ANVIL_OK;
}

static int cmp_double(const void *x, const void *y) {
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* The median of t[0..n) (sorted in place); 0 for none. */
static double median(double *t, int n) {
    if (n <= 0) return 0;
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

/* Median ms per training step of two sessions, the cascade's (no database) and the database's,
 * stepped alternately after two warm-up steps each (the first builds and plans the graph). base
 * is SGD without momentum or decay; with lr 0 its update leaves the parameters as they are, so
 * every step does the same work. */
static anvil_status time_steps(const tune_args *a, const anvil_model *m,
                               const anvil_train_config *base, const char *db_path, size_t n_in,
                               const char *const *names, const anvil_tensor *const *batch,
                               double *cascade_ms, double *tuned_ms) {
    const int runs = (int)a->runs, warmup = 2;
    const bool progress = !a->quiet && isatty(STDERR_FILENO);
    anvil_train_session *s[2] = {NULL, NULL};
    double *t = calloc(2 * (size_t)runs, sizeof *t);
    anvil_status st = t ? ANVIL_OK : ANVIL_ERR_OUT_OF_MEMORY;
    for (int k = 0; k < 2 && st == ANVIL_OK; k++) {
        anvil_train_config c = *base;
        c.lr = 0.0f;
        c.tuning_db = k == 0 ? "" : db_path;
        st = anvil_train_session_create(m, &c, &s[k]);
    }
    for (int j = -warmup; j < runs && st == ANVIL_OK; j++) {
        if (progress)
            fprintf(stderr, "\r\033[Ktiming training steps: %d/%d", j < 0 ? 0 : j + 1, runs);
        for (int k = 0; k < 2 && st == ANVIL_OK; k++) {
            float loss;
            const uint64_t t0 = core_now_ns();
            st = anvil_train_step(s[k], n_in, names, batch, batch[n_in], &loss, NULL);
            if (j >= 0) t[k * runs + j] = cli_ms(t0, core_now_ns());
        }
    }
    if (progress) fprintf(stderr, "\r\033[K");
    if (st == ANVIL_OK) {
        *cascade_ms = median(t, runs);
        *tuned_ms = median(t + runs, runs);
    }
    anvil_train_session_free(s[0]);
    anvil_train_session_free(s[1]);
    free(t);
    return st;
}

static const char *loss_name(anvil_loss l) {
    return l == ANVIL_LOSS_MSE ? "mse" : l == ANVIL_LOSS_NLL ? "nll" : "cross_entropy";
}

/* The report of one --train run. */
typedef struct train_report {
    const char *db_path, *fp;
    const char *batch_desc; /* "x [32,1,8,8]" */
    int tuned;
    double seconds, cascade_ms, tuned_ms;
    const train_records *recs;
} train_report;

/* A group's layer as the key tells it: the forward Conv's shapes and the key's flags (fields
 * without '=', e.g. "no dx": a first layer, whose input needs no gradient). */
static const char *group_layer(const saved_record *r, char *buf, size_t cap) {
    buf[0] = 0;
    for (const char *f = r->key + sizeof group_prefix - 1; *f;) {
        const size_t n = strcspn(f, "|");
        const char *eq = memchr(f, '=', n);
        if (!strncmp(f, "shapes=", 7) || !eq)
            snprintf(buf + strlen(buf), cap - strlen(buf), "%s%.*s", buf[0] ? " " : "",
                     (int)(eq ? n - 7 : n), eq ? f + 7 : f);
        f += n + (f[n] == '|');
    }
    return buf;
}

static void train_print_text(const tune_args *a, const train_report *r) {
    const train_records *c = r->recs;
    printf("training graph of %s: batch %s, loss %s, %lld threads\n", a->model, r->batch_desc,
           loss_name(a->loss), a->threads);
    printf("tuned %d problems in %.1f s (problems the database had are not measured again); "
           "written: %d node winners, %d grouped choices\n",
           r->tuned, r->seconds, c->n - c->groups, c->groups);
    if (c->groups)
        printf("grouped choices (a conv layer's forward, input-gradient and weight-gradient "
               "passes, decided together):\n");
    for (int i = 0; i < c->n; i++) {
        char layer[1024];
        if (c->recs[i].group)
            printf("  %-7s %9.3f ms  %s\n", c->recs[i].variant, c->recs[i].median_ns / 1e6,
                   group_layer(&c->recs[i], layer, sizeof layer));
    }
    if (!r->tuned)
        printf("the database had every problem of this training graph (anvil db show lists "
               "them; --db another file measures them again)\n");
    for (int i = 0; a->verbose && i < c->n; i++) {
        const saved_record *rec = &c->recs[i];
        if (rec->group) continue;
        printf("  %-34s %-24s %10.3f ms  %s\n", rec->variant, rec->params, rec->median_ns / 1e6,
               rec->key);
    }
    if (r->cascade_ms > 0)
        printf("training step (median of %lld, alternating, lr 0): cascade %.3f ms, tuned "
               "%.3f ms (%.2fx)\n",
               a->runs, r->cascade_ms, r->tuned_ms, r->cascade_ms / r->tuned_ms);
    printf("database: %s\n", r->db_path);
}

static int train_print_json(const tune_args *a, const train_report *r) {
    const train_records *c = r->recs;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "model", a->model);
    cJSON_AddStringToObject(root, "mode", "train");
    cJSON_AddStringToObject(root, "data", a->data);
    cJSON_AddStringToObject(root, "database", r->db_path);
    cJSON_AddStringToObject(root, "fingerprint", r->fp);
    cJSON_AddNumberToObject(root, "threads", (double)a->threads);
    cJSON_AddNumberToObject(root, "batch", (double)a->batch);
    cJSON_AddStringToObject(root, "loss", loss_name(a->loss));
    cJSON_AddNumberToObject(root, "seconds", r->seconds);
    cJSON_AddNumberToObject(root, "tuned_problems", r->tuned);
    cJSON *groups = cJSON_AddArrayToObject(root, "grouped_choices");
    cJSON *winners = cJSON_AddArrayToObject(root, "winners");
    for (int i = 0; i < c->n; i++) {
        const saved_record *rec = &c->recs[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "key", rec->key);
        if (rec->group) {
            cJSON_AddStringToObject(o, "choice", rec->variant);
            cJSON_AddNumberToObject(o, "median_ms", rec->median_ns / 1e6);
            cJSON_AddItemToArray(groups, o);
            continue;
        }
        cJSON_AddStringToObject(o, "variant", rec->variant);
        cJSON_AddStringToObject(o, "params", rec->params);
        cJSON_AddNumberToObject(o, "median_ns", rec->median_ns);
        cJSON_AddNumberToObject(o, "max_err", rec->max_err);
        cJSON_AddItemToArray(winners, o);
    }
    if (r->cascade_ms > 0) {
        /* ms per training step, as the inference report's cascade_ms / tuned_ms per run */
        cJSON_AddNumberToObject(root, "runs", (double)a->runs);
        cJSON_AddNumberToObject(root, "cascade_ms", r->cascade_ms);
        cJSON_AddNumberToObject(root, "tuned_ms", r->tuned_ms);
        cJSON_AddNumberToObject(root, "speedup", r->cascade_ms / r->tuned_ms);
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) return cli_fail(ANVIL_ERR_OUT_OF_MEMORY, "out of memory");
    puts(text);
    free(text);
    return CLI_EXIT_OK;
}

/* anvil tune --train: the training session anvil train would make for the first --batch rows
 * of --data, tuned through the public training API, then the step times before and after. */
int cli_tune_train(tune_args *a, const char *db_path) {
    anvil_model *m = NULL;
    anvil_train_session *ts = NULL;
    anvil_tuning_db *db = NULL;
    cli_dataset d = {0};
    anvil_tensor *batch[65] = {NULL};
    const char **names = NULL;
    int64_t *idx = NULL;
    char fp[ANVIL_TUNING_FINGERPRINT_MAX], desc[256] = "";
    train_records recs = {.fingerprint = fp};
    train_report rep = {.db_path = db_path, .fp = fp, .batch_desc = desc, .recs = &recs};
    anvil_status st = anvil_model_load(a->model, &m);
    if (st == ANVIL_OK) st = anvil_tuning_fingerprint(fp, sizeof fp);
    if (st == ANVIL_OK) st = anvil_tuning_db_open(db_path, &db);
    if (st == ANVIL_OK) st = cli_dataset_load(a->data, m, a->labels, &d);
    const size_t n_in = m ? anvil_model_input_count(m) : 0;
    if (st == ANVIL_OK && n_in > 64)
        st = core_err(ANVIL_ERR_UNSUPPORTED,
                      "the model has %zu inputs; anvil tune --train takes 64", n_in);
    if (st == ANVIL_OK && a->batch > d.samples)
        st = core_err(ANVIL_ERR_INVALID_ARGUMENT,
                      "--batch %lld is larger than the %lld samples of '%s'", a->batch,
                      (long long)d.samples, a->data);
    if (st == ANVIL_OK) {
        names = calloc(n_in + 1, sizeof *names);
        idx = calloc((size_t)a->batch, sizeof *idx);
        if (!names || !idx) st = ANVIL_ERR_OUT_OF_MEMORY;
    }
    for (size_t i = 0; st == ANVIL_OK && i < n_in; i++) {
        anvil_value_info vi;
        st = anvil_model_input_info(m, i, &vi);
        names[i] = vi.name;
    }
    for (int64_t i = 0; idx && i < a->batch; i++) idx[i] = i;
    if (st == ANVIL_OK) st = cli_dataset_gather(&d, n_in + 1, idx, a->batch, batch);
    for (size_t i = 0; st == ANVIL_OK && i < n_in; i++) {
        char dims[128];
        const size_t len = strlen(desc);
        snprintf(desc + len, sizeof desc - len, "%s%s %s", i ? ", " : "", names[i],
                 cli_dims_str(anvil_tensor_rank(batch[i]), anvil_tensor_dims(batch[i]), dims,
                              sizeof dims));
    }
    if (a->threads <= 0)
        a->threads = core_hw_get()->logical_cores > 0 ? core_hw_get()->logical_cores : 1;
    anvil_train_config cfg;
    anvil_train_config_default(&cfg);
    cfg.loss = a->loss;
    cfg.output = a->output;
    cfg.threads = (int)a->threads;
    cfg.opt_level = (int)a->opt_level;
    cfg.tuning_db = db_path;
    cfg.precision = a->precision;
    cfg.tolerance = a->tolerance;
    const bool progress = !a->quiet && isatty(STDERR_FILENO);
    if (st == ANVIL_OK && progress)
        fprintf(stderr,
                "tuning the training graph for batch %s (forward, backward and grouped "
                "choices; no progress until it is done)...",
                desc);
    if (st == ANVIL_OK) st = anvil_tuning_db_foreach(db, collect_record, &recs);
    if (recs.n_before) qsort(recs.before, recs.n_before, sizeof *recs.before, cmp_u64);
    recs.after = true;
    const uint64_t t0 = core_now_ns();
    if (st == ANVIL_OK) st = anvil_train_session_create(m, &cfg, &ts);
    if (st == ANVIL_OK)
        st = anvil_train_tune(ts, n_in, names, (const anvil_tensor *const *)batch, batch[n_in],
                              (double)a->budget, &rep.tuned);
    rep.seconds = (double)(core_now_ns() - t0) / 1e9;
    if (progress) fprintf(stderr, "\r\033[K");
    anvil_train_session_free(ts);
    if (st == ANVIL_OK) st = anvil_tuning_db_foreach(db, collect_record, &recs);
    if (st == ANVIL_OK && a->runs > 0)
        st = time_steps(a, m, &cfg, db_path, n_in, names, (const anvil_tensor *const *)batch,
                        &rep.cascade_ms, &rep.tuned_ms);
    int code = CLI_EXIT_OK;
    if (st != ANVIL_OK)
        code = cli_fail_status(st);
    else if (a->json)
        code = train_print_json(a, &rep);
    else
        train_print_text(a, &rep);
    for (size_t i = 0; i <= n_in && i < 65; i++) anvil_tensor_free(batch[i]);
    for (int i = 0; i < recs.n; i++) {
        free(recs.recs[i].key);
        free(recs.recs[i].variant);
        free(recs.recs[i].params);
    }
    free(recs.recs);
    free(recs.before);
    free(names);
    free(idx);
    cli_dataset_free(&d);
    anvil_tuning_db_close(db);
    anvil_model_free(m);
    return code;
}

/* ---- main ------------------------------------------------------------------------------------ */
