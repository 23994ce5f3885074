/* AVX-512 instance of the general depthwise kernels (conv_dwx_tmpl.h). Called only after the
 * variant's KERN_NEEDS_AVX512 matched. */
#include "conv_dwx.h"

#include "conv_vec_avx512.h"
#define DWX_BAND_FN conv_dwx_band_avx512
#define DWX_ROW_FN conv_dwx_row_avx512
#include "conv_rows_tmpl.h"
#include "conv_dwx_tmpl.h"
