"""Checks for the anvil CLI tests that need more than a regex.

  check.py npy ACTUAL.npy EXPECTED.npy      values equal within rtol 1e-4, atol 1e-5
  check.py dot FILE.dot                     balanced braces, closed strings, a digraph
  check.py trace FILE.json                  a Chrome trace with at least one complete event
  check.py bench-json ANVIL MODEL ARGS...   runs `ANVIL bench MODEL --json ARGS...` and checks
                                            that stdout is one JSON object with sane numbers
"""
import json
import subprocess
import sys

import numpy as np


def fail(msg):
    sys.exit("check.py: " + msg)


def check_npy(actual, expected):
    a, e = np.load(actual), np.load(expected)
    if a.dtype != e.dtype or a.shape != e.shape:
        fail(f"{actual}: {a.dtype}{list(a.shape)}, expected {e.dtype}{list(e.shape)}")
    if not np.allclose(a, e, rtol=1e-4, atol=1e-5):
        worst = np.max(np.abs(a.astype(np.float64) - e.astype(np.float64)))
        fail(f"{actual} differs from {expected}: max abs error {worst}")


def check_dot(path):
    text = open(path, encoding="utf-8").read()
    if not text.startswith("digraph "):
        fail(f"{path} does not start with 'digraph '")
    depth, in_str, i = 0, False, 0
    while i < len(text):
        c = text[i]
        if in_str:
            if c == "\\":
                i += 1
            elif c == '"':
                in_str = False
            elif c == "\n":
                fail(f"{path}: newline inside a string at offset {i}")
        elif c == '"':
            in_str = True
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth < 0:
                fail(f"{path}: unbalanced '}}' at offset {i}")
        i += 1
    if in_str or depth != 0:
        fail(f"{path}: unterminated string or braces (depth {depth})")
    if "->" not in text:
        fail(f"{path}: no edges")


def check_trace(path):
    data = json.load(open(path, encoding="utf-8"))
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    if not any(isinstance(e, dict) and e.get("ph") in ("X", "B") for e in events):
        fail(f"{path}: no timing events")


def check_trace_variants(path, pairs):
    """Every op event of node NAME in the trace ran variant V, for each NAME=V in pairs."""
    data = json.load(open(path, encoding="utf-8"))
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    for pair in pairs:
        name, want = pair.rsplit("=", 1)
        got = {e["args"]["variant"] for e in events
               if isinstance(e, dict) and e.get("cat") == "op" and e.get("name") == name}
        if got != {want}:
            fail(f"{path}: node {name} ran {sorted(got) or 'nothing'}, want {want}")


def check_bench(anvil, model, args):
    proc = subprocess.run([anvil, "bench", model, "--json", *args], capture_output=True,
                          text=True, check=False)
    if proc.returncode != 0:
        fail(f"bench exited {proc.returncode}: {proc.stderr}")
    lines = [l for l in proc.stdout.splitlines() if l.strip()]
    if len(lines) != 1:
        fail(f"expected one line of JSON, got {len(lines)}: {proc.stdout!r}")
    r = json.loads(lines[0])
    for key in ("model", "threads", "iterations", "load_ms", "first_run_ms", "throughput_per_s",
                "latency_ms", "arena_bytes", "activation_bytes", "inputs"):
        if key not in r:
            fail(f"missing key '{key}' in {r}")
    lat = r["latency_ms"]
    order = [lat[k] for k in ("min", "median", "p90", "p99", "max")]
    if any(b < a for a, b in zip(order, order[1:])) or not order[0] > 0:
        fail(f"latency statistics out of order: {lat}")
    if not lat["min"] <= lat["mean"] <= lat["max"]:
        fail(f"mean outside [min, max]: {lat}")
    if abs(r["throughput_per_s"] - 1000.0 / lat["mean"]) > 1e-6 * r["throughput_per_s"]:
        fail(f"throughput {r['throughput_per_s']} is not 1000/mean {lat['mean']}")
    if r["load_ms"] <= 0 or r["first_run_ms"] <= 0:
        fail(f"load/first-run times must be positive: {r}")
    for key in ("arena_bytes", "activation_bytes"):
        if not isinstance(r[key], (int, float)) or r[key] < 0 or r[key] != int(r[key]):
            fail(f"{key} must be a byte count, got {r[key]!r}")
    # expectations given as KEY=VALUE pairs after "--expect"
    if "--expect" in sys.argv:
        for pair in sys.argv[sys.argv.index("--expect") + 1:]:
            key, value = pair.split("=", 1)
            got = r
            for part in key.split("."):
                got = got[int(part)] if isinstance(got, list) else got[part]
            try:
                want = json.loads(value)
            except json.JSONDecodeError:
                want = value
            if got != want:
                fail(f"{key} is {json.dumps(got)}, expected {value}")


def main():
    if len(sys.argv) < 3:
        fail(__doc__)
    what = sys.argv[1]
    if what == "npy":
        check_npy(sys.argv[2], sys.argv[3])
    elif what == "dot":
        check_dot(sys.argv[2])
    elif what == "trace":
        check_trace(sys.argv[2])
    elif what == "trace-variants":
        check_trace_variants(sys.argv[2], sys.argv[3:])
    elif what == "bench-json":
        rest = sys.argv[4:]
        if "--expect" in rest:
            rest = rest[:rest.index("--expect")]
        check_bench(sys.argv[2], sys.argv[3], rest)
    else:
        fail(f"unknown check '{what}'")


if __name__ == "__main__":
    main()
