"""Every gradient rule of src/autodiff checked against central finite differences.

    check_grads.py ANVIL OUT_DIR

For each case, a small model with trainable initializers around one op family (broadcasting
included) is trained by `anvil train --loss mse --optimizer sgd --lr 1` for exactly one step on
one batch, so that the exported weights are w - grad and anvil's gradient is their difference.
The reference is the gradient of the same loss, mean((model(x) - labels)^2), by central
differences in float64 through ONNX Runtime (the model converted to double), on up to 12
elements of every parameter. Where torch is installed, the summary also says so; the oracle is
the finite difference either way. Exit status 1 if any gradient is off by more than
atol 1e-5 + rtol 2e-3.

A case's input is x, or several inputs by name (the first's dim 0 is the batch): a model whose
loss is in the graph (SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss) reads its targets as
an input `t`, so that they are shuffled with the samples; a scalar loss is repeated N times
(Concat) to give an output with the samples along dim 0.
"""
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(2026)


def case_models():
    """(name, nodes, params {name: array}, x array or {input name: array}, opset[, ref nodes])"""
    r = RNG
    out = []

    def p(*shape, scale=0.5):
        return r.normal(0, scale, shape).astype(np.float32)

    # (the samples along dim 0 are shuffled by `anvil train`: every model treats them alike)
    x = r.normal(0, 1, (4, 5)).astype(np.float32)
    out.append(("gemm_transB_bias", [
        helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1, alpha=0.7, beta=1.3)],
        {"w": p(3, 5), "b": p(3)}, x, 17))
    out.append(("gemm_transA", [
        helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0]),
        helper.make_node("Gemm", ["xt", "w", "b"], ["y"], transA=1)],
        {"w": p(5, 3), "b": p(1, 3)}, x, 17))
    x3 = r.normal(0, 1, (2, 4, 5)).astype(np.float32)
    out.append(("matmul_bias_relu", [
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("Add", ["m", "b"], ["a"]),
        helper.make_node("Relu", ["a"], ["y"])],
        {"w": p(5, 3), "b": p(3)}, x3, 17))
    out.append(("matmul_batched_weight", [
        helper.make_node("MatMul", ["x", "w"], ["y"])],
        {"w": p(1, 5, 3)}, x3, 17))
    out.append(("broadcast_arith", [
        helper.make_node("Mul", ["x", "w1"], ["a"]),
        helper.make_node("Div", ["a", "w2"], ["b"]),
        helper.make_node("Sub", ["b", "w3"], ["y"])],
        {"w1": p(5), "w2": (np.abs(p(4, 1)) + 1.0).astype(np.float32), "w3": p(1, 5)}, x3, 17))
    out.append(("unary_math", [
        helper.make_node("Mul", ["x", "w"], ["a"]),
        helper.make_node("Exp", ["a"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["e1"]),
        helper.make_node("Log", ["e1"], ["l"]),
        helper.make_node("Sqrt", ["e1"], ["s"]),
        helper.make_node("Neg", ["s"], ["ns"]),
        helper.make_node("Add", ["l", "ns"], ["y"])],
        {"w": p(5, scale=0.3), "one": np.ones(2, np.float32)[:1].repeat(5)}, x, 17))
    for act, attrs in [("Sigmoid", {}), ("Tanh", {}), ("LeakyRelu", {"alpha": 0.2}),
                       ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}), ("HardSwish", {})]:
        out.append((f"act_{act}", [
            helper.make_node("MatMul", ["x", "w"], ["m"]),
            helper.make_node(act, ["m"], ["y"], **attrs)],
            {"w": p(5, 4, scale=1.0)}, x, 17))
    out.append(("act_Gelu", [
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("Gelu", ["m"], ["y"])], {"w": p(5, 4, scale=1.0)}, x, 20))
    for sm in ("Softmax", "LogSoftmax"):
        out.append((f"{sm.lower()}", [
            helper.make_node("MatMul", ["x", "w"], ["m"]),
            helper.make_node(sm, ["m"], ["y"], axis=-1)], {"w": p(5, 4, scale=1.0)}, x, 17))
    out.append(("reshape_transpose", [
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("Reshape", ["m", "shape"], ["r"]),
        helper.make_node("Transpose", ["r"], ["t"], perm=[0, 3, 2, 1]),
        helper.make_node("Flatten", ["t"], ["y"], axis=1)],
        {"w": p(5, 6)}, x3, 17))
    img = r.normal(0, 1, (2, 4, 7, 7)).astype(np.float32)
    out.append(("conv_s2_group_pool", [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                         strides=[2, 2], group=2),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["y"], kernel_shape=[2, 2], strides=[1, 1])],
        {"w": p(6, 2, 3, 3), "b": p(6)}, img, 17))
    out.append(("conv_dilated_gap", [
        helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], dilations=[2, 2],
                         pads=[0, 1, 2, 1]),
        helper.make_node("GlobalAveragePool", ["c"], ["y"])],
        {"w": p(3, 4, 3, 3)}, img, 17))
    out.append(("conv_then_conv_1d", [
        helper.make_node("Conv", ["x", "w1"], ["c"], kernel_shape=[3], pads=[1, 1]),
        helper.make_node("Conv", ["c", "w2"], ["y"], kernel_shape=[2], strides=[2])],
        {"w1": p(3, 4, 3), "w2": p(2, 3, 2)}, r.normal(0, 1, (2, 4, 9)).astype(np.float32), 17))
    out.append(("reduce_concat_split_slice", [
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("Split", ["m", "sizes"], ["s1", "s2"], axis=-1),
        helper.make_node("ReduceSum", ["s1", "ax1"], ["r1"], keepdims=1),
        helper.make_node("ReduceMean", ["s2"], ["r2"], axes=[2], keepdims=0),
        helper.make_node("Unsqueeze", ["r2", "ax1"], ["r2u"]),
        helper.make_node("Concat", ["s1", "r1", "r2u"], ["cat"], axis=2),
        helper.make_node("Slice", ["cat", "st", "en", "ax1"], ["y"])],
        {"w": p(5, 6)}, x3, 17))
    ids = r.integers(0, 7, (3, 4)).astype(np.int64)
    out.append(("embedding_layernorm_gelu", [
        helper.make_node("Gather", ["table", "x"], ["e"]),
        helper.make_node("LayerNormalization", ["e", "g", "b"], ["ln"], axis=-1, epsilon=1e-5),
        helper.make_node("MatMul", ["ln", "w"], ["m"]),
        helper.make_node("Div", ["m", "sqrt2"], ["d"]),
        helper.make_node("Erf", ["d"], ["er"]),
        helper.make_node("Add", ["er", "one1"], ["e1"]),
        helper.make_node("Mul", ["m", "e1"], ["h"]),
        helper.make_node("Pow", ["h", "three"], ["h3"]),
        helper.make_node("Mul", ["h3", "tiny"], ["h3s"]),
        helper.make_node("Add", ["h", "h3s"], ["hh"]),
        helper.make_node("Greater", ["hh", "zero"], ["pos"]),
        helper.make_node("Where", ["pos", "hh", "w2"], ["y"])],
        {"table": p(7, 6), "g": (1.0 + p(6, scale=0.2)).astype(np.float32), "b": p(6),
         "w": p(6, 5), "w2": p(5)}, ids, 17))
    out.append(("averagepool", [
        helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("AveragePool", ["c"], ["a"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("AveragePool", ["a"], ["y"], kernel_shape=[3, 3], strides=[1, 1],
                         pads=[1, 1, 1, 1], count_include_pad=1)],
        {"w": p(3, 4, 3, 3)}, img, 17))
    out.append(("convtranspose", [
        helper.make_node("ConvTranspose", ["x", "w", "b"], ["t"], kernel_shape=[3, 3],
                         strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1]),
        helper.make_node("Relu", ["t"], ["y"])],
        {"w": p(4, 3, 3, 3), "b": p(3)}, img, 17))
    out.append(("gather_axis1", [
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("Gather", ["m", "pick"], ["y"], axis=1)], {"w": p(5, 3)}, x3, 17))
    # BatchNormalization trains with batch statistics: the reference spells them out
    bn_ref = [
        helper.make_node("Mul", ["x", "w"], ["c"]),
        helper.make_node("ReduceMean", ["c", "axes"], ["m"], keepdims=1),
        helper.make_node("Sub", ["c", "m"], ["d"]),
        helper.make_node("Mul", ["d", "d"], ["d2"]),
        helper.make_node("ReduceMean", ["d2", "axes"], ["v"], keepdims=1),
        helper.make_node("Add", ["v", "eps"], ["ve"]),
        helper.make_node("Sqrt", ["ve"], ["sd"]),
        helper.make_node("Div", ["d", "sd"], ["xh"]),
        helper.make_node("Reshape", ["scale", "cshape"], ["s4"]),
        helper.make_node("Reshape", ["bias", "cshape"], ["b4"]),
        helper.make_node("Mul", ["xh", "s4"], ["ys"]),
        helper.make_node("Add", ["ys", "b4"], ["yb"]),
        helper.make_node("Relu", ["yb"], ["y"])]
    out.append(("batchnorm_train", [
        helper.make_node("Mul", ["x", "w"], ["c"]),
        helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["bn"],
                         epsilon=1e-3),
        helper.make_node("Relu", ["bn"], ["y"])],
        {"w": p(4, 1, 1), "scale": (1.0 + p(4, scale=0.2)).astype(np.float32),
         "bias": p(4, scale=0.2)}, img, 18, bn_ref))
    # cases added later draw from a generator of their own (p too), so that the cases above
    # and every draw of main() for them stay as they were
    r = np.random.default_rng(2027)
    # Softmax / LogSoftmax before opset 13: the input coerced to 2-D at the axis
    n, a, b, f = (int(v) for v in r.integers(2, 5, 4))
    x4 = r.normal(0, 1, (n, a, b, f)).astype(np.float32)
    for sm, axis in (("Softmax", None), ("LogSoftmax", 2), ("Softmax", -1), ("LogSoftmax", -3)):
        attrs = {} if axis is None else {"axis": axis}
        out.append((f"{sm.lower()}_opset11_axis{axis}", [
            helper.make_node("MatMul", ["x", "w"], ["m"]),
            helper.make_node(sm, ["m"], ["y"], **attrs)],
            {"w": p(f, int(r.integers(2, 5)), scale=1.0)}, x4, 11))
    # AveragePool leaving the padding out of the average (count_include_pad 0, the default)
    h, wd = (int(v) for v in r.integers(5, 10, 2))
    img2 = r.normal(0, 1, (2, 3, h, wd)).astype(np.float32)
    out.append(("averagepool_pads_excluded", [
        helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("AveragePool", ["c"], ["a"], kernel_shape=[3, 3], strides=[2, 2],
                         pads=[1, 1, 1, 1]),
        helper.make_node("AveragePool", ["a"], ["y"], kernel_shape=[3, 2], strides=[1, 2],
                         pads=[0, 1, 2, 1], count_include_pad=0)],
        {"w": p(4, 3, 3, 3)}, img2, 17))
    out.append(("averagepool_1d_pads_excluded", [
        helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[2]),
        helper.make_node("AveragePool", ["c"], ["y"], kernel_shape=[4], strides=[3],
                         pads=[2, 3])],
        {"w": p(3, 4, 2)}, r.normal(0, 1, (3, 4, int(r.integers(6, 12)))).astype(np.float32),
        17))
    # grouped ConvTranspose
    h, wd = (int(v) for v in r.integers(3, 7, 2))
    out.append(("convtranspose_group2", [
        helper.make_node("Conv", ["x", "w0"], ["c"], kernel_shape=[1, 1]),
        helper.make_node("ConvTranspose", ["c", "w", "b"], ["t"], kernel_shape=[3, 3],
                         strides=[2, 2], pads=[1, 0, 1, 1], output_padding=[1, 0], group=2),
        helper.make_node("Tanh", ["t"], ["y"])],
        {"w0": p(4, 3, 1, 1), "w": p(4, 3, 3, 3), "b": p(6)},
        r.normal(0, 1, (2, 3, h, wd)).astype(np.float32), 17))
    out.append(("convtranspose_1d_depthwise", [
        helper.make_node("Conv", ["x", "w1"], ["c"], kernel_shape=[1]),
        helper.make_node("ConvTranspose", ["c", "w2"], ["y"], kernel_shape=[3], strides=[2],
                         dilations=[2], pads=[1, 2], group=4)],
        {"w1": p(4, 4, 1), "w2": p(4, 2, 3)},
        r.normal(0, 1, (2, 4, int(r.integers(4, 9)))).astype(np.float32), 17))
    # the model's own losses; targets as an input, scalar losses repeated along the batch
    n, d, f, k = (int(v) for v in r.integers(2, 6, 4))
    for op, red in (("SoftmaxCrossEntropyLoss", "mean"), ("SoftmaxCrossEntropyLoss", "sum"),
                    ("SoftmaxCrossEntropyLoss", "none"), ("NegativeLogLikelihoodLoss", "mean"),
                    ("NegativeLogLikelihoodLoss", "sum"), ("NegativeLogLikelihoodLoss", "none")):
        spatial = red != "sum"  # [N, C, d] scores; sum: [N, C]
        xs = (n, d, f) if spatial else (n, f)
        inputs = {"x": r.normal(0, 1, xs).astype(np.float32),
                  "t": r.integers(0, k, xs[:-1]).astype(np.int64)}
        nodes = [helper.make_node("MatMul", ["x", "w"], ["m"])]
        if spatial:
            nodes.append(helper.make_node("Transpose", ["m"], ["s"], perm=[0, 2, 1]))
        scores = "s" if spatial else "m"
        if op == "NegativeLogLikelihoodLoss":
            nodes.append(helper.make_node("LogSoftmax", [scores], ["lp"], axis=1))
            scores = "lp"
        if red == "none":
            nodes.append(helper.make_node(op, [scores, "t"], ["y"], reduction=red))
        else:
            nodes += [helper.make_node(op, [scores, "t"], ["l"], reduction=red),
                      helper.make_node("Unsqueeze", ["l", "ax0"], ["l1"]),
                      helper.make_node("Concat", ["l1"] * n, ["y"], axis=0)]
        out.append((f"{op}_{red}", nodes, {"w": p(f, k, scale=1.0)}, inputs, 17))
    return out


FIXED = {"pick": np.array([[3, 0], [3, 1]], np.int64), "sizes": np.array([2, 4], np.int64), "ax1": np.array([-1], np.int64),
         "st": np.array([1], np.int64), "en": np.array([6], np.int64),
         "sqrt2": np.array(1.4142135, np.float32), "one1": np.array(1.0, np.float32),
         "three": np.array(3.0, np.float32), "tiny": np.array(0.05, np.float32),
         "zero": np.array(0.0, np.float32),
         "mean": np.zeros(4, np.float32), "var": np.ones(4, np.float32),
         "axes": np.array([0, 2, 3], np.int64), "eps": np.array(1e-3, np.float32),
         "cshape": np.array([1, 4, 1, 1], np.int64), "ax0": np.array([0], np.int64)}


def as_inputs(x):
    return x if isinstance(x, dict) else {"x": x}


def build(name, nodes, params, x, opset, dtype):
    npd = np.float64 if dtype == TensorProto.DOUBLE else np.float32
    inits = [numpy_helper.from_array(v.astype(npd), k) for k, v in params.items()]
    if name == "reshape_transpose":
        inits.append(numpy_helper.from_array(np.array([2, 4, 2, 3], np.int64), "shape"))
    used = {i for n in nodes for i in n.input}
    for k, v in FIXED.items():
        if k in used:
            inits.append(numpy_helper.from_array(v.astype(npd) if v.dtype == np.float32 else v, k))
    ins = [helper.make_tensor_value_info(k, TensorProto.INT64 if v.dtype == np.int64 else dtype,
                                         list(v.shape)) for k, v in as_inputs(x).items()]
    g = helper.make_graph(nodes, name, ins, [helper.make_tensor_value_info("y", dtype, None)],
                          initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def main():
    anvil, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    bad = 0
    for case in case_models():
        name, nodes, params, x, opset = case[:5]
        ref_nodes = case[5] if len(case) > 5 else nodes
        m32 = build(name, nodes, params, x, opset, TensorProto.FLOAT)
        path = os.path.join(out, f"{name}.onnx")
        onnx.save(m32, path)
        inputs = as_inputs(x)
        batch = next(iter(inputs.values())).shape[0]
        y0 = ort.InferenceSession(m32.SerializeToString(),
                                  providers=["CPUExecutionProvider"]).run(None, inputs)[0]
        labels = RNG.normal(0, 1, y0.shape).astype(np.float32)
        data = os.path.join(out, f"{name}.npz")
        np.savez(data, **inputs, labels=labels)
        trained = os.path.join(out, f"{name}.trained.onnx")
        r = subprocess.run([anvil, "train", path, "--data", data, "--loss", "mse", "--optimizer",
                            "sgd", "--lr", "1", "--epochs", "1", "--batch", str(batch),
                            "--threads", "1", "-q", "-o", trained], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"FAIL {name}: anvil train exited {r.returncode}: {r.stderr.strip()}")
            bad += 1
            continue
        after = {t.name: numpy_helper.to_array(t) for t in onnx.load(trained).graph.initializer}
        try:
            m64 = build(name, ref_nodes, params, x, opset, TensorProto.DOUBLE)
            ort.InferenceSession(m64.SerializeToString(), providers=["CPUExecutionProvider"])
            dtype, eps, npd = TensorProto.DOUBLE, 1e-6, np.float64
        except Exception:  # an op without a double kernel in ORT: float32, coarser steps
            dtype, eps, npd = TensorProto.FLOAT, 1e-2, np.float32

        def loss(pv):
            m = build(name, ref_nodes, pv, x, opset, dtype)
            s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
            feed = {k: v if v.dtype == np.int64 else v.astype(npd) for k, v in inputs.items()}
            y = s.run(None, feed)[0].astype(np.float64)
            return float(np.mean((y - labels.astype(np.float64)) ** 2))

        worst, failed = 0.0, bad
        for k, w in params.items():
            grad = w.astype(np.float64) - after[k].astype(np.float64)
            flat = w.reshape(-1)
            picks = RNG.choice(flat.size, size=min(12, flat.size), replace=False)
            for i in picks:
                pv = {kk: vv.astype(np.float64) for kk, vv in params.items()}
                f = pv[k].reshape(-1)
                f[i] += eps
                lp = loss(pv)
                f[i] -= 2 * eps
                lm = loss(pv)
                want = (lp - lm) / (2 * eps)
                got = grad.reshape(-1)[i]
                tol = 1e-5 + 2e-3 * abs(want) + (2e-3 if dtype == TensorProto.FLOAT else 0.0)
                worst = max(worst, abs(got - want) / (abs(want) + 1e-6))
                if abs(got - want) > tol:
                    print(f"FAIL {name}: d loss / d {k}[{i}] = {got:.6g}, finite differences "
                          f"{want:.6g}")
                    bad += 1
                    break
        print(f"{'ok  ' if bad == failed else 'FAIL'} {name}: worst relative error {worst:.2e} "
              f"({'float64' if dtype == TensorProto.DOUBLE else 'float32'} differences)")
    print(f"{bad} failures")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
