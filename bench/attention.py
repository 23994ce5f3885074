"""Attention alone: the fused anvil.Sdpa node against the unfused MatMul / scale / mask / Softmax /
MatMul nodes it replaces (and ONNX Runtime), at BERT-base's shape.

    .venv/bin/python bench/attention.py --seq 128,512 --threads 1,2 --rounds 5 --runs 10

The model (written with a fixed seed to a temporary folder) takes q, k and v as [1, S, 768] (the
three projections' outputs), splits them into 12 heads of 64 with Reshape and Transpose, and
computes softmax(q kᵀ / 8 + mask) v with a [1, 1, 1, S] additive mask, then merges the heads back:
exactly the nodes torch.onnx.export writes for BERT's self-attention after the projections. anvil
runs it with every pass (`fused`) and with `--passes -fuse_attention` (`unfused`), alternating in
fresh processes; the table gives medians over all timed runs and the ratio unfused/fused (above 1:
the fused kernel is faster).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def make_model(path, seq, heads=12, head=64):
    hid = heads * head
    inits = [numpy_helper.from_array(np.array([1, seq, heads, head], np.int64), "split"),
             numpy_helper.from_array(np.array([1, seq, hid], np.int64), "merge"),
             numpy_helper.from_array(np.array(np.sqrt(head), np.float32), "root")]
    n = [helper.make_node("Reshape", [x, "split"], [x + "4"]) for x in "qkv"]
    n += [helper.make_node("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3]),
          helper.make_node("Transpose", ["k4"], ["kh"], perm=[0, 2, 3, 1]),
          helper.make_node("Transpose", ["v4"], ["vh"], perm=[0, 2, 1, 3]),
          helper.make_node("MatMul", ["qh", "kh"], ["s"]),
          helper.make_node("Div", ["s", "root"], ["ss"]),
          helper.make_node("Add", ["ss", "mask"], ["sm"]),
          helper.make_node("Softmax", ["sm"], ["p"], axis=-1),
          helper.make_node("MatMul", ["p", "vh"], ["oh"]),
          helper.make_node("Transpose", ["oh"], ["o4"], perm=[0, 2, 1, 3]),
          helper.make_node("Reshape", ["o4", "merge"], ["o"])]
    ins = [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, seq, hid]) for x in "qkv"]
    ins.append(helper.make_tensor_value_info("mask", TensorProto.FLOAT, [1, 1, 1, seq]))
    out = [helper.make_tensor_value_info("o", TensorProto.FLOAT, [1, seq, hid])]
    g = helper.make_graph(n, f"attention_{seq}", ins, out, initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    rng = np.random.default_rng(seq)
    feeds = {x: rng.normal(0, 1, (1, seq, hid)).astype(np.float32) for x in "qkv"}
    feeds["mask"] = np.where(rng.uniform(0, 1, (1, 1, 1, seq)) < 0.1, -10000.0,
                             0.0).astype(np.float32)
    return feeds


def anvil_samples(anvil, model, args, threads, runs, warmup, extra):
    out = subprocess.run([anvil, "bench", model, "--json", "--no-db", "--threads", str(threads),
                          "--iters", str(runs), "--warmup", str(warmup), *args, *extra],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["latency_ms"]["samples"]


def ort_samples(model, feeds, threads, runs, warmup):
    code = (
        "import json, sys, time, numpy as np, onnxruntime as ort\n"
        "so = ort.SessionOptions(); so.intra_op_num_threads = int(sys.argv[2])\n"
        "so.inter_op_num_threads = 1\n"
        "s = ort.InferenceSession(sys.argv[1], so, providers=['CPUExecutionProvider'])\n"
        "f = dict(np.load(sys.argv[3])); r = []\n"
        "for i in range(int(sys.argv[4]) + int(sys.argv[5])):\n"
        "    t = time.perf_counter(); s.run(None, f); r.append((time.perf_counter() - t) * 1e3)\n"
        "print(json.dumps(r[int(sys.argv[5]):]))\n")
    npz = model + ".npz"
    np.savez(npz, **feeds)
    out = subprocess.run([sys.executable, "-c", code, model, str(threads), npz, str(runs),
                          str(warmup)], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seq", default="512")
    ap.add_argument("--threads", default="1")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--anvil", default=os.path.join(ROOT, "build-release", "anvil"))
    ap.add_argument("--no-ort", action="store_true", help="skip ONNX Runtime")
    args = ap.parse_args()
    print("| seq | threads | unfused ms | fused ms | unfused/fused | ORT ms |")
    print("|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for seq in [int(s) for s in args.seq.split(",")]:
            model = os.path.join(tmp, f"attention_{seq}.onnx")
            feeds = make_model(model, seq)
            inputs = []
            for name, arr in feeds.items():
                p = os.path.join(tmp, f"{seq}_{name}.npy")
                np.save(p, arr)
                inputs += ["-i", f"{name}={p}"]
            for threads in [int(t) for t in args.threads.split(",")]:
                s = {"unfused": [], "fused": [], "ort": []}
                for _ in range(args.rounds):
                    s["unfused"] += anvil_samples(args.anvil, model, inputs, threads, args.runs,
                                                  args.warmup, ["--passes", "-fuse_attention"])
                    s["fused"] += anvil_samples(args.anvil, model, inputs, threads, args.runs,
                                                args.warmup, [])
                    if not args.no_ort:
                        s["ort"] += ort_samples(model, feeds, threads, args.runs, args.warmup)
                u, f = statistics.median(s["unfused"]), statistics.median(s["fused"])
                o = f"{statistics.median(s['ort']):.2f}" if s["ort"] else "—"
                print(f"| {seq} | {threads} | {u:.2f} | {f:.2f} | {u / f:.2f} | {o} |",
                      flush=True)


if __name__ == "__main__":
    main()
