/* The row kernels for any x86-64 (baseline flags). */
#define DECONV_ROWS_SUF portable
#include "deconv_rows_tmpl.h"
