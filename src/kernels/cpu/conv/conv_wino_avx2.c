/* AVX2 instance of the vector Winograd transforms (conv_wino_vec_tmpl.h); used only on machines
 * with AVX2 and FMA. */
#include "conv_layout.h"
#include "conv_vec_avx2.h"
#include "conv_wino_tmpl.h"

#define WINO_SUFFIX avx2
#include "conv_wino_vec_tmpl.h"
