/* anvil sysinfo: prints the library's own description of the machine (anvil_sysinfo), so the
 * CLI and API users see exactly the same text. */
#include "cli.h"

#include <stdlib.h>

void cli_sysinfo_usage(FILE *f) {
    fprintf(f, "usage: anvil sysinfo\n"
               "\n"
               "Prints the CPU model, logical and physical cores, cache sizes, every ISA feature\n"
               "anvil can use as 'NAME = 0|1' (after the ANVIL_ISA cap), and the backends and\n"
               "libraries built in, one 'key = value' per line.\n");
}

int cli_sysinfo_main(int argc, char **argv) {
    static const cli_option opts[] = {{0}};
    cli_parser p;
    cli_parser_init(&p, "sysinfo", argc, argv, opts);
    const char *val;
    for (int id; (id = cli_parser_next(&p, &val)) != CLI_ARG_END;) {
        if (id == CLI_ARG_HELP) {
            cli_sysinfo_usage(stdout);
            return CLI_EXIT_OK;
        }
        if (id == CLI_ARG_ERROR) return CLI_EXIT_USAGE;
        return cli_usage_error("sysinfo", "unexpected argument '%s'", val);
    }
    size_t need = anvil_sysinfo(NULL, 0);
    char *buf = malloc(need + 1);
    if (!buf) return cli_fail(ANVIL_ERR_OUT_OF_MEMORY, "out of memory");
    anvil_sysinfo(buf, need + 1);
    fputs(buf, stdout);
    free(buf);
    return CLI_EXIT_OK;
}
