"""Generates the small models and data the anvil CLI tests run on.

Usage: gen_tiny.py OUTDIR

Writes, with fixed seeds:
  tiny.onnx      x[N,3,8,8] -> Conv(3x3, pad 1) -> Relu ("feat.map", output 2) -> MaxPool 2x2
                 -> Flatten -> Gemm(10, transB) -> Softmax ("probs/out:0", output 1)
  x.npy          a batch of 2 inputs for tiny.onnx
  expected/      ONNX Runtime's outputs for x.npy, named as `anvil run` names its files
  gather.onnx    a[N,4] float and idx[3] int64 -> Gather(axis 1) -> "picked"
  collide.onnx   v[3] -> Identity -> "o.1", Neg -> "o_1" (both sanitize to o_1)
  v.npy, expected/collide_*.npy
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import onnxruntime as ort


def save(model, path):
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


def tiny(rng):
    w = rng.uniform(-0.5, 0.5, (4, 3, 3, 3)).astype(np.float32)
    b = rng.uniform(-0.1, 0.1, (4,)).astype(np.float32)
    w2 = rng.uniform(-0.3, 0.3, (10, 64)).astype(np.float32)
    b2 = rng.uniform(-0.1, 0.1, (10,)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["conv_out"], name="conv1",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv_out"], ["feat.map"], name="relu1"),
        helper.make_node("MaxPool", ["feat.map"], ["pooled"], name="pool1",
                         kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["pooled"], ["flat"], name="flatten1", axis=1),
        helper.make_node("Gemm", ["flat", "w2", "b2"], ["logits"], name="fc1", transB=1),
        helper.make_node("Softmax", ["logits"], ["probs/out:0"], name="softmax1", axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("probs/out:0", TensorProto.FLOAT, ["N", 10]),
         helper.make_tensor_value_info("feat.map", TensorProto.FLOAT, ["N", 4, 8, 8])],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b"),
                     numpy_helper.from_array(w2, "w2"), numpy_helper.from_array(b2, "b2")])
    return helper.make_model(graph, producer_name="anvil-cli-tests",
                             opset_imports=[helper.make_opsetid("", 17)])


def gather():
    nodes = [helper.make_node("Gather", ["a", "idx"], ["picked"], name="gather1", axis=1)]
    graph = helper.make_graph(
        nodes, "gather",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 4]),
         helper.make_tensor_value_info("idx", TensorProto.INT64, [3])],
        [helper.make_tensor_value_info("picked", TensorProto.FLOAT, ["N", 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def collide():
    nodes = [helper.make_node("Identity", ["v"], ["o.1"], name="ident"),
             helper.make_node("Neg", ["v"], ["o_1"], name="neg")]
    graph = helper.make_graph(
        nodes, "collide",
        [helper.make_tensor_value_info("v", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("o.1", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("o_1", TensorProto.FLOAT, [3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gen_tiny.py OUTDIR")
    out = sys.argv[1]
    os.makedirs(os.path.join(out, "expected"), exist_ok=True)
    rng = np.random.default_rng(20240611)

    model = tiny(rng)
    save(model, os.path.join(out, "tiny.onnx"))
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    np.save(os.path.join(out, "x.npy"), x)
    sess = ort.InferenceSession(os.path.join(out, "tiny.onnx"),
                                providers=["CPUExecutionProvider"])
    probs, feat = sess.run(None, {"x": x})
    np.save(os.path.join(out, "expected", "probs_out_0.npy"), probs)
    np.save(os.path.join(out, "expected", "feat_map.npy"), feat)

    save(gather(), os.path.join(out, "gather.onnx"))

    save(collide(), os.path.join(out, "collide.onnx"))
    v = np.array([1.5, -2.0, 3.25], dtype=np.float32)
    np.save(os.path.join(out, "v.npy"), v)
    np.save(os.path.join(out, "expected", "collide_first.npy"), v)
    np.save(os.path.join(out, "expected", "collide_second.npy"), -v)


if __name__ == "__main__":
    main()
