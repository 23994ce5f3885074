#!/usr/bin/env python3
"""Fails when a model would run real work on a slow path.

Usage: check_slow_paths.py ANVIL MODEL_DIR [MODEL_DIR ...] [--max-bytes N] [--max-flops N]

Each MODEL_DIR holds model.onnx (the zoo's and fetch_real.py's layout). For each, anvil plans and
runs it once (`anvil bench --explain --json`, on test_data_set_0's inputs when the directory has
them, else seeded ones; no tuning database) and lists the
nodes that ran a slow path: a reference kernel (the plain C oracle, for nodes no optimized
variant takes), a node the interpreter ran (dynamic shapes), or a whole body the interpreter
ran. A node carries real work when its inputs and outputs exceed --max-bytes or its FLOPs exceed
--max-flops; any such node fails the check, named with its op, size and why. Structural, not
timed: nothing here depends on the machine's speed. Exit status 0 when no model has one.
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

SLOW = {"reference", "dynamic", "interpreted"}
# Ops a dynamic step legitimately carries: control flow (its body is judged on its own) and
# the data-dependent ops whose work is their output's size, known only by running them.
EXEMPT_OPS = {"If", "Loop", "Scan", "NonZero", "Unique", "NonMaxSuppression", "Compress"}


def case_inputs(d, tmp):
    """-i NAME=FILE.npy arguments for the inputs of d/test_data_set_0 (none if absent)."""
    files = sorted(glob.glob(os.path.join(d, "test_data_set_0", "input_*.pb")))
    if not files:
        return []
    import numpy as np
    import onnx
    from onnx import numpy_helper

    args = []
    for f in files:
        t = onnx.TensorProto()
        with open(f, "rb") as fh:
            t.ParseFromString(fh.read())
        path = os.path.join(tmp, os.path.basename(f) + ".npy")
        np.save(path, numpy_helper.to_array(t))
        args += ["-i", f"{t.name}={path}"]
    return args


def slow_nodes(anvil, d, max_bytes, max_flops):
    model = os.path.join(d, "model.onnx")
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [anvil, "bench", model, "--iters", "1", "--warmup", "0", "--threads", "1",
               "--json", "--explain", "--no-db"] + case_inputs(d, tmp)
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        return None, r.stderr.strip()
    report = json.loads(r.stdout)
    bad = []
    for n in report.get("nodes", []):
        if n["variant"] not in SLOW or n["op"] in EXEMPT_OPS:
            continue
        if n["bytes"] > max_bytes or n["flops"] > max_flops or n["variant"] == "interpreted":
            bad.append(n)
    return bad, None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("anvil")
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--max-bytes", type=int, default=256 * 1024)
    ap.add_argument("--max-flops", type=int, default=1_000_000)
    a = ap.parse_args()
    failed = 0
    for d in a.dirs:
        model = os.path.join(d, "model.onnx")
        name = os.path.basename(os.path.normpath(d))
        if not os.path.exists(model):
            continue
        bad, err = slow_nodes(a.anvil, d, a.max_bytes, a.max_flops)
        if err is not None:
            print(f"{name}: anvil could not run it: {err}")
            failed += 1
            continue
        if not bad:
            print(f"{name}: ok")
            continue
        failed += 1
        print(f"{name}: {len(bad)} node(s) with real work on a slow path:")
        for n in bad:
            where = (n.get("scope", "") + "/") if n.get("scope") else ""
            why = n.get("note", "")
            print(f"  {where}{n['node']} ({n['op']}): {n['variant']}, {n['bytes']} bytes, "
                  f"{n['flops']} FLOPs{'; ' + why if why else ''}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
