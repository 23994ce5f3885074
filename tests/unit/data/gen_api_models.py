"""Writes the small models the C API unit tests load (tests/unit/test_api.c, test_env.c,
test_precision.c).

Run with the project's venv: .venv/bin/python tests/unit/data/gen_api_models.py
The outputs are committed; rerunning gives the same bytes.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def api_small():
    # z = Relu(x + b) with a symbolic batch, plus s = Shape(z) as a second output
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 4])
    s = helper.make_tensor_value_info("s", TensorProto.INT64, [2])
    b = numpy_helper.from_array(np.array([1.0, -1.0, 0.5, -0.5], dtype=np.float32), "b")
    nodes = [
        helper.make_node("Add", ["x", "b"], ["t"], name="add"),
        helper.make_node("Relu", ["t"], ["z"], name="relu"),
        helper.make_node("Shape", ["z"], ["s"], name="shape"),
    ]
    graph = helper.make_graph(nodes, "api_small", [x], [z, s], [b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="anvil-tests")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(HERE, "api_small.onnx"))


def api_anon_dims():
    # y = Relu(x) with x declared ["?", "?"]: "?" means unknown, not one shared symbol
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["?", "?"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["?", "?"])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                              "api_anon_dims", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="anvil-tests")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(HERE, "api_anon_dims.onnx"))


def api_conv():
    # y = Relu(Conv(x, W, b)), 3x3, 8 -> 16 channels, padded: one conv the layout pass may turn
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 12, 12])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 12, 12])
    rng = np.random.default_rng(7)
    w = numpy_helper.from_array(rng.standard_normal((16, 8, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(nodes, "api_conv", [x], [y], [w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="anvil-tests")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(HERE, "api_conv.onnx"))


def api_matmul():
    # y = x @ W, x [8, 256], W [256, 64] constant: one MatMul a bf16 GEMM can take, whose output
    # is shaped like a classifier's logits ([N, C])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 256])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 64])
    rng = np.random.default_rng(11)
    w = numpy_helper.from_array(rng.standard_normal((256, 64)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="matmul")],
                              "api_matmul", [x], [y], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="anvil-tests")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(HERE, "api_matmul.onnx"))


if __name__ == "__main__":
    api_small()
    api_anon_dims()
    api_conv()
    api_matmul()
