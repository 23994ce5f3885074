/* Choosing a node's variant from the tuning database.
 *
 * A record is only advice: the variant it names must still exist in this build and still apply
 * to the node (the fingerprint's hash of variant names makes that the rule, but a file edited by
 * hand or merged from elsewhere must not break a session), and its parameters must parse.
 * Anything else falls through to the next source, so a bad record costs speed, never a run. */
#include "tune/tune.h"

#include <string.h>
#include <time.h>

const char *tune_why_name(tune_why w) {
    switch (w) {
    case TUNE_WHY_DB:
        return "database";
    case TUNE_WHY_NEAREST:
        return "nearest";
    case TUNE_WHY_FORCED:
        return "forced";
    case TUNE_WHY_ONLINE:
        return "online";
    case TUNE_WHY_CASCADE:
    default:
        return "cascade";
    }
}

/* Whether rec can run kn here; fills out if so. */
static bool usable(const tune_record *rec, const kern_node *kn, tune_choice *out) {
    const kern_variant *v = kern_find(kn->node->op, rec->variant);
    if (!v || !kern_applies(v, kn, core_hw_get())) return false;
    kern_config cfg;
    int threads;
    if (tune_params_parse(v, rec->params, &cfg, &threads) != ANVIL_OK) {
        core_err_clear();
        return false;
    }
    /* A nearest record may come from another thread count (the family leaves it out). */
    if (rec->nearest || threads > kn->threads) threads = 0;
    out->v = v;
    out->cfg = cfg;
    out->threads = threads;
    out->why = rec->nearest ? TUNE_WHY_NEAREST : TUNE_WHY_DB;
    out->median_ns = rec->median_ns;
    return true;
}

anvil_status tune_lookup(tune_db *db, const char *fingerprint, const kern_node *kn,
                         tune_choice *out, bool *found) {
    *found = false;
    tune_problem pr;
    if (tune_problem_of(kn, &pr) != ANVIL_OK) {
        core_err_clear();
        return ANVIL_OK;
    }
    tune_record rec;
    bool hit = false;
    anvil_status s = tune_db_get(db, pr.key, fingerprint, &rec, &hit);
    if (s != ANVIL_OK) return s;
    if (hit && usable(&rec, kn, out)) {
        *found = true;
        return ANVIL_OK;
    }
    s = tune_db_nearest(db, pr.family, fingerprint, pr.n_dims, pr.dims, &rec, &hit);
    if (s != ANVIL_OK) return s;
    if (hit && usable(&rec, kn, out)) *found = true;
    return ANVIL_OK;
}

void tune_record_of(const tune_problem *problem, const char *fingerprint, const tune_candidate *w,
                    const char *source, tune_record *rec) {
    memset(rec, 0, sizeof *rec);
    snprintf(rec->key, sizeof rec->key, "%s", problem->key);
    snprintf(rec->family, sizeof rec->family, "%s", problem->family);
    snprintf(rec->fingerprint, sizeof rec->fingerprint, "%s", fingerprint);
    rec->n_dims = problem->n_dims;
    memcpy(rec->dims, problem->dims, sizeof rec->dims);
    snprintf(rec->variant, sizeof rec->variant, "%s", w->v->name);
    tune_params_format(w->v, &w->cfg, w->threads, rec->params, sizeof rec->params);
    rec->median_ns = w->median_ns;
    rec->spread = w->spread;
    rec->reps = w->reps;
    rec->max_err = w->max_err;
    snprintf(rec->source, sizeof rec->source, "%s", source);
    rec->unix_time = (int64_t)time(NULL);
}
