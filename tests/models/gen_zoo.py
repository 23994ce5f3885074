#!/usr/bin/env python3
"""Generates the model zoo: well-known architectures as ONNX, with ONNX Runtime reference data.

Usage: gen_zoo.py NAME OUTDIR [--size full|ci] [--seed S] [--force]
       gen_zoo.py all OUTDIR [--size full|ci]      (one subfolder of OUTDIR per model)
       gen_zoo.py list                              (the model names, one a line)

Models (opset 17, ir_version 8, fixed seeds, symbolic batch where natural; the transformers also
declare a symbolic sequence dim "seq" and derive positions, masks and reshapes from it at run time):
  resnet50        bottleneck ResNet (1x1/3x3/1x1 conv + BN + ReLU, projection shortcuts)
  mobilenetv2     inverted residuals: 1x1 expand, 3x3 depthwise (group = channels), Clip as ReLU6
  vgg16           3x3 conv + ReLU stacks, max pools, three Gemm classifier layers
  squeezenet      fire modules: 1x1 squeeze, parallel 1x1 / 3x3 expand joined by Concat
  densenet_block  a DenseNet dense block (BN-ReLU-1x1-BN-ReLU-3x3, Concat growth) + transition
  bert_base       BERT encoder: Gather embeddings (positions from Shape/Gather/Range),
                  LayerNormalization, MatMul attention with an additive mask from attention_mask
                  (Cast/Sub/Mul), head reshapes with 0/-1 targets, Softmax, Erf-based Gelu
  distilbert      DistilBERT encoder: LayerNorm decomposed as exporters emit it
                  (ReduceMean/Sub/Pow/Sqrt/Div), mask applied with Equal + Where
  gpt2            GPT-2 decoder: positions as a Slice of the position table, causal mask from
                  Trilu over ConstantOfShape([S, S]), QKV projection Split in three, head reshapes
                  built with Shape/Gather/Concat, tanh-form Gelu, tied output embedding
  lstm            bidirectional LSTM then a unidirectional LSTM, last hidden state to a Gemm
  if_loop         a Loop (outer-scope weights, trip count input) feeding an If on the sign of a sum

--size full is the real architecture (used by bench/peer.py); --size ci is a narrow, shallow,
small-input version that runs in seconds with reference kernels.

OUTDIR becomes one case in the ONNX backend-test layout that tests/tools/run_cases.c reads:
model.onnx, test_data_set_<k>/ (seeded inputs, ONNX Runtime's outputs as input_<i>.pb /
output_<i>.pb; the transformers' test_data_set_1 has half the sequence length of set 0, if_loop has
four sets) and tolerance.txt (rtol 1e-3, atol = 1e-4 * max|expected|). A stamp file records
the script's hash, the size and the seed, so re-running skips models that are up to date.
"""

import argparse
import hashlib
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


class Builder:
    """Accumulates nodes and initializers with unique names and a seeded generator."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.inits = []
        self.count = 0

    def name(self, prefix):
        self.count += 1
        return f"{prefix}_{self.count}"

    def init(self, prefix, arr, dtype=np.float32):
        n = self.name(prefix)
        self.inits.append(numpy_helper.from_array(np.asarray(arr).astype(dtype), n))
        return n

    def ints(self, values):
        return self.init("const", np.array(values, dtype=np.int64), np.int64)

    def scalar(self, value, dtype=np.float32):
        return self.init("const", np.array(value, dtype=dtype), dtype)

    def op(self, op_type, inputs, outputs=1, **attrs):
        """Adds one node; returns its output name, or a list of names when outputs > 1."""
        n = self.name(op_type.lower())
        outs = [n] if outputs == 1 else [f"{n}_{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=n, **attrs))
        return outs[0] if outputs == 1 else outs

    def name_output(self, x, name):
        """Renames the last node's output x to the graph output name."""
        last = self.nodes[-1]
        assert last.output[0] == x
        last.output[0] = name
        return name

    def normal(self, shape, std):
        return self.rng.standard_normal(shape) * std

    # ---- CNN pieces ---------------------------------------------------------------------------

    def conv(self, x, cin, cout, k, stride=1, pad=None, group=1, bias=False, gain=2.0):
        # He initialisation (fan-in of one group) keeps activations near unit scale with depth.
        pad = k // 2 if pad is None else pad
        w = self.init("w", self.normal((cout, cin // group, k, k),
                                       np.sqrt(gain / (cin // group * k * k))))
        ins = [x, w]
        if bias:
            ins.append(self.init("b", self.normal(cout, 0.05)))
        return self.op("Conv", ins, kernel_shape=[k, k], strides=[stride, stride],
                       pads=[pad] * 4, group=group)

    def bn(self, x, c, gamma=(0.5, 1.5)):
        ins = [x, self.init("scale", self.rng.uniform(gamma[0], gamma[1], c)),
               self.init("bias", self.normal(c, 0.1)), self.init("mean", self.normal(c, 0.1)),
               self.init("var", self.rng.uniform(0.5, 1.5, c))]
        return self.op("BatchNormalization", ins, epsilon=1e-5)

    def relu(self, x):
        return self.op("Relu", [x])

    def relu6(self, x):
        return self.op("Clip", [x, self.scalar(0.0), self.scalar(6.0)])

    def gemm(self, x, cin, cout, gain=1.0):
        w = self.init("fc_w", self.normal((cout, cin), np.sqrt(gain / cin)))
        b = self.init("fc_b", self.normal(cout, 0.05))
        return self.op("Gemm", [x, w, b], transB=1)

    def head(self, x, c, classes):
        x = self.op("GlobalAveragePool", [x])
        x = self.op("Flatten", [x], axis=1)
        return self.gemm(x, c, classes)

    # ---- transformer pieces -------------------------------------------------------------------

    def linear(self, x, cin, cout, std=0.02):
        y = self.op("MatMul", [x, self.init("lin_w", self.normal((cin, cout), std))])
        return self.op("Add", [y, self.init("lin_b", self.normal(cout, 0.02))])

    def layernorm(self, x, d, decomposed=False):
        g = self.init("ln_g", 1.0 + self.normal(d, 0.05))
        b = self.init("ln_b", self.normal(d, 0.05))
        if not decomposed:
            return self.op("LayerNormalization", [x, g, b], axis=-1, epsilon=1e-5)
        # The form PyTorch exporters emit before opset 17 (and many models still carry).
        mean = self.op("ReduceMean", [x], axes=[-1], keepdims=1)
        c = self.op("Sub", [x, mean])
        var = self.op("ReduceMean", [self.op("Pow", [c, self.scalar(2.0)])], axes=[-1],
                      keepdims=1)
        std = self.op("Sqrt", [self.op("Add", [var, self.scalar(1e-5)])])
        return self.op("Add", [self.op("Mul", [self.op("Div", [c, std]), g]), b])

    def gelu_erf(self, x):
        e = self.op("Erf", [self.op("Div", [x, self.scalar(np.sqrt(2.0))])])
        return self.op("Mul", [self.op("Mul", [x, self.op("Add", [e, self.scalar(1.0)])]),
                               self.scalar(0.5)])

    def gelu_tanh(self, x):
        cube = self.op("Pow", [x, self.scalar(3.0)])
        inner = self.op("Add", [x, self.op("Mul", [cube, self.scalar(0.044715)])])
        t = self.op("Tanh", [self.op("Mul", [inner, self.scalar(np.sqrt(2.0 / np.pi))])])
        return self.op("Mul", [self.op("Mul", [x, self.scalar(0.5)]),
                               self.op("Add", [t, self.scalar(1.0)])])


def finish(b, name, inputs, outputs):
    b.name_output(b.nodes[-1].output[0], outputs[0].name)
    graph = helper.make_graph(b.nodes, f"anvil_zoo_{name}", inputs, outputs,
                              initializer=b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="anvil-gen-zoo")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def image_io(hw, classes):
    return ([helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, hw, hw])],
            [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", classes])])


def image_feeds(rng, hw):
    return {"input": rng.standard_normal((1, 3, hw, hw)).astype(np.float32)}


# ---- CNNs ---------------------------------------------------------------------------------------


def build_resnet50(size, seed):
    hw, widths, blocks, classes = {
        "full": (224, (64, 128, 256, 512), (3, 4, 6, 3), 1000),
        "ci": (32, (8, 16, 32, 64), (1, 1, 1, 1), 10)}[size]
    b = Builder(seed)
    x = b.relu(b.bn(b.conv("input", 3, widths[0], 7, 2, 3), widths[0]))
    x = b.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = widths[0]
    for stage, (width, count) in enumerate(zip(widths, blocks)):
        for i in range(count):
            stride = 2 if stage > 0 and i == 0 else 1
            cout = width * 4
            y = b.relu(b.bn(b.conv(x, cin, width, 1, 1, 0), width))
            y = b.relu(b.bn(b.conv(y, width, width, 3, stride, 1), width))
            # A small last-BN scale on the residual branch keeps activations from growing.
            y = b.bn(b.conv(y, width, cout, 1, 1, 0), cout, gamma=(0.1, 0.4))
            sc = x if stride == 1 and cin == cout else b.bn(b.conv(x, cin, cout, 1, stride, 0),
                                                             cout)
            x = b.relu(b.op("Add", [y, sc]))
            cin = cout
    b.head(x, cin, classes)
    return finish(b, "resnet50", *image_io(hw, classes)), lambda r, k: image_feeds(r, hw)


def build_mobilenetv2(size, seed):
    # (expansion t, channels c, repeats n, stride s) as in the MobileNetV2 paper.
    full_cfg = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                (6, 160, 3, 2), (6, 320, 1, 1)]
    ci_cfg = [(1, 8, 1, 1), (6, 8, 2, 2), (6, 16, 2, 2), (6, 24, 1, 1)]
    hw, cfg, stem, last, classes = {"full": (224, full_cfg, 32, 1280, 1000),
                                    "ci": (32, ci_cfg, 8, 64, 10)}[size]
    b = Builder(seed)
    # BN folded into conv bias, as exported MobileNets carry it.
    x = b.relu6(b.conv("input", 3, stem, 3, 2, 1, bias=True))
    cin = stem
    for t, c, n, s in cfg:
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = cin * t
            y = x
            if t != 1:
                y = b.relu6(b.conv(y, cin, hidden, 1, 1, 0, bias=True))
            y = b.relu6(b.conv(y, hidden, hidden, 3, stride, 1, group=hidden, bias=True))
            # Linear bottleneck: no activation; gain 0.5 keeps the residual sum bounded.
            y = b.conv(y, hidden, c, 1, 1, 0, bias=True, gain=0.5)
            x = b.op("Add", [x, y]) if stride == 1 and cin == c else y
            cin = c
    x = b.relu6(b.conv(x, cin, last, 1, 1, 0, bias=True))
    b.head(x, last, classes)
    return finish(b, "mobilenetv2", *image_io(hw, classes)), lambda r, k: image_feeds(r, hw)


def build_vgg16(size, seed):
    full_cfg = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512,
                512, "M"]
    ci_cfg = [8, 8, "M", 16, 16, "M", 32, 32, 32, "M", 32, 32, 32, "M", 32, 32, 32, "M"]
    hw, cfg, fc, classes = {"full": (224, full_cfg, 4096, 1000),
                            "ci": (32, ci_cfg, 64, 10)}[size]
    b = Builder(seed)
    x, cin = "input", 3
    for v in cfg:
        if v == "M":
            x = b.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
        else:
            x = b.relu(b.conv(x, cin, v, 3, 1, 1, bias=True))
            cin = v
    x = b.op("Flatten", [x], axis=1)
    feat = cin * (hw // 32) ** 2
    x = b.relu(b.gemm(x, feat, fc, gain=2.0))
    x = b.relu(b.gemm(x, fc, fc, gain=2.0))
    x = b.gemm(x, fc, classes)
    return finish(b, "vgg16", *image_io(hw, classes)), lambda r, k: image_feeds(r, hw)


def build_squeezenet(size, seed):
    # SqueezeNet 1.1: (squeeze, expand) per fire module, "M" a 3x3/2 max pool.
    full_cfg = [(16, 64), (16, 64), "M", (32, 128), (32, 128), "M", (48, 192), (48, 192),
                (64, 256), (64, 256)]
    ci_cfg = [(4, 8), (4, 8), "M", (8, 16), "M", (8, 16), (12, 24)]
    hw, cfg, stem, classes = {"full": (224, full_cfg, 64, 1000),
                              "ci": (48, ci_cfg, 16, 10)}[size]
    b = Builder(seed)
    x = b.relu(b.conv("input", 3, stem, 3, 2, 0, bias=True))
    x = b.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2])
    cin = stem
    for v in cfg:
        if v == "M":
            x = b.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2])
            continue
        sq, ex = v
        s = b.relu(b.conv(x, cin, sq, 1, 1, 0, bias=True))
        e1 = b.relu(b.conv(s, sq, ex, 1, 1, 0, bias=True))
        e3 = b.relu(b.conv(s, sq, ex, 3, 1, 1, bias=True))
        x = b.op("Concat", [e1, e3], axis=1)
        cin = 2 * ex
    x = b.relu(b.conv(x, cin, classes, 1, 1, 0, bias=True, gain=1.0))
    x = b.op("GlobalAveragePool", [x])
    x = b.op("Flatten", [x], axis=1)
    return finish(b, "squeezenet", *image_io(hw, classes)), lambda r, k: image_feeds(r, hw)


def build_densenet_block(size, seed):
    # DenseNet-121's first dense block and transition (growth 32, bottleneck 4 * growth).
    hw, cin0, growth, layers = {"full": (56, 64, 32, 6), "ci": (16, 16, 8, 4)}[size]
    b = Builder(seed)
    x, cin = "input", cin0
    for _ in range(layers):
        y = b.conv(b.relu(b.bn(x, cin)), cin, 4 * growth, 1, 1, 0)
        y = b.conv(b.relu(b.bn(y, 4 * growth)), 4 * growth, growth, 3, 1, 1)
        x = b.op("Concat", [x, y], axis=1)
        cin += growth
    x = b.conv(b.relu(b.bn(x, cin)), cin, cin // 2, 1, 1, 0)
    x = b.op("AveragePool", [x], kernel_shape=[2, 2], strides=[2, 2])
    out_hw = hw // 2
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", cin0, hw, hw])]
    outputs = [helper.make_tensor_value_info(x, TensorProto.FLOAT,
                                             ["N", cin // 2, out_hw, out_hw])]
    model = finish(b, "densenet_block", inputs, outputs)

    def feeds(r, k):
        # The block's input is a post-ReLU feature map.
        return {"input": np.abs(r.standard_normal((1, cin0, hw, hw))).astype(np.float32)}
    return model, feeds


# ---- transformers -------------------------------------------------------------------------------

BERT_SIZES = {  # layers, hidden, heads, ff, vocab, seq
    "full": (12, 768, 12, 3072, 30522, 128),
    "ci": (2, 64, 4, 128, 512, 32),
}


def transformer_seqs(seq):
    """The sequence length of each transformer data set: the size's own, then half of it.

    The graphs declare the sequence dim as the symbol "seq", so the second data set makes a
    session that already ran the first one plan again for a new shape."""
    return (seq, seq // 2)


def seq_len(b, ids, keep_dim):
    """The sequence length of ids [B, S] read at run time: a scalar, or a 1-D [S] if keep_dim."""
    shp = b.op("Shape", [ids])
    idx = b.ints([1]) if keep_dim else b.scalar(1, np.int64)
    return b.op("Gather", [shp, idx], axis=0)


def split_heads(b, x, heads, dh):
    # [B, S, H*dh] -> [B, H, S, dh]; Reshape's 0 copies the batch dim and -1 infers the sequence.
    x = b.op("Reshape", [x, b.ints([0, -1, heads, dh])])
    return b.op("Transpose", [x], perm=[0, 2, 1, 3])


def merge_heads(b, x, d):
    x = b.op("Transpose", [x], perm=[0, 2, 1, 3])
    return b.op("Reshape", [x, b.ints([0, 0, d])])


def encoder(name, size, seed, distil):
    layers, d, heads, ff, vocab, seq = BERT_SIZES[size]
    if distil:
        layers = max(1, layers // 2)
    dh = d // heads
    b = Builder(seed)
    emb = b.op("Gather", [b.init("word_emb", b.normal((vocab, d), 0.02)), "input_ids"], axis=0)
    # Position ids 0..S-1 from the run-time sequence length, as BERT exports build them.
    positions = b.op("Range", [b.scalar(0, np.int64), seq_len(b, "input_ids", False),
                               b.scalar(1, np.int64)])
    pos = b.op("Gather", [b.init("pos_emb", b.normal((512, d), 0.02)), positions], axis=0)
    x = b.op("Add", [emb, pos])
    if not distil:
        tok = b.op("Gather", [b.init("type_emb", b.normal((2, d), 0.02)), "token_type_ids"],
                   axis=0)
        x = b.op("Add", [x, tok])
    x = b.layernorm(x, d, decomposed=distil)
    # [B, S] mask -> [B, 1, 1, S]
    mask4 = b.op("Unsqueeze", ["attention_mask", b.ints([1, 2])])
    if distil:
        # masked positions: Where(mask == 0, -inf-ish, score), as DistilBERT's export does.
        is_pad = b.op("Equal", [mask4, b.scalar(0, np.int64)])
    else:
        # additive mask (1 - mask) * -10000, as BERT's export does.
        maskf = b.op("Cast", [mask4], to=TensorProto.FLOAT)
        additive = b.op("Mul", [b.op("Sub", [b.scalar(1.0), maskf]), b.scalar(-10000.0)])
    scale = b.scalar(np.sqrt(dh))
    for _ in range(layers):
        q = split_heads(b, b.linear(x, d, d), heads, dh)
        k = split_heads(b, b.linear(x, d, d), heads, dh)
        v = split_heads(b, b.linear(x, d, d), heads, dh)
        kt = b.op("Transpose", [k], perm=[0, 1, 3, 2])
        s = b.op("Div", [b.op("MatMul", [q, kt]), scale])
        if distil:
            s = b.op("Where", [is_pad, b.scalar(-3.4e38), s])
        else:
            s = b.op("Add", [s, additive])
        p = b.op("Softmax", [s], axis=-1)
        a = merge_heads(b, b.op("MatMul", [p, v]), d)
        x = b.layernorm(b.op("Add", [x, b.linear(a, d, d)]), d, decomposed=distil)
        h = b.gelu_erf(b.linear(x, d, ff))
        x = b.layernorm(b.op("Add", [x, b.linear(h, ff, d)]), d, decomposed=distil)
    ids = ["input_ids", "attention_mask"] + ([] if distil else ["token_type_ids"])
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"]) for n in ids]
    outputs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                             ["batch", "seq", d])]
    model = finish(b, name, inputs, outputs)

    def feeds(r, k):
        s = transformer_seqs(seq)[k]
        f = {"input_ids": r.integers(0, vocab, (1, s), dtype=np.int64)}
        mask = np.ones((1, s), dtype=np.int64)
        mask[:, s - s // 4:] = 0  # padded tail
        f["attention_mask"] = mask
        if not distil:
            tt = np.zeros((1, s), dtype=np.int64)
            tt[:, s // 2:] = 1
            f["token_type_ids"] = tt
        return f
    return model, feeds


def build_bert_base(size, seed):
    return encoder("bert_base", size, seed, distil=False)


def build_distilbert(size, seed):
    return encoder("distilbert", size, seed, distil=True)


def build_gpt2(size, seed):
    layers, d, heads, ff, vocab, seq = {"full": (12, 768, 12, 3072, 50257, 128),
                                        "ci": (2, 64, 4, 256, 512, 32)}[size]
    dh = d // heads
    b = Builder(seed)
    wte = b.init("wte", b.normal((vocab, d), 0.02))
    x = b.op("Gather", [wte, "input_ids"], axis=0)
    # Positions: the first S rows of the position table, S read from input_ids at run time.
    s1 = seq_len(b, "input_ids", True)
    wpe = b.init("wpe", b.normal((1024, d), 0.01))
    x = b.op("Add", [x, b.op("Slice", [wpe, b.ints([0]), s1, b.ints([0])])])
    # Shape [B, S, H, dh] built at run time, the way exporters emit dynamic reshapes.
    shp = b.op("Shape", ["input_ids"])
    bs = b.op("Gather", [shp, b.ints([0, 1])], axis=0)
    head_shape = b.op("Concat", [bs, b.ints([heads, dh])], axis=0)
    model_shape = b.op("Concat", [bs, b.ints([d])], axis=0)
    # Causal mask [S, S]: the lower triangle of a run-time sized block of ones.
    ones = b.op("ConstantOfShape", [b.op("Concat", [s1, s1], axis=0)],
                value=helper.make_tensor("one", TensorProto.BOOL, [1], [True]))
    causal = b.op("Trilu", [ones], upper=0)
    neg = b.scalar(-10000.0)
    scale = b.scalar(1.0 / np.sqrt(dh))
    for _ in range(layers):
        h = b.layernorm(x, d)
        q, k, v = b.op("Split", [b.linear(h, d, 3 * d), b.ints([d, d, d])], outputs=3, axis=2)
        q, k, v = (b.op("Transpose", [b.op("Reshape", [t, head_shape])], perm=[0, 2, 1, 3])
                   for t in (q, k, v))
        kt = b.op("Transpose", [k], perm=[0, 1, 3, 2])
        s = b.op("Mul", [b.op("MatMul", [q, kt]), scale])
        s = b.op("Where", [causal, s, neg])
        p = b.op("Softmax", [s], axis=-1)
        a = b.op("Transpose", [b.op("MatMul", [p, v])], perm=[0, 2, 1, 3])
        a = b.op("Reshape", [a, model_shape])
        x = b.op("Add", [x, b.linear(a, d, d, std=0.02 / np.sqrt(2 * layers))])
        m = b.gelu_tanh(b.linear(b.layernorm(x, d), d, ff))
        x = b.op("Add", [x, b.linear(m, ff, d, std=0.02 / np.sqrt(2 * layers))])
    x = b.layernorm(x, d)
    # Tied embedding: logits = x @ wte^T.
    wte_t = b.op("Transpose", [wte], perm=[1, 0])
    b.op("MatMul", [x, wte_t])
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                             ["batch", "seq", vocab])]
    model = finish(b, "gpt2", inputs, outputs)
    return model, lambda r, k: {"input_ids": r.integers(0, vocab, (1, transformer_seqs(seq)[k]),
                                                        dtype=np.int64)}


# ---- recurrent and control flow ---------------------------------------------------------------


def build_lstm(size, seed):
    seq, feat, hid, classes = {"full": (128, 256, 512, 100), "ci": (16, 16, 32, 10)}[size]
    b = Builder(seed)
    std = 1.0 / np.sqrt(hid)

    def lstm(x, cin, dirs, direction):
        w = b.init("lstm_w", b.rng.uniform(-std, std, (dirs, 4 * hid, cin)))
        r = b.init("lstm_r", b.rng.uniform(-std, std, (dirs, 4 * hid, hid)))
        bias = b.init("lstm_b", b.rng.uniform(-std, std, (dirs, 8 * hid)))
        return b.op("LSTM", [x, w, r, bias], outputs=3, hidden_size=hid, direction=direction)

    y, _, _ = lstm("input", feat, 2, "bidirectional")
    # Y [S, 2, B, H] -> [S, B, 2H]
    y = b.op("Reshape", [b.op("Transpose", [y], perm=[0, 2, 1, 3]), b.ints([0, 0, 2 * hid])])
    _, yh, _ = lstm(y, 2 * hid, 1, "forward")
    x = b.op("Squeeze", [yh, b.ints([0])])
    out = b.gemm(x, hid, classes)
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, [seq, "N", feat])]
    outputs = [helper.make_tensor_value_info(out, TensorProto.FLOAT, ["N", classes])]
    model = finish(b, "lstm", inputs, outputs)
    return model, lambda r, k: {"input": r.standard_normal((seq, 1, feat)).astype(np.float32)}


def build_if_loop(size, seed):
    width, iters = {"full": (1024, 16), "ci": (32, 4)}[size]
    b = Builder(seed)
    w = b.init("loop_w", b.normal((width, width), 1.0 / np.sqrt(width)))
    bias = b.init("loop_b", b.normal(width, 0.1))
    # Loop body: (iteration, cond, carried x) -> (cond, tanh(x W + b), scan output: row sums).
    # W and b come from the outer scope.
    body_nodes = [
        helper.make_node("MatMul", ["x_in", w], ["xw"], name="body_matmul"),
        helper.make_node("Add", ["xw", bias], ["xwb"], name="body_add"),
        helper.make_node("Tanh", ["xwb"], ["x_out"], name="body_tanh"),
        helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond"),
        helper.make_node("ReduceSum", ["x_out"], ["row_sum"], name="body_sum", keepdims=0),
    ]
    body = helper.make_graph(
        body_nodes, "loop_body",
        [helper.make_tensor_value_info("iter", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x_in", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x_out", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("row_sum", TensorProto.FLOAT, None)])
    true = b.init("cond", np.array(True), bool)
    b.nodes.append(helper.make_node("Loop", ["trip_count", true, "input"], ["x_final", "sums"],
                                    name="loop", body=body))
    total = b.op("ReduceSum", ["x_final"], keepdims=0)
    b.nodes.append(helper.make_node("Greater", [total, b.scalar(0.0)], ["branch"],
                                    name="greater"))
    two = b.scalar(2.0)
    then_g = helper.make_graph(
        [helper.make_node("Mul", ["x_final", two], ["then_out"], name="then_mul")], "then",
        [], [helper.make_tensor_value_info("then_out", TensorProto.FLOAT, None)])
    else_g = helper.make_graph(
        [helper.make_node("Sigmoid", ["x_final"], ["else_out"], name="else_sigmoid")], "else",
        [], [helper.make_tensor_value_info("else_out", TensorProto.FLOAT, None)])
    b.nodes.append(helper.make_node("If", ["branch"], ["output"], name="if",
                                    then_branch=then_g, else_branch=else_g))
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", width]),
              helper.make_tensor_value_info("trip_count", TensorProto.INT64, [])]
    outputs = [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", width]),
               helper.make_tensor_value_info("branch", TensorProto.BOOL, []),
               helper.make_tensor_value_info("sums", TensorProto.FLOAT, [iters])]
    model = finish(b, "if_loop", inputs, outputs)

    def feeds(r, k):
        return {"input": r.standard_normal((1, width)).astype(np.float32),
                "trip_count": np.array(iters, dtype=np.int64)}
    return model, feeds


MODELS = {
    "resnet50": build_resnet50,
    "mobilenetv2": build_mobilenetv2,
    "vgg16": build_vgg16,
    "squeezenet": build_squeezenet,
    "densenet_block": build_densenet_block,
    "bert_base": build_bert_base,
    "distilbert": build_distilbert,
    "gpt2": build_gpt2,
    "lstm": build_lstm,
    "if_loop": build_if_loop,
}

# Data sets per model: if_loop gets enough to take both If branches; the transformers get one per
# sequence length transformer_seqs gives, so that one session has to re-plan for a new shape.
DATA_SETS = {"if_loop": 4, "bert_base": 2, "distilbert": 2, "gpt2": 2}


def write_case(model, feeds_fn, outdir, seed, count):
    """Saves model.onnx and `count` test data sets computed by ONNX Runtime.

    feeds_fn(rng, k) returns the inputs of data set k, so a model may vary its input shapes
    across data sets (the transformers change their sequence length).
    """
    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(outdir, "model.onnx")
    onnx.save(model, path)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 2
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(seed + 1)
    in_names = [i.name for i in model.graph.input]
    out_names = [o.name for o in model.graph.output]
    for k in range(count):
        feeds = feeds_fn(rng, k)
        outs = sess.run(out_names, feeds)
        ddir = os.path.join(outdir, f"test_data_set_{k}")
        os.makedirs(ddir, exist_ok=True)
        for i, n in enumerate(in_names):
            with open(os.path.join(ddir, f"input_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(feeds[n], n).SerializeToString())
        for i, (n, y) in enumerate(zip(out_names, outs)):
            with open(os.path.join(ddir, f"output_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(np.asarray(y), n).SerializeToString())
    with open(os.path.join(outdir, "tolerance.txt"), "w") as f:
        f.write("rtol 1e-3\natol_scale 1e-4\n")
    return outs


def stamp_of(name, size, seed):
    with open(os.path.abspath(__file__), "rb") as f:
        h = hashlib.sha256(f.read()).hexdigest()[:16]
    return f"{name} {size} {seed} {h} onnx {onnx.__version__} ort {ort.__version__}\n"


def generate(name, outdir, size, seed, force):
    stamp_path = os.path.join(outdir, "zoo.stamp")
    stamp = stamp_of(name, size, seed)
    if not force and os.path.exists(stamp_path):
        with open(stamp_path) as f:
            if f.read() == stamp:
                print(f"{name}: up to date in {outdir}")
                return
    model, feeds_fn = MODELS[name](size, seed)
    outs = write_case(model, feeds_fn, outdir, seed, DATA_SETS.get(name, 1))
    with open(stamp_path, "w") as f:
        f.write(stamp)
    params = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
    print(f"{name} ({size}): {len(model.graph.node)} nodes, {params / 1e6:.2f} M parameters, "
          f"output max|y| {float(np.max(np.abs(outs[0]))):.3g} -> {outdir}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name", help="a model name, 'all' or 'list'")
    ap.add_argument("outdir", nargs="?")
    ap.add_argument("--size", choices=["full", "ci"], default="ci")
    ap.add_argument("--seed", type=int, default=20261121)
    ap.add_argument("--force", action="store_true", help="regenerate even if up to date")
    args = ap.parse_args()
    if args.name == "list":
        print("\n".join(MODELS))
        return 0
    if args.name != "all" and args.name not in MODELS:
        ap.error(f"unknown model '{args.name}'; one of: all, {', '.join(MODELS)}")
    if not args.outdir:
        ap.error("OUTDIR is required")
    if args.name == "all":
        for i, name in enumerate(MODELS):
            generate(name, os.path.join(args.outdir, name), args.size, args.seed + i, args.force)
    else:
        generate(args.name, args.outdir, args.size,
                 args.seed + list(MODELS).index(args.name), args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
