/* anvil db: looks after the tuning database from the shell through the public API
 * (anvil_tuning_db_*): what it holds, a JSON export and its import, an integrity check, merging
 * another machine's or run's file, and pruning records of other machines. */
#include "cli.h"

#include "core/core.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

void cli_db_usage(FILE *f) {
    fprintf(f,
            "usage: anvil db show [--db FILE]\n"
            "       anvil db export --json [--db FILE]\n"
            "       anvil db import FILE.json [--db FILE]\n"
            "       anvil db check [--db FILE]\n"
            "       anvil db merge OTHER_FILE [--db FILE]\n"
            "       anvil db prune [--db FILE]\n"
            "\n"
            "The tuning database keeps the kernel variants measured fastest per problem and\n"
            "machine. show: its path, this machine's fingerprint and one line per record\n"
            "(variant, median time, key; '*' marks records of this machine). export --json:\n"
            "every record as JSON on stdout. import: puts the records of such a JSON file in,\n"
            "all or none; on a clash the faster stays ('kept': the database's was faster).\n"
            "check: SQLite's integrity check and anvil's schema. merge: copies OTHER_FILE's\n"
            "records in, keeping the faster on a clash. prune: deletes the records of every\n"
            "other fingerprint.\n"
            "\n"
            "The file is --db FILE, else $ANVIL_TUNING_DB, else $XDG_CACHE_HOME/anvil/tuning.db\n"
            "(~/.cache/anvil/tuning.db); it is created when absent. ANVIL_TUNING_DB=off turns\n"
            "the database off for sessions.\n");
}

typedef struct db_show_ctx {
    const char *fingerprint;
    size_t total, mine;
} db_show_ctx;

static anvil_status db_show_one(const anvil_tuning_record *r, void *arg) {
    db_show_ctx *c = arg;
    bool mine = strcmp(r->fingerprint, c->fingerprint) == 0;
    c->total++;
    c->mine += mine;
    printf("%c %-32s %12.0f ns  %s\n", mine ? '*' : ' ', r->variant, r->median_ns, r->key);
    return ANVIL_OK;
}

static int db_show(anvil_tuning_db *db) {
    char fp[ANVIL_TUNING_FINGERPRINT_MAX];
    anvil_status s = anvil_tuning_fingerprint(fp, sizeof fp);
    if (s != ANVIL_OK) return cli_fail_status(s);
    printf("database: %s\nschema version: %d\nthis machine: %s\n", anvil_tuning_db_path(db),
           anvil_tuning_db_schema_version(), fp);
    db_show_ctx c = {fp, 0, 0};
    s = anvil_tuning_db_foreach(db, db_show_one, &c);
    if (s != ANVIL_OK) return cli_fail_status(s);
    printf("records: %zu (%zu of this machine)\n", c.total, c.mine);
    return CLI_EXIT_OK;
}

/* export --json: the text onto stdout; arg is the database's path. */
static anvil_status db_write_stdout(const char *text, size_t len, void *arg) {
    if (fwrite(text, 1, len, stdout) != len || fflush(stdout) != 0)
        return core_err(ANVIL_ERR_IO, "exporting the tuning database '%s': write failed: %s",
                        (const char *)arg, strerror(errno));
    return ANVIL_OK;
}

enum { OPT_DB = 1, OPT_JSON };

int cli_db_main(int argc, char **argv) {
    static const cli_option opts[] = {{"db", 0, true, OPT_DB}, {"json", 0, false, OPT_JSON}, {0}};
    cli_parser p;
    cli_parser_init(&p, "db", argc, argv, opts);
    const char *val, *action = NULL, *other = NULL, *db_path = NULL;
    bool json = false;
    for (int id; (id = cli_parser_next(&p, &val)) != CLI_ARG_END;) {
        if (id == CLI_ARG_HELP) {
            cli_db_usage(stdout);
            return CLI_EXIT_OK;
        }
        if (id == CLI_ARG_ERROR) return CLI_EXIT_USAGE;
        if (id == OPT_DB)
            db_path = val;
        else if (id == OPT_JSON)
            json = true;
        else if (!action)
            action = val;
        else if (!other && (!strcmp(action, "merge") || !strcmp(action, "import")))
            other = val;
        else
            return cli_usage_error("db", "unexpected argument '%s'", val);
    }
    if (!action)
        return cli_usage_error("db", "name an action: show, export, import, check, merge, prune");
    bool known = !strcmp(action, "show") || !strcmp(action, "export") ||
                 !strcmp(action, "import") || !strcmp(action, "check") ||
                 !strcmp(action, "merge") || !strcmp(action, "prune");
    if (!known)
        return cli_usage_error(
            "db", "unknown action '%s' (show, export, import, check, merge, prune)", action);
    if (!strcmp(action, "export") && !json)
        return cli_usage_error("db", "export writes JSON only: pass --json");
    if (json && strcmp(action, "export") != 0)
        return cli_usage_error("db", "--json belongs to export");
    if (!strcmp(action, "merge") && !other)
        return cli_usage_error("db", "merge needs the file to merge from");
    if (!strcmp(action, "import") && !other)
        return cli_usage_error("db", "import needs the JSON file to import (from export --json)");

    char path[PATH_MAX];
    int prc = cli_tuning_db_path(db_path, path, sizeof path);
    if (prc != 0) return prc;
    anvil_tuning_db *db = NULL;
    anvil_status s = anvil_tuning_db_open(path, &db);
    if (s != ANVIL_OK) return cli_fail_status(s);
    int rc = CLI_EXIT_OK;
    if (!strcmp(action, "show")) {
        rc = db_show(db);
    } else if (!strcmp(action, "export")) {
        s = anvil_tuning_db_export_json(db, db_write_stdout, path);
    } else if (!strcmp(action, "check")) {
        size_t n = 0;
        s = anvil_tuning_db_check(db);
        if (s == ANVIL_OK) s = anvil_tuning_db_count(db, &n);
        if (s == ANVIL_OK) printf("%s: ok, %zu records\n", path, n);
    } else if (!strcmp(action, "import")) {
        size_t changed = 0, kept = 0;
        s = anvil_tuning_db_import_json(db, other, &changed, &kept);
        if (s == ANVIL_OK)
            printf("imported %s into %s: %zu records inserted or replaced, %zu kept\n", other, path,
                   changed, kept);
    } else if (!strcmp(action, "merge")) {
        size_t changed = 0;
        s = anvil_tuning_db_merge(db, other, &changed);
        if (s == ANVIL_OK)
            printf("merged %s into %s: %zu records added or replaced\n", other, path, changed);
    } else {
        char fp[ANVIL_TUNING_FINGERPRINT_MAX];
        size_t removed = 0;
        s = anvil_tuning_fingerprint(fp, sizeof fp);
        if (s == ANVIL_OK) s = anvil_tuning_db_prune(db, fp, &removed);
        if (s == ANVIL_OK) printf("%s: removed %zu records of other machines\n", path, removed);
    }
    if (s != ANVIL_OK) rc = cli_fail_status(s);
    anvil_tuning_db_close(db);
    return rc;
}
