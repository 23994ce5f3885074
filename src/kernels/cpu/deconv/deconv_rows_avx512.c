/* The row kernels compiled for AVX-512 (the same loops, wider vectors and permutes). */
#define DECONV_ROWS_SUF avx512
#include "deconv_rows_tmpl.h"
