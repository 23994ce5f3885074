/* A node's fused epilogue (ir_fusion) in the GEMM epilogue's terms, for the variants that apply
 * it inside their own loops and for the runtime's fallback (kern_fusion_apply). */
#ifndef ANVIL_KERNELS_FUSION_H
#define ANVIL_KERNELS_FUSION_H

#include "kernels/cpu/gemm/gemm.h"

/* The activation part of f as a GEMM epilogue (scale 1, no bias, no residual); the identity
 * epilogue for f == NULL. The caller adds the bias and residual pointers it has. */
gemm_epilogue kern_fusion_epilogue(const ir_fusion *f);

/* The epilogue loop compiled for this machine's widest ISA (the widest tile's tile epilogue),
 * for applying a fused epilogue to whole rows outside a GEMM (e.g. Winograd, depthwise, the
 * runtime's fallback). */
gemm_tile_epilogue_fn kern_fusion_rows_fn(void);

/* Whether every part of f is something a GEMM epilogue can apply (always true today; kept so a
 * future activation without a GEMM form is refused in one place). */
bool kern_fusion_gemm_ok(const ir_fusion *f);

/* ---- emitting (anvil compile) -------------------------------------------------------------- */

/* Writes f as a C constant into buf: "1.5f" (9 significant digits: the same float back),
 * "-__builtin_inff()", "__builtin_nanf(\"\")". Returns buf. */
const char *kern_emit_float(float f, char *buf, size_t cap);
/* Writes the statements declaring `gemm_epilogue VAR` equal to ep with its pointers replaced by the
 * C expressions given (NULL: none; r with ep's strides and beta). act_row is left NULL: the emitted
 * epilogue runs the GEMM's own loop (vectorized for ReLU and Clip, libm per element otherwise). */
void kern_emit_epilogue(kern_emit *e, const char *var, const gemm_epilogue *ep,
                        const char *row_bias, const char *col_bias, const char *r);

#endif
