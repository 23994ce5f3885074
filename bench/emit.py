#!/usr/bin/env python3
"""anvil compile's libraries against `anvil run`'s latency, side by side.

  .venv/bin/python bench/emit.py [--models resnet50,mobilenetv2,...] [--threads 1,2]
                                 [--rounds 5] [--iters 20] [--size ci|full] [--zoo DIR]

For each zoo model (tests/models/gen_zoo.py, fixed seeds) and thread count: `anvil compile` (no
database, so both sides run the built-in rules), `make`, then alternating rounds of
`anvil bench --iters N` and `NET_run --bench N`, each reporting its in-process median; the
table gives the medians of the rounds' medians, their ratio, the library's binary size (NET_run,
stripped) and its memory (arena + weights + workspace, as NET.h / the weights file say). Models
with nodes that cannot be emitted are listed with the first reason.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ANVIL = os.path.join(ROOT, "build-release", "anvil")
GEN = os.path.join(ROOT, "tests", "models", "gen_zoo.py")


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def input_shapes(model):
    """NAME=DIMS per input: the generator's test data's shapes (its sequence length, batch 1),
    else the declared ones with symbolic dims 1."""
    import onnx
    m = onnx.load(model, load_external_data=False)
    init = {t.name for t in m.graph.initializer}
    data = os.path.join(os.path.dirname(model), "test_data_set_0")
    out = []
    for k, i in enumerate(x for x in m.graph.input if x.name not in init):
        pb = os.path.join(data, f"input_{k}.pb")
        if os.path.exists(pb):
            t = onnx.TensorProto()
            with open(pb, "rb") as f:
                t.ParseFromString(f.read())
            dims = list(t.dims)
        else:
            dims = [d.dim_value if d.dim_value > 0 else 1 for d in i.type.tensor_type.shape.dim]
        out.append(f"{i.name}={'x'.join(map(str, dims)) or 'scalar'}")
    return out


def zero_int_inputs(model, shapes, tmp):
    """-i NAME=FILE.npy of zeros for the integer inputs: anvil bench's random integers are not
    valid indices everywhere (BERT's token_type_ids has 2 rows), and NET_run --bench feeds zeros
    to them too."""
    import numpy as np
    import onnx
    m = onnx.load(model, load_external_data=False)
    kinds = {i.name: i.type.tensor_type.elem_type for i in m.graph.input}
    out = []
    for s in shapes:
        name, dims = s.split("=", 1)
        if kinds.get(name) in (onnx.TensorProto.INT64, onnx.TensorProto.INT32):
            path = os.path.join(tmp, f"zeros_{name}.npy")
            dt = np.int64 if kinds[name] == onnx.TensorProto.INT64 else np.int32
            np.save(path, np.zeros([int(d) for d in dims.split("x")], dt))
            out += ["-i", f"{name}={path}"]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet50,mobilenetv2,bert_base,squeezenet,vgg16")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--size", default="ci")
    ap.add_argument("--zoo", help="a folder of generated models to reuse (NAME/model.onnx)")
    a = ap.parse_args()
    print("| model | threads | anvil run ms | emitted ms | emitted/anvil | NET_run bytes | "
          "arena + weights + workspace |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.models.split(","):
            case = os.path.join(a.zoo or tmp, name)
            r = sh([sys.executable, GEN, name, case, "--size", a.size])
            if r.returncode:
                print(f"| {name} | - | generation failed: {r.stderr.strip()[-200:]} |")
                continue
            model = os.path.join(case, "model.onnx")
            shapes = input_shapes(model)
            for threads in [int(t) for t in a.threads.split(",")]:
                lib = os.path.join(tmp, f"{name}_{threads}")
                shutil.rmtree(lib, ignore_errors=True)
                cmd = [ANVIL, "compile", model, "-o", lib, "--name", "net", "--no-db",
                       "--threads", str(threads)]
                for s in shapes:
                    cmd += ["--shape", s]
                r = sh(cmd)
                if r.returncode:
                    why = [ln for ln in r.stderr.splitlines() if "): " in ln][:1]
                    print(f"| {name} | {threads} | not emittable: "
                          f"{(why[0].strip() if why else r.stderr.strip())[:150]} |||||")
                    continue
                r = sh(["make", "-C", lib, "-j2"])
                if r.returncode:
                    print(f"| {name} | {threads} | build failed |||||")
                    continue
                exe = os.path.join(lib, "net_run")
                bench = [ANVIL, "bench", model, "--iters", str(a.iters), "--threads",
                         str(threads), "--no-db", "--json"]
                zeros = zero_int_inputs(model, shapes, tmp)
                given = {z.split("=", 1)[0] for z in zeros[1::2]}
                for s in shapes:
                    if s.split("=", 1)[0] not in given:
                        bench += ["--shape", s]
                bench += zeros
                ours, theirs = [], []
                for _ in range(a.rounds):
                    r = sh(bench)
                    theirs.append(json.loads(r.stdout)["latency_ms"]["median"])
                    r = sh([exe, "--bench", str(a.iters), "--threads", str(threads)])
                    ours.append(float(re.search(r"median ([0-9.]+) ms", r.stdout).group(1)))
                t_anvil, t_lib = statistics.median(theirs), statistics.median(ours)
                stripped = exe + ".stripped"
                sh(["strip", "-o", stripped, exe])
                with open(os.path.join(lib, "net.c")) as f:
                    src = f.read()
                arena = int(re.search(r"#define ARENA_BYTES (\d+)", src).group(1))
                ws = int(re.search(r"#define WS_BYTES (\d+)", src).group(1))
                weights = int(re.search(r"#define WEIGHTS_BYTES (\d+)", src).group(1))
                mem = (arena + ws + weights) / 2**20
                print(f"| {name} | {threads} | {t_anvil:.3f} | {t_lib:.3f} | "
                      f"{t_lib / t_anvil:.3f} | {os.path.getsize(stripped)} | {mem:.1f} MiB |",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
