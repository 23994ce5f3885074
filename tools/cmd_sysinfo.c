/* anvil sysinfo: prints the library's own description of the machine (anvil_sysinfo), so the
 * CLI and API users see exactly the same text. --json turns the same "key = value" lines into one
 * flat JSON object rather than describing the machine a second time, so the two cannot drift. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

void cli_sysinfo_usage(FILE *f) {
    fprintf(f, "usage: anvil sysinfo [--json]\n"
               "\n"
               "Prints the CPU model, logical and physical cores, cache sizes, every ISA feature\n"
               "anvil can use as 'NAME = 0|1' (after the ANVIL_ISA cap), one core's measured\n"
               "multiply-accumulate peak per number format (peak.fp32.gflops, peak.bf16.gflops,\n"
               "peak.fp16.gflops, peak.int8.gops; 0 where absent) with the loop that gave it\n"
               "(peak.FORMAT.isa), and the backends and libraries built in, one 'key = value' per\n"
               "line.\n"
               "\n"
               "  --json  the same keys and values as one JSON object (numbers as numbers)\n");
}

/* Whether v is a plain decimal number ("12", "-3.5"), which JSON can carry as one. */
static bool sysinfo_is_number(const char *v, size_t n) {
    size_t i = n > 0 && v[0] == '-' ? 1 : 0, digits = 0, dots = 0;
    /* JSON has no leading zeros: "007" stays a string */
    if (i + 1 < n && v[i] == '0' && v[i + 1] >= '0' && v[i + 1] <= '9') return false;
    for (; i < n; i++) {
        if (v[i] >= '0' && v[i] <= '9')
            digits++;
        else if (v[i] == '.' && digits > 0 && dots++ == 0 && i + 1 < n)
            continue;
        else
            return false;
    }
    return digits > 0;
}

static void sysinfo_json_str(const char *s, size_t n) {
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

/* text: anvil_sysinfo's lines, each "key = value". */
static void sysinfo_print_json(const char *text) {
    printf("{");
    bool first = true;
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        const char *eq = memchr(line, '=', len);
        if (eq && eq > line + 1 && eq[-1] == ' ' && eq + 1 < line + len && eq[1] == ' ') {
            const char *val = eq + 2;
            size_t vlen = (size_t)(line + len - val);
            printf("%s\n  ", first ? "" : ",");
            sysinfo_json_str(line, (size_t)(eq - 1 - line));
            printf(": ");
            if (sysinfo_is_number(val, vlen))
                printf("%.*s", (int)vlen, val);
            else
                sysinfo_json_str(val, vlen);
            first = false;
        }
        line += len + (end ? 1 : 0);
    }
    printf("\n}\n");
}

int cli_sysinfo_main(int argc, char **argv) {
    enum { OPT_JSON = 1 };
    static const cli_option opts[] = {{"json", 0, false, OPT_JSON}, {0}};
    cli_parser p;
    cli_parser_init(&p, "sysinfo", argc, argv, opts);
    const char *val;
    bool json = false;
    for (int id; (id = cli_parser_next(&p, &val)) != CLI_ARG_END;) {
        if (id == CLI_ARG_HELP) {
            cli_sysinfo_usage(stdout);
            return CLI_EXIT_OK;
        }
        if (id == CLI_ARG_ERROR) return CLI_EXIT_USAGE;
        if (id == OPT_JSON) {
            json = true;
            continue;
        }
        return cli_usage_error("sysinfo", "unexpected argument '%s'", val);
    }
    size_t need = anvil_sysinfo(NULL, 0);
    char *buf = malloc(need + 1);
    if (!buf) return cli_fail(ANVIL_ERR_OUT_OF_MEMORY, "out of memory");
    anvil_sysinfo(buf, need + 1);
    if (json)
        sysinfo_print_json(buf);
    else
        fputs(buf, stdout);
    free(buf);
    return CLI_EXIT_OK;
}
