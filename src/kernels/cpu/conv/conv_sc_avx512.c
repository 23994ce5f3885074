/* AVX-512 instance of the few-input-channels conv kernel (conv_sc_tmpl.h): blocks of 8 output
 * channels x 3 vectors. Called only after the variant's KERN_NEEDS_AVX512 matched. */
#include "conv_layout.h"

#include "conv_vec_avx512.h"
#include "conv_rows_tmpl.h"
#define SC_MB CONV_SC_MB_AVX512
#define SC_BAND_FN conv_sc_band_avx512
#include "conv_sc_tmpl.h"
