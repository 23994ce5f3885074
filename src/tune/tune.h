/* tune: the persistent tuning database. The tuner times alternative kernel variants per problem
 * and keeps the winners here, one SQLite file shared by every process of a machine (WAL mode and a
 * busy timeout let several processes read and write it at once).
 *
 * A record is found by its problem key (opaque text chosen by the caller, e.g.
 * "Conv|k3s1p1|f32[1,64,56,56]>...|t2") together with the hardware fingerprint it was measured
 * on (tune_fingerprint). When no exact record exists, tune_db_nearest falls back to the record of
 * the same family (op and attributes, no shapes) whose shape numbers are closest.
 *
 * Ownership: a tune_db is owned by whoever opened it and released with tune_db_close. Records are
 * plain values (fixed-size arrays, no pointers) that the caller owns. Every const char * argument
 * is only read during the call. Functions that fail return a status and set core_err's message;
 * none prints or exits. */
#ifndef ANVIL_TUNE_H
#define ANVIL_TUNE_H

#include "core/core.h"
#include "kernels/kernels.h"

#include <stdio.h>

/* Bounds on a record's text fields, terminating NUL included. Longer input is refused with
 * ANVIL_ERR_LIMIT. */
#define TUNE_KEY_MAX 1024
#define TUNE_FAMILY_MAX 512
#define TUNE_FINGERPRINT_MAX 512
#define TUNE_VARIANT_MAX 128
#define TUNE_PARAMS_MAX 512
#define TUNE_SOURCE_MAX 16
/* Most shape numbers a record carries for the nearest-shape fallback. */
#define TUNE_MAX_DIMS 16

/* PRAGMA application_id of anvil's tuning databases ("ANVT"), and the schema version written to
 * PRAGMA user_version. A file with a newer schema is refused, never rewritten. */
#define TUNE_APPLICATION_ID 0x414E5654
#define TUNE_SCHEMA_VERSION 1

/* One measured winner. */
typedef struct tune_record {
    char key[TUNE_KEY_MAX];                 /* the problem, exact; non-empty */
    char family[TUNE_FAMILY_MAX];           /* op + attributes without shapes; non-empty */
    char fingerprint[TUNE_FINGERPRINT_MAX]; /* the machine (tune_fingerprint); non-empty */
    int n_dims;                             /* 0..TUNE_MAX_DIMS */
    int64_t dims[TUNE_MAX_DIMS];            /* shape numbers for the nearest-shape fallback */
    char variant[TUNE_VARIANT_MAX];         /* the winning kern_variant's name; non-empty */
    char params[TUNE_PARAMS_MAX];           /* the variant's parameters as text; may be empty */
    double median_ns;                       /* median time of one run */
    double spread;                          /* p90 / median of the timed runs */
    int reps;                               /* timed runs */
    double max_err;                         /* largest error against the reference */
    char source[TUNE_SOURCE_MAX];           /* "offline" or "online" */
    int64_t unix_time;                      /* when it was measured (seconds since 1970) */
    bool nearest; /* set by lookups: true when found by nearest shape, not by key */
} tune_record;

/* Writes this machine's fingerprint into buf (cap bytes): the CPU model, its ISA as a compact
 * flag list, the cache sizes and logical cores from core_hw_get(), anvil's version, and a 64-bit
 * FNV-1a hash of the names of every variant of every op, so a new kernel list or a new build makes
 * old measurements stale. ANVIL_ERR_LIMIT if cap is too small. */
anvil_status tune_fingerprint(char *buf, size_t cap);

/* An open database. */
typedef struct tune_db tune_db;

/* Opens the tuning database at path, creating the file and its schema if absent (the folder must
 * exist). Refuses, without modifying it, a file that is not an SQLite database or is corrupt, an
 * SQLite file of another application, and one with a newer schema; the message names the path,
 * what is wrong and what to do. *out is owned by the caller (tune_db_close). */
anvil_status tune_db_open(const char *path, tune_db **out);
/* What places the default database: the environment's values (src/api/env.c reads them), each
 * borrowed, NULL where unset. */
typedef struct tune_path_env {
    const char *tuning_db; /* $ANVIL_TUNING_DB */
    const char *xdg_cache_home, *home;
} tune_path_env;
/* The database to use when none is named (path.c): env->tuning_db, else
 * env->xdg_cache_home/anvil/tuning.db, else env->home/.cache/anvil/tuning.db; "" when tuning_db
 * is "off". create: make the folder if it is missing. */
anvil_status tune_db_default_path(const tune_path_env *env, char *buf, size_t cap, bool create);
/* Closes db and frees it. NULL is a no-op. */
void tune_db_close(tune_db *db);
/* The path db was opened with. Owned by db. */
const char *tune_db_path(const tune_db *db);

/* Inserts rec, or replaces the record with the same key and fingerprint. Committed before it
 * returns, so an interrupted tune keeps every record put so far. rec->nearest is ignored. */
anvil_status tune_db_put(tune_db *db, const tune_record *rec);
/* The record of key measured on fingerprint: *found true and *out filled (out->nearest false),
 * or *found false. */
anvil_status tune_db_get(tune_db *db, const char *key, const char *fingerprint, tune_record *out,
                         bool *found);
/* The record of the same family and fingerprint, with the same number of shape numbers, whose
 * shape is nearest to dims[0..n_dims): the smallest sum over dims of |log2(a / b)|, dims <= 0
 * counting as 1. Ties go to the smallest key. *found false if there is none; else out->nearest is
 * true. */
anvil_status tune_db_nearest(tune_db *db, const char *family, const char *fingerprint, int n_dims,
                             const int64_t *dims, tune_record *out, bool *found);
/* Copies every record of the anvil database at other_path into db in one transaction; on a
 * (key, fingerprint) clash the record with the smaller median_ns stays. other_path is opened read
 * only and checked like tune_db_open does. *changed (may be NULL): records inserted or replaced. */
anvil_status tune_db_merge(tune_db *db, const char *other_path, size_t *changed);
/* Deletes every record whose fingerprint is not fingerprint. *removed may be NULL. */
anvil_status tune_db_prune(tune_db *db, const char *fingerprint, size_t *removed);
/* PRAGMA integrity_check, then the application id, schema version, table columns and the rows'
 * shape fields. ANVIL_ERR_IO naming the first problem otherwise. */
anvil_status tune_db_check(tune_db *db);
/* Calls fn(rec, arg) for every record, ordered by key then fingerprint; rec is valid only during
 * the call. Stops at the first status fn returns other than ANVIL_OK and returns it. */
typedef anvil_status (*tune_record_fn)(const tune_record *rec, void *arg);
anvil_status tune_db_foreach(tune_db *db, tune_record_fn fn, void *arg);
/* Number of records. */
anvil_status tune_db_count(tune_db *db, size_t *out);
/* Writes every record as JSON to f: {"schema_version": N, "records": [{...}, ...]}, records
 * ordered by key then fingerprint. */
anvil_status tune_db_export_json(tune_db *db, FILE *f);
/* Largest file tune_db_import_json reads. */
#define TUNE_IMPORT_MAX_BYTES ((size_t)256 << 20)
/* Puts the records of the JSON file at path, in tune_db_export_json's form, into db in one
 * transaction; on a (key, fingerprint) clash the record with the smaller median_ns stays, as in
 * tune_db_merge. The whole file is checked before anything is written, and db is left unchanged
 * when it is refused: ANVIL_ERR_IO when it cannot be read, ANVIL_ERR_INVALID_ARGUMENT when it is
 * larger than TUNE_IMPORT_MAX_BYTES, not JSON, not {"schema_version": N, "records": [...]}, of a
 * schema newer than TUNE_SCHEMA_VERSION, or has a record that lacks a field, has one of the wrong
 * type, a text empty where the record needs one or longer than its TUNE_*_MAX bound, more than
 * TUNE_MAX_DIMS dims, dims, reps or unix_time that are not whole numbers, or a median_ns, spread
 * or max_err that is negative or not finite. Fields the record does not know are ignored. The
 * message names path, the record (records[i], from 0) and the field. *changed and *kept (each
 * may be NULL): records inserted or replaced, and records not written because db's were
 * faster. */
anvil_status tune_db_import_json(tune_db *db, const char *path, size_t *changed, size_t *kept);
/* The same for JSON text already in memory: text (borrowed) holds len bytes and a NUL after them;
 * path names it in messages. tune_db_import_json reads the file and calls this. */
anvil_status tune_db_import_json_text(tune_db *db, const char *text, size_t len, const char *path,
                                      size_t *changed, size_t *kept);
/* Gives tune_db_merge_records the next record: fills *out, or sets *end when there is none. */
typedef anvil_status (*tune_record_next_fn)(void *arg, tune_record *out, bool *end);
/* Puts every record next yields into db in one transaction, keeping on a (key, fingerprint)
 * clash the record with the smaller median_ns (what merge and import share). All or nothing:
 * the first status other than ANVIL_OK, next's or a write's, rolls back and is returned.
 * *changed (may be NULL): records inserted or replaced. */
anvil_status tune_db_merge_records(tune_db *db, tune_record_next_fn next, void *arg,
                                   size_t *changed);

/* ---- the problem key (key.c) ------------------------------------------------------------------
 */

/* The problem a node poses to the tuner, as the database keys it. Text forms, for a ResNet 3x3
 * conv with its bias and a fused Relu on 4 threads:
 *   family  Conv|dilations=1,1;group=1;kernel_shape=3,3;pads=1,1,1,1;strides=1,1|fuse=Relu
 *           |const=0,1,1|in=f32/4,f32/4,f32/1|out=f32/4
 *   key     <family>|shapes=[1,64,56,56],[64,64,3,3],[64]>[1,64,56,56]|t=4
 * (one line each). The family holds the op, every attribute sorted by name, the fused epilogue,
 * which inputs are constants and each input's and output's dtype and rank; the key adds every
 * dim and the thread count. Node names and the opset never enter either, so equal nodes share
 * one key. An omitted optional input or output is written "-". */
typedef struct tune_problem {
    char key[TUNE_KEY_MAX];       /* family + every input and output's dtype and shape + threads */
    char family[TUNE_FAMILY_MAX]; /* op, attributes, fused epilogue, constness of inputs */
    int n_dims;
    /* The input shapes' dims one after the other (omitted inputs skipped): what nearest-shape
     * fallback compares. Only the first TUNE_MAX_DIMS are kept when there are more. */
    int64_t dims[TUNE_MAX_DIMS];
} tune_problem;

/* Fills *out (caller-owned) with kn's problem. ANVIL_ERR_UNSUPPORTED when the node is not
 * tunable: an attribute holds a graph or a tensor (control flow, constants), or a shape is not
 * fully known yet. ANVIL_ERR_LIMIT when a text does not fit its buffer. Every message names the
 * node; on failure *out is zeroed. */
anvil_status tune_problem_of(const kern_node *kn, tune_problem *out);

/* ---- candidates (candidates.c) ---------------------------------------------------------------
 * What the tuner times for one node: every variant of its op that applies on this machine (the
 * reference kernel only when nothing else does: it is the oracle, not a contender), each at every
 * configuration of its kern_space that the hardware rules keep, each on 1..T of the session's T
 * threads. The cascade's choice (kern_select, default configuration, all threads) is always one
 * of them, whatever the rules say. */

typedef enum tune_cand_state {
    TUNE_CAND_ALIVE = 0, /* still in the race (or the winner) */
    TUNE_CAND_FAILED,    /* prepare or run returned an error */
    TUNE_CAND_WRONG,     /* its output differs from the reference kernel's */
    TUNE_CAND_SLOW,      /* pruned: slower than the best by more than the prune factor */
    TUNE_CAND_UNTIMED,   /* tune_search did not reach it */
} tune_cand_state;

typedef struct tune_candidate {
    const kern_variant *v;
    kern_config cfg;
    int threads;  /* threads the node runs on */
    bool cascade; /* the zero-knowledge default */
    tune_cand_state state;
    double median_ns; /* of the timed runs (0 before any) */
    double spread;    /* p90 / median */
    int reps;         /* timed runs */
    double max_err;   /* largest |out - reference| over the output's largest |reference| */
    int round;        /* SLOW: the round after which it was dropped */
    int stage;        /* tune_search's step that timed it last (1..3); 0: none */
} tune_candidate;

#define TUNE_MAX_RULES 32
typedef struct tune_space_stats {
    int raw;  /* configurations before the rules (all variants and thread counts) */
    int kept; /* candidates after them */
    int n_rules;
    struct {
        const char *name; /* the kern_rule's (static) */
        int removed;      /* configurations it was the first to reject */
    } rules[TUNE_MAX_RULES];
} tune_space_stats;

/* Lists kn's candidates for up to max_threads threads into *out (owned by the caller, free) and
 * their count into *n; stats (may be NULL) receives the raw count and what each rule removed.
 * Every candidate is applicable (kern_applies). ANVIL_ERR_UNSUPPORTED if no variant applies. */
anvil_status tune_candidates(const kern_node *kn, int max_threads, tune_candidate **out, int *n,
                             tune_space_stats *stats);

/* The parameter text a record keeps for a candidate: "name=value;..." for the non-default
 * parameters of v's space, then "threads=N" when threads > 0; "" when all are defaults. */
void tune_params_format(const kern_variant *v, const kern_config *cfg, int threads, char *buf,
                        size_t cap);
/* Reads that text back for v: unknown names or bad numbers give ANVIL_ERR_INVALID_ARGUMENT
 * (a record written by another build). *threads 0 when the text has none. */
anvil_status tune_params_parse(const kern_variant *v, const char *text, kern_config *cfg,
                               int *threads);

/* ---- the profiler (profile.c) ----------------------------------------------------------------
 * Times candidates of one node on its real shapes: the constant inputs (weights) are the model's,
 * the others random data in a scratch buffer. Every candidate's first output is compared with the
 * reference kernel's before it is timed, and one that differs can never win. Then rounds: each
 * live candidate runs a few more times per round, interleaved with the others so that a noisy
 * moment hurts them all alike; after round prune_after those slower than the best by more than
 * prune_factor drop out (BestOf's measured pruning); rounds go on until every live candidate's
 * median is known within target_rse, or the caps are reached. */
typedef struct tune_profile_opts {
    core_pool *pool;      /* borrowed; at least the candidates' largest thread count */
    int max_reps;         /* timed runs per candidate at most (default 60) */
    double target_rse;    /* median's relative standard error to reach (default 0.02) */
    double prune_factor;  /* F (default 1.3) */
    int prune_after;      /* P (default 1) */
    double round_seconds; /* time one round gives a candidate (default 0.004) */
    double max_seconds;   /* whole node, checks included (default 4) */
    double tolerance;     /* max_err a candidate may have (default 1e-3) */
    /* max_err a candidate that rounds to bf16 may have, and any candidate checked against an
     * oracle that does (default 5e-2: bf16's 8 significant bits over sums of random signs; a
     * session under precision auto passes its own tolerance) */
    double tolerance_bf16;
    /* The variant whose output is the truth (NULL: the reference kernel). The online tuner
     * checks against the cascade's choice, which is fast and itself tested against the
     * reference, so that checking does not cost a naive convolution per node. */
    const kern_variant *oracle;
    /* Optional: called after every round with the live candidates and the best median so far. */
    void (*progress)(void *arg, int round, int alive, double best_ns);
    void *progress_arg;
} tune_profile_opts;

/* The statistics of n timings (sorts t in place): the median, p90 / median, and the median's
 * relative standard error from the interquartile range (infinity below 5 samples), which one
 * preempted run does not move. Any output may be NULL; n == 0 gives a median of 0. */
void tune_summarize(double *t, int n, double *median, double *spread, double *rse);

/* Fills in o's defaults where its fields are 0. */
void tune_profile_defaults(tune_profile_opts *o);

/* Profiles c[0..n) for kn (state, median_ns, spread, reps, max_err, round filled in) and sets
 * *winner to the fastest live candidate, or -1 when none is live. Errors only for what stops
 * the whole node (out of memory, the reference failing); a candidate's own failure is its
 * state. */
anvil_status tune_profile(const kern_node *kn, tune_candidate *c, int n, const tune_profile_opts *o,
                          int *winner);

/* The same in steps that share one reference run and one time limit (o->max_seconds from
 * creation): create runs the reference kernel, each run profiles a set of candidates.
 * kn is borrowed until free; *out owned by the caller. */
typedef struct tune_profiler tune_profiler;
anvil_status tune_profiler_create(const kern_node *kn, const tune_profile_opts *o,
                                  tune_profiler **out);
anvil_status tune_profiler_run(tune_profiler *t, tune_candidate *c, int n, int *winner);
/* Only the numeric check of c (prepare, one run, compare with the oracle, one warm run, release):
 * sets c->state to ALIVE, WRONG or FAILED, c->max_err, and c->median_ns to the warm run's time
 * (one sample: a first estimate, with reps left 0). */
anvil_status tune_profiler_check(tune_profiler *t, tune_candidate *c);
/* Whether the time limit has passed (later runs then time only their first candidates). */
bool tune_profiler_expired(const tune_profiler *t);
void tune_profiler_free(tune_profiler *t);

/* ---- the search (search.c) --------------------------------------------------------------------
 * Times a node's candidates without timing all of them: the cross product of a GEMM-based
 * convolution's parameters is hundreds of configurations, most of them hopeless. Nested, the
 * parent first: (1) every variant at its default parameters, on each thread count; variants
 * slower than the best by more than the prune factor stop there. (2) For each variant left, its
 * parameters one at a time (coordinate descent from its best default): all values of one
 * parameter with the others fixed, keep the best, go to the next. (3) The finalists, each
 * variant at its best configuration with the cascade, timed again side by side for the verdict.
 * c[0..n) is tune_candidates' list; every candidate timed in any step keeps its numbers, the
 * others are left TUNE_CAND_UNTIMED. */
anvil_status tune_search(const kern_node *kn, tune_candidate *c, int n, const tune_profile_opts *o,
                         int *winner);

/* ---- choosing from the database (select.c) ---------------------------------------------------
 */

/* Why a node runs the variant it runs: what --explain prints. */
typedef enum tune_why {
    TUNE_WHY_CASCADE = 0, /* nothing known: the default rules (kern_select) */
    TUNE_WHY_DB,          /* measured on this machine for exactly this problem */
    TUNE_WHY_NEAREST,     /* measured for the nearest shape of the same op and attributes */
    TUNE_WHY_FORCED,      /* the user named the variant */
    TUNE_WHY_ONLINE,      /* being measured by the online tuner, or locked by it this session */
} tune_why;

/* "cascade", "database", "nearest", "forced", "online". */
const char *tune_why_name(tune_why w);

/* What runs a node. */
typedef struct tune_choice {
    const kern_variant *v;
    kern_config cfg;
    int threads; /* 0: all of the session's */
    tune_why why;
    double median_ns; /* the record's, for DB and NEAREST */
} tune_choice;

/* Looks kn's problem up in db under fingerprint: the exact key, else the nearest shape of its
 * family. *found false (and *out untouched) when neither exists or the record names a variant
 * that this build lacks or that cannot run kn (a stale record is skipped, not an error). */
anvil_status tune_lookup(tune_db *db, const char *fingerprint, const kern_node *kn,
                         tune_choice *out, bool *found);

/* Fills rec (caller-owned) from a profiled winner: key, family and dims from problem, this
 * fingerprint, the candidate's variant, parameters and measurements, source and the time now. */
void tune_record_of(const tune_problem *problem, const char *fingerprint,
                    const tune_candidate *winner, const char *source, tune_record *rec);

/* ---- online tuning: one step's BestOf tuner (online.c) -------------------------------------- */

typedef struct tune_online tune_online;
typedef struct tune_online_opts {
    core_pool *pool;       /* borrowed: the plan-time check runs' threads */
    int rounds;            /* rounds before the fastest is locked */
    int prune_after;       /* rounds before pruning starts; <= 0: 1 */
    double prune_factor;   /* slower than the best by more than this drops out; <= 1: 1.3 */
    bool keep_all;         /* tests: no cut on the check run's time (rt_test_online_keep_all) */
    double tolerance_bf16; /* tune_profile_opts' (<= 0: its default) */
} tune_online_opts;

/* A tuner for the step of node kn (as for prepare; kn->copied, when set, receives the bits every
 * candidate copied): every applicable variant at its defaults, on each thread count, checked
 * against the cascade's choice and prepared. peers[0..n_peers) are the tuners made before in the
 * same plan (borrowed): a step with the same problem as one of them checks only what that one
 * kept, and joins it (one decision) when it offers the same candidates. *out (owned by the
 * caller, tune_online_free) is NULL when there is nothing to choose between; *workspace is raised
 * to the largest candidate's. */
anvil_status tune_online_setup(const tune_online_opts *o, const kern_node *kn,
                               tune_online *const *peers, int n_peers, tune_online **out,
                               size_t *workspace);
void tune_online_free(tune_online *on);
/* The candidate the step runs this time (state borrowed). */
void tune_online_current(const tune_online *on, const kern_variant **v, void **state,
                         bool *fusion_after, int *threads);
/* That candidate's time in this run (a member's goes to its leader). */
void tune_online_sample(tune_online *on, uint64_t ns);
/* After a run, for every tuner: a leader moves to its next candidate, prunes at a round's end and
 * decides to lock (members: no-op). Then tune_online_follow for every tuner: the leader's cursor
 * and pruning (dropped candidates' states released); returns the winner when its group locks,
 * else -1. Members must follow before their leader is freed. */
void tune_online_advance(tune_online *on);
int tune_online_follow(tune_online *on);
bool tune_online_is_member(const tune_online *on);
/* Candidate w's choice (why ONLINE) and prepared state, which moves to the caller. */
void tune_online_take(tune_online *on, int w, tune_choice *choice, void **state,
                      bool *fusion_after);
/* A leader's record of its winner w (source "online"); false for a member, which writes none. */
bool tune_online_record(const tune_online *on, int w, const char *fingerprint, tune_record *rec);

/* ---- a race between a few choices over real runs (race.c) ------------------------------------ */

#define TUNE_RACE_MAX_CHOICES 3
typedef struct tune_race tune_race;
/* n_choices (clamped to 1..TUNE_RACE_MAX_CHOICES; choice 0 is the rule's) raced for `rounds`
 * rounds (clamped to 1..64). *out owned by the caller (tune_race_free). */
anvil_status tune_race_new(int n_choices, int rounds, tune_race **out);
void tune_race_free(tune_race *r);
/* The choice this run takes. */
int tune_race_current(const tune_race *r);
/* Adds a member's time in this run to the current choice's sample. */
void tune_race_sample(tune_race *r, uint64_t ns);
/* After a run: the run's sample recorded, the next choice taken; the winner (the lowest median,
 * choice 0 unless beaten by more than 1%) when the last round ends now, with its median in
 * *winner_ms; else -1 (also once done). */
int tune_race_after_run(tune_race *r, double *winner_ms);
bool tune_race_done(const tune_race *r);
/* Rounds completed. */
int tune_race_rounds(const tune_race *r);

#endif
