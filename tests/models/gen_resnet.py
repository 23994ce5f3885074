#!/usr/bin/env python3
"""Generates a ResNet-style CNN as ONNX, with fixed-seed weights and ONNX Runtime reference data.

Usage: gen_resnet.py OUTDIR [--size tiny|small|resnet18|resnet34] [--batches 1,2] [--seed S]

The network follows ResNet's basic-block design: a 7x7/2 convolution stem with batch norm, ReLU
and a 3x3/2 max pool; four stages of basic blocks (3x3 conv + BN + ReLU, 3x3 conv + BN, identity
or 1x1/2 conv + BN shortcut, add, ReLU); then global average pooling, Flatten, a Gemm classifier
and Softmax. The input is `input` [N, 3, H, W] with a symbolic batch `N`, the output `output`
[N, classes]. Opset 17.

OUTDIR becomes one test case in the ONNX backend-test layout (see tests/tools/run_cases.c):
model.onnx, one test_data_set_<k>/ per entry of --batches (seeded input, ONNX Runtime's output),
and tolerance.txt with rtol 1e-3 and atol = 1e-4 * max|expected| (atol_scale), since the
softmax output's scale depends on the weights.
"""

import argparse
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

# name: (input size, stage widths, blocks per stage, classes)
SIZES = {
    "tiny": (56, (8, 16, 32, 64), (1, 1, 1, 1), 10),
    "small": (112, (32, 64, 128, 256), (1, 1, 1, 1), 100),
    "resnet18": (224, (64, 128, 256, 512), (2, 2, 2, 2), 1000),
    "resnet34": (224, (64, 128, 256, 512), (3, 4, 6, 3), 1000),
}


class Builder:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.inits = []
        self.count = 0

    def name(self, prefix):
        self.count += 1
        return f"{prefix}_{self.count}"

    def init(self, name, arr):
        self.inits.append(numpy_helper.from_array(arr.astype(np.float32), name))
        return name

    def conv(self, x, cin, cout, k, stride, pad):
        n = self.name("conv")
        # He initialisation keeps activations at unit scale through the depth.
        w = self.rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k))
        self.init(n + ".weight", w)
        self.nodes.append(helper.make_node(
            "Conv", [x, n + ".weight"], [n], name=n, kernel_shape=[k, k], strides=[stride, stride],
            pads=[pad] * 4))
        return n

    def bn(self, x, c, gamma=(0.5, 1.5)):
        n = self.name("bn")
        self.init(n + ".scale", self.rng.uniform(gamma[0], gamma[1], c))
        self.init(n + ".bias", self.rng.standard_normal(c) * 0.1)
        self.init(n + ".mean", self.rng.standard_normal(c) * 0.1)
        self.init(n + ".var", self.rng.uniform(0.5, 1.5, c))
        self.nodes.append(helper.make_node(
            "BatchNormalization", [x, n + ".scale", n + ".bias", n + ".mean", n + ".var"], [n],
            name=n, epsilon=1e-5))
        return n

    def op(self, op_type, inputs, **attrs):
        n = self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [n], name=n, **attrs))
        return n

    def basic_block(self, x, cin, cout, stride):
        y = self.op("Relu", [self.bn(self.conv(x, cin, cout, 3, stride, 1), cout)])
        # A small scale on the residual branch's last BN (as trained ResNets end up with) keeps
        # activations from growing block after block, so the logits stay at unit scale.
        y = self.bn(self.conv(y, cout, cout, 3, 1, 1), cout, gamma=(0.1, 0.4))
        if stride != 1 or cin != cout:
            x = self.bn(self.conv(x, cin, cout, 1, stride, 0), cout)
        return self.op("Relu", [self.op("Add", [y, x])])


def build(size, seed):
    hw, widths, blocks, classes = SIZES[size]
    b = Builder(seed)
    x = b.op("Relu", [b.bn(b.conv("input", 3, widths[0], 7, 2, 3), widths[0])])
    x = b.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = widths[0]
    for stage, (width, count) in enumerate(zip(widths, blocks)):
        for i in range(count):
            stride = 2 if stage > 0 and i == 0 else 1
            x = b.basic_block(x, cin, width, stride)
            cin = width
    x = b.op("GlobalAveragePool", [x])
    x = b.op("Flatten", [x], axis=1)
    # Pooled features are a few units large; this scale puts the logits near unit spread, so
    # the softmax is not one-hot and every class's probability carries information.
    b.init("fc.weight", b.rng.standard_normal((classes, cin)) * 0.3 * np.sqrt(1.0 / cin))
    b.init("fc.bias", b.rng.standard_normal(classes) * 0.1)
    x = b.op("Gemm", [x, "fc.weight", "fc.bias"], transB=1)
    b.nodes.append(helper.make_node("Softmax", [x], ["output"], name="softmax", axis=1))

    graph = helper.make_graph(
        b.nodes, f"anvil_resnet_{size}",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, hw, hw])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", classes])],
        initializer=b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="anvil-gen-resnet")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model, hw


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir")
    ap.add_argument("--size", choices=sorted(SIZES), default="small")
    ap.add_argument("--batches", default="1",
                    help="comma-separated batch sizes, one test data set each (default 1)")
    ap.add_argument("--seed", type=int, default=20240601)
    args = ap.parse_args()
    batches = [int(v) for v in args.batches.split(",")]
    if not batches or min(batches) < 1:
        ap.error("--batches needs positive integers")

    model, hw = build(args.size, args.seed)
    os.makedirs(args.outdir, exist_ok=True)
    path = os.path.join(args.outdir, "model.onnx")
    onnx.save(model, path)

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(args.seed + 1)
    for k, n in enumerate(batches):
        x = rng.standard_normal((n, 3, hw, hw)).astype(np.float32)
        (y,) = sess.run(None, {"input": x})
        ddir = os.path.join(args.outdir, f"test_data_set_{k}")
        os.makedirs(ddir, exist_ok=True)
        with open(os.path.join(ddir, "input_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(x, "input").SerializeToString())
        with open(os.path.join(ddir, "output_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(y, "output").SerializeToString())
    with open(os.path.join(args.outdir, "tolerance.txt"), "w") as f:
        f.write("rtol 1e-3\natol_scale 1e-4\n")
    params = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
    print(f"wrote {path}: {args.size}, input [N,3,{hw},{hw}], {len(model.graph.node)} nodes, "
          f"{params / 1e6:.2f} M parameters, data sets for batch {batches}")


if __name__ == "__main__":
    sys.exit(main())
