"""End to end test of precision auto: `anvil tune --precision auto --tolerance T` keeps a node in
bf16 or fp16 only where its measured error stays within T, and says why it kept the others in
fp32.

    check_precision_auto.py ANVIL MODEL WORKDIR

On MODEL (one MatMul with constant weights):
  1. a tolerance no bf16 or fp16 product can meet (1e-7): the report names the node as kept in
     fp32 because of the reduced precision's error, and a session under precision auto reading that database runs it
     in fp32 (`anvil bench --explain`'s compute column);
  2. a tolerance bf16 meets (5e-2): the database's winner is whatever measured fastest, and a
     session reading it computes in the format that winner rounds to (bf16 for gemm_bf16*, fp16
     for gemm_fp16*);
  3. without a database, precision auto computes in fp32 (the cascade picks no bf16 variant
     before a measurement does).
Exit 77 (skipped) on a CPU without AVX512_BF16: there is no bf16 variant to keep or refuse.
"""

import os
import subprocess
import sys


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"FAIL: {' '.join(cmd)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
        sys.exit(1)
    return r.stdout + r.stderr


def explain_compute(anvil, model, db):
    args = [anvil, "bench", model, "--precision", "auto", "--threads", "1", "--iters", "1",
            "--warmup", "0", "--explain"]
    args += ["--db", db] if db else ["--no-db"]
    out = run(args)
    rows = [l.split() for l in out.splitlines() if l.split()[:2] == ["matmul", "MatMul"]]
    if len(rows) != 1:
        print(f"FAIL: no explain row for the MatMul:\n{out}")
        sys.exit(1)
    return rows[0][2], rows[0][3]


def main():
    anvil, model, work = sys.argv[1:4]
    with open("/proc/cpuinfo") as f:
        if " avx512_bf16" not in f.read():
            print("skipped: this CPU has no AVX512_BF16")
            return 77
    os.makedirs(work, exist_ok=True)
    ok = True

    strict = os.path.join(work, "auto_strict.db")
    if os.path.exists(strict):
        os.remove(strict)
    out = run([anvil, "tune", model, "--precision", "auto", "--tolerance", "1e-7", "--db", strict,
               "--threads", "1"])
    if "kept in fp32: the reduced-precision error" not in out:
        print(f"FAIL: the strict tune does not say why it kept fp32:\n{out}")
        ok = False
    variant, compute = explain_compute(anvil, model, strict)
    print(f"tolerance 1e-7: {variant} ({compute})")
    if compute != "fp32":
        print("FAIL: a bf16 variant ran although its error exceeds the tolerance")
        ok = False

    loose = os.path.join(work, "auto_loose.db")
    if os.path.exists(loose):
        os.remove(loose)
    run([anvil, "tune", model, "--precision", "auto", "--tolerance", "5e-2", "--db", loose,
         "--threads", "1"])
    variant, compute = explain_compute(anvil, model, loose)
    print(f"tolerance 5e-2: {variant} ({compute})")
    if compute != ("bf16" if "bf16" in variant else "fp16" if "fp16" in variant else "fp32"):
        print("FAIL: the compute column disagrees with the variant")
        ok = False

    variant, compute = explain_compute(anvil, model, None)
    print(f"no database: {variant} ({compute})")
    if compute != "fp32":
        print("FAIL: precision auto picked bf16 without a measurement")
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
