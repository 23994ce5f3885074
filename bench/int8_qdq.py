#!/usr/bin/env python3
"""int8 benchmark: QDQ models as users bring them, anvil against ONNX Runtime and OpenVINO.

Usage: int8_qdq.py [--models resnet18,resnet50,mobilenet_v2] [--threads 1,2] [--rounds 5]
                   [--iters 20] [--dir DIR] [--anvil PATH] [--json OUT.json] [--md OUT.md]

Each model is a torchvision network with seeded random weights, exported by torch.onnx.export
(opset 17), pre-processed and quantized by ONNX Runtime's quantize_static (QDQ, per-channel s8
weights, u8 activations, MinMax calibration on 8 seeded random batches): the files a user of ONNX
Runtime's tooling gets. They are written to --dir (default build-release/int8_zoo) on first use.

Per model and thread count T, in alternation for --rounds rounds (a fresh process each):
  - anvil int8: `anvil bench QDQ.onnx --json --threads T` (its passes fold the QDQ products into
    QLinearConv / QLinearMatMul and run them on the int8 tiles);
  - anvil fp32: the same on the fp32 export;
  - ONNX Runtime on the QDQ file and on the fp32 file (intra-op threads T, its default
    optimisations, which fuse the QDQ products into its own int8 kernels);
  - OpenVINO on the QDQ file (when installed), INFERENCE_NUM_THREADS=T, latency hint.
Latency is the median over rounds of each round's median. The table gives anvil int8 against
anvil fp32 (the speedup), ONNX Runtime and OpenVINO (below 1: anvil is faster), and the
accuracy: anvil int8's and ONNX Runtime int8's top-1 against the fp32 model's on 64 seeded
inputs, and the largest difference of anvil's int8 logits from ONNX Runtime's int8 ones, in
units of the output's quantization step. Not a test: it never fails on a number.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def make_models(name, d):
    """Writes d/<name>_fp32.onnx and d/<name>_qdq.onnx (skipped when present)."""
    fp32, qdq = os.path.join(d, f"{name}_fp32.onnx"), os.path.join(d, f"{name}_qdq.onnx")
    if os.path.exists(fp32) and os.path.exists(qdq):
        return fp32, qdq
    import torch
    import torchvision
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process
    os.makedirs(d, exist_ok=True)
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None).eval()
    raw = os.path.join(d, f"{name}_raw.onnx")
    torch.onnx.export(model, torch.randn(1, 3, 224, 224), raw, input_names=["input"],
                      output_names=["logits"], opset_version=17, dynamo=False)
    quant_pre_process(raw, fp32)

    class Reader(CalibrationDataReader):
        def __init__(self):
            rng = np.random.default_rng(1)
            self.batches = [{"input": rng.standard_normal((1, 3, 224, 224)).astype(np.float32)}
                            for _ in range(8)]

        def get_next(self):
            return self.batches.pop() if self.batches else None

    quantize_static(fp32, qdq, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    os.remove(raw)
    return fp32, qdq


def child(args):
    """Times one engine on one model in this process: prints the median latency in ms."""
    engine, model, threads, iters = args.child, args.model, int(args.threads), args.iters
    x = np.random.default_rng(0).uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32)
    if engine == "ort":
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        run = lambda: s.run(None, {"input": x})
    else:
        import openvino as ov
        core = ov.Core()
        c = core.compile_model(model, "CPU", {"INFERENCE_NUM_THREADS": threads,
                                              "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1})
        req = c.create_infer_request()
        run = lambda: req.infer({0: x})
    for _ in range(5):
        run()
    t = []
    for _ in range(iters):
        t0 = time.perf_counter()
        run()
        t.append(time.perf_counter() - t0)
    print(json.dumps({"median_ms": statistics.median(t) * 1e3}))


def time_engine(engine, model, threads, args):
    if engine == "anvil":
        r = subprocess.run([args.anvil, "bench", model, "--json", "--threads", str(threads),
                            "--iters", str(args.iters), "--no-db"], capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(r.stderr.strip()[-300:])
        return json.loads(r.stdout)["latency_ms"]["median"]
    r = subprocess.run([sys.executable, __file__, "--child", engine, "--model", model, "--threads",
                        str(threads), "--iters", str(args.iters)], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(r.stderr.strip()[-300:])
    return json.loads(r.stdout)["median_ms"]


def accuracy(args, fp32, qdq):
    """Top-1 agreement with the fp32 model and anvil int8's largest difference from ORT int8."""
    import onnx
    import onnxruntime as ort
    q_out = next(n for n in onnx.load(qdq).graph.node if n.output[0] == "logits")
    scale = None
    for init in onnx.load(qdq).graph.initializer:
        if init.name == q_out.input[1]:
            scale = float(onnx.numpy_helper.to_array(init))
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    s32 = ort.InferenceSession(fp32, so, providers=["CPUExecutionProvider"])
    s8 = ort.InferenceSession(qdq, so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(7)
    agree_anvil = agree_ort = 0
    worst = 0.0
    n = 64
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(n):
            x = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)
            np.save(os.path.join(tmp, "x.npy"), x)
            r = subprocess.run([args.anvil, "run", qdq, "-i", f"input={tmp}/x.npy", "-o", tmp,
                                "--threads", "2", "--no-db"], capture_output=True, text=True)
            if r.returncode:
                raise RuntimeError(r.stderr.strip()[-300:])
            ya = np.load(os.path.join(tmp, "logits.npy"))
            y32 = s32.run(None, {"input": x})[0]
            y8 = s8.run(None, {"input": x})[0]
            agree_anvil += int(ya.argmax() == y32.argmax())
            agree_ort += int(y8.argmax() == y32.argmax())
            worst = max(worst, float(np.abs(ya - y8).max()) / (scale or 1.0))
    return agree_anvil / n, agree_ort / n, worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="resnet18,resnet50,mobilenet_v2")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--dir", default=os.path.join(ROOT, "build-release", "int8_zoo"))
    ap.add_argument("--anvil", default=os.path.join(ROOT, "build-release", "anvil"))
    ap.add_argument("--json")
    ap.add_argument("--md")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    try:
        import openvino  # noqa: F401
        have_ov = True
    except ImportError:
        have_ov = False
    rows = []
    for name in args.models.split(","):
        fp32, qdq = make_models(name, args.dir)
        acc = accuracy(args, fp32, qdq)
        for t in (int(v) for v in args.threads.split(",")):
            engines = [("anvil int8", "anvil", qdq), ("anvil fp32", "anvil", fp32),
                       ("ORT int8", "ort", qdq), ("ORT fp32", "ort", fp32)]
            if have_ov:
                engines.append(("OpenVINO int8", "ov", qdq))
            times = {e[0]: [] for e in engines}
            notes = []
            for _ in range(args.rounds):
                for label, engine, model in engines:
                    try:
                        times[label].append(time_engine(engine, model, t, args))
                    except RuntimeError as err:
                        notes.append(f"{label}: {err}")
            med = {k: statistics.median(v) if v else None for k, v in times.items()}
            rows.append({"model": name, "threads": t, "ms": med, "top1_anvil": acc[0],
                         "top1_ort": acc[1], "max_diff_steps": acc[2], "notes": notes})
            print(json.dumps(rows[-1]), flush=True)
    ratio = lambda a, b: a / b if a and b else float("nan")
    lines = ["| model | T | anvil int8 ms | anvil fp32 ms | ORT int8 ms | OpenVINO int8 ms | "
             "fp32/int8 | anvil/ORT | anvil/OV | top-1 vs fp32 anvil / ORT | max diff vs ORT "
             "(steps) |", "|" + "---|" * 11]
    for r in rows:
        m = r["ms"]
        lines.append(
            f"| {r['model']} | {r['threads']} | {m['anvil int8']:.2f} | {m['anvil fp32']:.2f} | "
            f"{m['ORT int8']:.2f} | {m.get('OpenVINO int8') or float('nan'):.2f} | "
            f"{ratio(m['anvil fp32'], m['anvil int8']):.2f} | "
            f"{ratio(m['anvil int8'], m['ORT int8']):.2f} | "
            f"{ratio(m['anvil int8'], m.get('OpenVINO int8')):.2f} | "
            f"{r['top1_anvil']:.2f} / {r['top1_ort']:.2f} | {r['max_diff_steps']:.1f} |")
    print("\n".join(lines))
    if args.md:
        with open(args.md, "w") as f:
            f.write("\n".join(lines) + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
