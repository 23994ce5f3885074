"""Training against PyTorch eager on the CPU: the same model, the same batches, the same optimizer.

    .venv/bin/python bench/train_torch.py --check             # parameters after 20 steps agree
    .venv/bin/python bench/train_torch.py --threads 1,2        # time per training step
    .venv/bin/python bench/train_torch.py --threads 1,2 --only bert
    .venv/bin/python bench/train_torch.py --threads 1,2 --tune     # and anvil tuned offline

--check trains two models (an MLP with Gelu, and a CNN with a strided conv, max pool and two
Linear layers) for 20 steps of SGD (momentum 0.9, Nesterov, weight decay 1e-4) and 20 steps of
AdamW (weight decay 0.01), in PyTorch and with `anvil train` (one batch of the whole set per
epoch, so both see the same batches in the same order), from the same initial weights, and
fails when any parameter differs by more than 1e-4 relative to the parameter's largest value.

Without --check it times training steps, anvil and PyTorch alternating, same threads: SOL's
3-layer MLP of width 4096 at batch 64 and the digits CNN at batch 256 (`anvil train` runs of 5 and
25 steps, the difference divided by 20, so that session creation is not counted; PyTorch: the
median of 20 steps after 3 warm-up steps). Prints a table with the ratio torch/anvil (above 1:
anvil is faster). With --tune, anvil also trains with a tuning database that `anvil train
--tune offline` filled for that model and thread count first (every node of the training graph
and the conv layers' grouped choices measured; the tuning time is printed, not counted), in its
own columns. Needs torch (skips with a message otherwise).
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
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

try:
    import torch
    import torch.nn as nn
except ImportError:  # pragma: no cover
    print("skipped: torch is not installed (ANVIL_TORCH=1 scripts/setup.sh installs it)")
    sys.exit(0)


class Mlp(nn.Module):
    def __init__(self, dims, act="relu"):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims, dims[1:]))
        self.act = act

    def forward(self, x):
        for i, l in enumerate(self.layers):
            x = l(x)
            if i + 1 < len(self.layers):
                x = torch.relu(x) if self.act == "relu" else torch.nn.functional.gelu(x)
        return x


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.f1 = nn.Linear(16 * 2 * 2, 32)
        self.f2 = nn.Linear(32, 10)

    def forward(self, x):
        x = torch.relu(self.c1(x))
        x = torch.nn.functional.max_pool2d(torch.relu(self.c2(x)), 2)
        return self.f2(torch.relu(self.f1(x.flatten(1))))


class BnCnn(nn.Module):
    """Conv, BatchNorm (train mode: batch statistics, running ones updated), Relu, and a head."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.f = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        return self.f(torch.relu(self.bn(self.c1(x))).flatten(1))


def onnx_of(model, example, path):
    """The module as ONNX written by hand from its parameters (names = the state_dict's)."""
    sd = {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    inits = [numpy_helper.from_array(v, k) for k, v in sd.items()]
    nodes, x = [], "x"
    if isinstance(model, BnCnn):
        nodes = [helper.make_node("Conv", ["x", "c1.weight"], ["a"], kernel_shape=[3, 3],
                                  pads=[1, 1, 1, 1]),
                 helper.make_node("BatchNormalization", ["a", "bn.weight", "bn.bias",
                                                         "bn.running_mean", "bn.running_var"],
                                  ["b"], epsilon=1e-5, momentum=0.9),
                 helper.make_node("Relu", ["b"], ["r"]),
                 helper.make_node("Flatten", ["r"], ["fl"]),
                 helper.make_node("Gemm", ["fl", "f.weight", "f.bias"], ["out"], transB=1)]
        inits = [i for i in inits if i.name != "bn.num_batches_tracked"]
        out, opset = "out", 17
    elif isinstance(model, Mlp):
        for i in range(len(model.layers)):
            y = f"h{i}"
            nodes.append(helper.make_node("Gemm", [x, f"layers.{i}.weight", f"layers.{i}.bias"],
                                          [y], transB=1))
            if i + 1 < len(model.layers):
                nodes.append(helper.make_node("Relu" if model.act == "relu" else "Gelu", [y],
                                              [y + "a"]))
                y += "a"
            x = y
        out, opset = x, 20
    else:
        nodes = [helper.make_node("Conv", ["x", "c1.weight", "c1.bias"], ["a"],
                                  kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                 helper.make_node("Relu", ["a"], ["b"]),
                 helper.make_node("Conv", ["b", "c2.weight", "c2.bias"], ["c"],
                                  kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
                 helper.make_node("Relu", ["c"], ["d"]),
                 helper.make_node("MaxPool", ["d"], ["e"], kernel_shape=[2, 2], strides=[2, 2]),
                 helper.make_node("Flatten", ["e"], ["f"]),
                 helper.make_node("Gemm", ["f", "f1.weight", "f1.bias"], ["g"], transB=1),
                 helper.make_node("Relu", ["g"], ["h"]),
                 helper.make_node("Gemm", ["h", "f2.weight", "f2.bias"], ["out"], transB=1)]
        out, opset = "out", 17
    shape = ["N"] + list(example.shape[1:])
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)],
                          initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    onnx.save(m, path)


def optimizer(kind, params):
    if kind == "sgd":
        return torch.optim.SGD(params, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-4)
    return torch.optim.AdamW(params, lr=0.01, weight_decay=0.01)


ANVIL_OPT = {"sgd": ["--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9", "--nesterov",
                     "--weight-decay", "1e-4"],
             "adamw": ["--optimizer", "adamw", "--lr", "0.01", "--weight-decay", "0.01"]}


def check(anvil, tmp):
    bad = 0
    for name, make, x in [
            ("mlp_gelu", lambda: Mlp([20, 32, 32, 10], "gelu"), np.random.default_rng(1).normal(
                0, 1, (64, 20)).astype(np.float32)),
            ("cnn", Cnn, np.random.default_rng(2).normal(0, 1, (48, 1, 8, 8)).astype(np.float32)),
            ("cnn_batchnorm", BnCnn,
             np.random.default_rng(4).normal(0, 1, (32, 1, 8, 8)).astype(np.float32))]:
        y = np.random.default_rng(3).integers(0, 10, x.shape[0]).astype(np.int64)
        for kind in ("sgd", "adamw"):
            torch.manual_seed(0)
            model = make()
            path = os.path.join(tmp, f"{name}.onnx")
            onnx_of(model, x, path)
            opt = optimizer(kind, model.parameters())
            for _ in range(20):
                opt.zero_grad()
                loss = nn.functional.cross_entropy(model(torch.from_numpy(x)), torch.from_numpy(y))
                loss.backward()
                opt.step()
            data = os.path.join(tmp, f"{name}.npz")
            np.savez(data, x=x, labels=y)
            trained = os.path.join(tmp, f"{name}_{kind}.onnx")
            r = subprocess.run([anvil, "train", path, "--data", data, "--epochs", "20", "--batch",
                                str(x.shape[0]), "--threads", "1", "-q", "-o", trained,
                                *ANVIL_OPT[kind]], capture_output=True, text=True)
            if r.returncode:
                print(f"FAIL {name} {kind}: {r.stderr.strip()}")
                bad += 1
                continue
            got = {t.name: numpy_helper.to_array(t) for t in onnx.load(trained).graph.initializer}
            worst = 0.0
            for k, v in model.state_dict().items():
                if k.endswith("num_batches_tracked"):
                    continue
                want = v.detach().numpy()
                worst = max(worst, float(np.max(np.abs(got[k] - want)) / np.max(np.abs(want))))
            ok = worst <= 1e-4
            bad += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {name} {kind}: 20 steps, parameters (and running "
                  f"statistics) within {worst:.1e} of PyTorch's (relative to each tensor's "
                  f"largest value)")
    return bad


def tune_db(anvil, tmp, model, data, batch, threads, tag):
    """A tuning database for this model and thread count, filled by `anvil train --tune
    offline`; its path, or None without --tune."""
    if not TUNE:
        return None
    db = os.path.join(tmp, f"{tag}-t{threads}.db")
    t = time.perf_counter()
    subprocess.run([anvil, "train", model, "--data", data, "--epochs", "1", "--batch", str(batch),
                    "--threads", str(threads), "--tune", "offline", "--db", db, "-q", "-o",
                    model + ".tuned.onnx", *ANVIL_OPT["sgd"]], capture_output=True, text=True,
                   check=True)
    print(f"<!-- {tag}, {threads} threads: tuned offline in {time.perf_counter() - t:.0f} s -->",
          flush=True)
    return db


def row(label, threads, a, at, t):
    """A table row from the rounds' times (at empty without --tune)."""
    am, tm = statistics.median(a), statistics.median(t)
    if not TUNE:
        return f"| {label} | {threads} | {am:.2f} | {tm:.2f} | {tm / am:.2f} |"
    atm = statistics.median(at)
    return (f"| {label} | {threads} | {am:.2f} | {atm:.2f} | {tm:.2f} | {tm / am:.2f} | "
            f"{tm / atm:.2f} |")


def header():
    if not TUNE:
        print("| model | threads | anvil ms/step | PyTorch ms/step | PyTorch/anvil |")
        print("|---|---:|---:|---:|---:|")
    else:
        print("| model | threads | anvil ms/step | anvil tuned ms/step | PyTorch ms/step | "
              "PyTorch/anvil | PyTorch/anvil tuned |")
        print("|---|---:|---:|---:|---:|---:|---:|")


TUNE = False


def anvil_step_ms(anvil, model, data, batch, threads, extra):
    def run(epochs):
        r = subprocess.run([anvil, "train", model, "--data", data, "--epochs", str(epochs),
                            "--batch", str(batch), "--threads", str(threads), "--json", "-q",
                            "-o", model + ".out.onnx", *extra], capture_output=True, text=True,
                           check=True)
        return json.loads(r.stdout)["seconds"]
    return (run(25) - run(5)) / 20 * 1e3


def torch_step_ms(model, x, y, threads, kind):
    torch.set_num_threads(threads)
    opt = optimizer(kind, model.parameters())
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    times = []
    for i in range(23):
        t = time.perf_counter()
        opt.zero_grad()
        nn.functional.cross_entropy(model(xt), yt).backward()
        opt.step()
        if i >= 3:
            times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def export_torch(model, x, path):
    """A torchvision model as torch.onnx.export writes it in eval mode: BatchNormalization kept
    (no constant folding into the convs), initializers named after the state_dict."""
    model.eval()
    torch.onnx.export(model, torch.from_numpy(x), path, dynamo=False, do_constant_folding=False,
                      input_names=["x"], output_names=["out"], dynamic_axes={"x": {0: "N"}},
                      opset_version=17)
    model.train()


def bert_speed(anvil, tmp, threads_list, rounds):
    """BERT L4/H512/A8 with a 2-class head, sequence 128, batch 8 (the issue's BERT-small), dropout
    off in both (anvil trains exported inference graphs, which have none)."""
    from transformers import BertConfig, BertForSequenceClassification
    cfg = BertConfig(hidden_size=512, num_hidden_layers=4, num_attention_heads=8,
                     intermediate_size=2048, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0, num_labels=2, attn_implementation="eager")
    torch.manual_seed(0)
    model = BertForSequenceClassification(cfg)
    rng = np.random.default_rng(6)
    ids = rng.integers(0, cfg.vocab_size, (8, 128)).astype(np.int64)
    mask = np.ones((8, 128), np.int64)
    y = rng.integers(0, 2, 8).astype(np.int64)
    path, data = os.path.join(tmp, "bert.onnx"), os.path.join(tmp, "bert.npz")
    model.eval()
    torch.onnx.export(model, (torch.from_numpy(ids), torch.from_numpy(mask)), path, dynamo=False,
                      do_constant_folding=False, input_names=["input_ids", "attention_mask"],
                      output_names=["logits"],
                      dynamic_axes={"input_ids": {0: "N"}, "attention_mask": {0: "N"}},
                      opset_version=17)
    model.train()
    np.savez(data, input_ids=ids, attention_mask=mask, labels=y)
    for threads in threads_list:
        a, at, t = [], [], []
        db = tune_db(anvil, tmp, path, data, 8, threads, "bert")
        for _ in range(rounds):
            a.append(anvil_step_ms(anvil, path, data, 8, threads, ANVIL_OPT["sgd"] + ["--no-db"]))
            if db:
                at.append(anvil_step_ms(anvil, path, data, 8, threads,
                                        ANVIL_OPT["sgd"] + ["--db", db]))
            torch.set_num_threads(threads)
            opt = optimizer("sgd", model.parameters())
            xi, xm, yt = (torch.from_numpy(v) for v in (ids, mask, y))
            times = []
            for i in range(13):
                s = time.perf_counter()
                opt.zero_grad()
                nn.functional.cross_entropy(model(input_ids=xi, attention_mask=xm).logits,
                                            yt).backward()
                opt.step()
                if i >= 3:
                    times.append((time.perf_counter() - s) * 1e3)
            t.append(statistics.median(times))
        print(row("BERT L4/H512, seq 128, batch 8", threads, a, at, t), flush=True)


def speed(anvil, tmp, threads_list, rounds):
    header()
    import torchvision
    cases = [("MLP 4096x3, batch 64", lambda: Mlp([4096, 4096, 4096, 4096]), (64, 4096)),
             ("ResNet-18 64x64, batch 16", lambda: torchvision.models.resnet18(num_classes=10),
              (16, 3, 64, 64)),
             ("digits CNN, batch 256", Cnn, (256, 1, 8, 8))]
    for label, make, shape in cases:
        rng = np.random.default_rng(5)
        x = rng.normal(0, 1, shape).astype(np.float32)
        y = rng.integers(0, 10, shape[0]).astype(np.int64)
        torch.manual_seed(0)
        model = make()
        path = os.path.join(tmp, "speed.onnx")
        if isinstance(model, (Mlp, Cnn, BnCnn)):
            onnx_of(model, x, path)
        else:
            export_torch(model, x, path)
        data = os.path.join(tmp, "speed.npz")
        np.savez(data, x=x, labels=y)
        for threads in threads_list:
            a, at, t = [], [], []
            db = tune_db(anvil, tmp, path, data, shape[0], threads, label.split()[0])
            for _ in range(rounds):
                a.append(anvil_step_ms(anvil, path, data, shape[0], threads,
                                       ANVIL_OPT["sgd"] + ["--no-db"]))
                if db:
                    at.append(anvil_step_ms(anvil, path, data, shape[0], threads,
                                            ANVIL_OPT["sgd"] + ["--db", db]))
                t.append(torch_step_ms(model, x, y, threads, "sgd"))
            print(row(label, threads, a, at, t), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--threads", default="1")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", choices=["bert"], help="only the BERT row")
    ap.add_argument("--anvil", default=os.path.join(ROOT, "build-release", "anvil"))
    ap.add_argument("--tune", action="store_true",
                    help="also time anvil with a database `anvil train --tune offline` filled")
    a = ap.parse_args()
    global TUNE
    TUNE = a.tune
    with tempfile.TemporaryDirectory() as tmp:
        if a.check:
            return 1 if check(a.anvil, tmp) else 0
        threads = [int(t) for t in a.threads.split(",")]
        if a.only != "bert":
            speed(a.anvil, tmp, threads, a.rounds)
        else:
            header()
        if a.only in (None, "bert"):
            bert_speed(a.anvil, tmp, threads, a.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
