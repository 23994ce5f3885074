"""Training against PyTorch eager on the CPU: the same model, the same batches, the same optimizer.

    .venv/bin/python bench/train_torch.py --check             # parameters after 20 steps agree
    .venv/bin/python bench/train_torch.py --threads 1,2        # time per training step
    .venv/bin/python bench/train_torch.py --threads 1,2 --only bert
    .venv/bin/python bench/train_torch.py --threads 1,2 --tune     # and anvil tuned offline
    .venv/bin/python bench/train_torch.py --threads 1,2 --precision bf16 --profile  # mixed precision

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

With --precision bf16, every round times four trainings in turn: `anvil train --precision bf16`,
`anvil train` in fp32, PyTorch eager fp32 and PyTorch eager with
`torch.autocast(device_type="cpu", dtype=torch.bfloat16)` around forward and loss (backward
outside it, fp32 master weights, the same optimizer). The table gives the four medians and the
ratios torch fp32 / anvil bf16, torch autocast / anvil bf16 and anvil fp32 / anvil bf16 (above 1:
anvil bf16 is faster). Once per model it also shows that bf16 training makes progress: anvil's
loss on the first batch (a 1-step run) and after the 25-step run of the first round, bf16 next
to fp32 (reported, not asserted). --profile adds, per model, one `anvil train --precision bf16
--profile` run at the first thread count: the nodes that ran bf16 variants and the five
(op, variant) groups that took the most time.
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
PRECISION = "fp32"
PROFILE = False
NOTES = []  # markdown printed after the timing table (--precision bf16: losses, profiles)


def bf16_header():
    print("| model | threads | torch fp32 ms | torch bf16-autocast ms | anvil bf16 ms | "
          "anvil fp32 ms | torch fp32/anvil bf16 | torch autocast/anvil bf16 | "
          "anvil fp32/anvil bf16 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")


def profile_summary(anvil, label, model, data, batch, threads, tmp):
    """One `anvil train --precision bf16 --profile` run of 6 steps; markdown lines: the nodes
    whose variant (or the "runs" kernel inside it) is a bf16 one, and the top 5 (op, variant)
    groups by time over steps 2..6 (the first step warms up)."""
    trace = os.path.join(tmp, "profile.json")
    subprocess.run([anvil, "train", model, "--data", data, "--epochs", "6", "--batch", str(batch),
                    "--threads", str(threads), "--precision", "bf16", "--no-db", "-q",
                    "--profile", trace, "-o", model + ".out.onnx", *ANVIL_OPT["sgd"]],
                   capture_output=True, text=True, check=True)
    with open(trace) as f:
        events = [e for e in json.load(f)["traceEvents"]
                  if e.get("cat") == "op" and e["args"].get("run", 0) >= 1]
    steps = len({e["args"]["run"] for e in events}) or 1
    total = sum(e["dur"] for e in events) / 1e3 / steps
    groups, bf16 = {}, {}
    for e in events:
        a = e["args"]
        kernel = a["variant"] + (f" ({a['runs']})" if a.get("runs") else "")
        key = (a["op"], kernel)
        groups[key] = groups.get(key, 0.0) + e["dur"] / 1e3 / steps
        if "bf16" in kernel:
            b = bf16.setdefault(key, [set(), 0.0])
            b[0].add(e["name"])
            b[1] += e["dur"] / 1e3 / steps
    lines = [f"**{label}**, {threads} thread(s), --precision bf16: {total:.1f} ms of op time per "
             f"step (forward, loss and backward nodes; the optimizer update is not in the trace), "
             f"{sum(v[1] for v in bf16.values()) / total:.0%} of it in bf16 kernels.", "",
             "| ran bf16 | nodes | ms/step | share |", "|---|---:|---:|---:|"]
    for (op, kernel), (names, ms) in sorted(bf16.items(), key=lambda kv: -kv[1][1]):
        lines.append(f"| {op}: {kernel} | {len(names)} | {ms:.2f} | {ms / total:.0%} |")
    if not bf16:
        lines.append("| (none) | 0 | 0 | 0% |")
    fp32 = {k: ms for k, ms in groups.items() if "bf16" not in k[1]
            and any(w in k[0] for w in ("Conv", "MatMul", "Gemm", "Attention"))}
    if fp32:
        lines += ["", f"Products still in fp32: {sum(fp32.values()):.1f} ms/step "
                      f"({sum(fp32.values()) / total:.0%}): " + ", ".join(
                          f"{op}: {kernel} {ms:.1f} ms" for (op, kernel), ms in
                          sorted(fp32.items(), key=lambda kv: -kv[1]))]
    lines += ["", "| top 5 by time (op: variant) | ms/step | share |", "|---|---:|---:|"]
    for (op, kernel), ms in sorted(groups.items(), key=lambda kv: -kv[1])[:5]:
        lines.append(f"| {op}: {kernel} | {ms:.2f} | {ms / total:.0%} |")
    return lines + [""]


def bf16_rows(anvil, tmp, label, model, data, batch, threads_list, rounds, torch_ms):
    """The --precision bf16 rows of one model: each round anvil bf16, anvil fp32, PyTorch fp32
    and PyTorch autocast in turn (torch_ms(threads, autocast) times one PyTorch round). Adds the
    loss check and, with --profile, the profile summary to NOTES."""
    bf16 = ANVIL_OPT["sgd"] + ["--no-db", "--precision", "bf16"]
    fp32 = ANVIL_OPT["sgd"] + ["--no-db"]
    losses = None
    for threads in threads_list:
        ab, af, tf, tb = [], [], [], []
        for r in range(rounds):
            ms, loss_b = anvil_step(anvil, model, data, batch, threads, bf16)
            ab.append(ms)
            ms, loss_f = anvil_step(anvil, model, data, batch, threads, fp32)
            af.append(ms)
            tf.append(torch_ms(threads, False))
            tb.append(torch_ms(threads, True))
            if losses is None:
                start_b = anvil_train(anvil, model, data, batch, threads, bf16, 1)["train_loss"]
                start_f = anvil_train(anvil, model, data, batch, threads, fp32, 1)["train_loss"]
                losses = (start_b, loss_b, start_f, loss_f)
        m = [statistics.median(v) for v in (tf, tb, ab, af)]
        print(f"| {label} | {threads} | {m[0]:.2f} | {m[1]:.2f} | {m[2]:.2f} | {m[3]:.2f} | "
              f"{m[0] / m[2]:.2f} | {m[1] / m[2]:.2f} | {m[3] / m[2]:.2f} |", flush=True)
    start_b, loss_b, start_f, loss_f = losses
    NOTES.append(("loss", f"| {label} | 25 | {start_b:.4f} | {loss_b:.4f} | "
                          f"{'yes' if loss_b < start_b else 'NO'} | {start_f:.4f} | "
                          f"{loss_f:.4f} |"))
    if PROFILE:
        NOTES.append(("profile", profile_summary(anvil, label, model, data, batch,
                                                 threads_list[0], tmp)))


def print_notes():
    loss = [n for kind, n in NOTES if kind == "loss"]
    if loss:
        print("\nLoss on the first batch (a 1-step run) and at the 25th step (the 25-step run of "
              "the first round; SGD, the same single batch every step):\n")
        print("| model | steps | anvil bf16 start | anvil bf16 at 25 | bf16 lower | "
              "anvil fp32 start | anvil fp32 at 25 |")
        print("|---|---:|---:|---:|---|---:|---:|")
        print("\n".join(loss))
    for kind, lines in NOTES:
        if kind == "profile":
            print()
            print("\n".join(lines))


def anvil_train(anvil, model, data, batch, threads, extra, epochs):
    """`anvil train --json` for that many epochs (one batch each): its summary."""
    r = subprocess.run([anvil, "train", model, "--data", data, "--epochs", str(epochs),
                        "--batch", str(batch), "--threads", str(threads), "--json", "-q",
                        "-o", model + ".out.onnx", *extra], capture_output=True, text=True,
                       check=True)
    return json.loads(r.stdout)


def anvil_step(anvil, model, data, batch, threads, extra):
    """ms per step (25- and 5-step runs, the difference / 20) and the 25-step run's last loss."""
    long = anvil_train(anvil, model, data, batch, threads, extra, 25)
    short = anvil_train(anvil, model, data, batch, threads, extra, 5)
    return (long["seconds"] - short["seconds"]) / 20 * 1e3, long["train_loss"]


def anvil_step_ms(anvil, model, data, batch, threads, extra):
    return anvil_step(anvil, model, data, batch, threads, extra)[0]


def torch_step_ms(model, x, y, threads, kind, autocast=False):
    """The median of 20 steps after 3 warm-up ones; autocast: forward and loss under
    torch.autocast to bfloat16, backward and the optimizer outside it (fp32 master weights)."""
    torch.set_num_threads(threads)
    opt = optimizer(kind, model.parameters())
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    times = []
    for i in range(23):
        t = time.perf_counter()
        opt.zero_grad()
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = nn.functional.cross_entropy(model(xt), yt)
        loss.backward()
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
    if PRECISION == "bf16":
        def torch_ms(threads, autocast):
            torch.set_num_threads(threads)
            opt = optimizer("sgd", model.parameters())
            xi, xm, yt = (torch.from_numpy(v) for v in (ids, mask, y))
            times = []
            for i in range(13):
                s = time.perf_counter()
                opt.zero_grad()
                with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=autocast):
                    loss = nn.functional.cross_entropy(
                        model(input_ids=xi, attention_mask=xm).logits, yt)
                loss.backward()
                opt.step()
                if i >= 3:
                    times.append((time.perf_counter() - s) * 1e3)
            return statistics.median(times)
        bf16_rows(anvil, tmp, "BERT L4/H512, seq 128, batch 8", path, data, 8, threads_list,
                  rounds, torch_ms)
        return
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


def speed(anvil, tmp, threads_list, rounds, only=None):
    """The MLP, ResNet-18 and digits rows (only: the one whose label starts with it)."""
    if PRECISION == "bf16":
        bf16_header()
    else:
        header()
    import torchvision
    cases = [("MLP 4096x3, batch 64", lambda: Mlp([4096, 4096, 4096, 4096]), (64, 4096)),
             ("ResNet-18 64x64, batch 16", lambda: torchvision.models.resnet18(num_classes=10),
              (16, 3, 64, 64)),
             ("digits CNN, batch 256", Cnn, (256, 1, 8, 8))]
    for label, make, shape in cases:
        if only and not label.lower().startswith(only):
            continue
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
        if PRECISION == "bf16":
            bf16_rows(anvil, tmp, label, path, data, shape[0], threads_list, rounds,
                      lambda threads, autocast: torch_step_ms(model, x, y, threads, "sgd",
                                                              autocast))
            continue
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
    ap.add_argument("--only", choices=["mlp", "resnet", "digits", "bert"],
                    help="only this model's row")
    ap.add_argument("--anvil", default=os.path.join(ROOT, "build-release", "anvil"))
    ap.add_argument("--tune", action="store_true",
                    help="also time anvil with a database `anvil train --tune offline` filled")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="bf16: anvil --precision bf16 and fp32 next to PyTorch fp32 and autocast")
    ap.add_argument("--profile", action="store_true",
                    help="with --precision bf16: one profiled anvil bf16 run per model")
    a = ap.parse_args()
    global TUNE, PRECISION, PROFILE
    TUNE, PRECISION, PROFILE = a.tune, a.precision, a.profile
    if a.precision == "bf16" and a.tune:
        ap.error("--tune is not supported with --precision bf16")
    with tempfile.TemporaryDirectory() as tmp:
        if a.check:
            return 1 if check(a.anvil, tmp) else 0
        threads = [int(t) for t in a.threads.split(",")]
        if a.only != "bert":
            speed(a.anvil, tmp, threads, a.rounds, a.only)
        elif a.precision == "bf16":
            bf16_header()
        else:
            header()
        if a.only in (None, "bert"):
            bert_speed(a.anvil, tmp, threads, a.rounds)
        print_notes()
    return 0


if __name__ == "__main__":
    sys.exit(main())
