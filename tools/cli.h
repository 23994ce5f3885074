/* The anvil command-line tool: shared pieces of the subcommands.
 *
 * Conventions: results go to stdout, notes and errors to stderr. Exit codes: 0 success, 2 usage
 * error, 10 + anvil_status for a failure the library reported (11 invalid argument ... 19
 * internal), 1 for other failures. */
#ifndef ANVIL_CLI_H
#define ANVIL_CLI_H

#include "anvil.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum { CLI_EXIT_OK = 0, CLI_EXIT_FAIL = 1, CLI_EXIT_USAGE = 2, CLI_EXIT_STATUS_BASE = 10 };

/* One subcommand: name, one-line summary, its main (argv[0] is the subcommand name) and its
 * help text writer. */
typedef struct cli_command {
    const char *name;
    const char *summary;
    int (*main)(int argc, char **argv);
    void (*usage)(FILE *f);
} cli_command;

int cli_info_main(int argc, char **argv);
void cli_info_usage(FILE *f);
int cli_run_main(int argc, char **argv);
void cli_run_usage(FILE *f);
int cli_bench_main(int argc, char **argv);
void cli_bench_usage(FILE *f);
int cli_dump_main(int argc, char **argv);
void cli_dump_usage(FILE *f);
int cli_db_main(int argc, char **argv);
void cli_db_usage(FILE *f);
int cli_tune_main(int argc, char **argv);
void cli_tune_usage(FILE *f);
int cli_train_main(int argc, char **argv);
void cli_train_usage(FILE *f);
int cli_sysinfo_main(int argc, char **argv);
void cli_sysinfo_usage(FILE *f);
int cli_compile_main(int argc, char **argv);
void cli_compile_usage(FILE *f);
void cli_sysinfo_usage(FILE *f);

/* ---- errors -----------------------------------------------------------------------------------
 */

/* Prints "anvil: error: <status name>: <anvil_last_error()>" to stderr; returns the exit code. */
int cli_fail_status(anvil_status s);
/* Prints "anvil: error: <status name>: <message>" for a failure found by the tool itself (the
 * status classifies it); returns the exit code for s. */
int cli_fail(anvil_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints "anvil <cmd>: <message>" and a pointer to "anvil <cmd> -h" to stderr; returns 2. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints "anvil: note: <message>" to stderr. */
void cli_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The exit code for a status. */
int cli_exit_code(anvil_status s);

/* ---- argument parsing -------------------------------------------------------------------------
 */

/* Option table entry. long_name without the leading "--"; short_name 0 when there is none. */
typedef struct cli_option {
    const char *long_name;
    char short_name;
    bool takes_value;
    int id;
} cli_option;

/* Walks argv[1..] of a subcommand. Accepts "--name value", "--name=value", "-x value", "-xvalue",
 * positional arguments anywhere, and "--" to end options. */
typedef struct cli_parser {
    const char *cmd;
    int argc;
    char **argv; /* borrowed */
    int next;
    bool only_positional;
    const cli_option *opts; /* borrowed, terminated by an entry with id 0 */
} cli_parser;

enum { CLI_ARG_END = 0, CLI_ARG_POSITIONAL = -1, CLI_ARG_ERROR = -2, CLI_ARG_HELP = -3 };

void cli_parser_init(cli_parser *p, const char *cmd, int argc, char **argv, const cli_option *opts);
/* Returns an option id (> 0) with *value set for options that take one, CLI_ARG_POSITIONAL with
 * *value the argument, CLI_ARG_HELP for -h/--help, CLI_ARG_END when done, or CLI_ARG_ERROR after
 * printing a usage error (unknown option, missing value, value given to a flag). *value points
 * into argv. */
int cli_parser_next(cli_parser *p, const char **value);

/* Parses a whole decimal integer in [lo, hi]; on failure prints a usage error naming `what` and
 * returns false. */
/* --passes SPEC: checks it (api_passes_parse) and sets *off; false after printing a usage error
 * that names the unknown pass and lists the passes. */
#define CLI_PASSES_HELP                                                                            \
    "  --passes LIST              graph rewrites on/off by name, e.g. -fuse_attention or\n"        \
    "                             none,+fold_conv_bn (an unknown name lists the passes)\n"
bool cli_parse_passes(const char *cmd, const char *spec, uint32_t *off);

/* --precision P (run, bench, tune, train, compile) and --tolerance X (bench, tune): the
 * arithmetic a session accepts and precision auto's error bound (anvil_options_set_precision,
 * anvil_options_set_tolerance). */
#define CLI_PRECISION_HELP                                                                         \
    "  --precision P              fp32 (default), bf16 (MatMul/Gemm round their operands to\n"     \
    "                             bfloat16 and accumulate in fp32, where the CPU has\n"            \
    "                             AVX512_BF16 or AMX), fp16 (IEEE half instead, where the CPU\n"   \
    "                             has AVX512-FP16), auto (bf16 or fp16 where\n"                    \
    "                             tuning finds it faster within the tolerance), int8 (MatMuls\n"   \
    "                             with constant weights quantized dynamically, AVX512-VNNI)\n"
#define CLI_TOLERANCE_HELP                                                                         \
    "  --tolerance X              precision auto's error bound, relative to an output's scale\n"   \
    "                             (default 0.01)\n"
/* Checks that s names a precision (fp32, bf16, fp16, auto, int8): false after a usage error. The
 * API refuses fp16 itself where it cannot serve it (training), with its reason. */
bool cli_parse_precision(const char *cmd, const char *s);
/* A positive finite number into *out: false after a usage error. */
bool cli_parse_tolerance(const char *cmd, const char *s, double *out);
/* Sets precision (NULL: leave the default) and tolerance (0: leave the default) on opts. */
anvil_status cli_precision_apply(const char *precision, double tolerance, anvil_options *opts);
bool cli_parse_int(const char *cmd, const char *what, const char *s, long long lo, long long hi,
                   long long *out);

/* Splits "NAME=VALUE" at the last '=' (names may contain '='; file names and shapes rarely do).
 * Returns false (after a usage error) if there is no '=' or either side is empty. *name is a
 * new string owned by the caller (free); *value points into s. */
bool cli_split_assign(const char *cmd, const char *what, const char *s, char **name,
                      const char **value);

/* --variant NODE_OR_OP=NAME arguments (split at the last '='). */
#define CLI_MAX_VARIANTS 256
typedef struct cli_variants {
    char *keys[CLI_MAX_VARIANTS];        /* owned */
    const char *names[CLI_MAX_VARIANTS]; /* point into argv */
    size_t n;
} cli_variants;
bool cli_variants_add(cli_variants *v, const char *cmd, const char *arg);
/* anvil_options_set_variant for each, in order (a later one for the same key wins). */
anvil_status cli_variants_apply(const cli_variants *v, anvil_options *opts);
void cli_variants_free(cli_variants *v);

/* The tuning options run and bench share: --db FILE, --no-db, --tune online|off,
 * --tune-rounds N. */
typedef struct cli_tuning {
    const char *db; /* points into argv; NULL: the default */
    bool no_db;
    bool online;
    long long rounds; /* online rounds (default 3) */
} cli_tuning;
enum { CLI_OPT_DB = 1000, CLI_OPT_NO_DB, CLI_OPT_TUNE, CLI_OPT_TUNE_ROUNDS };
#define CLI_TUNING_OPTIONS                                                                         \
    {"db", 0, true, CLI_OPT_DB}, {"no-db", 0, false, CLI_OPT_NO_DB},                               \
        {"tune", 0, true, CLI_OPT_TUNE}, {                                                         \
        "tune-rounds", 0, true, CLI_OPT_TUNE_ROUNDS                                                \
    }
#define CLI_TUNING_HELP                                                                            \
    "  --db FILE                  the tuning database (default: $ANVIL_TUNING_DB, else\n"          \
    "                             $XDG_CACHE_HOME/anvil/tuning.db when it exists)\n"               \
    "  --no-db                    no tuning database: the built-in rules only\n"                   \
    "  --tune online|off          online: nodes the database lacks try their candidates over\n"    \
    "                             the runs, lock the fastest and write it to the database\n"       \
    "  --tune-rounds N            rounds of online tuning before locking (default 3)\n"
/* The tuning database a command that writes one uses: `given` (--db FILE) when non-NULL, else
 * the default (anvil_tuning_db_default_path, its folder created). An error when the path is too
 * long or $ANVIL_TUNING_DB is "off" (such a command needs a file). 0 or the exit code. */
int cli_tuning_db_path(const char *given, char *buf, size_t cap);
/* Handles option id if it is one of CLI_TUNING_OPTIONS: returns 1 when taken, 0 when id is not
 * a tuning option, -1 after a usage error. */
int cli_tuning_option(cli_tuning *t, const char *cmd, int id, const char *val);
/* Applies them to opts. */
anvil_status cli_tuning_apply(const cli_tuning *t, anvil_options *opts);

/* Parses "1x3x224x224" (or "1,3,224,224"; "" or "scalar" for rank 0) into dims. */
bool cli_parse_shape(const char *cmd, const char *s, int *rank, int64_t dims[ANVIL_MAX_RANK]);

/* ---- models and values ------------------------------------------------------------------------
 */

/* Formats a declared shape with symbolic dims by name: "[N,3,224,224]", "[?]" for unknown rank. */
const char *cli_value_shape(const anvil_value_info *vi, char *buf, size_t cap);
/* Formats concrete dims: "[1,3,224,224]". */
const char *cli_dims_str(int rank, const int64_t *dims, char *buf, size_t cap);

/* A list of NAME=FILE.npy inputs from the command line. The split between name and file is
 * made against the model's input names (cli_inputs_resolve), so either may contain '='. */
typedef struct cli_input_arg {
    const char *arg;  /* "NAME=FILE", points into argv */
    char *name;       /* owned; set by cli_inputs_resolve */
    const char *path; /* points into arg; set by cli_inputs_resolve */
} cli_input_arg;

typedef struct cli_inputs {
    cli_input_arg *items; /* owned */
    size_t n, cap;
} cli_inputs;

/* Records "NAME=FILE" (usage error if there is no '=' with text on both sides). */
bool cli_inputs_add(cli_inputs *in, const char *cmd, const char *arg);
void cli_inputs_free(cli_inputs *in);

/* Splits every argument at the '=' that leaves a model input name on the left. Unknown names get
 * an error listing the model's inputs, a name given twice an error too. Returns 0 or the exit
 * code. */
int cli_inputs_resolve(const anvil_model *model, cli_inputs *in);

/* Reads every input's .npy file into tensors[i] (owned by the caller, freed with
 * anvil_tensor_free; NULL where none). Returns 0 or the exit code after an error. */
int cli_inputs_read(const cli_inputs *in, anvil_tensor **tensors);

/* --shape NAME=DIMS arguments: the dims of a generated input. */
typedef struct cli_shape {
    char *name; /* owned */
    int rank;
    int64_t dims[ANVIL_MAX_RANK];
} cli_shape;
typedef struct cli_shapes {
    cli_shape *items; /* owned */
    size_t n;
} cli_shapes;
/* Records "NAME=DIMS" (usage error naming cmd if malformed or NAME given twice). */
bool cli_shapes_add(cli_shapes *s, const char *cmd, const char *arg);
void cli_shapes_free(cli_shapes *s);

/* Per model input: the tensor fed and where it came from. */
typedef struct cli_model_input {
    const char *name; /* owned by the model */
    anvil_tensor *t;  /* owned */
    bool from_file;
} cli_model_input;

/* Fills bi[0..n) (n = the model's input count, bi zeroed by the caller) with the files of
 * `files` (resolved with cli_inputs_resolve) and, for the other inputs, seeded random data of
 * the --shape dims or the declared ones (symbolic dims 1, with a note): floats uniform in
 * [-1,1], integers in [0,3], booleans random. Returns 0 or the exit code after an error. */
int cli_model_inputs(const cli_inputs *files, const cli_shapes *shapes, const anvil_model *m,
                     cli_model_input *bi, size_t n);
/* Frees the tensors and bi itself. */
void cli_model_inputs_free(cli_model_input *bi, size_t n);

/* File name for an output: every character outside [A-Za-z0-9_-] becomes '_' ("" -> "output").
 * Writes at most cap-1 characters. */
void cli_sanitize_name(const char *name, char *buf, size_t cap);

/* Creates a directory and its missing parents (like mkdir -p). 0 or an exit code after an error. */
int cli_mkdirs(const char *path);

/* "15.67 M" style rendering of a count (SI prefixes, 3 significant digits), and "2.98 KiB"
 * style rendering of a byte count (binary prefixes). Return buf. */
const char *cli_human_si(double v, char *buf, size_t cap);
const char *cli_human_bytes(double bytes, char *buf, size_t cap);

/* Milliseconds between two core_now_ns() readings. */
double cli_ms(uint64_t t0, uint64_t t1);

#endif
