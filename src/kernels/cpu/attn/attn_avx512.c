/* The attention jobs for AVX-512 (attn_vec_avx512.h gives the blocks' and tiles' sizes). */
#include "attn_vec_avx512.h"

#define ATT_C 4
#include "attn_tmpl.h"
#undef ATT_C
#define ATT_C 1
#include "attn_tmpl.h"
#undef ATT_C

const attn_isa attn_isa_avx512 = {.mb = 4 * VW,
                                  .narrow = VW,
                                  .nb = 120,
                                  .key_tile = ATT_R,
                                  .rows = ATT_RV,
                                  .block = att_block_4,
                                  .block_narrow = att_block_1};
