/* The eltwise kernels for AVX-512 (16 float lanes; tails through mask registers). */
#include "eltwise_vec_avx512.h"

#define VW 16
#define M __mmask16
#define V_LOADU(p) _mm512_loadu_ps(p)
#define V_STOREU(p, v) _mm512_storeu_ps((p), (v))
#define V_TAILMASK(n) ((__mmask16)((1u << (n)) - 1u))
#define V_MLOAD(p, m, fill) _mm512_mask_loadu_ps((fill), (m), (p))
#define V_MSTORE(p, m, v) _mm512_mask_storeu_ps((p), (m), (v))
#define V_IDX(s)                                                                                   \
    _mm512_castsi512_ps(_mm512_mullo_epi32(                                                        \
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),                   \
        _mm512_set1_epi32(s)))
#define V_GATHER(base, idx, m, full, fill)                                                         \
    _mm512_mask_i32gather_ps((fill), (full) ? (__mmask16)0xffff : (m), _mm512_castps_si512(idx),   \
                             (base), 4)
/* The even lanes of the 2 * VW floats lo:hi (one two-source permute). */
#define V_EVEN2(lo, hi)                                                                            \
    _mm512_permutex2var_ps(                                                                        \
        (lo), _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), (hi))
#define V_HSUM(v) _mm512_reduce_add_ps(v)
#define V_HMAX(v) _mm512_reduce_max_ps(v)
/* Stores 16 floats rounded to bf16 by the bf16 tiles' own instruction (vcvtneps2bf16: to
 * nearest even, NaN quieted, denormals flushed to zero), in a function compiled for AVX512-BF16
 * (ELT_BF16_TARGET) that the variants call only where the CPU has it (bf16_io_common). The same
 * rounding in AVX-512F integer arithmetic took ten instructions a vector and left an SE gate's Mul
 * slower with half the bytes to write than with all of them. */
#define ELT_BF16_TARGET __attribute__((target("avx512bf16")))
#define V_STORE_BF16(p, v) _mm256_storeu_si256((__m256i *)(p), (__m256i)_mm512_cvtneps_pbh(v))
#define V_MSTORE_BF16(p, m, v) _mm256_mask_storeu_epi16((p), (m), (__m256i)_mm512_cvtneps_pbh(v))
#define ELT_ISA_NAME elt_isa_avx512

#include "eltwise_simd.h"
