/* Private to src/kernels/cpu/rnn: the per-ISA kernel table the LSTM / GRU / RNN variants call.
 *
 * rnn_variants.c (baseline code) reads the node, lays the weights out once in prepare and walks
 * the sequence; the arithmetic lives in these tables: rnn_avx512.c and rnn_avx2.c instantiate
 * rnn_simd.h (with their own inline exp, see there), and rnn_portable.c is plain C with libm,
 * for every machine. Nothing in an ISA table may be called
 * unless the CPU has that ISA (the variant's `needs` matched).
 *
 * Every hidden-sized row here is padded to hp floats (a multiple of RNN_PAD): the variants pad
 * each gate's block of the weights, biases and states with zeros, so the gate kernels only ever
 * see whole vectors. All pointers are borrowed for the call. */
#ifndef ANVIL_KERNELS_RNN_H
#define ANVIL_KERNELS_RNN_H

#include <stdint.h>

/* Padding of hidden-sized rows, in floats: one AVX-512 vector, two AVX2 ones. */
#define RNN_PAD 16
/* Columns per panel of gemm_small's B: the widest register tile (8 AVX-512 vectors). */
#define RNN_PANEL 128

typedef struct rnn_isa {
    /* C[i, j] = bias[j] + sum_p A[i, p] B[p, j] for i < m, j < n: A[i, p] at a[i*lda + p],
     * C[i, j] at c[i*ldc + j], and B in column panels (rnn_panel_b): panel q holds columns
     * [q*RNN_PANEL, q*RNN_PANEL + w) as k rows of w floats (w = RNN_PANEL but in the last
     * panel), one after another, so the product streams B in order. n is a multiple of
     * RNN_PAD; bias NULL means 0; k may be 0. For few rows (the recurrent step of a small batch
     * is a GEMV), where a general GEMM's packing costs more than the product. */
    void (*gemm_small)(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                       const float *bias, float *c, int64_t ldc);
    /* One LSTM step of one batch row, hidden units [0, n) (n a multiple of RNN_PAD, at most
     * hp; a slice of the units when the pointers are offset). xw: the input projection with
     * both biases, gates i, o, f, c at 0, hp, 2hp, 3hp; rec: h_{t-1} R^T in the same order; p:
     * the peepholes i, o, f at 0, hp, 2hp, or NULL. c and h hold the state and are updated in
     * place. clip: the clip threshold (INFINITY: none). */
    void (*lstm_row)(int64_t n, int64_t hp, const float *xw, const float *rec, const float *p,
                     float *c, float *h, float clip);
    /* One GRU step with linear_before_reset = 1, units [0, n) as lstm_row. xw: z, r, h gates
     * (biases Wb + Rb for z and r, Wb only for h); rec: h_{t-1} R^T without bias; rbh: Rb of the
     * h gate. h updated in place. */
    void (*gru_lbr_row)(int64_t n, int64_t hp, const float *xw, const float *rec, const float *rbh,
                        float *h, float clip);
    /* The first half of a GRU step with linear_before_reset = 0: z = f(xw_z + rec_z) is written
     * over xw's z gate, and rh = r * h_{t-1} with r = f(xw_r + rec_r). */
    void (*gru_zr_row)(int64_t hp, float *xw, const float *rec, const float *h, float *rh,
                       float clip);
    /* Its second half: hh = g(xw_h + prod), prod = rh R_h^T (xw_h holds Wb_h + Rb_h); then
     * h = (1 - z) hh + z h in place. */
    void (*gru_h_row)(int64_t hp, const float *xw_h, const float *prod, const float *z, float *h,
                      float clip);
    /* One vanilla RNN step: h = tanh(xw + rec), in place. */
    void (*rnn_row)(int64_t hp, const float *xw, const float *rec, float *h, float clip);
} rnn_isa;

extern const rnn_isa rnn_isa_avx512;
extern const rnn_isa rnn_isa_avx2;
extern const rnn_isa rnn_isa_portable;

#endif
