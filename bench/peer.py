#!/usr/bin/env python3
"""Peer benchmark: anvil against ONNX Runtime (and PyTorch when it can) on the model zoo.

Usage: peer.py [--models a,b,...] [--size full|ci] [--threads 1,2] [--runs N] [--rounds R]
               [--warmup W] [--anvil PATH] [--zoo DIR] [--json out.json] [--md out.md]

For every model (the generated zoo of tests/models/gen_zoo.py and the real models of
tests/models/fetch_real.py whose packages are installed) and every thread count, the engines run
in alternation, A B A B ..., R rounds; each round is a fresh child process per engine that loads
the model, runs it once (first run, includes planning), runs W untimed warmup iterations and N
timed ones on the same inputs (the model's test_data_set_0, so both engines see identical data):
  - anvil: `anvil bench MODEL --json -i NAME=FILE.npy ... --threads T` (build-release by default);
  - ONNX Runtime: this script in child mode, intra-op threads T, inter-op 1, sequential
    execution, its default graph optimisations;
  - PyTorch (when torch and onnx2torch are installed: ANVIL_TORCH=1 scripts/setup.sh): the
    model's torch twin (bench/torch_twin.py: the ONNX graph as a torch.fx module holding the
    model's own initializers), built once by this process and accepted only if it reproduces
    test_data_set_0 within the zoo tolerance (rtol 1e-3, atol 1e-4 * max|y|); a twin that cannot
    be built or does not match is never timed and its reason goes to the notes. Each round's
    child loads the saved twin and runs it under torch.inference_mode() with
    torch.set_num_threads(T) and torch.set_num_interop_threads(1).
Latency per engine is the median over rounds of each round's median (and likewise p90), so all
engines are summarised the same way. Peak RSS is each child's maximum resident set (wait4's
ru_maxrss, the largest over rounds); for ONNX Runtime and PyTorch that includes the Python
interpreter and the onnxruntime / torch import, reported separately as "base". ratio = anvil
median / ORT (or torch) median (lower is better for anvil). Models are generated on first use
into --zoo (default build-release/peer_zoo/<size>). Not a test: it never fails on a number; an
engine that cannot run a model gets its error in the notes column.
"""

import argparse
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
GEN_ZOO = os.path.join(ROOT, "tests", "models", "gen_zoo.py")
FETCH_REAL = os.path.join(ROOT, "tests", "models", "fetch_real.py")
MIB = 1024.0


def vm_hwm_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def percentile(values, q):
    s = sorted(values)
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


# ---- child mode: one ONNX Runtime measurement -------------------------------------------------


def ort_child(model, inputs_npz, threads, warmup, runs):
    import numpy as np
    import onnxruntime as ort
    base = vm_hwm_kib()
    feeds = dict(np.load(inputs_npz))
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    t0 = time.perf_counter()
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    load_ms = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    sess.run(None, feeds)
    first_ms = (time.perf_counter() - t0) * 1e3
    for _ in range(warmup):
        sess.run(None, feeds)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t0) * 1e3)
    print(json.dumps({"median": statistics.median(times), "p90": percentile(times, 0.9),
                      "min": min(times), "load_ms": load_ms, "first_run_ms": first_ms,
                      "base_rss_kib": base}))
    return 0


def torch_child(twin_path, inputs_npz, threads, warmup, runs):
    import numpy as np
    import torch
    # Before any parallel work: the thread pools are sized on first use.
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    # The twin unpickles its modules from bench/torch_twin.py and onnx2torch; importing them here
    # puts their cost in the base, as `import onnxruntime` is in ORT's.
    sys.path.insert(0, HERE)
    import torch_twin  # noqa: F401
    base = vm_hwm_kib()
    data = np.load(inputs_npz)
    t0 = time.perf_counter()
    saved = torch.load(twin_path, weights_only=False)
    twin, names = saved["twin"], saved["names"]
    args = [torch.from_numpy(np.array(data[n])) for n in names]
    load_ms = (time.perf_counter() - t0) * 1e3
    with torch.inference_mode():
        t0 = time.perf_counter()
        twin(*args)
        first_ms = (time.perf_counter() - t0) * 1e3
        for _ in range(warmup):
            twin(*args)
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            twin(*args)
            times.append((time.perf_counter() - t0) * 1e3)
    print(json.dumps({"median": statistics.median(times), "p90": percentile(times, 0.9),
                      "min": min(times), "load_ms": load_ms, "first_run_ms": first_ms,
                      "base_rss_kib": base}))
    return 0


def torch_status():
    """None when PyTorch twins can be built here, else why not (for the table)."""
    missing = [m for m in ("torch", "onnx2torch") if importlib.util.find_spec(m) is None]
    if missing:
        return (f"{' and '.join(missing)} not installed (ANVIL_TORCH=1 scripts/setup.sh): "
                "skipped")
    return None


def twin_child(case, path):
    """Builds the torch twin of case, checks it against test_data_set_0 and saves it to path.

    Prints JSON {"why": null} when the twin is saved, else why there is none (for the notes).
    Runs in a child so that this script's own process never holds torch: a child's wait4 peak
    RSS includes the image it was forked from, so a large parent would inflate every engine's."""
    import torch
    sys.path.insert(0, HERE)
    import torch_twin
    try:
        twin, names = torch_twin.load_twin(os.path.join(case, "model.onnx"))
        why = torch_twin.check_twin(twin, names, case)
        if why:
            why = f"torch: twin differs from ORT, not timed ({why})"
        else:
            torch.save({"twin": twin, "names": names}, path)
    except Exception as e:  # noqa: BLE001 - any conversion failure is a note, not a crash
        lines = str(e).strip().splitlines() or [""]
        op = re.search(r"operation_type='([^']+)'", lines[0])
        why = (f"torch: no twin (onnx2torch has no {op.group(1)} converter)" if op
               else f"torch: no twin ({type(e).__name__}: {lines[0][:140]})")
    print(json.dumps({"why": why}))
    return 0


def make_twin(case, path, python, timeout):
    """None when case's twin is saved at path, else why not."""
    rc, out, err, _ = run_child([python, os.path.abspath(__file__), "--child-twin", case, path],
                                timeout)
    if rc != 0:
        return short_error("torch twin", err, rc)
    return json.loads(out.strip().splitlines()[-1])["why"]


# ---- parent ------------------------------------------------------------------------------------


def run_child(cmd, timeout):
    """Runs cmd; returns (rc, stdout, stderr, peak RSS in KiB) measured by wait4."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err)
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                p.kill()
                pid, status, usage = os.wait4(p.pid, 0)
                break
            time.sleep(0.01)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return (p.returncode, out.read().decode(errors="replace"),
                err.read().decode(errors="replace"), usage.ru_maxrss)


def load_inputs(case):
    """The inputs of test_data_set_0 as {name: array}, in graph input order."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    ddir = os.path.join(case, "test_data_set_0")
    feeds = {}
    k = 0
    while os.path.exists(os.path.join(ddir, f"input_{k}.pb")):
        t = onnx.TensorProto()
        with open(os.path.join(ddir, f"input_{k}.pb"), "rb") as f:
            t.ParseFromString(f.read())
        feeds[t.name] = np.asarray(numpy_helper.to_array(t))
        k += 1
    return feeds


def ensure_models(names, size, zoo, python):
    """Generates the zoo models and copies the real ones into zoo; returns {name: case dir}."""
    gen = subprocess.run([python, GEN_ZOO, "list"], capture_output=True, text=True, check=True)
    generated = gen.stdout.split()
    real = subprocess.run([python, FETCH_REAL, "--list"], capture_output=True, text=True,
                          check=True)
    real_names = [line.split("\t")[0] for line in real.stdout.splitlines() if line]
    wanted = names or generated + real_names
    unknown = [n for n in wanted if n not in generated and n not in real_names]
    if unknown:
        sys.exit(f"peer.py: unknown model(s) {', '.join(unknown)}; known: "
                 f"{', '.join(generated + real_names)}")
    cases = {}
    for n in wanted:
        if n in generated:
            subprocess.run([python, GEN_ZOO, n, os.path.join(zoo, n), "--size", size],
                           check=True, stdout=subprocess.DEVNULL)
            cases[n] = os.path.join(zoo, n)
    if any(n in real_names for n in wanted):
        real_dir = os.path.join(zoo, "real")
        if not os.path.isdir(real_dir):
            subprocess.run([python, FETCH_REAL, real_dir], stdout=subprocess.DEVNULL)
        for n in wanted:
            if n in real_names:
                cases[n] = os.path.join(real_dir, n)
    return cases


def short_error(engine, text, rc):
    """The last line of a child's stderr, shortened to what matters in a table cell."""
    msg = (text.strip().splitlines() or [f"exit status {rc}"])[-1]
    if "unsupported operators:" in msg:
        ops = msg.split("unsupported operators:", 1)[1].split(";", 1)[0]
        return f"{engine}: unsupported {', '.join(re.findall(r'([A-Za-z0-9_]+) [(]opset', ops))}"
    for prefix in ("anvil: error: ", "anvil: "):
        if msg.startswith(prefix):
            msg = msg[len(prefix):]
    return f"{engine}: {msg[:160]}"


def summarise(rounds):
    if not rounds:
        return None
    return {"median_ms": statistics.median(r["median"] for r in rounds),
            "p90_ms": statistics.median(r["p90"] for r in rounds),
            "min_ms": min(r["min"] for r in rounds),
            "first_run_ms": statistics.median(r["first_run_ms"] for r in rounds),
            "peak_rss_mib": max(r["rss_kib"] for r in rounds) / MIB,
            "rounds": len(rounds)}


def bench_model(name, case, threads, args, python, tmp):
    import numpy as np
    model = os.path.join(case, "model.onnx")
    result = {"model": name, "size": args.size if "/real/" not in case else "real",
              "threads": threads, "notes": []}
    if not os.path.isfile(model):
        result["notes"].append(f"not available ({model} missing)")
        return result
    feeds = load_inputs(case)
    npz = os.path.join(tmp, f"{name}.npz")
    np.savez(npz, **feeds)
    anvil_cmd = [args.anvil, "bench", model, "--json", "--threads", str(threads), "--warmup",
                 str(args.warmup), "--iters", str(args.runs)]
    for n, arr in feeds.items():
        path = os.path.join(tmp, f"{name}.{n}.npy")
        np.save(path, arr)
        anvil_cmd += ["-i", f"{n}={path}"]
    ort_cmd = [python, os.path.abspath(__file__), "--child-ort", model, npz, str(threads),
               str(args.warmup), str(args.runs)]
    twin_path = os.path.join(tmp, f"{name}.twin.pt")
    torch_ok = args.torch_note is None
    if torch_ok and not os.path.exists(twin_path):
        if name not in args.twin_notes:
            args.twin_notes[name] = make_twin(case, twin_path, python, args.timeout)
        if args.twin_notes[name]:
            result["notes"].append(args.twin_notes[name])
            torch_ok = False
    elif not torch_ok:
        result["notes"].append(f"torch: {args.torch_note}")
    torch_cmd = [python, os.path.abspath(__file__), "--child-torch", twin_path, npz,
                 str(threads), str(args.warmup), str(args.runs)]
    anvil_rounds, ort_rounds, torch_rounds = [], [], []
    anvil_ok = ort_ok = True
    for _ in range(args.rounds):
        # A B C A B C: the engines take turns so drift in machine load hits all alike.
        if anvil_ok:
            rc, out, err, rss = run_child(anvil_cmd, args.timeout)
            if rc == 0:
                j = json.loads(out)
                lat = j["latency_ms"]
                anvil_rounds.append({"median": lat["median"], "p90": lat["p90"],
                                     "min": lat["min"], "first_run_ms": j["first_run_ms"],
                                     "rss_kib": rss})
            else:
                anvil_ok = False
                result["notes"].append(short_error("anvil", err, rc))
        if ort_ok:
            rc, out, err, rss = run_child(ort_cmd, args.timeout)
            if rc == 0:
                j = json.loads(out)
                j["rss_kib"] = rss
                ort_rounds.append(j)
                result["ort_base_rss_mib"] = j["base_rss_kib"] / MIB
            else:
                ort_ok = False
                result["notes"].append(short_error("ORT", err, rc))
        if torch_ok:
            rc, out, err, rss = run_child(torch_cmd, args.timeout)
            if rc == 0:
                j = json.loads(out)
                j["rss_kib"] = rss
                torch_rounds.append(j)
                result["torch_base_rss_mib"] = j["base_rss_kib"] / MIB
            else:
                torch_ok = False
                result["notes"].append(short_error("torch", err, rc))
    result["anvil"] = summarise(anvil_rounds)
    result["ort"] = summarise(ort_rounds)
    result["torch"] = summarise(torch_rounds)
    if result["anvil"] and result["ort"]:
        result["ratio"] = result["anvil"]["median_ms"] / result["ort"]["median_ms"]
    if result["anvil"] and result["torch"]:
        result["ratio_torch"] = result["anvil"]["median_ms"] / result["torch"]["median_ms"]
    return result


def fmt(v, spec=".2f"):
    return "—" if v is None else format(v, spec)


def markdown(results, meta):
    lines = [f"Peer benchmark, size `{meta['size']}`, {meta['rounds']} rounds x "
             f"{meta['runs']} runs (warmup {meta['warmup']}), {meta['cpu']}.", "",
             "| model | size | thr | anvil median ms | anvil p90 | ORT median ms | ORT p90 | "
             "anvil/ORT | torch median ms | torch p90 | anvil/torch | anvil peak RSS MiB | "
             "ORT peak RSS MiB (base) | torch peak RSS MiB (base) | notes |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in results:
        a, o, t = r.get("anvil"), r.get("ort"), r.get("torch")
        # A torch note repeated on every row would drown the table; it is printed once below.
        notes = "; ".join(n for n in r["notes"] if n != f"torch: {meta['torch_note']}")
        lines.append(
            f"| {r['model']} | {r['size']} | {r['threads']} | "
            f"{fmt(a and a['median_ms'])} | {fmt(a and a['p90_ms'])} | "
            f"{fmt(o and o['median_ms'])} | {fmt(o and o['p90_ms'])} | "
            f"{fmt(r.get('ratio'))} | {fmt(t and t['median_ms'])} | {fmt(t and t['p90_ms'])} | "
            f"{fmt(r.get('ratio_torch'))} | {fmt(a and a['peak_rss_mib'], '.0f')} | "
            f"{fmt(o and o['peak_rss_mib'], '.0f')} ({fmt(r.get('ort_base_rss_mib'), '.0f')}) | "
            f"{fmt(t and t['peak_rss_mib'], '.0f')} ({fmt(r.get('torch_base_rss_mib'), '.0f')}) | "
            f"{notes.replace('|', '/')} |")
    lines += ["", f"PyTorch: {meta['torch_note'] or meta['torch_versions']}.",
              "", f"Peak RSS floor: a child that runs nothing reports "
              f"{fmt(meta['rss_floor_mib'], '.0f')} MiB (wait4 counts the image a child was "
              "forked from, i.e. this script's process), so smaller peaks read as that."]
    return "\n".join(lines) + "\n"


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return f"{line.split(':', 1)[1].strip()}, {os.cpu_count()} CPUs"
    except OSError:
        pass
    return f"{os.cpu_count()} CPUs"


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child-ort":
        model, npz, threads, warmup, runs = sys.argv[2:7]
        return ort_child(model, npz, int(threads), int(warmup), int(runs))
    if len(sys.argv) > 1 and sys.argv[1] == "--child-twin":
        return twin_child(sys.argv[2], sys.argv[3])
    if len(sys.argv) > 1 and sys.argv[1] == "--child-torch":
        twin, npz, threads, warmup, runs = sys.argv[2:7]
        return torch_child(twin, npz, int(threads), int(warmup), int(runs))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", help="comma-separated model names (default: all)")
    ap.add_argument("--size", choices=["full", "ci"], default="ci")
    ap.add_argument("--threads", default="1", help="comma-separated thread counts (default 1)")
    ap.add_argument("--runs", type=int, default=10, help="timed runs per round (default 10)")
    ap.add_argument("--rounds", type=int, default=2, help="A B rounds (default 2)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed runs per round (default 2)")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per child (default 1800)")
    ap.add_argument("--anvil", default=os.path.join(ROOT, "build-release", "anvil"))
    ap.add_argument("--zoo", help="model folder (default build-release/peer_zoo/<size>)")
    ap.add_argument("--json", help="write the results as JSON here")
    ap.add_argument("--md", help="write the markdown table here")
    args = ap.parse_args()
    try:
        threads = [int(t) for t in args.threads.split(",")]
    except ValueError:
        ap.error(f"--threads needs comma-separated whole numbers, got '{args.threads}'")
    if min(threads) < 1 or args.runs < 1 or args.rounds < 1 or args.warmup < 0:
        ap.error("--threads, --runs and --rounds must be positive, --warmup not negative")
    if not os.access(args.anvil, os.X_OK):
        ap.error(f"{args.anvil} is not an executable; build it with scripts/build.sh release "
                 "or pass --anvil")
    python = sys.executable
    zoo = args.zoo or os.path.join(ROOT, "build-release", "peer_zoo", args.size)
    names = [n for n in args.models.split(",") if n] if args.models else None
    cases = ensure_models(names, args.size, zoo, python)
    args.torch_note = torch_status()
    args.twin_notes = {}
    torch_versions = None
    if args.torch_note is None:
        from importlib import metadata
        torch_versions = (f"torch {metadata.version('torch')}, onnx2torch "
                          f"{metadata.version('onnx2torch')}; twins from bench/torch_twin.py, "
                          "checked against ORT on test_data_set_0 before timing")
    results = []
    with tempfile.TemporaryDirectory(prefix="anvil_peer_") as tmp:
        for name, case in cases.items():
            for t in threads:
                r = bench_model(name, case, t, args, python, tmp)
                results.append(r)
                a, o, pt = r.get("anvil"), r.get("ort"), r.get("torch")
                print(f"{name} threads={t}: anvil {fmt(a and a['median_ms'])} ms, "
                      f"ORT {fmt(o and o['median_ms'])} ms, "
                      f"torch {fmt(pt and pt['median_ms'])} ms", file=sys.stderr)
    # /bin/true's peak is this process's resident size at the fork: the least any child reports.
    meta = {"size": args.size, "rounds": args.rounds, "runs": args.runs,
            "warmup": args.warmup, "cpu": cpu_name(), "torch_note": args.torch_note,
            "torch_versions": torch_versions, "anvil": args.anvil,
            "rss_floor_mib": run_child(["true"], 60)[3] / MIB}
    md = markdown(results, meta)
    print(md, end="")
    if args.md:
        with open(args.md, "w") as f:
            f.write(md)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
