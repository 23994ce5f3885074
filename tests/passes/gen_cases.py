"""Cases for the graph passes (src/passes): small models, each with the rewrite it must (or must
not) get and outputs computed by ONNX Runtime.

    gen_cases.py OUT_DIR

Writes OUT_DIR/<case>/model.onnx, test_data_set_0/{input,output}_<i>.pb and expect.txt: one line
per node anvil's `dump --opt-level 1` must print, as "<OpType> <fused annotation or ->", in
order, so check.py can tell a rewrite that did not fire (or fired where it must not) from one
that did. Fixed seeds; no downloads.
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(20261121)


class G:
    def __init__(self):
        self.nodes, self.inits, self.n = [], [], 0

    def name(self, base):
        self.n += 1
        return f"{base}_{self.n}"

    def const(self, arr, base="c"):
        n = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(arr, dtype=np.float32), n))
        return n

    def const_i64(self, arr):
        n = self.name("c")
        self.inits.append(numpy_helper.from_array(np.asarray(arr, dtype=np.int64), n))
        return n

    def const_bool(self, arr):
        n = self.name("c")
        self.inits.append(numpy_helper.from_array(np.asarray(arr, dtype=bool), n))
        return n

    def op(self, t, ins, outs=1, **attrs):
        o = [self.name(t.lower()) for _ in range(outs)]
        self.nodes.append(helper.make_node(t, ins, o, name=self.name("n_" + t.lower()), **attrs))
        return o[0] if outs == 1 else o

    def conv(self, x, cin, cout, k=3, stride=1, bias=True, group=1):
        w = self.const(RNG.normal(0, 0.3, (cout, cin // group, k, k)), "w")
        ins = [x, w] + ([self.const(RNG.normal(0, 0.1, cout), "b")] if bias else [])
        return self.op("Conv", ins, kernel_shape=[k, k], pads=[k // 2] * 4, strides=[stride] * 2,
                       group=group)

    def bn(self, x, c):
        return self.op("BatchNormalization",
                       [x, self.const(RNG.uniform(0.5, 1.5, c)), self.const(RNG.normal(0, 0.1, c)),
                        self.const(RNG.normal(0, 0.1, c)), self.const(RNG.uniform(0.5, 2.0, c))],
                       epsilon=1e-3)

    def linear(self, x, k, n, bias=True):
        y = self.op("MatMul", [x, self.const(RNG.normal(0, 0.2, (k, n)), "w")])
        return self.op("Add", [y, self.const(RNG.normal(0, 0.1, n), "b")]) if bias else y


def save(out, name, g, inputs, feeds, outputs, expect, opset=17, env=None, atol=1e-5):
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    graph = helper.make_graph(g.nodes, name, inputs,
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
                               for o in outputs], initializer=g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, os.path.join(d, "model.onnx"))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    res = sess.run(None, feeds)
    for i, inp in enumerate(inputs):
        t = numpy_helper.from_array(feeds[inp.name], inp.name)
        with open(os.path.join(d, "test_data_set_0", f"input_{i}.pb"), "wb") as f:
            f.write(t.SerializeToString())
    for i, r in enumerate(res):
        t = numpy_helper.from_array(r, outputs[i])
        with open(os.path.join(d, "test_data_set_0", f"output_{i}.pb"), "wb") as f:
            f.write(t.SerializeToString())
    with open(os.path.join(d, "expect.txt"), "w") as f:
        f.write("\n".join(expect) + "\n")
    with open(os.path.join(d, "tolerance.txt"), "w") as f:
        f.write(f"rtol 1e-4\natol {atol}\n")
    if env:
        with open(os.path.join(d, "env.txt"), "w") as f:
            f.write("".join(f"{k}={v}\n" for k, v in env.items()))


def image(name, c, hw, n=1):
    return (helper.make_tensor_value_info(name, TensorProto.FLOAT, [n, c, hw, hw]),
            RNG.normal(0, 1, (n, c, hw, hw)).astype(np.float32))


def cases(out):
    # Conv(no bias) -> BN -> Relu: BN folds (bias appears), Relu fuses.
    g = G()
    x, xv = image("x", 4, 9)
    y = g.op("Relu", [g.bn(g.conv("x", 4, 8, bias=False), 8)])
    save(out, "conv_bn_relu", g, [x], {"x": xv}, [y], ["Conv fused[Relu]"])

    # A bottleneck-style residual block: conv-bn-relu, conv-bn, + skip, relu.
    g = G()
    x, xv = image("x", 8, 7)
    a = g.op("Relu", [g.bn(g.conv("x", 8, 8), 8)])
    b = g.bn(g.conv(a, 8, 8, k=1), 8)
    y = g.op("Relu", [g.op("Add", [b, "x"])])
    save(out, "residual_block", g, [x], {"x": xv}, [y],
         ["Conv fused[Relu]", "Conv fused[+residual(in3) Relu]"])

    # The skip first: Add(skip, conv) with the conv output as the second operand.
    g = G()
    x, xv = image("x", 8, 5)
    y = g.op("Add", ["x", g.conv("x", 8, 8, stride=1)])
    save(out, "residual_swapped", g, [x], {"x": xv}, [y], ["Conv fused[+residual(in3)]"])

    # A conv whose output is also a graph output: nothing may be folded or fused into it.
    g = G()
    x, xv = image("x", 4, 6)
    c = g.conv("x", 4, 4)
    y = g.op("Relu", [g.bn(c, 4)])
    save(out, "shared_output", g, [x], {"x": xv}, [c, y],
         ["Conv -", "BatchNormalization -", "Relu -"])

    # Every activation the epilogue has, one per conv; depthwise and strided shapes among them.
    g = G()
    x, xv = image("x", 6, 10)
    h = g.op("Clip", [g.conv("x", 6, 6), g.const(0.0), g.const(6.0)])
    h = g.op("LeakyRelu", [g.conv(h, 6, 6, group=6)], alpha=0.2)
    h = g.op("HardSigmoid", [g.conv(h, 6, 6, stride=2)], alpha=0.25, beta=0.4)
    h = g.op("HardSwish", [g.conv(h, 6, 6, k=1)])
    h = g.op("Sigmoid", [g.conv(h, 6, 6)])
    h = g.op("Tanh", [g.conv(h, 6, 6, k=1)])
    y = g.op("Clip", [g.conv(h, 6, 6), "", g.const(0.3)])
    # (The chain holds a depthwise conv, so the layout pass turns all of it channels-last.)
    save(out, "activations", g, [x], {"x": xv}, [y],
         ["Transpose -", "anvil.ConvNhwc fused[Clip]", "anvil.ConvNhwc fused[LeakyRelu]",
          "anvil.ConvNhwc fused[HardSigmoid]", "anvil.ConvNhwc fused[HardSwish]",
          "anvil.ConvNhwc fused[Sigmoid]", "anvil.ConvNhwc fused[Tanh]",
          "anvil.ConvNhwc fused[Clip]", "Transpose -"])

    # MobileNetV2-style blocks (expand 1x1, depthwise, project 1x1 + residual) on odd sizes and
    # channel counts that are not a multiple of a vector, 3x3 and 5x5 depthwise at strides 1 and
    # 2, two images. The layout pass turns the whole chain channels-last: one transpose in (the
    # graph input, read as input and as residual), none inside, one for an inner value that is
    # also a graph output, and the pooling carried along as a ReduceMean over the channels-last
    # map, its 1x1 result transposed back.
    g = G()
    x, xv = image("x", 20, 13, n=2)
    h = g.op("Clip", [g.conv("x", 20, 40, k=1), g.const(0.0), g.const(6.0)])
    h = g.op("Clip", [g.conv(h, 40, 40, group=40), g.const(0.0), g.const(6.0)])
    b1 = g.op("Add", ["x", g.conv(h, 40, 20, k=1)])
    h = g.op("Clip", [g.conv(b1, 20, 20, k=5, stride=2, group=20), g.const(0.0), g.const(6.0)])
    mid = g.conv(h, 20, 36, k=1)
    h = g.op("Relu", [g.conv(mid, 36, 36, k=3, stride=2, group=36)])
    h = g.op("Clip", [g.conv(h, 36, 17, k=3), g.const(0.0), g.const(6.0)])
    y = g.op("GlobalAveragePool", [g.conv(h, 17, 17, k=5, group=17)])
    save(out, "layout_mobilenet", g, [x], {"x": xv}, [y, mid],
         ["Transpose -", "anvil.ConvNhwc fused[Clip]", "anvil.ConvNhwc fused[Clip]",
          "anvil.ConvNhwc fused[+residual(in3)]", "anvil.ConvNhwc fused[Clip]",
          "anvil.ConvNhwc -", "anvil.ConvNhwc fused[Relu]", "anvil.ConvNhwc fused[Clip]",
          "anvil.ConvNhwc -", "Transpose -", "ReduceMean -", "Transpose -"])

    # Squeeze-excitation blocks (EfficientNet / MobileNetV3 style): expand 1x1, depthwise, then
    # pool -> 1x1 conv -> 1x1 conv -> gate, and the map scaled by the gate before the projection
    # (+ residual). The pool and the Mul are carried channels-last: no full-size transpose but
    # the graph input's and output's; the gate's C floats cross over by a tiny transpose each way.
    # The last conv has no depthwise conv of its own: the Mul joins it to the chain before it.
    g = G()
    x, xv = image("x", 12, 11, n=2)
    h = g.op("Relu", [g.conv("x", 12, 24, k=1)])
    d = g.op("HardSwish", [g.conv(h, 24, 24, group=24)])
    s = g.op("Relu", [g.conv(g.op("GlobalAveragePool", [d]), 24, 8, k=1)])
    s = g.op("HardSigmoid", [g.conv(s, 8, 24, k=1)], alpha=1.0 / 6, beta=0.5)
    y = g.op("Add", ["x", g.conv(g.op("Mul", [d, s]), 24, 12, k=1)])
    d2 = g.op("Relu", [g.conv(y, 12, 12, k=5, stride=2, group=12)])
    s2 = g.op("Sigmoid", [g.conv(g.op("GlobalAveragePool", [d2]), 12, 12, k=1)])
    y2 = g.conv(g.op("Mul", [s2, d2]), 12, 16, k=1)
    save(out, "layout_se", g, [x], {"x": xv}, [y2],
         ["Transpose -", "anvil.ConvNhwc fused[Relu]", "anvil.ConvNhwc fused[HardSwish]",
          "ReduceMean -", "Transpose -", "Conv fused[Relu]", "Conv fused[HardSigmoid]",
          "Transpose -", "Mul -", "anvil.ConvNhwc fused[+residual(in3)]",
          "anvil.ConvNhwc fused[Relu]", "ReduceMean -", "Transpose -", "Conv fused[Sigmoid]",
          "Transpose -", "Mul -", "anvil.ConvNhwc -", "Transpose -"])

    # ConvNeXt's blocks, as torch exports them: depthwise conv, permute to channels-last,
    # LayerNorm and Linears there, permute back, per-channel scale, residual Add. The model's
    # own transposes meet the layout pass's: a permute to channels-last of a conv's output reads
    # its twin, a permute back is its input's twin, and the scale (a [C, 1, 1] constant) and the
    # Add are carried, so the blocks run no transpose; the stem's permutes stay (its conv is
    # NCHW, and the Transposes around its LayerNorm are the model's).
    g = G()
    x, xv = image("x", 3, 12)
    stem = g.conv("x", 3, 8, k=2, stride=2)
    ln_w, ln_b = g.const(RNG.normal(1, 0.1, 8)), g.const(RNG.normal(0, 0.1, 8))
    h = g.op("Transpose", [stem], perm=[0, 2, 3, 1])
    h = g.op("LayerNormalization", [h, ln_w, ln_b], axis=-1, epsilon=1e-6)
    y = g.op("Transpose", [h], perm=[0, 3, 1, 2])
    for _ in range(2):
        d = g.conv(y, 8, 8, k=7, group=8)
        t = g.op("Transpose", [d], perm=[0, 2, 3, 1])
        t = g.op("LayerNormalization", [t, ln_w, ln_b], axis=-1, epsilon=1e-6)
        t = g.linear(g.op("Relu", [g.linear(t, 8, 16)]), 16, 8)
        t = g.op("Transpose", [t], perm=[0, 3, 1, 2])
        y = g.op("Add", [g.op("Mul", [g.const(RNG.normal(0, 1, (8, 1, 1))), t]), y])
    block = ["anvil.ConvNhwc -", "LayerNormalization -", "MatMul fused[+bias(in2) Relu]",
             "MatMul fused[+bias(in2)]", "Mul -", "Add -"]
    save(out, "layout_model_transposes", g, [x], {"x": xv}, [y],
         ["Conv -", "Transpose -", "LayerNormalization -"] + block + block + ["Transpose -"])

    # Clip with min > max is left alone (the epilogue's clip assumes lo <= hi); an Add of a
    # per-channel constant broadcasts, so it is not a residual.
    g = G()
    x, xv = image("x", 4, 6)
    h = g.op("Clip", [g.conv("x", 4, 4), g.const(1.0), g.const(-1.0)])
    y = g.op("Add", [g.conv(h, 4, 4), g.const(RNG.normal(0, 1, (1, 4, 1, 1)))])
    save(out, "not_fused", g, [x], {"x": xv}, [y], ["Conv -", "Clip -", "Conv -", "Add -"])

    # Opset 6 Clip takes its bounds as attributes.
    g = G()
    x, xv = image("x", 3, 5)
    y = g.op("Clip", [g.conv("x", 3, 5)], min=-0.5, max=0.5)
    save(out, "clip_opset6", g, [x], {"x": xv}, [y], ["Conv fused[Clip]"], opset=10)

    # A transformer feed-forward block: bias, Gelu written out (both spellings), residual.
    for form in ("erf_a", "erf_b", "tanh", "op"):
        g = G()
        xi = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "s", 16])
        xv = RNG.normal(0, 1, (2, 5, 16)).astype(np.float32)
        h = g.linear("x", 16, 24)
        if form == "erf_a":
            e = g.op("Erf", [g.op("Div", [h, g.const(np.sqrt(2.0))])])
            h = g.op("Mul", [g.op("Mul", [h, g.op("Add", [e, g.const(1.0)])]), g.const(0.5)])
        elif form == "erf_b":
            e = g.op("Erf", [g.op("Mul", [h, g.const(1.0 / np.sqrt(2.0))])])
            h = g.op("Mul", [g.op("Mul", [h, g.const(0.5)]), g.op("Add", [g.const(1.0), e])])
        elif form == "tanh":
            cube = g.op("Pow", [h, g.const(3.0)])
            inner = g.op("Add", [h, g.op("Mul", [cube, g.const(0.044715)])])
            t = g.op("Tanh", [g.op("Mul", [inner, g.const(np.sqrt(2.0 / np.pi))])])
            h = g.op("Mul", [g.op("Mul", [h, g.const(0.5)]), g.op("Add", [t, g.const(1.0)])])
        else:
            h = g.op("Gelu", [h], approximate="tanh")
        y = g.op("Add", ["x", g.linear(h, 24, 16)])
        act = "Gelu(tanh)" if form in ("tanh", "op") else "Gelu"
        save(out, f"ffn_gelu_{form}", g, [xi], {"x": xv}, [y],
             [f"MatMul fused[+bias(in2) {act}]", "MatMul fused[+bias(in2) +residual(in3)]"],
             opset=20 if form == "op" else 17)

    # GPT-2's Conv1D: Gemm on the flattened rows, a Reshape back to [b, s, width], then the Gelu
    # (written out, tanh form; and a Relu op): the activation moves into the Gemm's epilogue and
    # the Reshape makes its output.
    for form in ("tanh", "relu"):
        g = G()
        xi = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5, 16])
        xv = RNG.normal(0, 1, (2, 5, 16)).astype(np.float32)
        flat = g.op("Reshape", ["x", g.const_i64([10, 16])])
        h = g.op("Gemm", [flat, g.const(RNG.normal(0, 0.3, (16, 24))),
                          g.const(RNG.normal(0, 0.3, 24))])
        h = g.op("Reshape", [h, g.const_i64([2, 5, 24])])
        if form == "tanh":
            cube = g.op("Pow", [h, g.const(3.0)])
            inner = g.op("Add", [h, g.op("Mul", [cube, g.const(0.044715)])])
            t = g.op("Tanh", [g.op("Mul", [inner, g.const(np.sqrt(2.0 / np.pi))])])
            y = g.op("Mul", [g.op("Mul", [h, g.const(0.5)]), g.op("Add", [t, g.const(1.0)])])
        else:
            y = g.op("Relu", [h])
        act = "Gelu(tanh)" if form == "tanh" else "Relu"
        save(out, f"gemm_reshape_{form}", g, [xi], {"x": xv}, [y],
             ["Reshape -", f"Gemm fused[{act}]", "Reshape -"])

    # Gemm + Relu.
    g = G()
    xi = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 7])
    xv = RNG.normal(0, 1, (3, 7)).astype(np.float32)
    y = g.op("Relu", [g.op("Gemm", ["x", g.const(RNG.normal(0, 1, (5, 7))),
                                    g.const(RNG.normal(0, 1, 5))], transB=1)])
    save(out, "gemm_relu", g, [xi], {"x": xv}, [y], ["Gemm fused[Relu]"])

    # A residual whose shape is unknown at load (a Reshape to a caller-given shape) is fused on
    # trust; fed a broadcasting shape, the runtime must notice and rebuild without the fusion.
    g = G()
    xi = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])
    zi = helper.make_tensor_value_info("z", TensorProto.FLOAT, [4])
    si = helper.make_tensor_value_info("shape", TensorProto.INT64, [2])
    y = g.op("Add", [g.linear("x", 8, 4, bias=False), g.op("Reshape", ["z", "shape"])])
    save(out, "residual_broadcast_at_run", g, [xi, zi, si],
         {"x": RNG.normal(0, 1, (4, 8)).astype(np.float32),
          "z": RNG.normal(0, 1, 4).astype(np.float32), "shape": np.array([1, 4], np.int64)},
         [y], ["Reshape -", "MatMul fused[+residual(in2)]"])


def attention_cases(out):
    """Attention in the spellings torch.onnx.export writes, and near misses left alone."""
    # 150 keys: three blocks of the AVX-512 kernel's 64, the last one partial
    b, s, h, d = 2, 150, 3, 16
    hid = h * d

    def heads(g, x, perm=(0, 2, 1, 3)):
        r = g.op("Reshape", [x, g.const_i64([b, s, h, d])])
        return g.op("Transpose", [r], perm=list(perm))

    def inputs():
        xi = helper.make_tensor_value_info("x", TensorProto.FLOAT, [b, s, hid])
        return xi, RNG.normal(0, 1, (b, s, hid)).astype(np.float32)

    def merge(g, o):
        t = g.op("Transpose", [o], perm=[0, 2, 1, 3])
        return g.op("Reshape", [t, g.const_i64([b, s, hid])])

    # BERT: K transposed twice, Div by sqrt(d), an additive [b, 1, 1, s] mask.
    g = G()
    xi, xv = inputs()
    mi = helper.make_tensor_value_info("m", TensorProto.FLOAT, [b, 1, 1, s])
    mv = np.where(RNG.uniform(0, 1, (b, 1, 1, s)) < 0.2, -10000.0, 0.0).astype(np.float32)
    q, k, v = (heads(g, g.linear("x", hid, hid)) for _ in range(3))
    kt = g.op("Transpose", [k], perm=[0, 1, 3, 2])
    sc = g.op("Add", [g.op("Div", [g.op("MatMul", [q, kt]), g.const(np.sqrt(d))]), "m"])
    y = merge(g, g.op("MatMul", [g.op("Softmax", [sc], axis=-1), v]))
    lin = ["MatMul fused[+bias(in2)]", "Reshape -"] * 3
    save(out, "attention_bert", g, [xi, mi], {"x": xv, "m": mv}, [y],
         lin + ["anvil.Sdpa -", "Reshape -"])

    # GPT-2: K^T as one Transpose [0, 2, 3, 1], Mul by the scale, a causal Where, an Identity
    # (a Cast to float) before the second MatMul.
    g = G()
    xi, xv = inputs()
    q, v = heads(g, g.linear("x", hid, hid)), heads(g, g.linear("x", hid, hid))
    kr = g.op("Reshape", [g.linear("x", hid, hid), g.const_i64([b, s, h, d])])
    kt = g.op("Transpose", [kr], perm=[0, 2, 3, 1])
    causal = g.const_bool(np.tril(np.ones((1, 1, s, s), bool)))
    sc = g.op("Where", [causal, g.op("Mul", [g.op("MatMul", [q, kt]), g.const(d ** -0.5)]),
                        g.const(np.finfo(np.float32).min)])
    p = g.op("Cast", [g.op("Softmax", [sc], axis=-1)], to=TensorProto.FLOAT)
    y = merge(g, g.op("MatMul", [p, v]))
    save(out, "attention_gpt2", g, [xi], {"x": xv}, [y],
         ["MatMul fused[+bias(in2)]", "Reshape -", "MatMul fused[+bias(in2)]", "Reshape -",
          "MatMul fused[+bias(in2)]", "Reshape -", "anvil.Sdpa -", "Reshape -"])

    # DistilBERT: Where(mask == 0, fill, scores), the bool mask marking what to drop.
    g = G()
    xi, xv = inputs()
    mi = helper.make_tensor_value_info("m", TensorProto.INT64, [b, 1, 1, s])
    mv = (RNG.uniform(0, 1, (b, 1, 1, s)) > 0.2).astype(np.int64)
    q, k, v = (heads(g, g.linear("x", hid, hid)) for _ in range(3))
    kt = g.op("Transpose", [k], perm=[0, 1, 3, 2])
    drop = g.op("Equal", ["m", g.const_i64(0)])
    sc = g.op("Where", [drop, g.const(-np.inf),
                        g.op("Div", [g.op("MatMul", [q, kt]), g.const(np.sqrt(d))])])
    y = merge(g, g.op("MatMul", [g.op("Softmax", [sc], axis=-1), v]))
    save(out, "attention_distilbert", g, [xi, mi], {"x": xv, "m": mv}, [y],
         lin + ["Equal -", "anvil.Sdpa -", "Reshape -"])

    # GPT-2 from transformers builds its causal mask as Trilu(ConstantOfShape([n, n], true)):
    # the node takes it as its causal flag (and skips the blocks above the diagonal).
    g = G()
    xi, xv = inputs()
    q, k, v = (heads(g, g.linear("x", hid, hid)) for _ in range(3))
    kt = g.op("Transpose", [k], perm=[0, 1, 3, 2])
    ones = g.op("ConstantOfShape", [g.const_i64([s, s])],
                value=helper.make_tensor("one", TensorProto.BOOL, [1], [True]))
    tri = g.op("Trilu", [ones], upper=0)
    sc = g.op("Where", [tri, g.op("Mul", [g.op("MatMul", [q, kt]), g.const(d ** -0.5)]),
                        g.const(-10000.0)])
    y = merge(g, g.op("MatMul", [g.op("Softmax", [sc], axis=-1), v]))
    save(out, "attention_causal_trilu", g, [xi], {"x": xv}, [y], lin + ["anvil.Sdpa -", "Reshape -"])

    # No scale, no mask, output left as [b, h, s, d] (a graph output of that layout).
    g = G()
    xi, xv = inputs()
    q, k, v = (heads(g, g.linear("x", hid, hid)) for _ in range(3))
    kt = g.op("Transpose", [k], perm=[0, 1, 3, 2])
    y = g.op("MatMul", [g.op("Softmax", [g.op("MatMul", [q, kt])], axis=-1), v])
    save(out, "attention_plain", g, [xi], {"x": xv}, [y], lin + ["anvil.Sdpa -"])

    # ViT (scaled_dot_product_attention): q and k^T each scaled by the root of a scale computed
    # from q's shape at run time (Shape -> Gather -> Cast -> Sqrt -> Div -> Sqrt), which
    # fold_consts computes at load; the attention pass takes both into its scale.
    g = G()
    xi, xv = inputs()
    q, k, v = (heads(g, g.linear("x", hid, hid)) for _ in range(3))
    dim = g.op("Cast", [g.op("Gather", [g.op("Shape", [q]), g.const_i64(3)], axis=0)],
               to=TensorProto.FLOAT)
    root = g.op("Sqrt", [g.op("Div", [g.const(1.0), g.op("Sqrt", [dim])])])
    kt = g.op("Transpose", [k], perm=[0, 1, 3, 2])
    sc = g.op("MatMul", [g.op("Mul", [q, root]), g.op("Mul", [kt, root])])
    y = merge(g, g.op("MatMul", [g.op("Softmax", [sc], axis=-1), v]))
    save(out, "attention_vit", g, [xi], {"x": xv}, [y], lin + ["anvil.Sdpa -", "Reshape -"])

    # T5: no scale, a per-head position bias and then the padding mask, added one after the
    # other: the two masks are summed once (an Add of the masks), the scores never.
    g = G()
    xi, xv = inputs()
    mi = helper.make_tensor_value_info("m", TensorProto.FLOAT, [b, 1, 1, s])
    mv = np.where(RNG.uniform(0, 1, (b, 1, 1, s)) < 0.2, -1e9, 0.0).astype(np.float32)
    bias = g.const(RNG.normal(0, 1, (1, h, s, s)))
    q, k, v = (heads(g, g.linear("x", hid, hid)) for _ in range(3))
    kt = g.op("Transpose", [k], perm=[0, 1, 3, 2])
    sc = g.op("Add", [g.op("Add", [g.op("MatMul", [q, kt]), bias]), "m"])
    y = merge(g, g.op("MatMul", [g.op("Softmax", [sc], axis=-1), v]))
    save(out, "attention_t5", g, [xi, mi], {"x": xv, "m": mv}, [y],
         lin + ["Add -", "anvil.Sdpa -", "Reshape -"])

    # QKV: the three projections read one input; forced fused (the rule keeps them separate
    # until measured), they become one MatMul with a bias, a Split, and the attention.
    g = G()
    xi, xv = inputs()
    q, k, v = (heads(g, g.linear("x", hid, hid)) for _ in range(3))
    kt = g.op("Transpose", [k], perm=[0, 1, 3, 2])
    y = merge(g, g.op("MatMul", [g.op("Softmax", [g.op("MatMul", [q, kt])], axis=-1), v]))
    # (attention_views then reads q, k and v as column ranges of the wide output: the Split,
    # and the Reshapes only it read, go)
    save(out, "parallel_qkv", g, [xi], {"x": xv}, [y],
         ["MatMul fused[+bias(in2)]", "anvil.Sdpa -", "Reshape -"],
         env={"ANVIL_PARALLEL_GEMM": "fused"})
    # GPT-2's c_attn: one projection to 3 x hidden, split three ways, reshaped by constants;
    # with the reshape target computed at run time, the Split stays.
    for const_target in (True, False):
        g = G()
        xi, xv = inputs()
        if not const_target:  # symbolic dims: the Shape is not folded at load
            xi = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", hid])
        parts = g.op("Split", [g.linear("x", hid, 3 * hid), g.const_i64([hid] * 3)], outs=3,
                     axis=2)
        target = (g.const_i64([0, -1, h, d]) if const_target else
                  g.op("Concat", [g.op("Shape", ["x"], end=2), g.const_i64([h, d])], axis=0))
        q, k, v = (g.op("Transpose", [g.op("Reshape", [p, target])], perm=[0, 2, 1, 3])
                   for p in parts)
        kt = g.op("Transpose", [k], perm=[0, 1, 3, 2])
        y = merge(g, g.op("MatMul", [g.op("Softmax", [g.op("MatMul", [q, kt])], axis=-1), v]))
        if const_target:
            save(out, "attention_split_views", g, [xi], {"x": xv}, [y],
                 ["MatMul fused[+bias(in2)]", "anvil.Sdpa -", "Reshape -"])
        else:
            save(out, "attention_split_kept", g, [xi], {"x": xv}, [y],
                 ["MatMul fused[+bias(in2)]", "Split -", "Shape -", "Concat -", "Reshape -",
                  "Reshape -", "Reshape -", "anvil.Sdpa -", "Reshape -"])
    # Siblings that differ (another K, an activation on one of them) stay apart.
    g = G()
    xi, xv = inputs()
    a = g.linear("x", hid, 8)
    b2 = g.op("Relu", [g.linear("x", hid, 8)])
    c2 = g.linear("x", hid, 5)
    save(out, "parallel_mixed", g, [xi], {"x": xv}, [a, b2, c2],
         ["MatMul fused[+bias(in2)]", "MatMul fused[+bias(in2) Relu]", "Split -"],
         env={"ANVIL_PARALLEL_GEMM": "fused"})

    # The ONNX Attention op (opset 23): 4-D with a bool mask and is_causal, and 3-D with heads
    # from q_num_heads (Y reshaped back), and with softcap (Gemma 2's logit capping).
    # And grouped-query attention: 6 query heads over 2 k/v heads.
    for form in ("4d", "3d", "gqa", "softcap"):
        g = G()
        if form == "3d":
            shp = kv_shp = [b, s, hid]
            attrs = {"q_num_heads": h, "kv_num_heads": h}
        elif form == "gqa":
            shp, kv_shp = [b, 6, s, d], [b, 2, s, d]
            attrs = {}
        else:
            shp = kv_shp = [b, h, s, d]
            attrs = {"is_causal": 1} if form == "4d" else {"softcap": 5.0}
        ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shp if n == "q" else kv_shp)
               for n in "qkv"]
        feeds = {n: RNG.normal(0, 1, shp if n == "q" else kv_shp).astype(np.float32)
                 for n in "qkv"}
        names = ["q", "k", "v"]
        if form == "4d":
            ins.append(helper.make_tensor_value_info("m", TensorProto.BOOL, [b, 1, s, s]))
            feeds["m"] = RNG.uniform(0, 1, (b, 1, s, s)) > 0.1
            names.append("m")
        y = g.op("Attention", names, **attrs)
        want = ["anvil.Sdpa -"] + (["Reshape -"] if form == "3d" else [])
        save(out, f"attention_onnx_{form}", g, ins, feeds, [y],
             want, opset=23)

    # With a past cache: present_key / present_value become Concats the node reads.
    g = G()
    shp, past = [b, h, 20, d], [b, h, 30, d]
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shp) for n in "qkv"]
    ins += [helper.make_tensor_value_info(n, TensorProto.FLOAT, past) for n in ("pk", "pv")]
    feeds = {n: RNG.normal(0, 1, shp).astype(np.float32) for n in "qkv"}
    feeds.update({n: RNG.normal(0, 1, past).astype(np.float32) for n in ("pk", "pv")})
    y, pk, pv = g.op("Attention", ["q", "k", "v", "", "pk", "pv"], outs=3)
    save(out, "attention_onnx_past", g, ins, feeds, [y, pk, pv],
         ["Concat -", "Concat -", "anvil.Sdpa -"], opset=23)
    # ... and causal (a decoder's step over its cache: the new queries see the whole past and
    # the new keys up to their own), with as many new keys as queries: lower-right aligned.
    g = G()
    y, pk, pv = g.op("Attention", ["q", "k", "v", "", "pk", "pv"], outs=3, is_causal=1)
    save(out, "attention_onnx_past_causal", g, ins, feeds, [y, pk, pv],
         ["Concat -", "Concat -", "anvil.Sdpa -"], opset=23)

    # Near misses: the scores are also a graph output; a Softmax over another axis.
    # (k's two Transposes left for the MatMul compose into one)
    unfused = (lin[:2] + ["Transpose -"] + lin[:2] + lin[:2] + ["Transpose -"] +
               ["Transpose -", "MatMul -", "Softmax -", "MatMul -"])
    g = G()
    xi, xv = inputs()
    q, k, v = (heads(g, g.linear("x", hid, hid)) for _ in range(3))
    kt = g.op("Transpose", [k], perm=[0, 1, 3, 2])
    sc = g.op("MatMul", [q, kt])
    y = g.op("MatMul", [g.op("Softmax", [sc], axis=-1), v])
    save(out, "attention_scores_read", g, [xi], {"x": xv}, [y, sc],
         unfused)
    g = G()
    xi, xv = inputs()
    q, k, v = (heads(g, g.linear("x", hid, hid)) for _ in range(3))
    kt = g.op("Transpose", [k], perm=[0, 1, 3, 2])
    y = g.op("MatMul", [g.op("Softmax", [g.op("MatMul", [q, kt])], axis=2), v])
    save(out, "attention_softmax_axis", g, [xi], {"x": xv}, [y],
         unfused)


def norm_cases(out):
    """LayerNorm and RMSNorm written out in primitive ops, and spellings left alone."""
    shape = [2, 7, 24]

    def data():
        xi = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)
        return xi, (RNG.normal(0, 2, shape) + 0.5).astype(np.float32)

    def mean(g, x, axes=(-1,), keepdims=1):
        return g.op("ReduceMean", [x], axes=list(axes), keepdims=keepdims)

    def layernorm(g, x, square="Pow", beta=True):
        d = g.op("Sub", [x, mean(g, x)])
        sq = g.op("Pow", [d, g.const(2.0)]) if square == "Pow" else g.op("Mul", [d, d])
        r = g.op("Sqrt", [g.op("Add", [mean(g, sq), g.const(1e-5)])])
        y = g.op("Mul", [g.op("Div", [d, r]), g.const(RNG.uniform(0.5, 1.5, shape[-1]))])
        return g.op("Add", [y, g.const(RNG.normal(0, 0.1, shape[-1]))]) if beta else y

    for square in ("Pow", "Mul"):
        g = G()
        xi, xv = data()
        y = layernorm(g, "x", square)
        save(out, f"layernorm_{square.lower()}", g, [xi], {"x": xv}, [y],
             ["LayerNormalization -"])
    g = G()
    xi, xv = data()
    y = layernorm(g, "x", beta=False)
    save(out, "layernorm_no_beta", g, [xi], {"x": xv}, [y], ["LayerNormalization -"])

    # T5: x * (1 / sqrt(mean(x^2) + eps)) * w, and x / sqrt(...) * w
    for form in ("reciprocal", "div"):
        g = G()
        xi, xv = data()
        r = g.op("Sqrt", [g.op("Add", [mean(g, g.op("Pow", ["x", g.const(2.0)])), g.const(1e-6)])])
        n = (g.op("Mul", ["x", g.op("Div", [g.const(1.0), r])]) if form == "reciprocal"
             else g.op("Div", ["x", r]))
        y = g.op("Mul", [g.const(RNG.uniform(0.5, 1.5, shape[-1])), n])
        save(out, f"rmsnorm_{form}", g, [xi], {"x": xv}, [y], ["RMSNormalization -"])

    # Left alone: a mean over another axis. A centred value that is also a graph output keeps
    # its ReduceMean and Sub; what follows is an RMSNorm of it, which is what it computes.
    g = G()
    xi, xv = data()
    d = g.op("Sub", ["x", mean(g, "x", axes=(1,))])
    r = g.op("Sqrt", [g.op("Add", [mean(g, g.op("Pow", [d, g.const(2.0)]), axes=(1,)),
                                   g.const(1e-5)])])
    y = g.op("Mul", [g.op("Div", [d, r]), g.const(np.ones(shape[-1]))])
    save(out, "layernorm_other_axis", g, [xi], {"x": xv}, [y],
         ["ReduceMean -", "Sub -", "Pow -", "ReduceMean -", "anvil.EltwiseChain -", "Div -",
          "Mul -"])
    g = G()
    xi, xv = data()
    d = g.op("Sub", ["x", mean(g, "x")])
    r = g.op("Sqrt", [g.op("Add", [mean(g, g.op("Pow", [d, g.const(2.0)])), g.const(1e-5)])])
    y = g.op("Mul", [g.op("Div", [d, r]), g.const(np.ones(shape[-1]))])
    save(out, "layernorm_centred_read", g, [xi], {"x": xv}, [y, d],
         ["ReduceMean -", "Sub -", "RMSNormalization -"])


def cleanup_cases(out):
    """cse, transposes, dce."""
    xi = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4, 5])
    xv = RNG.normal(0, 1, (3, 4, 5)).astype(np.float32)
    # the same Softmax twice: one stays
    g = G()
    y = g.op("Concat", [g.op("Softmax", ["x"], axis=-1), g.op("Softmax", ["x"], axis=-1)], axis=0)
    save(out, "cse_twice", g, [xi], {"x": xv}, [y], ["Softmax -", "Concat -"])
    # the same op with other attributes stays twice
    g = G()
    y = g.op("Concat", [g.op("Softmax", ["x"], axis=-1), g.op("Softmax", ["x"], axis=1)], axis=0)
    save(out, "cse_other_attrs", g, [xi], {"x": xv}, [y], ["Softmax -", "Softmax -", "Concat -"])
    # two Transposes that cancel, and two that compose into one
    g = G()
    t = g.op("Transpose", [g.op("Transpose", ["x"], perm=[1, 0, 2])], perm=[1, 0, 2])
    u = g.op("Transpose", [g.op("Transpose", ["x"], perm=[0, 2, 1])], perm=[1, 0, 2])
    y = g.op("Softmax", [t], axis=-1)
    z = g.op("Softmax", [u], axis=-1)
    save(out, "transposes_pairs", g, [xi], {"x": xv}, [y, z],
         ["Identity -", "Transpose -", "Softmax -", "Softmax -"])
    # a branch nothing reads goes
    g = G()
    g.op("Relu", [g.op("Sigmoid", ["x"])])
    y = g.op("Softmax", ["x"], axis=-1)
    save(out, "dce_branch", g, [xi], {"x": xv}, [y], ["Softmax -"])

    # Back-to-back pairs (forced fused: the rule keeps them separate until measured).
    # A 3x3 conv with a Relu, then a 1x1 conv whose residual and Relu stay fused: one ConvPair.
    g = G()
    xi, xv = image("x", 8, 10, n=2)
    t = g.op("Relu", [g.conv("x", 8, 16)])
    y = g.op("Relu", [g.op("Add", [g.conv(t, 16, 8, k=1), "x"])])
    save(out, "pair_conv", g, [xi], {"x": xv}, [y], ["anvil.ConvPair fused[+residual(in5) Relu]"],
         env={"ANVIL_B2B": "fused"})
    # stride 2, no bias on the first, odd sizes, no activation between
    g = G()
    xi, xv = image("x", 5, 9)
    y = g.conv(g.conv("x", 5, 7, stride=2, bias=False), 7, 11, k=1)
    save(out, "pair_conv_s2", g, [xi], {"x": xv}, [y], ["anvil.ConvPair -"],
         env={"ANVIL_B2B": "fused"})
    # a 3x3 after the 3x3, or a first conv read twice: no pair
    g = G()
    xi, xv = image("x", 4, 6)
    t = g.conv("x", 4, 4)
    y = g.op("Add", [g.conv(g.conv("x", 4, 4), 4, 4), g.conv(t, 4, 4, k=1)])
    z = g.op("Relu", [t])
    save(out, "pair_conv_kept", g, [xi], {"x": xv}, [y, z],
         ["Conv -", "Conv -", "Conv -", "Conv fused[+residual(in3)]", "Relu -"],
         env={"ANVIL_B2B": "fused"})
    # An MLP block: Linear + Relu, Linear + bias + residual: one GemmPair.
    g = G()
    xi = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 37, 16])
    xv = RNG.normal(0, 1, (2, 37, 16)).astype(np.float32)
    y = g.op("Add", [g.linear(g.op("Relu", [g.linear("x", 16, 48)]), 48, 16), "x"])
    save(out, "pair_gemm", g, [xi], {"x": xv}, [y], ["anvil.GemmPair fused[+residual(in5)]"],
         env={"ANVIL_B2B": "fused"})
    # no biases, a Gelu between, symbolic rows
    g = G()
    xi = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", 24])
    xv = RNG.normal(0, 1, (131, 24)).astype(np.float32)
    t = g.linear("x", 24, 40, bias=False)
    t = g.op("Mul", [g.op("Mul", [t, g.const(0.5)]),
                     g.op("Add", [g.op("Erf", [g.op("Div", [t, g.const(1.4142135)])]),
                                  g.const(1.0)])])
    y = g.linear(t, 40, 9, bias=False)
    save(out, "pair_gemm_gelu", g, [xi], {"x": xv}, [y], ["anvil.GemmPair -"],
         env={"ANVIL_B2B": "fused"})

    # pool_act: a Relu or Clip that only a MaxPool reads is applied after the pool; one a Conv
    # absorbed stays there; one read twice stays a node.
    g = G()
    xi, xv = image("x", 3, 12)
    a = g.op("Relu", [g.op("Mul", ["x", g.const(1.5)])])
    b = g.op("Clip", [g.op("Add", ["x", g.const(0.2)]), g.const(-0.3), g.const(0.8)])
    y1 = g.op("MaxPool", [a], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    y2 = g.op("GlobalMaxPool", [b])
    save(out, "pool_act", g, [xi], {"x": xv}, [y1, y2],
         ["Mul -", "Add -", "MaxPool fused[Relu]", "GlobalMaxPool fused[Clip]"])
    g = G()
    xi, xv = image("x", 3, 8)
    t = g.op("Relu", [g.op("Mul", ["x", g.const(2.0)])])
    y1 = g.op("MaxPool", [t], kernel_shape=[2, 2], strides=[2, 2])
    y2 = g.op("MaxPool", [g.op("Relu", [g.conv("x", 3, 4)])], kernel_shape=[2, 2],
              strides=[2, 2])
    save(out, "pool_act_kept", g, [xi], {"x": xv}, [y1, y2, t],
         ["anvil.EltwiseChain -", "MaxPool -", "Conv fused[Relu]", "MaxPool -"])


def gemm_transpose_cases(out):
    """A 2-D Transpose next to a Gemm goes into its transA/transB (the transposes pass): weights
    that are inputs, as in a training graph, so nothing folds them at load."""
    def mat(name, r, c):
        return (helper.make_tensor_value_info(name, TensorProto.FLOAT, [r, c]),
                RNG.normal(0, 1, (r, c)).astype(np.float32))

    # Gemm(Transpose(W), X) and Gemm(X, Transpose(V), transB=1): both read their inputs directly.
    g = G()
    (wi, wv), (xi, xv), (vi, vv) = mat("w", 6, 5), mat("x", 6, 7), mat("v", 7, 4)
    a = g.op("Gemm", [g.op("Transpose", ["w"], perm=[1, 0]), "x"], alpha=0.5)
    y = g.op("Gemm", ["x", g.op("Transpose", ["v"], perm=[1, 0])], transB=1)
    save(out, "gemm_reads_transpose", g, [wi, xi, vi], {"w": wv, "x": xv, "v": vv}, [a, y],
         ["Gemm -", "Gemm -"])

    # The weight gradient's form: Transpose(Gemm(X, dY, transA=1)) becomes Gemm(dY, X, transA=1).
    g = G()
    (xi, xv), (di, dv) = mat("x", 9, 5), mat("dy", 9, 3)
    y = g.op("Transpose", [g.op("Gemm", ["x", "dy"], transA=1)], perm=[1, 0])
    save(out, "transpose_of_gemm", g, [xi, di], {"x": xv, "dy": dv}, [y], ["Gemm -"])

    # Kept: a Gemm with C (its broadcast would have to turn too), a Gemm output read by another
    # node besides the Transpose, a Transpose that is not a 2-D swap.
    g = G()
    (xi, xv), (wi, wv) = mat("x", 4, 5), mat("w", 5, 3)
    y = g.op("Transpose", [g.op("Gemm", ["x", "w", g.const(RNG.normal(0, 1, (1, 3)))])],
             perm=[1, 0])
    m = g.op("Gemm", ["x", "w"])
    z = g.op("Transpose", [m], perm=[1, 0])
    r = g.op("Relu", [m])
    save(out, "gemm_transpose_kept", g, [xi, wi], {"x": xv, "w": wv}, [y, z, r],
         ["Gemm -", "Transpose -", "Gemm -", "Transpose -", "Relu -"])


def qdq(g, x, scale, zp, dtype):
    """QuantizeLinear then DequantizeLinear of x, per tensor: the activations of a QDQ model."""
    s = g.const(scale)
    z = g.name("z")
    g.inits.append(numpy_helper.from_array(np.array(zp, dtype=dtype), z))
    return g.op("DequantizeLinear", [g.op("QuantizeLinear", [x, s, z]), s, z])


def q_weight(g, w, axis, dtype=np.int8, zp=0):
    """A constant 8-bit weight (symmetric per channel along axis) and its DequantizeLinear."""
    red = tuple(i for i in range(w.ndim) if i != axis)
    scale = (np.abs(w).max(axis=red) / 127.0 + 1e-8).astype(np.float32)
    shape = [1] * w.ndim
    shape[axis] = -1
    q = np.clip(np.round(w / scale.reshape(shape)) + zp, np.iinfo(dtype).min,
                np.iinfo(dtype).max).astype(dtype)
    qn, sn, zn = g.name("wq"), g.name("ws"), g.name("wz")
    g.inits += [numpy_helper.from_array(q, qn), numpy_helper.from_array(scale, sn),
                numpy_helper.from_array(np.full(scale.shape, zp, dtype=dtype), zn)]
    return g.op("DequantizeLinear", [qn, sn, zn], axis=axis), scale


def q_bias(g, b, scale):
    """A bias quantized to int32 with scale x_scale * w_scale, as quantizers write it."""
    q = np.round(b / scale).astype(np.int32)
    qn, sn = g.name("bq"), g.name("bs")
    g.inits += [numpy_helper.from_array(q, qn), numpy_helper.from_array(scale.astype(np.float32), sn)]
    return g.op("DequantizeLinear", [qn, sn], axis=0)


def qdq_cases(out):
    # The QDQ form quantizers write (fold_qdq): each DQ -> Conv / MatMul -> Q becomes one QLinear
    # node. Outputs may move by one quantization step between the fp32 and integer arithmetic.
    g = G()
    x, xv = image("x", 8, 9)
    sx, sy = 0.02, 0.05
    h = qdq(g, "x", sx, 128, np.uint8)
    w, sw = q_weight(g, RNG.normal(0, 0.3, (16, 8, 3, 3)), 0)
    b = q_bias(g, RNG.normal(0, 0.1, 16), np.float32(sx) * sw)
    h = g.op("Relu", [g.op("Conv", [h, w, b], kernel_shape=[3, 3], pads=[1] * 4)])
    y = qdq(g, h, sy, 0, np.uint8)
    save(out, "qdq_conv_relu", g, [x], {"x": xv}, [y],
         ["QuantizeLinear -", "QLinearConv -", "DequantizeLinear -"], atol=sy * 1.01)

    # s8 activations, a stride-2 conv without bias, and a MatMul with per-column weights
    g = G()
    x, xv = image("x", 4, 10)
    h = qdq(g, "x", 0.02, -3, np.int8)
    w, _ = q_weight(g, RNG.normal(0, 0.3, (6, 4, 3, 3)), 0)
    h = g.op("Conv", [h, w], kernel_shape=[3, 3], pads=[1] * 4, strides=[2, 2])
    h = g.op("Reshape", [qdq(g, h, 0.04, 5, np.int8), g.const_i64([1, 6, 25])])
    h = qdq(g, h, 0.04, 5, np.int8)
    w, _ = q_weight(g, RNG.normal(0, 0.3, (25, 12)), 1, np.uint8, 128)
    y = qdq(g, g.op("MatMul", [h, w]), 0.1, 120, np.uint8)
    save(out, "qdq_conv_matmul", g, [x], {"x": xv}, [y],
         ["QuantizeLinear -", "QLinearConv -", "DequantizeLinear -", "Reshape -",
          "QuantizeLinear -", "QLinearMatMul -", "DequantizeLinear -"], atol=0.1 * 1.01)

    # DQ -> MaxPool -> Q with the DQ's own scale and zero point: the MaxPool of the 8-bit tensor
    # (exact); with another scale after it the pool stays in fp32.
    g = G()
    x, xv = image("x", 3, 11)
    h = g.op("MaxPool", [qdq(g, "x", 0.03, 7, np.uint8)], kernel_shape=[3, 3], strides=[2, 2],
             pads=[1] * 4)
    y = qdq(g, h, 0.03, 7, np.uint8)
    z = qdq(g, g.op("MaxPool", [y], kernel_shape=[2, 2]), 0.05, 7, np.uint8)
    save(out, "qdq_maxpool", g, [x], {"x": xv}, [z],
         ["QuantizeLinear -", "MaxPool -", "DequantizeLinear -", "MaxPool -", "QuantizeLinear -",
          "DequantizeLinear -"], atol=0.05 * 1.01)

    # A residual block's Add of two dequantized tensors: anvil.QLinearAdd (the same arithmetic)
    g = G()
    x, xv = image("x", 4, 7)
    h = qdq(g, "x", 0.02, 128, np.uint8)
    w, sw = q_weight(g, RNG.normal(0, 0.3, (4, 4, 3, 3)), 0)
    c = qdq(g, g.op("Conv", [h, w], kernel_shape=[3, 3], pads=[1] * 4), 0.04, 120, np.uint8)
    y = qdq(g, g.op("Relu", [g.op("Add", [c, h])]), 0.05, 0, np.uint8)
    save(out, "qdq_add", g, [x], {"x": xv}, [y],
         ["QuantizeLinear -", "QLinearConv -", "anvil.QLinearAdd -", "DequantizeLinear -"],
         atol=0.05 * 1.01)

    # Not folded: a Relu before a Q whose zero point is not its type's minimum (the Relu would be
    # lost), and a depthwise conv (its fp32 kernels measured faster than qconv_dw_i8).
    g = G()
    x, xv = image("x", 4, 6)
    h = qdq(g, "x", 0.02, 128, np.uint8)
    w, _ = q_weight(g, RNG.normal(0, 0.3, (4, 4, 1, 1)), 0)
    h = g.op("Relu", [g.op("Conv", [h, w], kernel_shape=[1, 1])])
    h = qdq(g, h, 0.03, 10, np.uint8)
    w, _ = q_weight(g, RNG.normal(0, 0.3, (4, 1, 3, 3)), 0)
    h = g.op("Conv", [h, w], kernel_shape=[3, 3], pads=[1] * 4, group=4)
    y = qdq(g, h, 0.03, 128, np.uint8)
    save(out, "qdq_kept", g, [x], {"x": xv}, [y],
         ["QuantizeLinear -", "DequantizeLinear -", "Conv fused[Relu]", "QuantizeLinear -",
          "DequantizeLinear -", "Conv -", "QuantizeLinear -", "DequantizeLinear -"],
         env={"ANVIL_LAYOUT": "nchw"}, atol=0.03 * 1.01)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    qdq_cases(sys.argv[1])
    cases(sys.argv[1])
    attention_cases(sys.argv[1])
    norm_cases(sys.argv[1])
    cleanup_cases(sys.argv[1])
    gemm_transpose_cases(sys.argv[1])
