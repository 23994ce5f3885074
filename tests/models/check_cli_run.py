#!/usr/bin/env python3
"""Checks `anvil run` end to end against ONNX Runtime's answer for a test case.

Usage: check_cli_run.py ANVIL_BINARY CASE_DIR WORK_DIR

CASE_DIR is a case in the ONNX backend-test layout (model.onnx, test_data_set_0/input_<i>.pb and
output_<i>.pb, optional tolerance.txt). The inputs are converted to .npy files, `anvil run MODEL
-i NAME=FILE.npy ... -o WORK_DIR/out` is run, and each .npy it writes (named after the output,
characters outside [A-Za-z0-9_-] replaced by '_') is compared with the expected output: same dtype
and shape, |got - want| <= atol + rtol * |want| with the case's tolerances. Exits 0 on a match.
"""

import os
import re
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def load_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def tolerances(case_dir):
    tol = {"rtol": 1e-3, "atol": 1e-7, "atol_scale": 0.0}
    path = os.path.join(case_dir, "tolerance.txt")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.strip():
                    key, val = line.split()
                    tol[key] = float(val)
    return tol


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    anvil, case_dir, work = sys.argv[1:]
    model = onnx.load(os.path.join(case_dir, "model.onnx"), load_external_data=False)
    inits = {t.name for t in model.graph.initializer}
    in_names = [i.name for i in model.graph.input if i.name not in inits]
    out_names = [o.name for o in model.graph.output]
    ds = os.path.join(case_dir, "test_data_set_0")
    out_dir = os.path.join(work, "out")
    os.makedirs(out_dir, exist_ok=True)

    cmd = [anvil, "run", os.path.join(case_dir, "model.onnx"), "-o", out_dir]
    for i, name in enumerate(in_names):
        path = os.path.join(work, f"input_{i}.npy")
        np.save(path, load_pb(os.path.join(ds, f"input_{i}.pb")))
        cmd += ["-i", f"{name}={path}"]
    print("$", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(proc.stdout, end="")
    if proc.returncode != 0:
        print(f"FAIL: anvil run exited with {proc.returncode}")
        return 1

    tol = tolerances(case_dir)
    ok = True
    for i, name in enumerate(out_names):
        want = load_pb(os.path.join(ds, f"output_{i}.pb"))
        path = os.path.join(out_dir, re.sub(r"[^A-Za-z0-9_-]", "_", name) + ".npy")
        if not os.path.exists(path):
            print(f"FAIL: output '{name}': {path} was not written")
            ok = False
            continue
        got = np.load(path)
        if got.dtype != want.dtype or got.shape != want.shape:
            print(f"FAIL: output '{name}': {got.dtype}{list(got.shape)}, expected "
                  f"{want.dtype}{list(want.shape)}")
            ok = False
            continue
        atol = tol["atol"]
        if tol["atol_scale"] > 0:
            atol = tol["atol_scale"] * float(np.max(np.abs(want))) if want.size else 0.0
        if np.issubdtype(want.dtype, np.floating):
            good = np.isclose(got, want, rtol=tol["rtol"], atol=atol, equal_nan=True)
        else:
            good = got == want
        if not good.all():
            diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
            print(f"FAIL: output '{name}': {int((~good).sum())} of {want.size} elements differ; "
                  f"max |diff| {diff.max():.3g} (rtol {tol['rtol']}, atol {atol:.3g})")
            ok = False
        else:
            print(f"output '{name}' {want.dtype}{list(want.shape)}: matches ONNX Runtime")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
