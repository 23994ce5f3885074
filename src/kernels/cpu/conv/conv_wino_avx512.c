/* AVX-512 instance of the vector Winograd transforms (conv_wino_vec_tmpl.h); used only on machines
 * with AVX-512. */
#include "conv_layout.h"
#include "conv_vec_avx512.h"
#include "conv_wino_tmpl.h"

#define WINO_SUFFIX avx512
#include "conv_wino_vec_tmpl.h"
