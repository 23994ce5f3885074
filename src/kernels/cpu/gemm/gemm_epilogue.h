/* The epilogue loop, shared by the portable driver and the ISA files: included (static inline)
 * so each ISA file compiles it with its own vector flags. Contract: gemm_epilogue_apply. */
#ifndef ANVIL_GEMM_EPILOGUE_H
#define ANVIL_GEMM_EPILOGUE_H

#include "gemm.h"

#include <math.h>
#include <string.h>

static inline float gemm_act_scalar(const gemm_epilogue *ep, float x) {
    switch (ep->act) {
    case IR_ACT_NONE:
        return x;
    case IR_ACT_RELU:
        return x > 0.0f ? x : 0.0f;
    case IR_ACT_CLIP:
        return x < ep->lo ? ep->lo : (x > ep->hi ? ep->hi : x);
    case IR_ACT_LEAKY_RELU:
        return x < 0.0f ? ep->alpha * x : x;
    case IR_ACT_SIGMOID:
        return 1.0f / (1.0f + expf(-x));
    case IR_ACT_TANH:
        return tanhf(x);
    case IR_ACT_GELU_ERF:
        return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case IR_ACT_GELU_TANH:
        return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    case IR_ACT_HARD_SIGMOID: {
        float y = ep->alpha * x + ep->beta_act;
        return y < 0.0f ? 0.0f : (y > 1.0f ? 1.0f : y);
    }
    case IR_ACT_HARD_SWISH: {
        float y = x / 6.0f + 0.5f;
        return x * (y < 0.0f ? 0.0f : (y > 1.0f ? 1.0f : y));
    }
    case IR_ACT_SILU:
        return x * (1.0f / (1.0f + expf(-x)));
    }
    return x;
}

static inline void gemm_epilogue_body(const gemm_epilogue *ep, float *c, int64_t ldc, int64_t i0,
                                      int64_t j0, int64_t m, int64_t n) {
    const float scale = ep->scale;
    for (int64_t i = 0; i < m; i++) {
        float *restrict row = c + i * ldc;
        if (ep->col_scale) {
            /* an int8 tile's int32 sums (gemm_epilogue.col_scale), the addition wrapping */
            const float *restrict cs = ep->col_scale + j0;
            const float rs = ep->row_scale ? ep->row_scale[i0 + i] : 1.0f;
            for (int64_t j = 0; j < n; j++) {
                uint32_t bits;
                memcpy(&bits, &row[j], sizeof bits);
                if (ep->col_comp) bits += (uint32_t)ep->col_comp[j0 + j];
                row[j] = (float)(int32_t)bits * cs[j] * rs;
            }
        }
        const float rb = ep->row_bias ? ep->row_bias[i0 + i] : 0.0f;
        if (scale != 1.0f)
            for (int64_t j = 0; j < n; j++) row[j] *= scale;
        if (ep->row_bias)
            for (int64_t j = 0; j < n; j++) row[j] += rb;
        if (ep->col_bias) {
            const float *restrict cb = ep->col_bias + j0;
            for (int64_t j = 0; j < n; j++) row[j] += cb[j];
        }
        if (ep->r) {
            const float *r = ep->r + (i0 + i) * ep->rs_r + j0 * ep->cs_r;
            const float beta = ep->beta;
            if (ep->cs_r == 1)
                for (int64_t j = 0; j < n; j++) row[j] += beta * r[j];
            else
                for (int64_t j = 0; j < n; j++) row[j] += beta * r[j * ep->cs_r];
        }
        switch (ep->act) {
        case IR_ACT_NONE:
            break;
        case IR_ACT_RELU:
            for (int64_t j = 0; j < n; j++) row[j] = row[j] > 0.0f ? row[j] : 0.0f;
            break;
        case IR_ACT_CLIP: {
            const float lo = ep->lo, hi = ep->hi;
            for (int64_t j = 0; j < n; j++) {
                float x = row[j] < lo ? lo : row[j];
                row[j] = x > hi ? hi : x;
            }
            break;
        }
        /* The piecewise-linear ones as loops of their own (gemm_act_scalar's arithmetic): through
         * the switch per element they ran scalar, MobileNetV3's HardSwish depthwise convs at
         * 3.5x the time of their ReLU twins. */
        case IR_ACT_LEAKY_RELU: {
            const float alpha = ep->alpha;
            for (int64_t j = 0; j < n; j++) row[j] = row[j] < 0.0f ? alpha * row[j] : row[j];
            break;
        }
        case IR_ACT_HARD_SIGMOID: {
            const float alpha = ep->alpha, beta = ep->beta_act;
            for (int64_t j = 0; j < n; j++) {
                float y = alpha * row[j] + beta;
                y = y < 0.0f ? 0.0f : y;
                row[j] = y > 1.0f ? 1.0f : y;
            }
            break;
        }
        case IR_ACT_HARD_SWISH:
            for (int64_t j = 0; j < n; j++) {
                float y = row[j] / 6.0f + 0.5f;
                y = y < 0.0f ? 0.0f : y;
                row[j] *= y > 1.0f ? 1.0f : y;
            }
            break;
        default:
            if (ep->act_row)
                ep->act_row(ep, row, n);
            else
                for (int64_t j = 0; j < n; j++) row[j] = gemm_act_scalar(ep, row[j]);
        }
    }
}

#endif
