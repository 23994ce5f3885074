"""`anvil.torch.optimize` against eager PyTorch on the CPU: the same module, the same inputs.

    .venv/bin/python bench/torch_optimize.py --threads 1,2 [--rounds 5] [--runs 20] [--tune]

ResNet-18 and MobileNetV3-Large (torchvision, 224x224, batch 1) and BERT-base (transformers from
a config, random weights, sequence 128, batch 1), all in eval mode under torch.no_grad(). Per
model and thread count: `rounds` rounds, each timing `runs` calls of PyTorch and then of the
optimized module (after warm-up), alternating; the medians of the rounds' medians. With --tune,
the optimized module's session reads a tuning database that `anvil.tune` filled for the
exported model first (the tuning time is printed, not counted). Prints a markdown table with
PyTorch/anvil (above 1: anvil is faster). Also the call overhead of Session.run on a one-node
model.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

try:
    import torch
except ImportError:  # pragma: no cover
    print("skipped: torch is not installed")
    sys.exit(0)

import numpy as np  # noqa: E402

import anvil  # noqa: E402
import anvil.torch  # noqa: E402


class BertLogits(torch.nn.Module):
    def __init__(self, bert):
        super().__init__()
        self.bert = bert

    def forward(self, ids, mask):
        return self.bert(input_ids=ids, attention_mask=mask).last_hidden_state


def models():
    import torchvision
    torch.manual_seed(0)
    yield "ResNet-18 224x224", torchvision.models.resnet18().eval(), (torch.randn(1, 3, 224, 224),)
    yield ("MobileNetV3-Large 224x224", torchvision.models.mobilenet_v3_large().eval(),
           (torch.randn(1, 3, 224, 224),))
    from transformers import BertConfig, BertModel
    cfg = BertConfig(attn_implementation="eager")  # BERT-base: 12 layers, hidden 768
    bert = BertLogits(BertModel(cfg)).eval()
    ids = torch.randint(0, cfg.vocab_size, (1, 128))
    yield "BERT-base seq 128", bert, (ids, torch.ones(1, 128, dtype=torch.int64))


class OtherLoad:
    """How many CPUs other processes kept busy since construction (Linux /proc; 0 elsewhere).
    Eager PyTorch's OpenMP threads spin at every barrier for milliseconds (libgomp's default
    wait policy); when another process takes one of the CPUs (a build beside the bench), its
    2-thread runs on a 2-CPU machine took up to 70x longer (ResNet-18 0.12-1.9 s against 27 ms
    at 1 thread) while anvil's stayed at about its 1-thread time: such rows say nothing."""

    @staticmethod
    def _ticks():
        try:
            with open("/proc/stat") as f:
                v = [int(x) for x in f.readline().split()[1:]]
            with open("/proc/self/stat") as f:
                own = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return None
        # busy = all but idle and iowait; this process's own time: utime + stime
        return sum(v) - v[3] - v[4], int(own[11]) + int(own[12])

    def __init__(self):
        self.t, self.start = time.perf_counter(), self._ticks()

    def cpus(self) -> float:
        end = self._ticks()
        if self.start is None or end is None:
            return 0.0
        ticks = (end[0] - self.start[0]) - (end[1] - self.start[1])
        return max(ticks, 0) / os.sysconf("SC_CLK_TCK") / (time.perf_counter() - self.t)


def time_calls(fn, args, runs):
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        fn(*args)
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e3


def overhead():
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    s = anvil.Session(m.SerializeToString(), threads=1, tuning="off")
    feeds = {"x": np.ones((1, 16), np.float32)}
    for _ in range(1000):
        s.run(feeds)
    best = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(10000):
            s.run(feeds)
        best.append((time.perf_counter() - t) / 10000 * 1e6)
    return min(best)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--tune", action="store_true")
    a = ap.parse_args()
    print(f"Session.run overhead (1-node model, best of 5 x 10000 calls): {overhead():.1f} us")
    print("| model | threads | PyTorch ms | anvil ms | PyTorch/anvil |")
    print("|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for label, model, args in models():
            for threads in [int(t) for t in a.threads.split(",")]:
                torch.set_num_threads(threads)
                opts = {"threads": threads, "tuning": "db" if a.tune else "off"}
                if a.tune:
                    db = os.path.join(tmp, f"{label.split()[0]}-{threads}.db")
                    opts["db"] = db
                    probe = anvil.torch.optimize(model, args, **dict(opts, tuning="off"))
                    path = os.path.join(tmp, "m.onnx")
                    with open(path, "wb") as f:
                        f.write(probe._proto.SerializeToString())
                    t = time.perf_counter()
                    shapes = {n: tuple(x.shape) for n, x in zip(probe._in_names, args)}
                    anvil.tune(path, threads=threads, db=db, shapes=shapes, runs=0)
                    print(f"<!-- {label}, {threads} threads: tuned in "
                          f"{time.perf_counter() - t:.0f} s -->", flush=True)
                fast = anvil.torch.optimize(model, args, **opts)
                with torch.no_grad():
                    for _ in range(3):
                        model(*args)
                        fast(*args)
                    pt, an = [], []
                    busy = OtherLoad()
                    for _ in range(a.rounds):
                        pt.append(time_calls(model, args, a.runs))
                        an.append(time_calls(fast, args, a.runs))
                    others = busy.cpus()
                if others > 0.2:
                    print(f"<!-- {label}, {threads} threads: other processes used {others:.1f} "
                          "CPUs during these rounds; eager PyTorch's multi-threaded times are "
                          "not valid (bench/README.md) -->", flush=True)
                p, q = statistics.median(pt), statistics.median(an)
                print(f"| {label} | {threads} | {p:.2f} | {q:.2f} | {p / q:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
