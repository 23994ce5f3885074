/* AVX-512 instances of the GEMM template (this file is compiled with AVX-512 flags; the driver
 * calls it only on machines that have AVX-512, see cmake/kernels.cmake).
 *
 * Tiles (GEMM_TILES_AVX512 in gemm.h): 32 zmm registers hold MR*NV accumulators + NV B vectors + 1
 * broadcast. 14x32 (28 acc) maximises FMAs per load; 8x48 and 6x64 trade broadcasts for wider B
 * loads; 12x32/8x32/16x16/ 4x64 serve narrower or shorter problems where a big tile would mostly be
 * padding. 7x32 and 7x48 fit the 49 pixels of a 7x7 image (channels-last convs, whose GEMM rows are
 * pixels) without a padded row: ResNet-50's 512ch 14->7 stride-2 3x3 through conv_nhwc_im2col_gemm,
 * medians of 3 alternated runs, ms, 1 / 2 threads: 6x64 2.70 / -, 4x64 2.35 / 1.25, 7x48 2.44
 * / 1.31 (6 + 5 column panels between 2 threads), 7x32 2.27 / 1.18. 7x64 would need 33 registers.
 */
#include "gemm_vec_avx512.h"

GEMM_TILES_AVX512(GEMM_UKERNEL_INSTANCE)
GEMM_UKERNEL_COLS(avx512)
GEMM_TILE_EPILOGUE(avx512)
GEMM_TILES_AVX512(GEMM_KERNEL_DEF)
