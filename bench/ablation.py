"""Graph-pass ablation: anvil with a graph rewrite off and on, per model and thread count, in
alternating fresh processes, with a Welch t-test on the per-run latencies. Without --passes the
rewrite is all of them (--opt-level 0 against 1); with --passes each named pass is measured on its
own (every other pass on, that one off with `--passes -NAME`, against all on).

    .venv/bin/python bench/ablation.py --size full --models resnet50,mobilenetv2,bert_base \
        --threads 1,2 --rounds 4 --runs 10
    .venv/bin/python bench/ablation.py --size full --models bert_base,distilbert,gpt2 \
        --passes fuse_attention,fuse_chain --threads 1,2 --rounds 4 --runs 10

Per model and thread count it prints the median latency at each level, the ratio level1/level0,
Welch's t and the two-sided p-value over all timed runs (rounds x runs samples per level), and the
verdict the project uses to keep a pass: faster with p < 0.01 over >= 30 samples each. The
models come from the zoo generator as in bench/peer.py (same inputs: test_data_set_0).
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer  # noqa: E402  (the zoo and input helpers)


def betacf(a, b, x):
    """Continued fraction of the regularized incomplete beta function (Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for num in (m * (b - m) * x / ((a + m2 - 1) * (a + m2)),
                    -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-12:
            break
    return h


def betainc(a, b, x):
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbt = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + \
        b * math.log(1.0 - x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lbt) * betacf(a, b, x) / a
    return 1.0 - math.exp(lbt) * betacf(b, a, 1.0 - x) / b


def welch(x, y):
    """Welch's t statistic and two-sided p-value for samples x, y."""
    mx, my = statistics.fmean(x), statistics.fmean(y)
    vx, vy = statistics.variance(x) / len(x), statistics.variance(y) / len(y)
    if vx + vy == 0:
        return 0.0, 1.0
    t = (mx - my) / math.sqrt(vx + vy)
    df = (vx + vy) ** 2 / (vx ** 2 / (len(x) - 1) + vy ** 2 / (len(y) - 1))
    return t, betainc(df / 2.0, 0.5, df / (df + t * t))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet50,mobilenetv2,bert_base")
    ap.add_argument("--size", choices=["full", "ci"], default="ci")
    ap.add_argument("--threads", default="1")
    ap.add_argument("--rounds", type=int, default=4, help="alternations (default 4)")
    ap.add_argument("--runs", type=int, default=10, help="timed runs per process (default 10)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--anvil", default=os.path.join(peer.ROOT, "build-release", "anvil"))
    ap.add_argument("--zoo", help="model folder (default build-release/peer_zoo/<size>)")
    ap.add_argument("--json", help="write the results as JSON here")
    ap.add_argument("--passes", help="comma-separated pass names, each ablated on its own "
                    "(default: all passes together, --opt-level 0 against 1)")
    ap.add_argument("--corpus-dir", default=os.path.join(peer.ROOT, "models", "corpus"),
                    help="models named here that are not in the zoo are read from this folder")
    args = ap.parse_args()
    zoo = args.zoo or os.path.join(peer.ROOT, "build-release", "peer_zoo", args.size)
    names = args.models.split(",")
    corpus = {n: os.path.join(args.corpus_dir, n) for n in names
              if os.path.exists(os.path.join(args.corpus_dir, n, "model.onnx"))}
    cases = peer.ensure_models([n for n in names if n not in corpus], args.size, zoo,
                               sys.executable)[0] if len(corpus) < len(names) else {}
    cases.update(corpus)
    # (label, arguments with the rewrite off, arguments with it on)
    arms = [("all", ["--opt-level", "0"], ["--opt-level", "1"])]
    if args.passes:
        arms = [(p, ["--passes", "-" + p], []) for p in args.passes.split(",")]
    results = []
    print("| model | threads | pass | off median ms | on median ms | on/off | Welch t | p | kept |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, case in cases.items():
            import numpy as np
            cmd = [args.anvil, "bench", os.path.join(case, "model.onnx"), "--json", "--warmup",
                   str(args.warmup), "--iters", str(args.runs)]
            for n, arr in peer.load_inputs(case).items():
                path = os.path.join(tmp, f"{name}.{n}.npy")
                np.save(path, arr)
                cmd += ["-i", f"{n}={path}"]
            for threads, (label, off, on) in [(int(t), a) for t in args.threads.split(",")
                                              for a in arms]:
                samples = {0: [], 1: []}
                for _ in range(args.rounds):
                    for level, extra in ((0, off), (1, on)):
                        out = subprocess.run(cmd + ["--threads", str(threads)] + extra, check=True,
                                             capture_output=True, text=True).stdout
                        samples[level] += json.loads(out)["latency_ms"]["samples"]
                m0, m1 = statistics.median(samples[0]), statistics.median(samples[1])
                t, p = welch(samples[1], samples[0])
                n = min(len(samples[0]), len(samples[1]))
                kept = m1 < m0 and p < 0.01 and n >= 30
                results.append({"model": name, "threads": threads, "pass": label,
                                "off_median_ms": m0, "on_median_ms": m1, "ratio": m1 / m0,
                                "t": t, "p": p, "samples": n, "kept": kept})
                print(f"| {name} | {threads} | {label} | {m0:.2f} | {m1:.2f} | {m1 / m0:.3f} | "
                      f"{t:.2f} | {p:.2g} | {'yes' if kept else 'no'} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
