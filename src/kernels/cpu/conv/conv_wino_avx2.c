/* AVX2 instance of the Winograd transforms (conv_wino_tmpl.h); used only on machines with AVX2. */
#include "conv.h"

#define WINO_SUFFIX avx2
#include "conv_wino_tmpl.h"
