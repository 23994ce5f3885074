"""Real training, end to end: scikit-learn's 8x8 handwritten digits (shipped inside its wheel,
nothing downloaded) and a small CNN this script writes, trained by `anvil train`.

    digits.py ANVIL OUT_DIR [--epochs N] [--threads T] [--min-accuracy A] [--precision P]

Writes OUT_DIR/{train,test}.npz (80/20 split, fixed seed; pixels scaled to [0, 1], x as
[N, 1, 8, 8] float32, labels int64) and OUT_DIR/cnn.onnx (Conv 3x3 16 + Relu, Conv 3x3 32 + Relu,
MaxPool 2x2, Flatten, Gemm 64 + Relu, Gemm 10; He-uniform weights, fixed seed), runs
`anvil train` with Adam, and checks: the test accuracy anvil reports is at least --min-accuracy
(default 0.97); the exported model loads in ONNX Runtime, whose outputs on the test set match
`anvil run`'s, and whose accuracy is the one anvil reported. Exit status 1 on any failure.

--precision bf16 trains in mixed precision (bf16 products, fp32 weights, optimizer state and
loss): the same checks hold (the exported model is fp32 ONNX), and where the CPU has AVX512_BF16
the training profile must show bf16 variants at work, so a precision that is silently dropped
fails.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from sklearn.datasets import load_digits


def write_data(out):
    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[:, None, :, :]
    y = d.target.astype(np.int64)
    perm = np.random.default_rng(7).permutation(len(y))
    cut = int(len(y) * 0.8)
    tr, te = perm[:cut], perm[cut:]
    np.savez(os.path.join(out, "train.npz"), x=x[tr], labels=y[tr])
    np.savez(os.path.join(out, "test.npz"), x=x[te], labels=y[te])
    return x[te], y[te]


def write_model(path):
    rng = np.random.default_rng(11)

    def he(shape, fan_in):
        b = np.sqrt(6.0 / fan_in)
        return rng.uniform(-b, b, shape).astype(np.float32)

    inits = [numpy_helper.from_array(a, n) for n, a in [
        ("c1.w", he((16, 1, 3, 3), 9)), ("c1.b", np.zeros(16, np.float32)),
        ("c2.w", he((32, 16, 3, 3), 144)), ("c2.b", np.zeros(32, np.float32)),
        ("f1.w", he((64, 512), 512)), ("f1.b", np.zeros(64, np.float32)),
        ("f2.w", he((10, 64), 64)), ("f2.b", np.zeros(10, np.float32))]]
    n = [helper.make_node("Conv", ["x", "c1.w", "c1.b"], ["a1"], kernel_shape=[3, 3],
                          pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["a1"], ["r1"]),
         helper.make_node("Conv", ["r1", "c2.w", "c2.b"], ["a2"], kernel_shape=[3, 3],
                          pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["a2"], ["r2"]),
         helper.make_node("MaxPool", ["r2"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
         helper.make_node("Flatten", ["p"], ["f"]),
         helper.make_node("Gemm", ["f", "f1.w", "f1.b"], ["h0"], transB=1),
         helper.make_node("Relu", ["h0"], ["h"]),
         helper.make_node("Gemm", ["h", "f2.w", "f2.b"], ["logits"], transB=1)]
    g = helper.make_graph(n, "digits_cnn",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 8, 8])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
                          initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)


def bf16_pays(anvil):
    """Whether this CPU has AVX512_BF16 and its bf16 dot product measures faster than its fp32 FMA
    (anvil sysinfo's peaks): where it does not (a Xeon without AMX runs vdpbf16ps at half its FMA
    rate) anvil keeps fp32 under --precision bf16, by measurement, and there is nothing to see."""
    try:
        with open("/proc/cpuinfo") as f:
            if " avx512_bf16" not in f.read():
                return False
    except OSError:
        return False
    r = subprocess.run([anvil, "sysinfo", "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        return False
    info = json.loads(r.stdout)
    return info["peak.bf16.gflops"] > 1.2 * info["peak.fp32.gflops"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("anvil")
    ap.add_argument("out")
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--min-accuracy", type=float, default=0.97)
    ap.add_argument("--precision", default="fp32")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    xt, yt = write_data(a.out)
    model = os.path.join(a.out, "cnn.onnx")
    write_model(model)
    trained = os.path.join(a.out, "trained.onnx")
    cmd = [a.anvil, "train", model, "--data", os.path.join(a.out, "train.npz"),
           "--val", os.path.join(a.out, "test.npz"), "--optimizer", "adam", "--lr", "0.003",
           "--epochs", str(a.epochs), "--batch", "32", "--seed", "3", "--json", "-o", trained]
    if a.threads:
        cmd += ["--threads", str(a.threads)]
    profile = os.path.join(a.out, f"profile_{a.precision}.json")
    if a.precision != "fp32":
        cmd += ["--precision", a.precision, "--profile", profile]
    r = subprocess.run(cmd, capture_output=True, text=True)
    sys.stderr.write(r.stderr)
    if r.returncode != 0:
        print(f"FAIL: anvil train exited {r.returncode}")
        return 1
    rep = json.loads(r.stdout)
    print(json.dumps(rep))
    ok = True
    if a.precision == "bf16" and bf16_pays(a.anvil):
        with open(profile) as f:
            trace = json.load(f)
        events = trace["traceEvents"] if isinstance(trace, dict) else trace
        # "runs" names the variant a dispatching one (conv_f32) handed the node to
        bf16 = sorted({e.get("args", {}).get(k, "") for e in events for k in ("variant", "runs")}
                      - {""})
        bf16 = [v for v in bf16 if "bf16" in v]
        print(f"bf16 variants in the training steps: {', '.join(bf16) or 'none'}")
        if not bf16:
            print("FAIL: --precision bf16 ran no bf16 variant on a CPU with AVX512_BF16")
            ok = False
    if rep["val_accuracy"] < a.min_accuracy:
        print(f"FAIL: test accuracy {rep['val_accuracy']:.4f} < {a.min_accuracy}")
        ok = False
    # the exported model: ONNX Runtime loads it and agrees with anvil run
    sess = ort.InferenceSession(trained, providers=["CPUExecutionProvider"])
    ref = sess.run(None, {"x": xt})[0]
    np.save(os.path.join(a.out, "xt.npy"), xt)
    r = subprocess.run([a.anvil, "run", trained, "-i", f"x={os.path.join(a.out, 'xt.npy')}",
                        "-o", os.path.join(a.out, "run")], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"FAIL: anvil run on the trained model: {r.stderr}")
        return 1
    got = np.load(os.path.join(a.out, "run", "logits.npy"))
    err = float(np.max(np.abs(got - ref)) / (np.max(np.abs(ref)) + 1e-12))
    acc = float(np.mean(np.argmax(ref, 1) == yt))
    print(f"exported model: ORT accuracy {acc:.4f}, anvil run vs ORT max rel err {err:.2e}")
    if err > 1e-4:
        print("FAIL: anvil run and ONNX Runtime disagree on the trained model")
        ok = False
    if abs(acc - rep["val_accuracy"]) > 1e-9:
        print(f"FAIL: ORT's accuracy {acc} is not the {rep['val_accuracy']} anvil reported")
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
