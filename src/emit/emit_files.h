/* The source files `anvil compile` copies into the libraries it emits, embedded in anvil at build
 * time (cmake/emit.cmake lists them; tools/embed/embed.c writes the table). */
#ifndef ANVIL_EMIT_FILES_H
#define ANVIL_EMIT_FILES_H

#include <stddef.h>

typedef struct emit_file {
    const char *path; /* under src/: "kernels/cpu/gemm/gemm.c"; the shims under emit/shim/ */
    const char *text; /* bytes, NUL-terminated */
    size_t size;
} emit_file;

/* Terminated by an entry with path NULL. Static data. */
extern const emit_file emit_files[];

#endif
