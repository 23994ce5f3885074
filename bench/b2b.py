"""Back-to-back fusion: one anvil.GemmPair / anvil.ConvPair node against the same two nodes run
separately, on the shapes Bolt's back-to-back tables use and on ResNet-50's bottleneck pairs.

    .venv/bin/python bench/b2b.py --threads 1,2 --rounds 5 --runs 10 [--only gemm|conv]

Each case is a two-node model written with a fixed seed to a temporary folder:
  gemm  X [M, K] -> MatMul W1 [K, N0] + bias, Relu -> MatMul W2 [N0, N1] + bias (Bolt's Table 1
        pairs: a wide first GEMM with a small N0 feeding a second; the first two rows are the
        shapes of CUTLASS's back-to-back GEMM example, with M cut from 81920 to 16384 rows to fit
        a CPU's run time; then a BERT-base FFN at sequence 512 and a narrow MLP);
  conv  X [1, C, H, W] -> Conv kxk (C -> M1) + bias, Relu -> Conv 1x1 (M1 -> M2) + bias, Relu
        (Bolt's Table 2 pairs: a 3x3 feeding a 1x1, CUTLASS's back-to-back conv example at
        batch 1, and ResNet-50's four bottleneck 3x3 -> 1x1 pairs).
anvil runs each with ANVIL_B2B=fused and =separate, alternating fresh processes (`anvil bench`,
no tuning database); the table gives the medians of every timed run and separate/fused (above 1:
the fused kernel is faster). For the convs, "same algorithm" is the separate pair with the first
conv forced to conv_implicit_gemm, the algorithm the fused kernel runs for it: that ratio is what
the fusion itself saves, the other what it gains over the best separate choice (often Winograd
for the 3x3, which the pair does not have). Outputs of both are the same within float rounding (the pass tests
check that; this script only times).
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (M, K, N0, N1)
GEMMS = [(16384, 576, 64, 128), (16384, 576, 64, 256), (512, 768, 3072, 768),
         (8192, 256, 64, 256), (8192, 64, 256, 64)]
# (C, H, k, stride, M1, M2)
CONVS = [(64, 56, 3, 1, 64, 128), (64, 56, 3, 1, 64, 256), (128, 28, 3, 1, 128, 512),
         (256, 14, 3, 1, 256, 1024), (512, 7, 3, 1, 512, 2048), (32, 112, 3, 2, 64, 64)]


def save(path, nodes, inits, x_shape, name):
    g = helper.make_graph(nodes, name,
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)


def tensor(rng, name, shape, scale):
    return numpy_helper.from_array(rng.normal(0, scale, shape).astype(np.float32), name)


def gemm_model(path, m, k, n0, n1):
    rng = np.random.default_rng(m + k + n0 + n1)
    inits = [tensor(rng, "w1", (k, n0), k ** -0.5), tensor(rng, "b1", (n0,), 0.1),
             tensor(rng, "w2", (n0, n1), n0 ** -0.5), tensor(rng, "b2", (n1,), 0.1)]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["t0"]),
             helper.make_node("Add", ["t0", "b1"], ["t1"]),
             helper.make_node("Relu", ["t1"], ["t"]),
             helper.make_node("MatMul", ["t", "w2"], ["y0"]),
             helper.make_node("Add", ["y0", "b2"], ["y"])]
    save(path, nodes, inits, [m, k], "gemm_pair")
    return rng.normal(0, 1, (m, k)).astype(np.float32)


def conv_model(path, c, hw, k, stride, m1, m2):
    rng = np.random.default_rng(c + hw + m1 + m2)
    inits = [tensor(rng, "w1", (m1, c, k, k), (c * k * k) ** -0.5), tensor(rng, "b1", (m1,), 0.1),
             tensor(rng, "w2", (m2, m1, 1, 1), m1 ** -0.5), tensor(rng, "b2", (m2,), 0.1)]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["t0"], kernel_shape=[k, k],
                              pads=[k // 2] * 4, strides=[stride] * 2, name="conv1"),
             helper.make_node("Relu", ["t0"], ["t"]),
             helper.make_node("Conv", ["t", "w2", "b2"], ["y0"], kernel_shape=[1, 1]),
             helper.make_node("Relu", ["y0"], ["y"])]
    save(path, nodes, inits, [1, c, hw, hw], "conv_pair")
    return rng.normal(0, 1, (1, c, hw, hw)).astype(np.float32)


def samples(anvil, model, x, threads, runs, warmup, mode):
    env = dict(os.environ, ANVIL_B2B="separate" if mode == "implicit" else mode)
    extra = ["--variant", "conv1=conv_implicit_gemm"] if mode == "implicit" else []
    out = subprocess.run([anvil, "bench", model, "--json", "--no-db", "--threads", str(threads),
                          "--iters", str(runs), "--warmup", str(warmup), "-i", f"x={x}", *extra],
                         check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out)["latency_ms"]["samples"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="1")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--only", choices=["gemm", "conv"])
    ap.add_argument("--anvil", default=os.path.join(ROOT, "build-release", "anvil"))
    args = ap.parse_args()
    cases = []
    if args.only != "conv":
        cases += [("gemm", s, f"gemm M={s[0]} K={s[1]} N0={s[2]} N1={s[3]}") for s in GEMMS]
    if args.only != "gemm":
        cases += [("conv", s, f"conv {s[0]}x{s[1]}x{s[1]} {s[2]}x{s[2]}/{s[3]} ->{s[4]} ->{s[5]}")
                  for s in CONVS]
    print("| pair | threads | separate ms | fused ms | separate/fused | same algorithm/fused |")
    print("|---|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for i, (kind, shape, label) in enumerate(cases):
            model = os.path.join(tmp, f"{i}.onnx")
            xv = (gemm_model if kind == "gemm" else conv_model)(model, *shape)
            x = os.path.join(tmp, f"{i}.npy")
            np.save(x, xv)
            for threads in [int(t) for t in args.threads.split(",")]:
                modes = ("separate", "fused") + (("implicit",) if kind == "conv" else ())
                s = {m: [] for m in modes}
                for _ in range(args.rounds):
                    for mode in modes:
                        s[mode] += samples(args.anvil, model, x, threads, args.runs, args.warmup,
                                           mode)
                a, b = statistics.median(s["separate"]), statistics.median(s["fused"])
                same = statistics.median(s["implicit"]) / b if kind == "conv" else a / b
                print(f"| {label} | {threads} | {a:.3f} | {b:.3f} | {a / b:.2f} | {same:.2f} |",
                      flush=True)


if __name__ == "__main__":
    main()
