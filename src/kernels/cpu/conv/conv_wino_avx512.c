/* AVX512 instance of the Winograd transforms (conv_wino_tmpl.h); used only on machines with AVX512.
 */
#include "conv.h"

#define WINO_SUFFIX avx512
#include "conv_wino_tmpl.h"
