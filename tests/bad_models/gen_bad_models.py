#!/usr/bin/env python3
"""Writes anvil's corpus of bad ONNX models (one per class of defect) and manifest.tsv, plus the
small valid models the importer's unit test reads (tests/unit/data/onnx_*).

Run with the project's venv (onnx==1.22.0):
    .venv/bin/python tests/bad_models/gen_bad_models.py

Everything written is fixed: re-running produces identical files.

manifest.tsv columns (tab-separated, '#' starts a comment line):
    file      path relative to this folder
    status    the anvil_status name the load (or run) must fail with
    substring text the error message must contain
    stage     load: anvil_model_load must fail
              run:  the model may load; a session is created and run with every input filled
                    with `fill`, and the first failure (load, session or run) must match
    fill      value every element of every input gets (run rows only)
"""

import os
import random
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
UNIT_DATA = os.path.join(os.path.dirname(HERE), "unit", "data")

OPSET = 17
IR = 8

rows = []


def model(nodes, inputs, outputs, inits=(), opset=OPSET, ir=IR, extra_opsets=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    ops = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    m = helper.make_model(g, opset_imports=ops, producer_name="anvil-gen")
    m.ir_version = ir
    return m


def fvi(name, shape, dt=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dt, shape)


def identity_model(inits=(), inputs=None):
    """x -> Identity -> y, plus whatever initializers are given."""
    inputs = inputs if inputs is not None else [fvi("x", [2])]
    return model([helper.make_node("Identity", ["x"], ["y"])], inputs, [fvi("y", [2])], inits)


def write_bytes(rel, data):
    path = os.path.join(HERE, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def bad(rel, m, status, substring, stage="load", fill=""):
    data = m if isinstance(m, (bytes, bytearray)) else m.SerializeToString()
    write_bytes(rel, data)
    rows.append((rel, status, substring, stage, str(fill)))


def raw_tensor(name, dt, dims, raw):
    t = TensorProto()
    t.name = name
    t.data_type = dt
    t.dims.extend(dims)
    t.raw_data = raw
    return t


def external_tensor(name, dims, location, offset=None, length=None):
    t = TensorProto()
    t.name = name
    t.data_type = TensorProto.FLOAT
    t.dims.extend(dims)
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", offset), ("length", length)):
        if v is not None:
            e = t.external_data.add()
            e.key = k
            e.value = str(v)
    return t


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def field(num, payload):
    """A length-delimited protobuf field (wire type 2)."""
    if isinstance(payload, str):
        payload = payload.encode()
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def graph_attr(name, graph):
    """AttributeProto bytes: name (1), type (20) = GRAPH, g (6)."""
    return field(1, name) + varint(20 << 3) + varint(onnx.AttributeProto.GRAPH) + field(6, graph)


def nested_if(depth):
    """NodeProto bytes of an If whose then_branch holds an If ... `depth` levels deep. Written
    by hand: the Python protobuf runtime itself refuses to build messages this deep."""
    leaf = helper.make_graph([helper.make_node("Identity", ["x"], ["r0"])], "leaf", [],
                             [fvi("r0", [2])]).SerializeToString()
    body = leaf
    for level in range(1, depth + 1):
        out = "r%d" % level
        node = (field(1, "c") + field(2, out) + field(4, "If") +
                field(5, graph_attr("then_branch", body)) + field(5, graph_attr("else_branch", leaf)))
        if level == depth:
            return node
        body = field(1, node) + field(2, "level%d" % level) + field(12, field(1, out))
    raise ValueError("depth must be >= 1")


def with_extra_node(m, node_bytes):
    """Serialized model m with one more node appended to its graph."""
    graph = m.graph.SerializeToString() + field(1, node_bytes)
    m = onnx.ModelProto.FromString(m.SerializeToString())
    m.ClearField("graph")
    return m.SerializeToString() + field(7, graph)


def main():
    valid = identity_model()

    # --- not a model at all ---------------------------------------------------------------
    full = model([helper.make_node("Relu", ["x"], ["y"])], [fvi("x", [2, 3])], [fvi("y", [2, 3])],
                 [numpy_helper.from_array(np.arange(64, dtype=np.float32), "w")]).SerializeToString()
    bad("truncated.onnx", full[: len(full) * 2 // 3], "ANVIL_ERR_INVALID_MODEL",
        "not an ONNX model")
    rnd = random.Random(1234)
    bad("random_bytes.onnx", bytes(rnd.getrandbits(8) for _ in range(512)),
        "ANVIL_ERR_INVALID_MODEL", "not an ONNX model")
    bad("tensorproto.onnx", numpy_helper.from_array(np.ones((4, 4), np.float32), "t"),
        "ANVIL_ERR_INVALID_MODEL", "not an ONNX model")

    # --- dims and sizes ----------------------------------------------------------------------
    bad("huge_dims.onnx", identity_model([raw_tensor("w", TensorProto.FLOAT, [1 << 40], b"\0" * 4)]),
        "ANVIL_ERR_LIMIT", "more than anvil's limit")
    bad("negative_dims.onnx",
        identity_model([raw_tensor("w", TensorProto.FLOAT, [2, -3], b"\0" * 24)]),
        "ANVIL_ERR_INVALID_MODEL", "dim 1 is negative")
    bad("numel_overflow.onnx",
        identity_model([raw_tensor("w", TensorProto.FLOAT, [1 << 32, 1 << 32], b"")]),
        "ANVIL_ERR_INVALID_MODEL", "element count overflows")
    bad("bytes_overflow.onnx", identity_model([raw_tensor("w", TensorProto.FLOAT, [1 << 62], b"")]),
        "ANVIL_ERR_INVALID_MODEL", "size in bytes overflows")
    bad("init_size_mismatch.onnx",
        identity_model([raw_tensor("w", TensorProto.FLOAT, [2, 3], b"\0" * 20)]),
        "ANVIL_ERR_INVALID_MODEL", "raw_data holds 20 bytes but shape [2,3] of FLOAT needs 24")
    bad("input_dim_huge.onnx", identity_model(inputs=[fvi("x", [1 << 40])]), "ANVIL_ERR_LIMIT",
        "graph input 'x' has shape [1099511627776]")

    # --- types -------------------------------------------------------------------------------
    m = identity_model()
    m.graph.input[0].type.tensor_type.elem_type = 99
    bad("unknown_dtype.onnx", m, "ANVIL_ERR_INVALID_MODEL", "unknown element type 99")
    bad("string_dtype.onnx", identity_model(inputs=[fvi("x", [2], TensorProto.STRING)]),
        "ANVIL_ERR_UNSUPPORTED", "element type STRING")

    # --- graph structure ---------------------------------------------------------------------
    bad("cycle.onnx",
        model([helper.make_node("Relu", ["b"], ["a"], name="r1"),
               helper.make_node("Relu", ["a"], ["b"], name="r2"),
               helper.make_node("Add", ["x", "b"], ["y"], name="add")],
              [fvi("x", [2])], [fvi("y", [2])]),
        "ANVIL_ERR_INVALID_MODEL", "cycle")
    bad("dup_value.onnx",
        model([helper.make_node("Relu", ["x"], ["y"], name="r1"),
               helper.make_node("Neg", ["x"], ["y"], name="r2")], [fvi("x", [2])],
              [fvi("y", [2])]),
        "ANVIL_ERR_INVALID_MODEL", "value 'y' is defined more than once")
    bad("undefined_value.onnx",
        model([helper.make_node("Add", ["x", "nowhere"], ["y"], name="add")], [fvi("x", [2])],
              [fvi("y", [2])]),
        "ANVIL_ERR_INVALID_MODEL", "'nowhere' is never defined")

    # --- versions and operators ----------------------------------------------------------------
    # Operators anvil will not implement: a vendor one, an ai.onnx.ml one, SequenceMap (sequences
    # are out of scope; it also carries a subgraph) and ImageDecoder (image codecs are out of
    # scope), so the expected message stays valid as anvil's operator set grows.
    body = helper.make_graph([helper.make_node("Neg", ["bx"], ["by"])], "body", [fvi("bx", [2])],
                             [fvi("by", [2])])
    nodes = [helper.make_node("FusedConv", ["x"], ["f%d" % i], domain="com.microsoft")
             for i in range(3)]
    nodes += [helper.make_node("SequenceMap", ["x"], ["z"], body=body),
              helper.make_node("Relu", ["x"], ["y"]),
              helper.make_node("TreeEnsembleClassifier", ["x"], ["l", "p"],
                               domain="ai.onnx.ml"),
              helper.make_node("ImageDecoder", ["c"], ["s"])]
    bad("unsupported_ops.onnx",
        model(nodes, [fvi("x", [2]), fvi("c", [4], TensorProto.UINT8)], [fvi("y", [2])],
              extra_opsets=[("com.microsoft", 1), ("ai.onnx.ml", 3)]),
        "ANVIL_ERR_UNSUPPORTED",
        "unsupported operators: com.microsoft::FusedConv (opset 1, 3 nodes), "
        "SequenceMap (opset 17, 1 node), ai.onnx.ml::TreeEnsembleClassifier (opset 3, 1 node), "
        "ImageDecoder (opset 17, 1 node)")
    # anvil's internal ops ("anvil.*", which its passes create) are not ONNX operators
    bad("internal_op.onnx",
        model([helper.make_node("anvil.ConvNhwc", ["x", "x"], ["y"])], [fvi("x", [1, 1, 1, 1])],
              [fvi("y", [1, 1, 1, 1])]),
        "ANVIL_ERR_UNSUPPORTED", "unsupported operators: anvil.ConvNhwc (opset 17, 1 node)")
    m = identity_model()
    m.opset_import[0].version = 28
    bad("future_opset.onnx", m, "ANVIL_ERR_UNSUPPORTED",
        "opset 28 is newer than anvil supports (7..27); re-export with opset 27 or older")
    m = identity_model()
    m.ir_version = 2
    bad("old_ir.onnx", m, "ANVIL_ERR_UNSUPPORTED", "IR version 2 is not supported")
    shallow = model([helper.make_node("Identity", ["x"], ["y"])],
                    [fvi("x", [2]), fvi("c", [], TensorProto.BOOL)], [fvi("y", [2])])
    bad("deep_if.onnx", with_extra_node(shallow, nested_if(40)), "ANVIL_ERR_LIMIT",
        "nested more than 32 deep")

    # --- attributes ----------------------------------------------------------------------------
    conv_in = [fvi("x", [1, 1, 4, 4])]
    conv_out = [fvi("y", [1, 1, 2, 2])]
    w = numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "w")
    conv = helper.make_node("Conv", ["x", "w"], ["y"], name="conv", kernel_shape=[3, 3])
    conv.attribute[0].type = onnx.AttributeProto.FLOAT  # still holds ints
    bad("attr_type_mismatch.onnx", model([conv], conv_in, conv_out, [w]),
        "ANVIL_ERR_INVALID_MODEL", "attribute 'kernel_shape' is declared FLOAT but holds INTS")
    conv = helper.make_node("Conv", ["x", "w"], ["y"], name="conv", kernel_shape=3.0)
    bad("attr_wrong_type.onnx", model([conv], conv_in, conv_out, [w]),
        "ANVIL_ERR_INVALID_MODEL", "kernel_shape")

    # --- external data -------------------------------------------------------------------------
    bad("ext_absolute.onnx", identity_model([external_tensor("w", [2], "/etc/hostname")]),
        "ANVIL_ERR_INVALID_MODEL", "is an absolute path")
    bad("ext_dotdot.onnx", identity_model([external_tensor("w", [2], "sub/../../w.bin")]),
        "ANVIL_ERR_INVALID_MODEL", "contains a '..' component")
    write_bytes("ext_outside.bin", struct.pack("<2f", 1.0, 2.0))
    bad("ext_symlink/model.onnx", identity_model([external_tensor("w", [2], "w.bin")]),
        "ANVIL_ERR_INVALID_MODEL", "outside the model's folder")
    link = os.path.join(HERE, "ext_symlink", "w.bin")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink("../ext_outside.bin", link)
    write_bytes("ext_past_eof.bin", struct.pack("<4f", 1.0, 2.0, 3.0, 4.0))
    bad("ext_past_eof.onnx",
        identity_model([external_tensor("w", [4], "ext_past_eof.bin", offset=8, length=16)]),
        "ANVIL_ERR_INVALID_MODEL", "lies past the end of 'ext_past_eof.bin'")

    # --- quantization parameters a failed calibration leaves -------------------------------------
    scale = numpy_helper.from_array(np.array(0.0, np.float32), "scale")
    zp = numpy_helper.from_array(np.array(128, np.uint8), "zp")
    bad("dequantize_zero_scale.onnx",
        model([helper.make_node("DequantizeLinear", ["x", "scale", "zp"], ["y"], name="dq")],
              [fvi("x", [4], TensorProto.UINT8)], [fvi("y", [4])], [scale, zp]),
        "ANVIL_ERR_INVALID_MODEL", "node 'dq' (DequantizeLinear): the scale[0] is 0")
    x_s = numpy_helper.from_array(np.array(0.02, np.float32), "x_s")
    w = numpy_helper.from_array(np.ones((2, 1, 1, 1), np.int8), "w")
    w_s = numpy_helper.from_array(np.array([0.1, np.nan], np.float32), "w_s")
    w_z = numpy_helper.from_array(np.zeros(2, np.int8), "w_z")
    bad("qlinearconv_nan_scale.onnx",
        model([helper.make_node("QLinearConv", ["x", "x_s", "zp", "w", "w_s", "w_z", "x_s", "zp"],
                                ["y"], name="qconv")],
              [fvi("x", [1, 1, 2, 2], TensorProto.UINT8)], [fvi("y", None, TensorProto.UINT8)],
              [x_s, zp, w, w_s, w_z]),
        "ANVIL_ERR_INVALID_MODEL", "w_scale[1] is nan")

    # --- failures only a run can show ------------------------------------------------------------
    data = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(3, 2), "data")
    bad("gather_oob.onnx",
        model([helper.make_node("Gather", ["data", "idx"], ["y"], name="gather", axis=0)],
              [fvi("idx", [1], TensorProto.INT64)], [fvi("y", [1, 2])], [data]),
        "ANVIL_ERR_RUNTIME", "100", stage="run", fill=100)
    shape = numpy_helper.from_array(np.array([1 << 40], np.int64), "shape")
    bad("constantofshape_huge.onnx",
        model([helper.make_node("ConstantOfShape", ["shape"], ["z"], name="cos"),
               helper.make_node("Identity", ["x"], ["y"])],
              [fvi("x", [2])], [fvi("y", [2]), fvi("z", None)], [shape]),
        "ANVIL_ERR_LIMIT", "limit", stage="run", fill=1)

    with open(os.path.join(HERE, "manifest.tsv"), "w") as f:
        f.write("# file\tstatus\tsubstring\tstage\tfill (written by gen_bad_models.py)\n")
        for r in rows:
            f.write("\t".join(r) + "\n")

    write_unit_models()
    assert valid.graph.node  # the helper model itself stays well-formed
    return 0


def write_unit_models():
    """Valid models for tests/unit/test_onnx_import.c."""
    os.makedirs(UNIT_DATA, exist_ok=True)
    # Every initializer storage form the importer handles: raw_data, float_data, int64_data,
    # FLOAT16 bit patterns in int32_data, BOOL in int32_data, plus an IR<4-style input.
    w = numpy_helper.from_array(np.arange(54, dtype=np.float32).reshape(2, 3, 3, 3) / 8, "W")
    b = helper.make_tensor("B", TensorProto.FLOAT, [2], [0.5, -1.5])
    shape = helper.make_tensor("S", TensorProto.INT64, [2], [0, -1])
    half = helper.make_tensor("H", TensorProto.FLOAT16, [3],
                              np.array([1.0, -2.0, 0.5], np.float16))
    flags = helper.make_tensor("F", TensorProto.BOOL, [2], [True, False])
    pads = numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads")
    value = numpy_helper.from_array(np.array([3.0, 4.0], np.float32), "cval")
    nodes = [
        helper.make_node("Conv", ["X", "W", "B"], ["c"], name="conv", kernel_shape=[3, 3],
                         pads=[1, 1, 1, 1], strides=[1, 1], group=1),
        helper.make_node("LeakyRelu", ["c"], ["r"], alpha=0.25),
        helper.make_node("Pad", ["r", "pads", ""], ["p"], mode="reflect"),
        helper.make_node("Reshape", ["p", "S"], ["Y"], name="reshape"),
        helper.make_node("Constant", [], ["K"], value=value),
        helper.make_node("Identity", ["H"], ["Hout"]),
    ]
    g = helper.make_graph(
        nodes, "small",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 3, 4, 4]),
         helper.make_tensor_value_info("W", TensorProto.FLOAT, [2, 3, 3, 3])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", None]),
         helper.make_tensor_value_info("K", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("Hout", TensorProto.FLOAT16, [3])],
        initializer=[w, b, shape, half, flags, pads])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name="anvil-gen", producer_version="1")
    m.ir_version = 8
    onnx.checker.check_model(m)
    with open(os.path.join(UNIT_DATA, "onnx_small.onnx"), "wb") as f:
        f.write(m.SerializeToString())

    # Subgraphs: a GRAPH attribute two levels deep whose innermost body reads the main graph's X
    # and the middle graph's t (outer scope), and a GRAPHS attribute of two graphs.
    inner = helper.make_graph([helper.make_node("Add", ["X", "t"], ["u"])], "inner", [],
                              [helper.make_tensor_value_info("u", TensorProto.FLOAT, None)])
    middle = helper.make_graph(
        [helper.make_node("Neg", ["X"], ["t"]),
         helper.make_node("Identity", ["t"], ["v"], body=inner)], "middle", [],
        [helper.make_tensor_value_info("v", TensorProto.FLOAT, None)])
    branch = helper.make_graph([helper.make_node("Neg", ["X"], ["o"])], "branch", [],
                               [helper.make_tensor_value_info("o", TensorProto.FLOAT, ["N", 2])])
    node = helper.make_node("Identity", ["X"], ["Y"], name="holder", body=middle)
    node.attribute.append(helper.make_attribute("branches", [branch, branch]))
    g = helper.make_graph([node], "outer",
                          [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 2])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    with open(os.path.join(UNIT_DATA, "onnx_subgraph.onnx"), "wb") as f:
        f.write(m.SerializeToString())

    # Serialized TensorProto files (onnx_tensor_read_pb): raw FLOAT, and INT8 in int32_data.
    t = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3) * 1.5, "t")
    with open(os.path.join(UNIT_DATA, "onnx_tensor_f32.pb"), "wb") as f:
        f.write(t.SerializeToString())
    t = helper.make_tensor("q", TensorProto.INT8, [3], [-1, 5, 7])
    with open(os.path.join(UNIT_DATA, "onnx_tensor_i8.pb"), "wb") as f:
        f.write(t.SerializeToString())

    # External data inside the model's folder, two tensors in one file.
    ext_dir = os.path.join(UNIT_DATA, "onnx_external")
    os.makedirs(ext_dir, exist_ok=True)
    with open(os.path.join(ext_dir, "weights.bin"), "wb") as f:
        f.write(struct.pack("<4f", 1.0, 2.0, 3.0, 4.0) + struct.pack("<2f", 5.0, 6.0))
    g = helper.make_graph(
        [helper.make_node("Add", ["X", "A"], ["t"]), helper.make_node("Mul", ["t", "B"], ["Y"])],
        "ext", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 2])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 2])],
        initializer=[external_tensor("A", [2, 2], "weights.bin", offset=0, length=16),
                     external_tensor("B", [2], "weights.bin", offset=16, length=8)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    with open(os.path.join(ext_dir, "model.onnx"), "wb") as f:
        f.write(m.SerializeToString())


if __name__ == "__main__":
    sys.exit(main())
