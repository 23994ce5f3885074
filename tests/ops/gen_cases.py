#!/usr/bin/env python3
"""Generates anvil's operator test cases, with expected outputs from ONNX Runtime.

Usage: gen_cases.py OUTDIR [--list]

Every case is one small ONNX model (one operator, or a short chain for patterns that exported
models use), written in the ONNX backend-test layout that tests/tools/run_cases.c reads:

    OUTDIR/<case>/model.onnx
    OUTDIR/<case>/test_data_set_0/input_<i>.pb    (graph inputs that are not initializers, in order)
    OUTDIR/<case>/test_data_set_0/output_<i>.pb   (expected outputs, computed by ONNX Runtime)
    OUTDIR/<case>/tolerance.txt                   (optional: "rtol R" / "atol A" lines)

Inputs come from numpy generators seeded by the case name, so the files are the same on every
run. ONNX Runtime runs on the CPU provider with graph optimizations disabled, so its answer is
that of its plain kernels. A stamp file records a hash of this script and of the onnx/onnxruntime
/numpy versions; a re-run with the same stamp does nothing.
"""

import argparse
import hashlib
import os
import shutil
import sys
import zlib

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

DEFAULT_OPSET = 17

# ONNX IR version per default-domain opset (what onnx's own helper would pick), so every model
# is in the range anvil accepts (IR 3..11).
def ir_version_for(opset):
    if opset <= 18:
        return 8
    if opset <= 20:
        return 9
    return 10


class Case:
    """One model plus its inputs. `inputs` is a list of (name, array, is_initializer); a None
    array stands for an omitted optional input (empty name in the node)."""

    def __init__(self, name, nodes, inputs, outputs, opset=DEFAULT_OPSET, sym=None, tol=None):
        self.name = name
        self.nodes = nodes
        self.inputs = inputs
        self.outputs = outputs  # list of (name, numpy dtype)
        self.opset = opset
        self.sym = sym or {}  # input name -> list of dims (str for symbolic)
        self.tol = tol or {}


CASES = []


def rng_for(name):
    return np.random.default_rng(zlib.crc32(name.encode()))


def add_case(case):
    if any(c.name == case.name for c in CASES):
        raise SystemExit(f"duplicate case name {case.name}")
    CASES.append(case)


def single(name, op, ins, attrs=None, outs=1, opset=DEFAULT_OPSET, init=(), out_dtype=None,
           tol=None, sym=None, in_names=None):
    """A one-node case. ins: arrays (None = omitted optional input); init: indices of inputs
    that become initializers; out_dtype: numpy dtype, or a list per output (default: the first
    input's dtype)."""
    names = in_names or [f"x{i}" for i in range(len(ins))]
    node_inputs = [names[i] if a is not None else "" for i, a in enumerate(ins)]
    out_names = ["y"] if outs == 1 else [f"y{i}" for i in range(outs)]
    node = helper.make_node(op, node_inputs, out_names, name=f"{op.lower()}_node", **(attrs or {}))
    if out_dtype is None:
        first = next(a for a in ins if a is not None)
        out_dtype = first.dtype
    dts = out_dtype if isinstance(out_dtype, list) else [out_dtype] * outs
    inputs = [(names[i], a, i in init) for i, a in enumerate(ins) if a is not None]
    add_case(Case(name, [node], inputs, list(zip(out_names, dts)), opset=opset, sym=sym, tol=tol))


# ---- data helpers --------------------------------------------------------------------------


def randn(name, *shape, dtype=np.float32, salt=0):
    r = np.random.default_rng(zlib.crc32(name.encode()) + salt)
    return np.asarray(r.standard_normal(shape)).astype(dtype)


def positive(name, *shape, salt=0):
    return (np.abs(randn(name, *shape, salt=salt)) + 0.1).astype(np.float32)


def ints(name, lo, hi, *shape, dtype=np.int64, salt=0):
    r = np.random.default_rng(zlib.crc32(name.encode()) + 1000 + salt)
    return r.integers(lo, hi, size=shape).astype(dtype)


def i64(*v):
    return np.array(v, dtype=np.int64)


def f32(*v):
    return np.array(v, dtype=np.float32)


# ---- elementwise ------------------------------------------------------------------------------


def gen_unary():
    for op in ["Abs", "Exp", "Neg", "Relu", "Sigmoid"]:
        n = f"{op.lower()}"
        single(n, op, [randn(n, 3, 4, 5)])
    single("log", "Log", [positive("log", 3, 4, 5)])
    single("sqrt", "Sqrt", [positive("sqrt", 3, 4, 5)])
    single("log_wide_range", "Log", [f32(1e-30, 1e-5, 0.5, 1, 2, 1e10, 3e38)])
    single("log_f64", "Log", [np.abs(randn("log_f64", 3, 4, dtype=np.float64)) + 0.01])
    single("exp_f64", "Exp", [randn("exp_f64", 2, 7, dtype=np.float64)])
    single("sqrt_f64", "Sqrt", [np.abs(randn("sqrt_f64", 9, dtype=np.float64))])
    single("abs_int32", "Abs", [ints("abs_int32", -100, 100, 4, 5, dtype=np.int32)])
    single("abs_int64", "Abs", [ints("abs_int64", -10**12, 10**12, 17)])
    single("neg_int64", "Neg", [ints("neg_int64", -1000, 1000, 3, 3)])
    single("neg_int32", "Neg", [ints("neg_int32", -1000, 1000, 10, dtype=np.int32)])
    single("relu_scalar", "Relu", [np.array(-1.5, dtype=np.float32)])
    single("relu_empty", "Relu", [np.zeros((2, 0, 3), dtype=np.float32)])
    single("sigmoid_large", "Sigmoid", [f32(-100, -20, -1, 0, 1, 20, 100)])
    single("exp_large", "Exp", [f32(-100, -10, 0, 10, 80)])
    # Sixteen leading dims collapsed to one big tensor (odd size exercises any tail loop).
    single("relu_odd_size", "Relu", [randn("relu_odd_size", 1027)])

    single("leakyrelu_default", "LeakyRelu", [randn("leakyrelu_default", 3, 4, 5)])
    single("leakyrelu_alpha", "LeakyRelu", [randn("leakyrelu_alpha", 3, 4, 5)], {"alpha": 0.3})
    single("hardsigmoid_default", "HardSigmoid", [randn("hardsigmoid_default", 3, 4, 5) * 4])
    single("hardsigmoid_alpha_beta", "HardSigmoid", [randn("hardsigmoid_alpha_beta", 3, 4) * 4],
           {"alpha": 0.5, "beta": 0.6})
    single("hardswish", "HardSwish", [randn("hardswish", 3, 4, 5) * 4])

    x = randn("clip", 3, 4, 5)
    single("clip_min_max", "Clip", [x, np.array(-0.5, np.float32), np.array(0.7, np.float32)],
           init=(1, 2))
    single("clip_min_only", "Clip", [x, np.array(-0.2, dtype=np.float32)], init=(1,))
    single("clip_max_only", "Clip", [x, None, np.array(0.3, dtype=np.float32)], init=(2,))
    single("clip_none", "Clip", [x])
    single("clip_bounds_as_inputs", "Clip", [x, np.array(-0.1, dtype=np.float32),
                                             np.array(0.1, dtype=np.float32)])
    single("clip_opset10_attrs", "Clip", [x], {"min": -0.4, "max": 0.25}, opset=10)
    single("clip_int32", "Clip", [ints("clip_int32", -50, 50, 20, dtype=np.int32),
                                  np.array(-5, dtype=np.int32), np.array(7, dtype=np.int32)],
           init=(1, 2))


def gen_binary():
    shapes = {
        "same": ((3, 4, 5), (3, 4, 5)),
        "scalar": ((3, 4, 5), ()),
        "row": ((3, 4, 5), (5,)),
        "col": ((3, 4, 1), (3, 1, 5)),
        "rank_mismatch": ((2, 1, 4), (3, 1)),
    }
    for op in ["Add", "Sub", "Mul", "Div"]:
        for tag, (sa, sb) in shapes.items():
            n = f"{op.lower()}_bcast_{tag}"
            a = randn(n, *sa)
            b = randn(n, *sb, salt=1)
            if op == "Div":
                b = np.where(np.abs(b) < 0.1, 0.5, b).astype(np.float32)
            single(n, op, [a, b])
    single("add_int64", "Add", [ints("add_int64", -10**9, 10**9, 4, 3), ints("add_int64", -5, 5, 3, salt=1)])
    single("add_int32", "Add", [ints("add_int32", -1000, 1000, 4, 3, dtype=np.int32),
                                ints("add_int32", -5, 5, 4, 3, dtype=np.int32, salt=1)])
    single("sub_int64", "Sub", [ints("sub_int64", -1000, 1000, 6), ints("sub_int64", -1000, 1000, 6, salt=1)])
    single("mul_int32", "Mul", [ints("mul_int32", -1000, 1000, 2, 5, dtype=np.int32),
                                ints("mul_int32", -1000, 1000, 5, dtype=np.int32, salt=1)])
    # Integer division truncates toward zero in ONNX Runtime (C semantics), negative operands
    # included.
    single("div_int64", "Div", [i64(7, -7, 7, -7, 100, 0, -1), i64(2, 2, -2, -2, 7, 3, 5)])
    single("div_int32", "Div", [np.array([9, -9, 13, -13], dtype=np.int32),
                                np.array([4, 4, -5, -5], dtype=np.int32)])
    single("add_f64", "Add", [randn("add_f64", 3, 4, dtype=np.float64), randn("add_f64", 4, dtype=np.float64, salt=1)])
    single("mul_weight_init", "Mul", [randn("mul_weight_init", 2, 3, 4), randn("mul_weight_init", 3, 1, salt=1)],
           init=(1,))
    single("add_same_input_twice", "Add", [randn("add_same_input_twice", 5, 5)] * 2, in_names=["x", "x"])
    single("add_empty", "Add", [np.zeros((0, 3), np.float32), randn("add_empty", 3)])
    single("add_dynamic_batch", "Add", [randn("add_dynamic_batch", 4, 3), randn("add_dynamic_batch", 3, salt=1)],
           sym={"x0": ["N", 3]})

    single("pow_float", "Pow", [positive("pow_float", 3, 4), randn("pow_float", 3, 4, salt=1)])
    single("pow_square_bcast", "Pow", [randn("pow_square_bcast", 3, 4), np.array(2.0, np.float32)],
           init=(1,))
    single("pow_neg_base_int_exp", "Pow", [f32(-2, -1.5, 3, -0.5), f32(3, 2, -1, 4)])
    single("pow_int_exponent", "Pow", [randn("pow_int_exponent", 5), i64(2, 3, 0, 1, 2)])
    single("pow_int64", "Pow", [i64(2, -3, 4, 5), i64(3, 3, 0, 2)])

    for op in ["Max", "Min"]:
        n = op.lower()
        single(f"{n}_one_input", op, [randn(f"{n}_one", 3, 4)])
        single(f"{n}_two", op, [randn(f"{n}_two", 3, 4), randn(f"{n}_two", 3, 4, salt=1)])
        single(f"{n}_three_bcast", op, [randn(f"{n}_3", 2, 3, 4), randn(f"{n}_3", 4, salt=1),
                                       randn(f"{n}_3", 3, 1, salt=2)])
        single(f"{n}_int64", op, [ints(f"{n}_i", -100, 100, 10), ints(f"{n}_i", -100, 100, 10, salt=1)])
        single(f"{n}_int32", op, [ints(f"{n}_i32", -100, 100, 2, 5, dtype=np.int32),
                                  ints(f"{n}_i32", -100, 100, 5, dtype=np.int32, salt=1)])


def gen_cast():
    pairs = [
        (np.float32, TensorProto.INT32, np.int32),
        (np.float32, TensorProto.INT64, np.int64),
        (np.float32, TensorProto.FLOAT16, np.float16),
        (np.float16, TensorProto.FLOAT, np.float32),
        (np.float32, TensorProto.DOUBLE, np.float64),
        (np.float64, TensorProto.FLOAT, np.float32),
        (np.int64, TensorProto.FLOAT, np.float32),
        (np.int32, TensorProto.INT64, np.int64),
        (np.int64, TensorProto.INT32, np.int32),
        (np.float32, TensorProto.BOOL, np.bool_),
        (np.bool_, TensorProto.FLOAT, np.float32),
        (np.uint8, TensorProto.FLOAT, np.float32),
        (np.float32, TensorProto.UINT8, np.uint8),
        (np.int8, TensorProto.INT32, np.int32),
        (np.int32, TensorProto.INT8, np.int8),
        (np.int64, TensorProto.BOOL, np.bool_),
        (np.float32, TensorProto.FLOAT, np.float32),
        (np.uint16, TensorProto.INT64, np.int64),
        (np.int16, TensorProto.FLOAT, np.float32),
        (np.uint32, TensorProto.UINT64, np.uint64),
    ]
    for src, to, dst in pairs:
        n = f"cast_{np.dtype(src).name}_to_{np.dtype(dst).name}"
        r = rng_for(n)
        if np.dtype(src).kind == "f":
            lo, hi = (0, 255) if dst == np.uint8 else (-100, 100)
            x = r.uniform(lo, hi, size=(3, 7))
            if dst == np.bool_:
                x[0, :3] = 0.0
        elif src == np.bool_:
            x = r.integers(0, 2, size=(3, 7))
        else:
            info = np.iinfo(src)
            lo, hi = max(info.min, -100), min(info.max, 120)
            x = r.integers(lo, hi, size=(3, 7))
            if dst == np.bool_:
                x[0, :3] = 0
        single(n, "Cast", [x.astype(src)], {"to": to}, out_dtype=dst)
    # float -> float16 rounding of values that are not exactly representable, and overflow to inf.
    single("cast_float_to_float16_rounding", "Cast", [f32(0.1, 1 / 3, 65504, 70000, -1e-8, 2049)],
           {"to": TensorProto.FLOAT16}, out_dtype=np.float16)
    # bfloat16 has no numpy dtype, so go through it and back inside the model.
    x = randn("cast_bfloat16_round_trip", 4, 5)
    nodes = [helper.make_node("Cast", ["x"], ["b"], to=TensorProto.BFLOAT16),
             helper.make_node("Cast", ["b"], ["y"], to=TensorProto.FLOAT)]
    add_case(Case("cast_bfloat16_round_trip", nodes, [("x", x, False)], [("y", np.float32)]))


# ---- tensor manipulation --------------------------------------------------------------------


def gen_shape_ops():
    x = randn("concat", 2, 3, 4)
    for axis in [0, 1, 2, -1, -3]:
        n = f"concat_axis_{axis}".replace("-", "neg")
        shp = list(x.shape)
        shp[axis] = 2
        single(n, "Concat", [x, randn(n, *shp, salt=1)], {"axis": axis})
    single("concat_three_int64", "Concat", [i64(1, 2), i64(3), i64(4, 5, 6)], {"axis": 0})
    single("concat_with_init", "Concat", [randn("cwi", 2, 3), randn("cwi", 1, 3, salt=1)],
           {"axis": 0}, init=(1,))
    single("concat_empty_part", "Concat", [randn("cep", 2, 3), np.zeros((0, 3), np.float32)],
           {"axis": 0})
    single("concat_opset11_neg_axis", "Concat", [randn("c11", 2, 2), randn("c11", 2, 3, salt=1)],
           {"axis": -1}, opset=11)

    x = randn("flatten", 2, 3, 4, 5)
    for axis in [0, 1, 2, 4, -1]:
        single(f"flatten_axis_{axis}".replace("-", "neg"), "Flatten", [x], {"axis": axis})
    single("flatten_default", "Flatten", [x])

    single("identity", "Identity", [randn("identity", 3, 4)])
    single("identity_int64", "Identity", [i64(5, 6, 7)])

    single("reshape_basic", "Reshape", [randn("reshape", 2, 3, 4), i64(4, 6)], init=(1,))
    single("reshape_infer_dim", "Reshape", [randn("reshape", 2, 3, 4), i64(2, -1)], init=(1,))
    single("reshape_copy_zero", "Reshape", [randn("reshape", 2, 3, 4), i64(0, 12)], init=(1,))
    single("reshape_shape_input", "Reshape", [randn("reshape", 2, 3, 4), i64(3, 2, 4)])
    single("reshape_to_scalar", "Reshape", [f32(3.5), np.zeros((0,), np.int64)], init=(1,))
    single("reshape_allowzero", "Reshape", [np.zeros((0, 3), np.float32), i64(3, 0)],
           {"allowzero": 1}, init=(1,), opset=14)
    single("reshape_opset7", "Reshape", [randn("reshape", 2, 3, 4), i64(-1, 4)], init=(1,), opset=7)

    x = randn("transpose", 2, 3, 4)
    single("transpose_default", "Transpose", [x])
    single("transpose_perm_021", "Transpose", [x], {"perm": [0, 2, 1]})
    single("transpose_perm_4d_nhwc", "Transpose", [randn("t4", 2, 3, 4, 5)], {"perm": [0, 2, 3, 1]})
    single("transpose_2d", "Transpose", [randn("t2", 7, 9)], {"perm": [1, 0]})
    single("transpose_6d", "Transpose", [randn("t6", 2, 1, 3, 2, 2, 3)], {"perm": [5, 3, 1, 0, 4, 2]})
    single("transpose_int64", "Transpose", [ints("ti", 0, 100, 3, 4)], {"perm": [1, 0]})

    x = randn("squeeze", 1, 3, 1, 5)
    single("squeeze_axes_input", "Squeeze", [x, i64(0, 2)], init=(1,))
    single("squeeze_all", "Squeeze", [x])
    single("squeeze_neg_axis", "Squeeze", [x, i64(-2)], init=(1,))
    single("squeeze_opset11_attr", "Squeeze", [x], {"axes": [0]}, opset=11)
    x = randn("unsqueeze", 3, 4)
    single("unsqueeze_axes_input", "Unsqueeze", [x, i64(0)], init=(1,))
    single("unsqueeze_two_axes", "Unsqueeze", [x, i64(1, 3)], init=(1,))
    single("unsqueeze_neg_axis", "Unsqueeze", [x, i64(-1)], init=(1,))
    single("unsqueeze_unsorted", "Unsqueeze", [x, i64(3, 0)], init=(1,))
    single("unsqueeze_scalar", "Unsqueeze", [f32(2.0), i64(0)], init=(1,))
    single("unsqueeze_opset11_attr", "Unsqueeze", [x], {"axes": [0, -1]}, opset=11)

    x = randn("shape", 2, 3, 4, 5)
    single("shape_basic", "Shape", [x], out_dtype=np.int64)
    single("shape_start_end", "Shape", [x], {"start": 1, "end": 3}, out_dtype=np.int64, opset=15)
    single("shape_neg_start", "Shape", [x], {"start": -2}, out_dtype=np.int64, opset=15)
    single("shape_scalar", "Shape", [f32(1.0)], out_dtype=np.int64)
    single("shape_dynamic", "Shape", [randn("shape_dyn", 6, 2)], out_dtype=np.int64,
           sym={"x0": ["N", 2]})

    single("constantofshape_float", "ConstantOfShape", [i64(2, 3)],
           {"value": numpy_helper.from_array(f32(1.25))}, init=(0,), out_dtype=np.float32)
    single("constantofshape_int64", "ConstantOfShape", [i64(4)],
           {"value": numpy_helper.from_array(i64(7))}, init=(0,), out_dtype=np.int64)
    single("constantofshape_default", "ConstantOfShape", [i64(3, 1, 2)], init=(0,),
           out_dtype=np.float32)
    single("constantofshape_shape_input", "ConstantOfShape", [i64(2, 2)],
           {"value": numpy_helper.from_array(np.array([3], dtype=np.int32))}, out_dtype=np.int32)
    single("constantofshape_empty", "ConstantOfShape", [i64(0, 3)], init=(0,),
           out_dtype=np.float32)

    # Constant: a model with no inputs at all, and constants feeding an op.
    add_case(Case("constant_tensor_no_inputs",
                  [helper.make_node("Constant", [], ["y"],
                                    value=numpy_helper.from_array(randn("ct", 2, 3)))],
                  [], [("y", np.float32)]))
    for attr, val, dt in [("value_float", 2.5, np.float32), ("value_floats", [1.0, -2.0], np.float32),
                          ("value_int", 3, np.int64), ("value_ints", [4, 5, 6], np.int64)]:
        n = f"constant_{attr}"
        x = randn(n, 2, 1) if dt == np.float32 else ints(n, 0, 9, 2, 1)
        nodes = [helper.make_node("Constant", [], ["c"], **{attr: val}),
                 helper.make_node("Add", ["x", "c"], ["y"])]
        add_case(Case(n, nodes, [("x", x, False)], [("y", dt)]))

    # Gather
    data = randn("gather", 5, 4, 3)
    single("gather_axis0", "Gather", [data, i64(0, 4, 2)], {"axis": 0})
    single("gather_axis1", "Gather", [data, i64(3, 0)], {"axis": 1})
    single("gather_axis_neg1", "Gather", [data, i64(2, 2, 1)], {"axis": -1})
    single("gather_negative_indices", "Gather", [data, i64(-1, -5, 0)], {"axis": 0})
    single("gather_scalar_index", "Gather", [data, np.array(-2, np.int64)], {"axis": 1})
    single("gather_2d_indices", "Gather", [data, np.array([[0, 1], [3, -1]], np.int64)], {"axis": 0})
    single("gather_int32_indices", "Gather", [data, np.array([1, -1], np.int32)], {"axis": 2})
    single("gather_indices_init", "Gather", [data, i64(4, 1)], {"axis": 0}, init=(1,))
    single("gather_int64_data", "Gather", [i64(10, 20, 30, 40), i64(3, 0, -1)], {"axis": 0})
    single("gather_empty_indices", "Gather", [data, np.zeros((0,), np.int64)], {"axis": 1})

    # Slice
    x = randn("slice", 6, 7, 8)
    def sl(name, starts, ends, axes=None, steps=None, opset=DEFAULT_OPSET, init=True, idx=np.int64):
        ins = [x, np.array(starts, idx), np.array(ends, idx)]
        ins.append(None if axes is None else np.array(axes, idx))
        ins.append(None if steps is None else np.array(steps, idx))
        while ins[-1] is None:
            ins.pop()
        single(name, "Slice", ins, init=tuple(range(1, len(ins))) if init else (), opset=opset)
    sl("slice_basic", [1, 2], [4, 6], [0, 1])
    sl("slice_default_axes", [0, 1, 2], [3, 5, 7])
    sl("slice_negative_axes", [1], [-1], [-1])
    sl("slice_negative_starts_ends", [-4, -6], [-1, -2], [0, 2])
    sl("slice_step2", [0, 1], [6, 8], [0, 2], [2, 3])
    sl("slice_negative_step", [5, -1], [0, -9], [0, 1], [-1, -2])
    sl("slice_reverse_all", [-1], [-(2**63)], [2], [-1])
    sl("slice_end_int64_max", [2], [2**63 - 1], [1])
    sl("slice_clamp_out_of_range", [-100, 3], [100, 1000], [0, 2])
    sl("slice_empty_result", [4], [2], [0])
    sl("slice_int32_params", [1], [3], [1], idx=np.int32)
    sl("slice_params_as_inputs", [0, 1], [2, 5], [1, 2], [1, 2], init=False)
    single("slice_opset9_attrs", "Slice", [x], {"starts": [1, 0], "ends": [3, -1], "axes": [0, 2]},
           opset=9)

    # Pad
    x = randn("pad", 2, 3, 4)
    def pad(name, pads, mode=None, value=None, opset=DEFAULT_OPSET, axes=None, data=x):
        ins = [data, np.array(pads, np.int64), value]
        if axes is not None:
            if value is None:
                ins[2] = None
            ins.append(np.array(axes, np.int64))
        while ins[-1] is None:
            ins.pop()
        attrs = {"mode": mode} if mode else None
        single(name, "Pad", ins, attrs, init=tuple(range(1, len(ins))), opset=opset)
    pad("pad_constant_zero", [0, 1, 2, 0, 2, 1])
    pad("pad_constant_value", [1, 0, 1, 1, 2, 0], value=np.array(-3.5, np.float32))
    pad("pad_reflect", [0, 2, 3, 0, 1, 2], mode="reflect")
    pad("pad_edge", [1, 1, 2, 0, 2, 3], mode="edge")
    pad("pad_negative_crop", [0, -1, 1, 0, -1, -2])
    pad("pad_axes_opset18", [1, 2, 3, 0], axes=[0, -1], opset=18)
    pad("pad_wrap_opset19", [0, 2, 1, 0, 1, 3], mode="wrap", opset=19)
    pad("pad_int64_data", [2, 1], value=np.array(9, np.int64), data=i64(1, 2, 3))
    single("pad_pads_as_input", "Pad", [x, i64(0, 0, 1, 0, 0, 1)])
    single("pad_opset10_attrs", "Pad", [randn("p10", 3, 4)], {"pads": [1, 0, 0, 2], "value": 1.5},
           opset=10)
    single("pad_4d_reflect_hw", "Pad", [randn("p4", 1, 2, 4, 5), i64(0, 0, 2, 1, 0, 0, 1, 3)],
           {"mode": "reflect"}, init=(1,))


# ---- reductions, normalisation, matrix products ------------------------------------------------


def gen_nn():
    x = randn("softmax", 2, 3, 4)
    single("softmax_default_axis", "Softmax", [x])
    single("softmax_axis0", "Softmax", [x], {"axis": 0})
    single("softmax_axis1", "Softmax", [x], {"axis": 1})
    single("softmax_axis_neg2", "Softmax", [x], {"axis": -2})
    single("softmax_large_values", "Softmax", [f32(1000, 1001, 1002, -1000).reshape(1, 4)])
    single("softmax_1d", "Softmax", [randn("s1", 10)])
    # Before opset 13, Softmax flattens the input to 2-D at `axis` and normalises each row.
    single("softmax_opset11_axis1", "Softmax", [x], {"axis": 1}, opset=11)
    single("softmax_opset11_axis0", "Softmax", [x], {"axis": 0}, opset=11)
    single("softmax_opset11_default", "Softmax", [x], opset=11)
    single("softmax_opset11_neg_axis", "Softmax", [x], {"axis": -1}, opset=11)
    single("softmax_f64", "Softmax", [randn("sf64", 3, 5, dtype=np.float64)])

    def gemm(name, m, k, n, c_shape=(None,), attrs=None, ta=0, tb=0, init=()):
        a = randn(name, *((k, m) if ta else (m, k)))
        b = randn(name, *((n, k) if tb else (k, n)), salt=1)
        ins = [a, b]
        if c_shape != (None,):
            ins.append(randn(name, *c_shape, salt=2))
        at = dict(attrs or {})
        if ta:
            at["transA"] = 1
        if tb:
            at["transB"] = 1
        single(name, "Gemm", ins, at, init=init)
    gemm("gemm_basic", 3, 4, 5, (3, 5))
    gemm("gemm_no_c", 3, 4, 5)
    gemm("gemm_trans_a", 3, 4, 5, (3, 5), ta=1)
    gemm("gemm_trans_b", 3, 4, 5, (3, 5), tb=1)
    gemm("gemm_trans_both", 2, 7, 3, (3,), ta=1, tb=1)
    gemm("gemm_alpha_beta", 3, 4, 5, (3, 5), {"alpha": 0.5, "beta": -2.0})
    gemm("gemm_bias_vector", 4, 6, 8, (8,), init=(1, 2))
    gemm("gemm_bias_row", 4, 6, 8, (1, 8))
    gemm("gemm_bias_col", 4, 6, 8, (4, 1))
    gemm("gemm_bias_scalar", 4, 6, 8, ())
    gemm("gemm_large_k", 5, 300, 7, (7,), tb=1, init=(1, 2))
    gemm("gemm_beta_zero", 3, 4, 5, (3, 5), {"beta": 0.0})

    def mm(name, sa, sb, dtype=np.float32):
        if dtype == np.float32:
            single(name, "MatMul", [randn(name, *sa), randn(name, *sb, salt=1)])
        else:
            single(name, "MatMul", [ints(name, -9, 9, *sa, dtype=dtype), ints(name, -9, 9, *sb, dtype=dtype, salt=1)])
    mm("matmul_2d", (3, 4), (4, 5))
    mm("matmul_batched", (2, 3, 4), (2, 4, 5))
    mm("matmul_bcast_rhs_2d", (2, 3, 4, 5), (5, 6))
    mm("matmul_bcast_batch", (2, 1, 3, 4), (5, 4, 2))
    mm("matmul_1d_2d", (4,), (4, 3))
    mm("matmul_2d_1d", (3, 4), (4,))
    mm("matmul_1d_1d", (6,), (6,))
    mm("matmul_3d_1d", (2, 3, 4), (4,))
    mm("matmul_odd_sizes", (17, 33), (33, 19))
    mm("matmul_int32", (3, 4), (4, 2), dtype=np.int32)
    mm("matmul_int64", (2, 3), (3, 2), dtype=np.int64)
    single("matmul_weight_init", "MatMul", [randn("mwi", 2, 8, 16), randn("mwi", 16, 4, salt=1)], init=(1,))
    single("matmul_f64", "MatMul", [randn("mf64", 3, 4, dtype=np.float64), randn("mf64", 4, 2, dtype=np.float64, salt=1)])

    def bn(name, shape, eps=None, opset=DEFAULT_OPSET):
        c = shape[1]
        x = randn(name, *shape)
        scale, bias, mean = randn(name, c, salt=1), randn(name, c, salt=2), randn(name, c, salt=3)
        var = positive(name, c, salt=4)
        single(name, "BatchNormalization", [x, scale, bias, mean, var],
               {"epsilon": eps} if eps is not None else None, init=(1, 2, 3, 4), opset=opset)
    bn("batchnorm_4d", (2, 3, 4, 5))
    bn("batchnorm_2d", (4, 6))
    bn("batchnorm_3d", (2, 3, 7))
    bn("batchnorm_epsilon", (1, 4, 3, 3), eps=0.1)
    bn("batchnorm_opset9", (2, 3, 2, 2), opset=9)
    bn("batchnorm_opset14", (2, 3, 2, 2), opset=14)
    x = randn("bn_inputs", 2, 3, 4)
    single("batchnorm_params_as_inputs", "BatchNormalization",
           [x, randn("bni", 3), randn("bni", 3, salt=1), randn("bni", 3, salt=2), positive("bni", 3)])

    single("dropout_opset17_no_ratio", "Dropout", [randn("dropout", 3, 4)])
    single("dropout_ratio_input", "Dropout", [randn("dropout2", 3, 4), np.array(0.3, np.float32)],
           init=(1,))
    single("dropout_with_mask", "Dropout", [randn("dropout3", 3, 4)], outs=2,
           out_dtype=[np.float32, np.bool_])
    single("dropout_training_false", "Dropout",
           [randn("dropout4", 2, 5), np.array(0.5, np.float32), np.array(False)], init=(1, 2))
    single("dropout_opset10_ratio_attr", "Dropout", [randn("dropout5", 3, 4)], {"ratio": 0.2},
           opset=10)
    single("dropout_opset7", "Dropout", [randn("dropout6", 3, 4)], opset=7)

    single("globalaveragepool_4d", "GlobalAveragePool", [randn("gap4", 2, 3, 5, 6)])
    single("globalaveragepool_3d", "GlobalAveragePool", [randn("gap3", 2, 3, 7)])
    single("globalaveragepool_5d", "GlobalAveragePool", [randn("gap5", 1, 2, 3, 4, 5)])
    single("globalaveragepool_1x1", "GlobalAveragePool", [randn("gap1", 2, 4, 1, 1)])


# ---- convolution and pooling ------------------------------------------------------------------


def gen_conv():
    def conv(name, xshape, wshape, attrs=None, bias=True, init=(1, 2), tol=None):
        x = randn(name, *xshape)
        w = randn(name, *wshape, salt=1)
        ins = [x, w]
        if bias:
            out_c = wshape[0]
            ins.append(randn(name, out_c, salt=2))
        single(name, "Conv", ins, attrs, init=tuple(i for i in init if i < len(ins)), tol=tol)
    conv("conv_basic", (1, 3, 7, 7), (4, 3, 3, 3))
    conv("conv_no_bias", (1, 3, 7, 7), (4, 3, 3, 3), bias=False)
    conv("conv_pads", (2, 3, 6, 5), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]})
    conv("conv_asymmetric_pads", (1, 2, 6, 6), (3, 2, 3, 2), {"pads": [0, 1, 2, 0]})
    conv("conv_strides", (1, 3, 9, 8), (2, 3, 3, 3), {"strides": [2, 3], "pads": [1, 1, 1, 1]})
    conv("conv_dilations", (1, 2, 10, 10), (3, 2, 3, 3), {"dilations": [2, 3]})
    conv("conv_groups", (1, 4, 6, 6), (6, 2, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]})
    conv("conv_depthwise", (2, 8, 7, 7), (8, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1]})
    conv("conv_depthwise_multiplier", (1, 3, 6, 6), (6, 1, 3, 3), {"group": 3})
    conv("conv_1x1", (2, 16, 5, 5), (8, 16, 1, 1))
    conv("conv_1x1_strided", (1, 8, 8, 8), (4, 8, 1, 1), {"strides": [2, 2]})
    conv("conv_7x7_s2", (1, 3, 23, 23), (8, 3, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]})
    conv("conv_nonsquare_kernel", (1, 2, 8, 9), (3, 2, 1, 5), {"pads": [0, 2, 0, 2]})
    conv("conv_auto_pad_same_upper", (1, 2, 7, 8), (3, 2, 3, 4), {"auto_pad": "SAME_UPPER", "strides": [2, 2]})
    conv("conv_auto_pad_same_lower", (1, 2, 7, 8), (3, 2, 3, 4), {"auto_pad": "SAME_LOWER", "strides": [2, 2]})
    conv("conv_auto_pad_valid", (1, 2, 7, 8), (3, 2, 3, 3), {"auto_pad": "VALID"})
    conv("conv_kernel_shape_attr", (1, 2, 5, 5), (3, 2, 3, 3), {"kernel_shape": [3, 3]})
    conv("conv_1d", (2, 3, 11), (4, 3, 3), {"pads": [1, 2], "strides": [2]})
    conv("conv_1d_dilated", (1, 2, 12), (3, 2, 3), {"dilations": [3]})
    conv("conv_3d", (1, 2, 5, 6, 4), (3, 2, 3, 3, 2), {"pads": [1, 0, 1, 1, 0, 0]})
    conv("conv_3d_strided_groups", (1, 4, 6, 6, 6), (4, 2, 2, 2, 2), {"strides": [2, 2, 2], "group": 2})
    conv("conv_weights_as_input", (1, 3, 5, 5), (2, 3, 3, 3), init=())
    # 576 products per output: fp32 summed in another order than ORT's differs by ~1e-5, which
    # outputs near zero cannot meet with atol 1e-7; scaled to the output's range instead.
    conv("conv_wide_channels", (1, 64, 6, 6), (32, 64, 3, 3), {"pads": [1, 1, 1, 1]},
         tol={"atol_scale": 1e-6})
    single("conv_dynamic_batch", "Conv",
           [randn("cdb", 3, 2, 5, 5), randn("cdb", 4, 2, 3, 3, salt=1)], init=(1,),
           sym={"x0": ["N", 2, 5, 5]})

    def convt(name, xshape, wshape, attrs=None, bias=True, init=(1, 2)):
        x = randn(name, *xshape)
        w = randn(name, *wshape, salt=1)
        ins = [x, w]
        if bias:
            g = (attrs or {}).get("group", 1)
            ins.append(randn(name, wshape[1] * g, salt=2))
        single(name, "ConvTranspose", ins, attrs, init=tuple(i for i in init if i < len(ins)))
    convt("convtranspose_basic", (1, 2, 4, 4), (2, 3, 3, 3))
    convt("convtranspose_no_bias", (1, 2, 4, 4), (2, 3, 3, 3), bias=False)
    convt("convtranspose_strides", (1, 2, 3, 4), (2, 3, 3, 3), {"strides": [2, 2]})
    convt("convtranspose_pads", (1, 2, 4, 4), (2, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]})
    convt("convtranspose_output_padding", (1, 2, 3, 3), (2, 2, 3, 3),
          {"strides": [3, 2], "output_padding": [1, 1]})
    convt("convtranspose_output_shape", (1, 2, 3, 3), (2, 2, 3, 3),
          {"strides": [2, 2], "output_shape": [7, 8]})
    convt("convtranspose_dilations", (1, 1, 3, 3), (1, 2, 2, 2), {"dilations": [2, 2]})
    convt("convtranspose_groups", (1, 4, 3, 3), (4, 2, 3, 3), {"group": 2})
    convt("convtranspose_auto_pad_same_upper", (1, 2, 3, 3), (2, 1, 3, 3),
          {"auto_pad": "SAME_UPPER", "strides": [2, 2]})
    convt("convtranspose_1d", (1, 2, 5), (2, 3, 3), {"strides": [2]})
    convt("convtranspose_3d", (1, 2, 3, 3, 2), (2, 2, 2, 2, 2), {"strides": [2, 1, 2]})
    convt("convtranspose_kernel_shape_attr", (2, 3, 3, 3), (3, 2, 2, 2),
          {"kernel_shape": [2, 2], "strides": [2, 2]})

    def pool(op, name, xshape, attrs, outs=1, out_dtype=None, opset=DEFAULT_OPSET):
        single(name, op, [randn(name, *xshape)], attrs, outs=outs, out_dtype=out_dtype,
               opset=opset)
    pool("MaxPool", "maxpool_2x2_s2", (1, 3, 6, 6), {"kernel_shape": [2, 2], "strides": [2, 2]})
    pool("MaxPool", "maxpool_3x3_s2_pads", (2, 2, 9, 9), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]})
    pool("MaxPool", "maxpool_default_strides", (1, 2, 5, 5), {"kernel_shape": [2, 3]})
    pool("MaxPool", "maxpool_ceil_mode", (1, 1, 7, 7), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1})
    pool("MaxPool", "maxpool_ceil_mode_pads", (1, 2, 6, 6), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1})
    pool("MaxPool", "maxpool_dilations", (1, 1, 8, 8), {"kernel_shape": [2, 2], "dilations": [2, 2]})
    pool("MaxPool", "maxpool_auto_pad_same_upper", (1, 2, 7, 7), {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"})
    pool("MaxPool", "maxpool_auto_pad_same_lower", (1, 2, 6, 7), {"kernel_shape": [2, 2], "strides": [2, 2], "auto_pad": "SAME_LOWER"})
    pool("MaxPool", "maxpool_auto_pad_valid", (1, 2, 7, 7), {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "VALID"})
    pool("MaxPool", "maxpool_asymmetric_pads", (1, 1, 5, 6), {"kernel_shape": [3, 2], "pads": [0, 1, 2, 0]})
    pool("MaxPool", "maxpool_1d", (2, 3, 9), {"kernel_shape": [3], "strides": [2]})
    pool("MaxPool", "maxpool_3d", (1, 2, 4, 5, 6), {"kernel_shape": [2, 2, 3], "strides": [2, 1, 2]})
    pool("MaxPool", "maxpool_with_indices", (1, 2, 4, 4), {"kernel_shape": [2, 2], "strides": [2, 2]},
         outs=2, out_dtype=[np.float32, np.int64])
    pool("MaxPool", "maxpool_with_indices_pads", (2, 2, 5, 5), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
         outs=2, out_dtype=[np.float32, np.int64])
    single("maxpool_all_negative_pads", "MaxPool", [-positive("mpneg", 1, 1, 4, 4)],
           {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]})
    single("maxpool_int8", "MaxPool", [ints("mpi8", -100, 100, 1, 2, 5, 5, dtype=np.int8)],
           {"kernel_shape": [2, 2]}, opset=12)

    pool("AveragePool", "averagepool_2x2_s2", (1, 3, 6, 6), {"kernel_shape": [2, 2], "strides": [2, 2]})
    pool("AveragePool", "averagepool_pads_exclude", (1, 2, 5, 5), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]})
    pool("AveragePool", "averagepool_pads_include", (1, 2, 5, 5), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1})
    pool("AveragePool", "averagepool_ceil_mode", (1, 1, 7, 7), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1})
    pool("AveragePool", "averagepool_ceil_mode_pads_include", (1, 1, 6, 6),
         {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1, "count_include_pad": 1})
    pool("AveragePool", "averagepool_strides", (2, 2, 9, 8), {"kernel_shape": [3, 2], "strides": [3, 2]})
    pool("AveragePool", "averagepool_auto_pad_same_upper", (1, 2, 7, 7), {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"})
    pool("AveragePool", "averagepool_auto_pad_same_lower", (1, 2, 7, 7), {"kernel_shape": [2, 2], "auto_pad": "SAME_LOWER"})
    pool("AveragePool", "averagepool_asymmetric_pads", (1, 1, 6, 5), {"kernel_shape": [2, 3], "pads": [1, 0, 0, 2]})
    pool("AveragePool", "averagepool_1d", (1, 2, 10), {"kernel_shape": [4], "strides": [3]})
    pool("AveragePool", "averagepool_3d", (1, 1, 4, 4, 4), {"kernel_shape": [2, 2, 2], "strides": [2, 2, 2]})
    pool("AveragePool", "averagepool_dilations_opset19", (1, 1, 7, 7),
         {"kernel_shape": [2, 2], "dilations": [2, 2]}, opset=19)


def gen_resize():
    x = randn("resize", 1, 2, 3, 4)
    def rs(name, attrs, scales=None, sizes=None, opset=DEFAULT_OPSET, data=x, roi=None, axes=None):
        ins = [data, roi]
        if scales is not None:
            ins.append(np.array(scales, np.float32))
        elif sizes is not None:
            # Before opset 13 the scales input is required even with sizes (empty then).
            ins.append(np.zeros((0,), np.float32) if opset < 13 else None)
            ins.append(np.array(sizes, np.int64))
        single(name, "Resize", ins, dict(attrs, **({"axes": axes} if axes else {})),
               init=tuple(range(1, len(ins))), opset=opset)
    up = [1, 1, 2, 2]
    rs("resize_nearest_default", {"mode": "nearest"}, up)
    rs("resize_nearest_asymmetric_floor", {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}, [1, 1, 1.5, 2.5])
    rs("resize_nearest_round_prefer_ceil", {"mode": "nearest", "nearest_mode": "round_prefer_ceil"}, [1, 1, 1.7, 2.3])
    rs("resize_nearest_ceil", {"mode": "nearest", "nearest_mode": "ceil"}, [1, 1, 0.7, 1.6])
    rs("resize_nearest_align_corners", {"mode": "nearest", "coordinate_transformation_mode": "align_corners"}, [1, 1, 2, 1.5])
    rs("resize_nearest_sizes", {"mode": "nearest"}, sizes=[1, 2, 7, 5])
    rs("resize_nearest_downsample", {"mode": "nearest"}, [1, 1, 0.6, 0.6], data=randn("rd", 1, 1, 5, 7))
    rs("resize_linear_half_pixel", {"mode": "linear"}, up)
    rs("resize_linear_align_corners", {"mode": "linear", "coordinate_transformation_mode": "align_corners"}, [1, 1, 2, 1.5])
    rs("resize_linear_asymmetric", {"mode": "linear", "coordinate_transformation_mode": "asymmetric"}, up)
    rs("resize_linear_pytorch_half_pixel", {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"}, sizes=[1, 2, 1, 6])
    rs("resize_linear_downsample", {"mode": "linear"}, [1, 1, 0.5, 0.5], data=randn("rld", 1, 2, 6, 8))
    rs("resize_linear_sizes", {"mode": "linear"}, sizes=[1, 2, 5, 9])
    rs("resize_linear_3d_input", {"mode": "linear"}, [1, 1, 2], data=randn("rl3", 1, 2, 5))
    rs("resize_cubic", {"mode": "cubic"}, up)
    rs("resize_cubic_a05_exclude_outside", {"mode": "cubic", "cubic_coeff_a": -0.5, "exclude_outside": 1}, [1, 1, 1.5, 1.5])
    rs("resize_cubic_align_corners", {"mode": "cubic", "coordinate_transformation_mode": "align_corners"}, [1, 1, 2, 2])
    rs("resize_opset11_nearest", {"mode": "nearest"}, up, opset=11, roi=np.zeros((0,), np.float32))
    rs("resize_opset11_linear_sizes", {"mode": "linear"}, sizes=[1, 2, 6, 6], opset=11,
       roi=np.zeros((0,), np.float32))
    rs("resize_opset18_axes", {"mode": "linear"}, [2.0, 0.5], opset=18, axes=[2, 3],
       data=randn("r18", 1, 1, 4, 6))
    rs("resize_opset18_antialias", {"mode": "linear", "antialias": 1}, [1, 1, 0.5, 0.5], opset=18,
       data=randn("r18a", 1, 1, 8, 8))
    rs("resize_opset18_keep_aspect_not_larger", {"mode": "nearest", "keep_aspect_ratio_policy": "not_larger"},
       sizes=[7, 7], axes=[2, 3], opset=18)
    rs("resize_tf_crop_and_resize", {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize"},
       sizes=[1, 2, 3, 3], roi=f32(0, 0, 0.2, 0.3, 1, 1, 0.8, 0.9), data=randn("rtf", 1, 2, 5, 5))


# ---- small multi-op patterns that exported models contain --------------------------------------


def gen_patterns():
    x = randn("pat_conv_bn_relu_pool", 1, 3, 12, 12)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["n"]),
        helper.make_node("Relu", ["n"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["y"], kernel_shape=[2, 2], strides=[2, 2]),
    ]
    n = "pat_conv_bn_relu_pool"
    inits = [("w", randn(n, 4, 3, 3, 3, salt=1)), ("b", randn(n, 4, salt=2)),
             ("s", randn(n, 4, salt=3)), ("bb", randn(n, 4, salt=4)), ("m", randn(n, 4, salt=5)),
             ("v", positive(n, 4, salt=6))]
    add_case(Case(n, nodes, [("x", x, False)] + [(k, v, True) for k, v in inits], [("y", np.float32)]))

    # The Shape -> Gather -> Unsqueeze -> Concat -> Reshape idiom with a symbolic batch.
    n = "pat_dynamic_flatten"
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axes0"], ["nu"]),
        helper.make_node("Concat", ["nu", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"]),
    ]
    inits = [("zero", np.array(0, np.int64)), ("axes0", i64(0)), ("minus1", i64(-1))]
    add_case(Case(n, nodes, [("x", randn(n, 3, 2, 4, 4), False)] + [(k, v, True) for k, v in inits],
                  [("y", np.float32)], sym={"x": ["batch", 2, 4, 4]}))

    n = "pat_mlp_softmax"
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Add", ["h", "b1"], ["hb"]),
        helper.make_node("Relu", ["hb"], ["r"]),
        helper.make_node("Gemm", ["r", "w2", "b2"], ["l"], transB=1),
        helper.make_node("Softmax", ["l"], ["y"], axis=1),
    ]
    inits = [("w1", randn(n, 16, 32, salt=1)), ("b1", randn(n, 32, salt=2)),
             ("w2", randn(n, 10, 32, salt=3)), ("b2", randn(n, 10, salt=4))]
    add_case(Case(n, nodes, [("x", randn(n, 4, 16), False)] + [(k, v, True) for k, v in inits],
                  [("y", np.float32)]))

    n = "pat_two_outputs_shared"
    nodes = [
        helper.make_node("Sigmoid", ["x"], ["s"]),
        helper.make_node("Mul", ["x", "s"], ["y0"]),
        helper.make_node("Transpose", ["s"], ["y1"], perm=[1, 0]),
    ]
    add_case(Case(n, nodes, [("x", randn(n, 3, 5), False)], [("y0", np.float32), ("y1", np.float32)]))

    n = "pat_upsample_concat"
    nodes = [
        helper.make_node("Resize", ["x", "", "scales"], ["u"], mode="nearest"),
        helper.make_node("Concat", ["u", "skip"], ["c"], axis=1),
        helper.make_node("HardSwish", ["c"], ["y"]),
    ]
    add_case(Case(n, nodes, [("x", randn(n, 1, 2, 3, 3), False), ("skip", randn(n, 1, 3, 6, 6, salt=1), False),
                             ("scales", f32(1, 1, 2, 2), True)], [("y", np.float32)]))

    n = "pat_input_is_output"
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    add_case(Case(n, nodes, [("x", randn(n, 4), False)], [("y", np.float32), ("x", np.float32)]))


# ---- writing ------------------------------------------------------------------------------


def value_info(name, arr_dtype, shape):
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(arr_dtype)), shape)


def build_model(case, out_shapes):
    graph_inputs, inits = [], []
    for name, arr, is_init in case.inputs:
        if is_init:
            inits.append(numpy_helper.from_array(arr, name))
        elif not any(i.name == name for i in graph_inputs):
            graph_inputs.append(value_info(name, arr.dtype, case.sym.get(name, list(arr.shape))))
    outputs = [value_info(n, dt, out_shapes.get(n)) for n, dt in case.outputs]
    graph = helper.make_graph(case.nodes, case.name, graph_inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", case.opset)],
                              producer_name="anvil-gen-cases")
    model.ir_version = ir_version_for(case.opset)
    return model


def run_ort(model, feeds):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def write_case(case, outdir):
    feeds = {}
    for name, arr, is_init in case.inputs:
        if not is_init:
            feeds[name] = arr
    # First pass with unknown output shapes; the actual shapes then go into the saved model so
    # that it declares them as exporters do (symbolic-input cases keep them open).
    model = build_model(case, {})
    try:
        got = run_ort(model, feeds)
    except Exception as e:  # a bad case definition: say which one
        raise SystemExit(f"case {case.name}: onnxruntime failed: {e}")
    shapes = {n: list(a.shape) for (n, _), a in zip(case.outputs, got)}
    if case.sym:
        # Declare what ONNX shape inference derives (symbolic dims included); any dim it cannot
        # name stays open.
        inferred = onnx.shape_inference.infer_shapes(model)
        known = {vi.name: vi for vi in list(inferred.graph.value_info) + list(inferred.graph.output)}
        for n in shapes:
            vi = known.get(n)
            dims = []
            for i, d in enumerate(shapes[n]):
                tdims = vi.type.tensor_type.shape.dim if vi is not None else []
                if i < len(tdims) and tdims[i].HasField("dim_param") and not tdims[i].dim_param.startswith("unk__"):
                    dims.append(tdims[i].dim_param)
                elif i < len(tdims) and tdims[i].HasField("dim_value"):
                    dims.append(tdims[i].dim_value)
                else:
                    dims.append(None)
            shapes[n] = dims
    model = build_model(case, shapes)
    onnx.checker.check_model(model)
    for (n, dt), a in zip(case.outputs, got):
        if a.dtype != np.dtype(dt):
            raise SystemExit(f"case {case.name}: output {n} is {a.dtype}, declared {np.dtype(dt)}")

    cdir = os.path.join(outdir, case.name)
    ddir = os.path.join(cdir, "test_data_set_0")
    os.makedirs(ddir, exist_ok=True)
    onnx.save(model, os.path.join(cdir, "model.onnx"))
    for i, name in enumerate(feeds):
        t = numpy_helper.from_array(feeds[name], name)
        with open(os.path.join(ddir, f"input_{i}.pb"), "wb") as f:
            f.write(t.SerializeToString())
    for i, ((name, _), arr) in enumerate(zip(case.outputs, got)):
        t = numpy_helper.from_array(np.asarray(arr), name)
        with open(os.path.join(ddir, f"output_{i}.pb"), "wb") as f:
            f.write(t.SerializeToString())
    if case.tol:
        with open(os.path.join(cdir, "tolerance.txt"), "w") as f:
            for k, v in case.tol.items():
                f.write(f"{k} {v}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir")
    ap.add_argument("--list", action="store_true", help="print the case names and exit")
    args = ap.parse_args()

    for gen in (gen_unary, gen_binary, gen_cast, gen_shape_ops, gen_nn, gen_conv, gen_resize,
                gen_patterns):
        gen()
    if args.list:
        for c in CASES:
            print(c.name)
        return

    with open(__file__, "rb") as f:
        stamp = hashlib.sha256(f.read() + f"{onnx.__version__} {ort.__version__} {np.__version__}".encode()).hexdigest()
    stamp_path = os.path.join(args.outdir, ".stamp")
    if os.path.exists(stamp_path) and open(stamp_path).read() == stamp:
        print(f"{len(CASES)} cases in {args.outdir} are up to date")
        return
    if os.path.isdir(args.outdir) and os.listdir(args.outdir):
        if not os.path.exists(stamp_path):
            raise SystemExit(f"{args.outdir} is not empty and was not made by this script; "
                             "pass an empty or new folder")
        shutil.rmtree(args.outdir)
    os.makedirs(args.outdir, exist_ok=True)
    for c in CASES:
        try:
            write_case(c, args.outdir)
        except onnx.checker.ValidationError as e:
            raise SystemExit(f"case {c.name}: invalid model: {e}")
    with open(stamp_path, "w") as f:
        f.write(stamp)
    print(f"wrote {len(CASES)} cases to {args.outdir}")


if __name__ == "__main__":
    sys.exit(main())
