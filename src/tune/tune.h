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

/* ---- the problem key (key.c) ------------------------------------------------------------------
 */

struct kern_node;

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
anvil_status tune_problem_of(const struct kern_node *kn, tune_problem *out);

#endif
