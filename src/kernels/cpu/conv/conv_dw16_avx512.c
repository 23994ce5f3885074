/* AVX-512 instance of the channels-last depthwise kernel (conv_dwn_tmpl.h) over X stored in bf16
 * (conv_last_row16_fn): each load widens 16 bf16 channels to fp32 (a bf16 value is the high half
 * of its float), and everything after it is the fp32 kernel's. Called only after the variant's
 * KERN_NEEDS_AVX512 matched; the placement (plan_store.c) stores X in bf16 only on CPUs with
 * AVX512-BF16 and in sessions that accept bf16. */
#include "conv_layout.h"

#include "conv_vec_avx512.h"

#define DWN_XT uint16_t
#define DWN_LOADX(p, m)                                                                            \
    _mm512_castsi512_ps(                                                                           \
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16((m), (p))), 16))
#define DWN_ROW_FN conv_dwn_row16_avx512
#include "conv_dwn_tmpl.h"
