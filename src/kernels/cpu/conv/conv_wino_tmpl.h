/* The Winograd transform matrices as macros over arrays of floats or of vectors (GCC vector types
 * take the same operators): the portable transforms in conv_winograd.c and the vector ones in
 * conv_wino_vec_tmpl.h apply them along the rows and then the columns of a tile.
 *
 * The matrices are Lavin & Gray's:
 *   F(2,3): B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1],  A^T = [1 1 1 0; 0 1 -1 -1]
 *   F(2,3) at stride 2 (5 inputs 4 apart per 2 outputs): B^T d = [d0 - d2, d2, d4 - d2, d1, d3],
 *           A^T = [1 1 0 1 0; 0 1 1 0 1] (conv_winograd.c derives it)
 *   F(4,3): B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0;
 *                  0 4 0 -5 0 1],
 *           A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]
 * written out term by term (a multiplication by a zero entry is not free in IEEE arithmetic, so
 * the compiler would not drop it from a generic matrix product). */
#include <stdint.h>

#define WINO_CAT2(a, b) a##b
#define WINO_CAT(a, b) WINO_CAT2(a, b)

/* o = B^T r for one 4-vector (F(2,3)). */
#define WINO_BT4(r, o)                                                                             \
    do {                                                                                           \
        (o)[0] = (r)[0] - (r)[2];                                                                  \
        (o)[1] = (r)[1] + (r)[2];                                                                  \
        (o)[2] = (r)[2] - (r)[1];                                                                  \
        (o)[3] = (r)[1] - (r)[3];                                                                  \
    } while (0)

/* o = B^T r for one 6-vector (F(4,3)). */
#define WINO_BT6(r, o)                                                                             \
    do {                                                                                           \
        (o)[0] = 4.0f * (r)[0] - 5.0f * (r)[2] + (r)[4];                                           \
        (o)[1] = -4.0f * ((r)[1] + (r)[2]) + (r)[3] + (r)[4];                                      \
        (o)[2] = 4.0f * ((r)[1] - (r)[2]) - (r)[3] + (r)[4];                                       \
        (o)[3] = 2.0f * ((r)[3] - (r)[1]) - (r)[2] + (r)[4];                                       \
        (o)[4] = 2.0f * ((r)[1] - (r)[3]) - (r)[2] + (r)[4];                                       \
        (o)[5] = 4.0f * (r)[1] - 5.0f * (r)[3] + (r)[5];                                           \
    } while (0)

/* o = B^T r for one 5-vector (F(2,3) at stride 2). */
#define WINO_BT5(r, o)                                                                             \
    do {                                                                                           \
        (o)[0] = (r)[0] - (r)[2];                                                                  \
        (o)[1] = (r)[2];                                                                           \
        (o)[2] = (r)[4] - (r)[2];                                                                  \
        (o)[3] = (r)[1];                                                                           \
        (o)[4] = (r)[3];                                                                           \
    } while (0)

/* o = A^T r (F(2,3) at stride 2): 5 -> 2. */
#define WINO_AT5(r, o)                                                                             \
    do {                                                                                           \
        (o)[0] = (r)[0] + (r)[1] + (r)[3];                                                         \
        (o)[1] = (r)[1] + (r)[2] + (r)[4];                                                         \
    } while (0)

/* o = A^T r (F(2,3)): 4 -> 2. */
#define WINO_AT4(r, o)                                                                             \
    do {                                                                                           \
        (o)[0] = (r)[0] + (r)[1] + (r)[2];                                                         \
        (o)[1] = (r)[1] - (r)[2] - (r)[3];                                                         \
    } while (0)

/* o = A^T r (F(4,3)): 6 -> 4. */
#define WINO_AT6(r, o)                                                                             \
    do {                                                                                           \
        const __typeof__((r)[0]) p12 = (r)[1] + (r)[2], m12 = (r)[1] - (r)[2];                     \
        const __typeof__((r)[0]) p34 = (r)[3] + (r)[4], m34 = (r)[3] - (r)[4];                     \
        (o)[0] = (r)[0] + p12 + p34;                                                               \
        (o)[1] = m12 + 2.0f * m34;                                                                 \
        (o)[2] = p12 + 4.0f * p34;                                                                 \
        (o)[3] = m12 + 8.0f * m34 + (r)[5];                                                        \
    } while (0)
