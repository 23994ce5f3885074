#!/usr/bin/env python3
"""Dynamic int8 benchmark: anvil --precision int8 against ONNX Runtime's quantize_dynamic.

Usage: int8_dynamic.py MODEL_DIR [MODEL_DIR ...] [--threads 1,2] [--rounds 5] [--iters 10]
                       [--anvil PATH] [--json OUT.json] [--md OUT.md]

Each MODEL_DIR holds model.onnx and test_data_set_0 (the corpus of scripts/gen_corpus.py, e.g.
bert_base). ONNX Runtime's model is onnxruntime.quantization.quantize_dynamic's (its defaults:
u8 weights per tensor, u8 activations quantized per tensor at run time), written beside it as
model_int8_ort.onnx. Per model and thread count, alternating for --rounds rounds (a fresh
process each): anvil fp32 and anvil --precision int8 (`anvil bench --json`), ONNX Runtime fp32
and its int8 model (intra-op threads T). Latency: the median over rounds of each round's median.
Accuracy, on test_data_set_0: each int8 engine's largest output difference from its own fp32
run, relative to that output's largest magnitude (anvil's from `anvil bench --check`). Not a
test: it never fails on a number.
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def inputs(d, tmp):
    """The model's test_data_set_0 inputs as .npy files: ({name: array}, anvil -i args)."""
    import onnx
    from onnx import numpy_helper
    names = [i.name for i in onnx.load(os.path.join(d, "model.onnx"),
                                       load_external_data=False).graph.input]
    feeds, args = {}, []
    for k, f in enumerate(sorted(glob.glob(os.path.join(d, "test_data_set_0", "input_*.pb")))):
        t = onnx.TensorProto()
        with open(f, "rb") as fh:
            t.ParseFromString(fh.read())
        name = t.name or names[k]
        feeds[name] = numpy_helper.to_array(t)
        path = os.path.join(tmp, f"{name}.npy")
        np.save(path, feeds[name])
        args += ["-i", f"{name}={path}"]
    return feeds, args


def child(args):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = int(args.threads)
    so.inter_op_num_threads = 1
    s = ort.InferenceSession(args.model, so, providers=["CPUExecutionProvider"])
    feeds = {k: np.load(v) for k, v in json.loads(args.feeds).items()}
    for _ in range(3):
        s.run(None, feeds)
    t = []
    for _ in range(args.iters):
        t0 = time.perf_counter()
        s.run(None, feeds)
        t.append(time.perf_counter() - t0)
    print(json.dumps({"median_ms": statistics.median(t) * 1e3}))


def anvil_ms(args, model, in_args, threads, precision):
    r = subprocess.run([args.anvil, "bench", model, "--json", "--threads", str(threads), "--iters",
                        str(args.iters), "--no-db", "--precision", precision] + in_args,
                       capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(r.stderr.strip()[-300:])
    return json.loads(r.stdout)["latency_ms"]["median"]


def ort_ms(args, model, feed_files, threads):
    r = subprocess.run([sys.executable, __file__, "--child", "--model", model, "--threads",
                        str(threads), "--iters", str(args.iters), "--feeds", json.dumps(feed_files)],
                       capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(r.stderr.strip()[-300:])
    return json.loads(r.stdout)["median_ms"]


def rel_err(a, b):
    return float(np.abs(a - b).max() / max(float(np.abs(b).max()), 1e-30))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="*")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--anvil", default=os.path.join(ROOT, "build-release", "anvil"))
    ap.add_argument("--json")
    ap.add_argument("--md")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--feeds", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    import onnxruntime as ort
    from onnxruntime.quantization import quantize_dynamic
    rows = []
    for d in args.dirs:
        name = os.path.basename(os.path.normpath(d))
        fp32 = os.path.join(d, "model.onnx")
        q = os.path.join(d, "model_int8_ort.onnx")
        if not os.path.exists(q):
            quantize_dynamic(fp32, q)
        with tempfile.TemporaryDirectory() as tmp:
            feeds, in_args = inputs(d, tmp)
            feed_files = {k: os.path.join(tmp, f"{k}.npy") for k in feeds}
            s32 = ort.InferenceSession(fp32, providers=["CPUExecutionProvider"])
            s8 = ort.InferenceSession(q, providers=["CPUExecutionProvider"])
            ort_err = max(rel_err(a, b) for a, b in zip(s8.run(None, feeds), s32.run(None, feeds)))
            r = subprocess.run([args.anvil, "bench", fp32, "--json", "--iters", "1", "--no-db",
                                "--precision", "int8", "--check"] + in_args,
                               capture_output=True, text=True)
            check = json.loads(r.stdout).get("check", {}) if r.returncode == 0 else {}
            outs = check.get("outputs", [])
            anvil_err = max((o.get("max_rel_err", float("nan")) for o in outs), default=float("nan"))
            for t in (int(v) for v in args.threads.split(",")):
                times = {"anvil int8": [], "anvil fp32": [], "ORT int8": [], "ORT fp32": []}
                for _ in range(args.rounds):
                    times["anvil int8"].append(anvil_ms(args, fp32, in_args, t, "int8"))
                    times["anvil fp32"].append(anvil_ms(args, fp32, in_args, t, "fp32"))
                    times["ORT int8"].append(ort_ms(args, q, feed_files, t))
                    times["ORT fp32"].append(ort_ms(args, fp32, feed_files, t))
                med = {k: statistics.median(v) for k, v in times.items()}
                rows.append({"model": name, "threads": t, "ms": med, "anvil_err": anvil_err,
                             "ort_err": ort_err})
                print(json.dumps(rows[-1]), flush=True)
    lines = ["| model | T | anvil int8 ms | anvil fp32 ms | ORT int8 ms | ORT fp32 ms | "
             "anvil fp32/int8 | anvil/ORT int8 | err anvil / ORT |", "|" + "---|" * 9]
    for r in rows:
        m = r["ms"]
        lines.append(f"| {r['model']} | {r['threads']} | {m['anvil int8']:.2f} | "
                     f"{m['anvil fp32']:.2f} | {m['ORT int8']:.2f} | {m['ORT fp32']:.2f} | "
                     f"{m['anvil fp32'] / m['anvil int8']:.2f} | "
                     f"{m['anvil int8'] / m['ORT int8']:.2f} | "
                     f"{r['anvil_err']:.2e} / {r['ort_err']:.2e} |")
    print("\n".join(lines))
    if args.md:
        with open(args.md, "w") as f:
            f.write("\n".join(lines) + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
