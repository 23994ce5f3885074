/* emit: `anvil compile`, a session's plan for fixed input shapes written out as a standalone C
 * library (emit.c: the plan walk and NET.c / NET.h; emit_files.c: the kernel sources, the build
 * files, the runner program and the README). It sits above the runtime and reads its plans
 * through runtime/plan.h; the public entry is anvil_session_compile (api/session.c). */
#ifndef ANVIL_EMIT_H
#define ANVIL_EMIT_H

#include "runtime/runtime.h"

#include <stdarg.h>

typedef struct emit_options {
    const char *name;   /* C identifier the library's symbols start with (checked) */
    bool embed_weights; /* weights in NET_weights.c instead of the NET.weights file */
} emit_options;

/* Writes the library for the plan of these inputs (the session runs once on them, so the plan
 * is made and checked) into dir, which is created if missing. Nodes that cannot be emitted are
 * listed all at once in an ANVIL_ERR_UNSUPPORTED message, and nothing is written. s, inputs, o
 * and dir borrowed. */
anvil_status emit_library(rt_session *s, const anvil_tensor *const *inputs, const emit_options *o,
                          const char *dir);

/* ---- emit_files.c ---------------------------------------------------------------------------- */

/* A growable text or byte buffer. */
typedef struct emit_buf {
    char *data;
    size_t len, cap;
    bool oom;
} emit_buf;
void emit_buf_printf(emit_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void emit_buf_vprintf(emit_buf *b, const char *fmt, va_list ap);
void emit_buf_bytes(emit_buf *b, const void *p, size_t n);
void emit_buf_free(emit_buf *b);

/* Writes bytes to dir/rel (parent folders created); IO error naming the path on failure. */
anvil_status emit_write_file(const char *dir, const char *rel, const void *data, size_t n);
/* Copies the embedded source `path` (emit_files.h) to dir/src/<dest or path>. */
anvil_status emit_copy_source(const char *dir, const char *path, const char *dest);
/* Whether `path` is among the embedded sources. */
bool emit_source_known(const char *path);

/* What the support files need to know of the library. */
typedef struct emit_lib {
    const char *name;
    const char *const *sources; /* the .c files under src/ to compile, n_sources of them */
    int n_sources;
    bool embed_weights;
    int n_inputs, n_outputs;
    const char *const *output_files; /* [n_outputs] .npy bases */
    double latency_ms;
    size_t arena_bytes, weights_bytes;
    const char *model_name;
} emit_lib;
/* Writes the Makefile, CMakeLists.txt, NET_run.c and README.md. */
anvil_status emit_support_files(const char *dir, const emit_lib *lib);

#endif
