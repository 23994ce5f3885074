/* Copying one element of any size: the reference kernels (ops) and the data family's run-time
 * half (kernels/cpu/data/data_move.c) share it. IR-free and self-contained, because `anvil
 * compile` ships this header verbatim into the libraries it emits. */
#ifndef ANVIL_CORE_COPY_H
#define ANVIL_CORE_COPY_H

#include <stddef.h>
#include <string.h>

/* Copies one element of `size` bytes from src to dst (both borrowed). Fixed-size memcpy calls
 * compile to single moves, and memcpy keeps the copy free of alignment and aliasing
 * assumptions. */
static inline void core_elem_copy(char *dst, const char *src, size_t size) {
    switch (size) {
    case 1:
        *dst = *src;
        break;
    case 2:
        memcpy(dst, src, 2);
        break;
    case 4:
        memcpy(dst, src, 4);
        break;
    case 8:
        memcpy(dst, src, 8);
        break;
    default:
        memcpy(dst, src, size);
        break;
    }
}

#endif
