/* Cast, Identity, (inference-mode) Dropout and BitCast: ops that move elements without arithmetic.
 *
 * Cast converts between every pair of dtypes anvil holds (bool, the eight integer types, f16,
 * bf16, f32, f64). Each pair gets its own loop, generated from one type list, because Cast sits
 * on hot paths of mixed-precision models. The rules:
 *   - to bool: nonzero (NaN included) is true; from bool: 0 or 1;
 *   - integer -> integer: keep the low bits (two's complement wrap), as C and ONNX Runtime do;
 *   - float -> integer: truncate toward zero; NaN and out-of-range values follow ONNX Runtime on
 *     x86-64 (see op_elt_f2i32 and friends in eltwise_common.h) instead of C's undefined
 *     behaviour;
 *   - to f16/bf16: through float, rounding to nearest even (ONNX Runtime also goes through
 *     float, so f64 -> f16 rounds twice there too).
 * String, complex, float8 and 4-/2-bit types are refused at inference. The `saturate` attribute
 * (opset 19) and `round_mode` (opset 24) concern float8 targets only and so never apply here;
 * Cast 21 / 23 / 24 / 25 only add such types, so every version from 7 to 25 runs the same code.
 *
 * Identity and Dropout alias their output to their input (OP_ALIAS_0): the runtime never calls
 * their kernels for data, but the kernels still copy so the ops are correct on their own.
 *
 * BitCast (opset 26) copies bytes: both dtypes must have the same element size,
 * so the output has the input's shape and the bytes are already in the
 * little-endian layout ONNX prescribes (anvil runs on little-endian hosts
 * only). Sub-byte and string dtypes have no byte size and are refused. */
#include "ops/eltwise_common.h"
#include "ops/tensor_common.h"

#include <string.h>

/* ---- Cast kernels ------------------------------------------------------------------------- */

typedef void (*cast_fn)(void *out, const void *in, size_t n);

#define CAST_BOOL_LD(x) ((x) != 0)
#define CAST_TO_F32(v) ((float)(v))
#define CAST_TO_F64(v) ((double)(v))
#define CAST_TO_F16(v) core_f32_to_f16((float)(v))
#define CAST_TO_BF16(v) core_f32_to_bf16((float)(v))
#define CAST_TO_BOOL(v) ((uint8_t)((v) != 0))
#define CAST_F2_I8(v) ((int8_t)op_elt_f2i32(v))
#define CAST_F2_I16(v) ((int16_t)op_elt_f2i32(v))
#define CAST_F2_I32(v) op_elt_f2i32(v)
#define CAST_F2_I64(v) op_elt_f2i64(v)
#define CAST_F2_U8(v) ((uint8_t)op_elt_f2i32(v))
#define CAST_F2_U16(v) ((uint16_t)op_elt_f2i32(v))
#define CAST_F2_U32(v) op_elt_f2u32(v)
#define CAST_F2_U64(v) op_elt_f2u64(v)
#define CAST_I2_I8(v) ((int8_t)(v))
#define CAST_I2_I16(v) ((int16_t)(v))
#define CAST_I2_I32(v) ((int32_t)(v))
#define CAST_I2_I64(v) ((int64_t)(v))
#define CAST_I2_U8(v) ((uint8_t)(v))
#define CAST_I2_U16(v) ((uint16_t)(v))
#define CAST_I2_U32(v) ((uint32_t)(v))
#define CAST_I2_U64(v) ((uint64_t)(v))

/* Sources: S(tag, DT, T, load, kind) with kind F (loads as float/double) or I (as an integer). */
#define CAST_SOURCES(S)                                                                            \
    S(f32, FLOAT32, float, ELT_ID, F)                                                              \
    S(f64, FLOAT64, double, ELT_ID, F)                                                             \
    S(f16, FLOAT16, uint16_t, core_f16_to_f32, F)                                                  \
    S(bf16, BFLOAT16, uint16_t, core_bf16_to_f32, F)                                               \
    S(bool, BOOL, uint8_t, CAST_BOOL_LD, I)                                                        \
    S(i8, INT8, int8_t, ELT_ID, I)                                                                 \
    S(i16, INT16, int16_t, ELT_ID, I)                                                              \
    S(i32, INT32, int32_t, ELT_ID, I)                                                              \
    S(i64, INT64, int64_t, ELT_ID, I)                                                              \
    S(u8, UINT8, uint8_t, ELT_ID, I)                                                               \
    S(u16, UINT16, uint16_t, ELT_ID, I)                                                            \
    S(u32, UINT32, uint32_t, ELT_ID, I)                                                            \
    S(u64, UINT64, uint64_t, ELT_ID, I)

/* Targets: D(<source args>, tag, DT, T, from_float, from_int). */
#define CAST_TARGETS(D, ...)                                                                       \
    D(__VA_ARGS__, f32, FLOAT32, float, CAST_TO_F32, CAST_TO_F32)                                  \
    D(__VA_ARGS__, f64, FLOAT64, double, CAST_TO_F64, CAST_TO_F64)                                 \
    D(__VA_ARGS__, f16, FLOAT16, uint16_t, CAST_TO_F16, CAST_TO_F16)                               \
    D(__VA_ARGS__, bf16, BFLOAT16, uint16_t, CAST_TO_BF16, CAST_TO_BF16)                           \
    D(__VA_ARGS__, bool, BOOL, uint8_t, CAST_TO_BOOL, CAST_TO_BOOL)                                \
    D(__VA_ARGS__, i8, INT8, int8_t, CAST_F2_I8, CAST_I2_I8)                                       \
    D(__VA_ARGS__, i16, INT16, int16_t, CAST_F2_I16, CAST_I2_I16)                                  \
    D(__VA_ARGS__, i32, INT32, int32_t, CAST_F2_I32, CAST_I2_I32)                                  \
    D(__VA_ARGS__, i64, INT64, int64_t, CAST_F2_I64, CAST_I2_I64)                                  \
    D(__VA_ARGS__, u8, UINT8, uint8_t, CAST_F2_U8, CAST_I2_U8)                                     \
    D(__VA_ARGS__, u16, UINT16, uint16_t, CAST_F2_U16, CAST_I2_U16)                                \
    D(__VA_ARGS__, u32, UINT32, uint32_t, CAST_F2_U32, CAST_I2_U32)                                \
    D(__VA_ARGS__, u64, UINT64, uint64_t, CAST_F2_U64, CAST_I2_U64)

/* Picks the target's conversion by the source's kind. */
#define CAST_PICK_F(from_float, from_int) from_float
#define CAST_PICK_I(from_float, from_int) from_int

#define CAST_DEF_PAIR(stag, SDT, ST, SLD, SK, dtag, DDT, DT, DFF, DFI)                             \
    static void cast_##stag##_##dtag(void *out, const void *in, size_t n) {                        \
        const ST *x = in;                                                                          \
        DT *y = out;                                                                               \
        for (size_t i = 0; i < n; i++) y[i] = CAST_PICK_##SK(DFF, DFI)(SLD(x[i]));                 \
    }
#define CAST_DEF_SOURCE(stag, SDT, ST, SLD, SK) CAST_TARGETS(CAST_DEF_PAIR, stag, SDT, ST, SLD, SK)
CAST_SOURCES(CAST_DEF_SOURCE)

#define CAST_ENTRY_PAIR(stag, SDT, ST, SLD, SK, dtag, DDT, DT, DFF, DFI)                           \
    [ANVIL_DTYPE_##SDT][ANVIL_DTYPE_##DDT] = cast_##stag##_##dtag,
#define CAST_ENTRY_SOURCE(stag, SDT, ST, SLD, SK)                                                  \
    CAST_TARGETS(CAST_ENTRY_PAIR, stag, SDT, ST, SLD, SK)
static const cast_fn cast_table[ELT_DTYPE_SLOTS][ELT_DTYPE_SLOTS] = {
    CAST_SOURCES(CAST_ENTRY_SOURCE)};

/* ---- Cast ---------------------------------------------------------------------------------- */

/* ONNX TensorProto.DataType numbers go up to 26 (INT2) in onnx 1.22. */
#define CAST_ONNX_DTYPE_MAX 26

typedef struct cast_params {
    anvil_dtype to;
} cast_params;

static anvil_status cast_check(ir_graph *g, ir_node *n) {
    if (!ir_node_attr(n, "to"))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: required attribute 'to' (the target dtype) is missing",
                        ir_node_label(n));
    int64_t to, saturate;
    const ir_attr *a = ir_node_attr(n, "to");
    if (n->opset < 6 && a->type == IR_ATTR_STRING) {
        /* opset 1 named the target type ("FLOAT", "INT64", ...) instead of numbering it */
        to = 0;
        for (int d = 1; d <= ANVIL_DTYPE_FLOAT8E8M0; d++)
            if (strcmp(a->s, anvil_dtype_name((anvil_dtype)d)) == 0) to = d;
        if (!to)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: attribute 'to' is \"%.64s\", which is not an ONNX dtype name "
                            "(e.g. FLOAT, INT64)",
                            ir_node_label(n), a->s);
    } else {
        CORE_TRY(ir_attr_int(n, "to", 0, &to));
    }
    if (to < 1 || to > CAST_ONNX_DTYPE_MAX)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'to' is %lld, which is not an ONNX dtype (valid: 1..%d)",
                        ir_node_label(n), (long long)to, CAST_ONNX_DTYPE_MAX);
    CORE_TRY(ir_attr_int(n, "saturate", 1, &saturate));
    const char *round_mode;
    CORE_TRY(ir_attr_string(n, "round_mode", "up", &round_mode));
    /* round_mode (opset 24) only affects float8e8m0 targets, which infer refuses, but a
     * misspelt value is still a broken model */
    if (strcmp(round_mode, "up") != 0 && strcmp(round_mode, "down") != 0 &&
        strcmp(round_mode, "nearest") != 0)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'round_mode' is \"%.32s\"; expected up, down or nearest",
                        ir_node_label(n), round_mode);
    OP_PARAMS_NEW(g, cast_params, p);
    p->to = (anvil_dtype)to;
    n->params = p;
    return ANVIL_OK;
}

static anvil_status cast_require(const ir_node *n, const char *what, anvil_dtype dt) {
    if (core_dtype_supported(dt)) return ANVIL_OK;
    return core_err(ANVIL_ERR_UNSUPPORTED,
                    "%s: %s dtype %s (%d) is not supported by anvil's Cast (supported: BOOL, "
                    "INT8..INT64, UINT8..UINT64, FLOAT16, BFLOAT16, FLOAT, DOUBLE)",
                    ir_node_label(n), what, anvil_dtype_name(dt), (int)dt);
}

static anvil_status cast_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                               op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    const cast_params *p = n->params;
    CORE_TRY(cast_require(n, "input", in[0].dtype));
    CORE_TRY(cast_require(n, "target ('to')", p->to));
    out[0].dtype = p->to;
    out[0].shape = in[0].shape;
    out[0].value = NULL;
    return ANVIL_OK;
}

typedef struct cast_job {
    cast_fn fn;
    const char *in;
    char *out;
    size_t es_in, es_out;
} cast_job;

static void cast_chunk(void *arg, size_t begin, size_t end) {
    const cast_job *j = arg;
    j->fn(j->out + begin * j->es_out, j->in + begin * j->es_in, end - begin);
}

/* Copies bytes of a same-dtype tensor unless the buffers already coincide. */
static void cast_copy(const op_tensor *in, op_tensor *out) {
    size_t cnt = op_tensor_numel(in);
    if (cnt && out->data != in->data)
        memcpy(out->data, in->data, cnt * anvil_dtype_size(in->dtype));
}

static anvil_status cast_run(const ir_node *n, const op_tensor *const *in, int n_in,
                             op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    const op_tensor *x = in[0];
    op_tensor *y = out[0];
    size_t cnt = op_tensor_numel(x);
    cast_fn fn = (unsigned)x->dtype < ELT_DTYPE_SLOTS && (unsigned)y->dtype < ELT_DTYPE_SLOTS
                     ? cast_table[x->dtype][y->dtype]
                     : NULL;
    if (!fn || cnt != op_tensor_numel(y))
        return core_err(ANVIL_ERR_INTERNAL, "%s: no kernel from %s to %s, or size mismatch",
                        ir_node_label(n), anvil_dtype_name(x->dtype), anvil_dtype_name(y->dtype));
    if (x->dtype == y->dtype) {
        cast_copy(x, y);
        return ANVIL_OK;
    }
    if (cnt == 0) return ANVIL_OK;
    cast_job job = {fn, x->data, y->data, anvil_dtype_size(x->dtype), anvil_dtype_size(y->dtype)};
    op_parallel_for(cnt >= ((size_t)1 << 15) ? ctx : NULL, cnt, cast_chunk, &job);
    return ANVIL_OK;
}

const op_impl op_impl_cast = {.min_inputs = 1,
                              .max_inputs = 1,
                              .min_outputs = 1,
                              .max_outputs = 1,
                              .check = cast_check,
                              .infer = cast_infer,
                              .run = cast_run};

/* ---- Identity ------------------------------------------------------------------------------ */

static anvil_status identity_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                   int n_in, op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    if (!core_dtype_supported(in[0].dtype))
        return core_err(ANVIL_ERR_UNSUPPORTED, "%s: input dtype %s (%d) is not supported by anvil",
                        ir_node_label(n), anvil_dtype_name(in[0].dtype), (int)in[0].dtype);
    out[0].dtype = in[0].dtype;
    out[0].shape = in[0].shape;
    out[0].value = NULL;
    return ANVIL_OK;
}

static anvil_status identity_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                 op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)ctx;
    if (in[0]->dtype != out[0]->dtype || op_tensor_numel(in[0]) != op_tensor_numel(out[0]))
        return core_err(ANVIL_ERR_INTERNAL, "%s: output buffer does not match the input",
                        ir_node_label(n));
    cast_copy(in[0], out[0]);
    return ANVIL_OK;
}

const op_impl op_impl_identity = {.min_inputs = 1,
                                  .max_inputs = 1,
                                  .min_outputs = 1,
                                  .max_outputs = 1,
                                  .flags = OP_ALIAS_0,
                                  .check = op_elt_check_none,
                                  .infer = identity_infer,
                                  .run = identity_run};

/* ---- Dropout --------------------------------------------------------------------------------
 *
 * anvil runs inference, where Dropout passes its input through and its optional mask is all
 * true (all ones of the data type before opset 10, when the mask became bool). The ratio is an
 * attribute before opset 12 and an optional input from 12 on, next to an optional training_mode
 * input. A training_mode known to be true asks for random dropping, which anvil does not do:
 * refused at load when the value is a constant, at run time otherwise. (Opset < 7 marked
 * inference with is_test; like other inference runtimes anvil treats those nodes as inference
 * whatever the flag says.) */

typedef struct dropout_params {
    float ratio; /* opset < 12 */
} dropout_params;

static bool dropout_has(const ir_node *n, int i) {
    return i < n->n_inputs && n->inputs[i] != IR_NONE;
}

static anvil_status dropout_ratio_ok(const ir_node *n, anvil_status status, double ratio) {
    if (ratio >= 0.0 && ratio < 1.0) return ANVIL_OK;
    return core_err(status, "%s: ratio is %g but must lie in [0, 1)", ir_node_label(n), ratio);
}

static anvil_status dropout_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, dropout_params, p);
    p->ratio = 0.5f;
    if (n->opset < 12) {
        if (dropout_has(n, 1) || dropout_has(n, 2))
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: opset %d Dropout takes one input (ratio is an attribute) but "
                            "the node has %d; ratio and training_mode inputs need opset >= 12",
                            ir_node_label(n), n->opset, n->n_inputs);
        CORE_TRY(ir_attr_float(n, "ratio", 0.5f, &p->ratio));
        CORE_TRY(dropout_ratio_ok(n, ANVIL_ERR_INVALID_MODEL, p->ratio));
        if (n->opset < 7) {
            int64_t is_test;
            CORE_TRY(ir_attr_int(n, "is_test", 0, &is_test));
        }
    } else {
        int64_t seed;
        CORE_TRY(ir_attr_int(n, "seed", 0, &seed));
    }
    n->params = p;
    return ANVIL_OK;
}

static anvil_status dropout_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                                  op_tinfo *out, int n_out) {
    CORE_TRY(op_elt_unary_infer(n, in, n_in, out, n_out, ELT_MASK_FLOAT));
    if (dropout_has(n, 1)) {
        CORE_TRY(op_elt_require(n, 1, in[1].dtype, ELT_MASK_FLOAT));
        size_t cnt;
        if (ir_shape_numel(&in[1].shape, &cnt) && cnt != 1) {
            char buf[128];
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: input 1 (ratio) must be a scalar but has shape %s",
                            ir_node_label(n), ir_shape_str(g, &in[1].shape, buf, sizeof buf));
        }
        if (in[1].value)
            CORE_TRY(dropout_ratio_ok(n, ANVIL_ERR_INVALID_MODEL,
                                      core_load_f64(in[1].dtype, in[1].value, 0)));
    }
    if (dropout_has(n, 2)) {
        if (in[2].dtype != ANVIL_DTYPE_BOOL)
            return core_err(ANVIL_ERR_SHAPE, "%s: input 2 (training_mode) must be BOOL but is %s",
                            ir_node_label(n), anvil_dtype_name(in[2].dtype));
        size_t cnt;
        if (ir_shape_numel(&in[2].shape, &cnt) && cnt != 1) {
            char buf[128];
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: input 2 (training_mode) must be a scalar but has shape %s",
                            ir_node_label(n), ir_shape_str(g, &in[2].shape, buf, sizeof buf));
        }
        if (in[2].value && ((const uint8_t *)in[2].value)[0])
            return core_err(ANVIL_ERR_UNSUPPORTED,
                            "%s: training mode (training_mode = true) is not supported: anvil "
                            "runs Dropout for inference only; set training_mode to false or "
                            "remove the input",
                            ir_node_label(n));
    }
    if (n_out > 1 && n->outputs[1] != IR_NONE) {
        out[1].dtype = n->opset < 10 ? in[0].dtype : ANVIL_DTYPE_BOOL;
        out[1].shape = in[0].shape;
        out[1].value = NULL;
    }
    return ANVIL_OK;
}

static anvil_status dropout_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)ctx;
    if (n_in > 1 && in[1]) {
        if (op_tensor_numel(in[1]) != 1)
            return core_err(ANVIL_ERR_RUNTIME, "%s: input 1 (ratio) has %zu elements, not 1",
                            ir_node_label(n), op_tensor_numel(in[1]));
        CORE_TRY(
            dropout_ratio_ok(n, ANVIL_ERR_RUNTIME, core_load_f64(in[1]->dtype, in[1]->data, 0)));
    }
    if (n_in > 2 && in[2]) {
        if (op_tensor_numel(in[2]) != 1)
            return core_err(ANVIL_ERR_RUNTIME,
                            "%s: input 2 (training_mode) has %zu elements, not 1", ir_node_label(n),
                            op_tensor_numel(in[2]));
        if (((const uint8_t *)in[2]->data)[0])
            return core_err(ANVIL_ERR_UNSUPPORTED,
                            "%s: training mode (training_mode = true at run time) is not "
                            "supported: anvil runs Dropout for inference only",
                            ir_node_label(n));
    }
    if (in[0]->dtype != out[0]->dtype || op_tensor_numel(in[0]) != op_tensor_numel(out[0]))
        return core_err(ANVIL_ERR_INTERNAL, "%s: output buffer does not match the input",
                        ir_node_label(n));
    cast_copy(in[0], out[0]);
    if (n_out > 1 && out[1]) {
        op_tensor *m = out[1];
        size_t cnt = op_tensor_numel(m);
        if (m->dtype == ANVIL_DTYPE_BOOL) {
            if (cnt) memset(m->data, 1, cnt);
        } else {
            for (size_t i = 0; i < cnt; i++) core_store_f64(m->dtype, m->data, i, 1.0);
        }
    }
    return ANVIL_OK;
}

const op_impl op_impl_dropout = {.min_inputs = 1,
                                 .max_inputs = 3,
                                 .min_outputs = 1,
                                 .max_outputs = 2,
                                 .flags = OP_ALIAS_0,
                                 .check = dropout_check,
                                 .infer = dropout_infer,
                                 .run = dropout_run};

/* ---- BitCast --------------------------------------------------------------------------------- */

typedef struct bitcast_params {
    anvil_dtype to;
} bitcast_params;

static anvil_status bitcast_check(ir_graph *g, ir_node *n) {
    CORE_TRY(tensor_need_opset(n, 26));
    int64_t to = 0;
    CORE_TRY(ir_attr_int(n, "to", -1, &to));
    if (to < 0)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "node '%s' (BitCast): required attribute 'to' is missing; set it to the "
                        "target TensorProto data type",
                        ir_node_label(n));
    if (to > ANVIL_DTYPE_FLOAT8E8M0 || anvil_dtype_size((anvil_dtype)to) == 0)
        return core_err(
            ANVIL_ERR_UNSUPPORTED,
            "node '%s' (BitCast): attribute 'to' = %lld (%s) is not a whole-byte numeric dtype "
            "anvil can hold; use a fixed-size type of 1, 2, 4, 8 or 16 bytes",
            ir_node_label(n), (long long)to, anvil_dtype_name((anvil_dtype)to));
    OP_PARAMS_NEW(g, bitcast_params, p);
    p->to = (anvil_dtype)to;
    n->params = p;
    return ANVIL_OK;
}

static anvil_status bitcast_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                                  op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    const bitcast_params *p = n->params;
    size_t from = anvil_dtype_size(in[0].dtype), to = anvil_dtype_size(p->to);
    if (from == 0)
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "node '%s' (BitCast): input dtype %s has no whole-byte element size; only "
                        "fixed-size numeric and bool inputs are supported",
                        ir_node_label(n), anvil_dtype_name(in[0].dtype));
    if (from != to)
        return core_err(ANVIL_ERR_SHAPE,
                        "node '%s' (BitCast): input dtype %s is %zu bytes but 'to' = %s is %zu "
                        "bytes; BitCast needs types of the same bit width",
                        ir_node_label(n), anvil_dtype_name(in[0].dtype), from,
                        anvil_dtype_name(p->to), to);
    out[0].dtype = p->to;
    out[0].shape = in[0].shape;
    return ANVIL_OK;
}

static anvil_status bitcast_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n;
    (void)n_in;
    (void)n_out;
    (void)ctx;
    size_t bytes = op_tensor_numel(in[0]) * anvil_dtype_size(in[0]->dtype);
    if (bytes) memcpy(out[0]->data, in[0]->data, bytes);
    return ANVIL_OK;
}

const op_impl op_impl_bitcast = {.min_inputs = 1,
                                 .max_inputs = 1,
                                 .min_outputs = 1,
                                 .max_outputs = 1,
                                 .check = bitcast_check,
                                 .infer = bitcast_infer,
                                 .run = bitcast_run};
