/* AVX2 instance of the few-input-channels conv kernel (conv_sc_tmpl.h): blocks of 4 output
 * channels x 3 vectors. Called only after the variant's KERN_NEEDS_AVX2 matched. */
#include "conv_layout.h"

#include "conv_vec_avx2.h"
#include "conv_rows_tmpl.h"
#define SC_MB CONV_SC_MB_AVX2
#define SC_BAND_FN conv_sc_band_avx2
#include "conv_sc_tmpl.h"
