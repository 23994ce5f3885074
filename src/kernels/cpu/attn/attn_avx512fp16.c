/* The attention jobs with fp16 products (attn.h's attn_isa.bf16 pair layout, IEEE half values):
 * attn_avx512bf16.c's blocks, slots and tiles, whose two products (scores = q k, output =
 * weights v) run vfmadd231ph on pairs instead of vdpbf16ps, twice the multiplies of an fp32 FMA
 * on a CPU with AVX512-FP16. vfmadd231ph keeps each half of a 32-bit lane apart, so a lane holds
 * two fp16 sums of its query (the pair's even and odd terms); ATT_WIDEN adds them in fp32 at the
 * end of each tile's loop: a score sums d / 2 pair steps (32 at head size 64), an output row the
 * kb / 2 pairs of one key block, before joining the fp32 running output. q (scaled) and k are
 * rounded to fp16 along the head size, the softmax's weights and v along the keys (to nearest
 * even); the scale, the masks, the softmax and the rescaling stay fp32. Compiled with
 * AVX512-FP16 flags (cmake/kernels.cmake); without a compiler that knows them the ISA has no
 * block functions and sdpa_fp16 does not apply. */
#include "attn_vec_avx512.h"

#ifdef ANVIL_CC_AVX512FP16

#define ATT_PAIRED 1
#define ATT_DOT(a, b, acc)                                                                         \
    _mm512_castph_ps(                                                                              \
        _mm512_fmadd_ph(_mm512_castps_ph(a), _mm512_castps_ph(b), _mm512_castps_ph(acc)))

/* 16 floats rounded to fp16, to nearest even */
static inline __m256i att_half(__m512 x) {
    return _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

/* The two fp16 sums of each 32-bit lane (low and high half) added in fp32. */
static inline __m512 att_widen(__m512 acc) {
    const __m512i x = _mm512_castps_si512(acc);
    const __m512 lo = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(x));
    const __m512 hi = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(x, 16)));
    return _mm512_add_ps(lo, hi);
}
#define ATT_WIDEN(acc) att_widen(acc)

/* out[i] = the slot (lo[i], hi[i]) in fp16, for 16 lanes; hi NULL: zeros. */
static inline void att_pairs(const float *lo, const float *hi, float *out) {
    __m512i w = _mm512_cvtepu16_epi32(att_half(_mm512_loadu_ps(lo)));
    if (hi)
        w = _mm512_or_si512(
            w, _mm512_slli_epi32(_mm512_cvtepu16_epi32(att_half(_mm512_loadu_ps(hi))), 16));
    _mm512_storeu_si512(out, w);
}
#define ATT_PAIRS(lo, hi, out) att_pairs((lo), (hi), (out))

/* out[i] = the slot (x[2i], x[2i + 1]) for i < (n + 1) / 2, an odd n's last slot paired with 0,
 * read and written as attn_avx512bf16.c's. */
static inline void att_row_pairs(const float *x, int64_t n, float *out) {
    for (int64_t i = 0; i < n; i += 32, x += 32, out += 16) {
        const int64_t left = n - i, nl = left < 16 ? left : 16, nh = left > 32 ? 16 : left - nl;
        const __m512 lo = _mm512_maskz_loadu_ps((__mmask16)((1u << nl) - 1u), x);
        const __m512 hi = _mm512_maskz_loadu_ps((__mmask16)((1u << nh) - 1u), x + 16);
        const int64_t slots = left >= 32 ? 16 : (left + 1) / 2;
        _mm512_mask_storeu_epi32(
            out, (__mmask16)((1u << slots) - 1u),
            _mm512_inserti64x4(_mm512_castsi256_si512(att_half(lo)), att_half(hi), 1));
    }
}
#define ATT_ROW_PAIRS(x, n, out) att_row_pairs((x), (n), (out))

#define ATT_C 4
#include "attn_tmpl.h"
#undef ATT_C
#define ATT_C 1
#include "attn_tmpl.h"
#undef ATT_C

const attn_isa attn_isa_avx512fp16 = {.mb = 4 * VW,
                                      .narrow = VW,
                                      .nb = 120,
                                      .key_tile = ATT_R,
                                      .rows = ATT_RV,
                                      .bf16 = 1,
                                      .block = att_block_4,
                                      .block_narrow = att_block_1};
#else
const attn_isa attn_isa_avx512fp16 = {.mb = 4 * VW, .narrow = VW, .nb = 120, .bf16 = 1};
#endif
