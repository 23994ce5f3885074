#!/usr/bin/env python3
"""Peak memory of loading a large model: anvil vs ONNX Runtime.

Usage: load_rss.py [--size-mb 128] [--workdir DIR] [--anvil-load-rss PATH] [--repeat 3]

Generates (once, fixed seed) an MLP whose float32 weights make a model file of at least
--size-mb MiB, then measures in fresh processes:
  - anvil: bench's anvil_load_rss program: anvil_model_load, then peak RSS (VmHWM); then a
    session and a first run on zero inputs (timed, with the peak after it);
  - ONNX Runtime: InferenceSession creation (peak RSS after it, above the interpreter's peak after
    `import onnxruntime`), and its first run.
Prints a table and whether anvil's peak after load stays within file size + 32 MiB (anvil maps the
file and copies no weights at load, so it should stay far below that). Resident memory is split
into heap (RssAnon: a copy of the weights would show here) and mapped file pages (RssFile: pages
of the model file the kernel mapped in while the parser read the tensor headers around them). Each measurement is the
median of --repeat runs. Not a test: it never fails on a number.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MIB = 1 << 20


def make_model(path, size_mb, seed=7):
    """Square MatMul+Add+Relu layers of width 2048 (16 MiB of weights each) until the weights
    reach size_mb."""
    width = 2048
    layer_bytes = width * width * 4
    layers = max(1, -(-size_mb * MIB // layer_bytes))
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    x = "input"
    for i in range(layers):
        w = (rng.standard_normal((width, width), dtype=np.float32) / np.sqrt(width)).astype(np.float32)
        b = rng.standard_normal(width, dtype=np.float32) * 0.01
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes += [helper.make_node("MatMul", [x, f"w{i}"], [f"m{i}"]),
                  helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"]),
                  helper.make_node("Relu", [f"a{i}"], [f"r{i}"])]
        x = f"r{i}"
    nodes[-1].output[0] = "output"
    graph = helper.make_graph(
        nodes, "load_rss_mlp",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", width])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", width])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


ORT_CHILD = textwrap.dedent("""
    import json, sys, time
    def kb(field):
        for line in open('/proc/self/status'):
            if line.startswith(field):
                return int(line.split()[1])
        return -1
    import numpy as np
    import onnxruntime as ort
    base = kb('VmHWM:')
    t0 = time.perf_counter()
    so = ort.SessionOptions()
    sess = ort.InferenceSession(sys.argv[1], so, providers=['CPUExecutionProvider'])
    t1 = time.perf_counter()
    peak_load = kb('VmHWM:')
    feeds = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in i.shape]
        feeds[i.name] = np.zeros(shape, dtype=np.float32)
    t2 = time.perf_counter()
    sess.run(None, feeds)
    t3 = time.perf_counter()
    anon, filed = kb('RssAnon:'), kb('RssFile:')
    print(json.dumps({'baseline_peak_rss_kb': base, 'peak_rss_kb_after_session': peak_load,
                      'rss_anon_kb_after_session': anon, 'rss_file_kb_after_session': filed,
                      'session_create_ms': (t1 - t0) * 1e3, 'first_run_ms': (t3 - t2) * 1e3,
                      'peak_rss_kb_after_run': kb('VmHWM:'), 'version': ort.__version__}))
""")


def find_tool(explicit):
    if explicit:
        return explicit
    for build in ("build-release", "build", "build-asan"):
        p = os.path.join(ROOT, build, "bench", "anvil_load_rss")
        if os.access(p, os.X_OK):
            return p
    raise SystemExit("anvil_load_rss not found; build first (scripts/build.sh release) or pass "
                     "--anvil-load-rss PATH")


def run_json(cmd):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        raise SystemExit(f"{cmd[0]} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")


def median_of(samples, key):
    vals = [s[key] for s in samples if key in s]
    return statistics.median(vals) if vals else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=128)
    ap.add_argument("--workdir", default=os.path.join(ROOT, "build-bench"))
    ap.add_argument("--anvil-load-rss", default=None)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if args.size_mb < 1 or args.repeat < 1:
        ap.error("--size-mb and --repeat must be positive")

    tool = find_tool(args.anvil_load_rss)
    os.makedirs(args.workdir, exist_ok=True)
    model = os.path.join(args.workdir, f"load_rss_{args.size_mb}mb.onnx")
    if not os.path.exists(model):
        print(f"generating {model} ...", flush=True)
        make_model(model, args.size_mb)
    file_bytes = os.path.getsize(model)

    anvil, ortr = [], []
    for _ in range(args.repeat):  # alternate A B A B on a shared machine
        anvil.append(run_json([tool, model, "--run"]))
        ortr.append(run_json([sys.executable, "-c", ORT_CHILD, model]))

    def mb(kb):
        return "n/a" if kb is None else f"{kb / 1024:.1f}"

    def ms(v):
        return "n/a" if v is None else f"{v:.1f}"

    a_peak = median_of(anvil, "peak_rss_kb_after_load")
    a_base = median_of(anvil, "baseline_peak_rss_kb")
    o_peak = median_of(ortr, "peak_rss_kb_after_session")
    o_base = median_of(ortr, "baseline_peak_rss_kb")
    rows = [
        ("model file", f"{file_bytes / MIB:.1f} MiB", ""),
        ("peak RSS after load (MiB)", mb(a_peak), mb(o_peak)),
        ("  process baseline before load (MiB)", mb(a_base), mb(o_base)),
        ("  load's own increase (MiB)", mb(a_peak - a_base), mb(o_peak - o_base)),
        ("RSS after load: heap, RssAnon (MiB)", mb(median_of(anvil, "rss_anon_kb_after_load")),
         mb(median_of(ortr, "rss_anon_kb_after_session"))),
        ("RSS after load: mapped file, RssFile (MiB)",
         mb(median_of(anvil, "rss_file_kb_after_load")),
         mb(median_of(ortr, "rss_file_kb_after_session"))),
        ("load / session create (ms)", ms(median_of(anvil, "load_ms")),
         ms(median_of(ortr, "session_create_ms"))),
        ("anvil session create (ms)", ms(median_of(anvil, "session_create_ms")), ""),
        ("first run (ms)", ms(median_of(anvil, "first_run_ms")), ms(median_of(ortr, "first_run_ms"))),
        ("peak RSS after first run (MiB)", mb(median_of(anvil, "peak_rss_kb_after_run")),
         mb(median_of(ortr, "peak_rss_kb_after_run"))),
    ]
    print(f"\nload RSS benchmark, median of {args.repeat}; onnxruntime {ortr[0].get('version')}")
    w = max(len(r[0]) for r in rows)
    print(f"{'':{w}}  {'anvil':>12}  {'onnxruntime':>12}")
    for name, a, o in rows:
        print(f"{name:{w}}  {a:>12}  {o:>12}")
    errors = {s["run_error"] for s in anvil if "run_error" in s}
    for e in errors:
        print(f"anvil first run failed: {e}")
    limit_kb = (file_bytes + 32 * MIB) / 1024
    verdict = "yes" if a_peak <= limit_kb else "NO"
    print(f"\nanvil peak RSS after load within file size + 32 MiB ({limit_kb / 1024:.1f} MiB): "
          f"{verdict}")


if __name__ == "__main__":
    sys.exit(main())
