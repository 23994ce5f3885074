/* AVX2 instance of the depthwise band kernel (conv_dw_tmpl.h) and row copy
 * (conv_rows_tmpl.h). Called only after
 * the variant's KERN_NEEDS_AVX2 matched. */
#include "conv_layout.h"

#include "conv_vec_avx2.h"
#define DW_BAND_FN conv_dw_band_avx2
#include "conv_rows_tmpl.h"
#include "conv_dw_tmpl.h"
#define DWN_ROW_FN conv_dwn_row_avx2
#include "conv_dwn_tmpl.h"
