/* anvil: one binary, one subcommand per task. This file only dispatches; each subcommand lives
 * in its own cmd_<name>.c. */
#include "cli.h"

#include "api/env.h"

#include <string.h>

static const cli_command commands[] = {
    {"info", "describe a model: inputs, outputs, ops, parameters, FLOPs", cli_info_main,
     cli_info_usage},
    {"run", "run a model on .npy inputs and write its outputs as .npy files", cli_run_main,
     cli_run_usage},
    {"bench", "measure load time, first-run time and latency of a model", cli_bench_main,
     cli_bench_usage},
    {"dump", "print a model's graph as text or Graphviz dot", cli_dump_main, cli_dump_usage},
    {"tune", "measure the fastest implementation of each of a model's problems", cli_tune_main,
     cli_tune_usage},
    {"db", "show, export, check, merge or prune the tuning database", cli_db_main, cli_db_usage},
    {"train", "train a model's weights on .npz data and write the trained model", cli_train_main,
     cli_train_usage},
    {"compile", "write a model as a standalone C library (for fixed input shapes)",
     cli_compile_main, cli_compile_usage},
    {"sysinfo", "show the CPU, its ISA features, its peaks and the backends built in",
     cli_sysinfo_main, cli_sysinfo_usage},
};
#define N_COMMANDS (sizeof commands / sizeof *commands)

static void usage(FILE *f) {
    fprintf(f, "usage: anvil COMMAND [ARGS...]\n"
               "       anvil COMMAND -h      help on one command\n"
               "       anvil --version\n"
               "\n"
               "commands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n"
               "Results go to stdout; notes and errors go to stderr.\n"
               "\n"
               "exit codes:\n"
               "   0  success\n"
               "   1  failure outside the library (e.g. writing a report)\n"
               "   2  usage error (unknown option, missing or malformed value)\n"
               "  11  invalid argument (e.g. an input the model does not have, a bad .npy)\n"
               "  12  invalid model\n"
               "  13  unsupported (valid ONNX that anvil does not handle)\n"
               "  14  shape or dtype mismatch\n"
               "  15  out of memory\n"
               "  16  I/O error (a file could not be read or written)\n"
               "  17  a limit was exceeded\n"
               "  18  runtime failure (e.g. an index out of range)\n"
               "  19  internal error (a bug in anvil; please report it)\n"
               "\n"
               "environment: ANVIL_LOG=error|warn|info|debug, ANVIL_ISA=avx2|avx512|scalar,\n"
               "             ANVIL_LAYOUT=auto|nchw|nhwc (the conv layout pass); the README lists\n"
               "             every variable\n");
}

int main(int argc, char **argv) {
    api_env_init();
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        if (argc > 2 && strcmp(cmd, "help") == 0) {
            for (size_t i = 0; i < N_COMMANDS; i++) {
                if (!strcmp(argv[2], commands[i].name)) {
                    commands[i].usage(stdout);
                    return CLI_EXIT_OK;
                }
            }
            fprintf(stderr, "anvil: unknown command '%s'; run 'anvil -h' for the list\n", argv[2]);
            return CLI_EXIT_USAGE;
        }
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V") || !strcmp(cmd, "version")) {
        printf("anvil %s\n", anvil_version());
        return CLI_EXIT_OK;
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(cmd, commands[i].name)) return commands[i].main(argc - 1, argv + 1);
    if (cmd[0] == '-')
        fprintf(stderr, "anvil: unknown option '%s'\n", cmd);
    else
        fprintf(stderr, "anvil: unknown command '%s'\n", cmd);
    fprintf(stderr, "run 'anvil -h' for the list of commands\n");
    return CLI_EXIT_USAGE;
}
