/* The attention jobs with bf16 products (attn.h's attn_isa.bf16): attn_avx512.c's blocks and
 * tiles, whose two products (scores = q k, output = weights v) take bf16 pairs through vdpbf16ps
 * into fp32 sums, twice the multiplies per instruction of an FMA. The scale, the masks, the
 * softmax and the output's rescaling stay fp32; q and k are rounded to bf16 along the head size,
 * the softmax's weights and v along the keys (to nearest even). Compiled with AVX-512 and
 * AVX512-BF16 flags; called only where the CPU has both. */
#include "attn_vec_avx512.h"

#define ATT_PAIRED 1
#define ATT_DOT(a, b, acc) _mm512_dpbf16_ps((acc), (__m512bh)(a), (__m512bh)(b))

/* out[i] = the slot (lo[i], hi[i]) rounded to bf16, for 16 lanes; hi NULL: zeros. */
static inline void att_pairs(const float *lo, const float *hi, float *out) {
    const __m512i l = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(lo)));
    __m512i w = l;
    if (hi) {
        const __m512i h = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(hi)));
        w = _mm512_or_si512(l, _mm512_slli_epi32(h, 16));
    }
    _mm512_storeu_si512(out, w);
}
#define ATT_PAIRS(lo, hi, out) att_pairs((lo), (hi), (out))

/* out[i] = the slot (x[2i], x[2i + 1]) for i < (n + 1) / 2, an odd n's last slot paired with 0:
 * 32 floats a step, masked at the end (nothing past x[n - 1] is read or out's last slot written).
 */
static inline void att_row_pairs(const float *x, int64_t n, float *out) {
    for (int64_t i = 0; i < n; i += 32, x += 32, out += 16) {
        const int64_t left = n - i, nl = left < 16 ? left : 16, nh = left > 32 ? 16 : left - nl;
        const __m512 lo = _mm512_maskz_loadu_ps((__mmask16)((1u << nl) - 1u), x);
        const __m512 hi = _mm512_maskz_loadu_ps((__mmask16)((1u << nh) - 1u), x + 16);
        const int64_t slots = left >= 32 ? 16 : (left + 1) / 2;
        _mm512_mask_storeu_epi32(out, (__mmask16)((1u << slots) - 1u),
                                 (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    }
}
#define ATT_ROW_PAIRS(x, n, out) att_row_pairs((x), (n), (out))

#define ATT_C 4
#include "attn_tmpl.h"
#undef ATT_C
#define ATT_C 1
#include "attn_tmpl.h"
#undef ATT_C

const attn_isa attn_isa_avx512bf16 = {.mb = 4 * VW,
                                      .narrow = VW,
                                      .nb = 120,
                                      .key_tile = ATT_R,
                                      .rows = ATT_RV,
                                      .bf16 = 1,
                                      .block = att_block_4,
                                      .block_narrow = att_block_1};
