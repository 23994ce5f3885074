#!/usr/bin/env python3
"""anvil compile, end to end: each model is compiled to C, the library is built with nothing but
`cc -std=c11 -O2 -Wall -Werror` (no anvil header or library on the include or link path), and
its runner's outputs must equal `anvil run`'s on the same inputs (rtol 1e-4, atol 1e-5 of the
largest magnitude), with the same output file names.

  check_emit.py ANVIL WORK cases DIR...      ONNX test-case folders (model.onnx +
                                            test_data_set_0/input_*.pb); folders holding such
                                            folders are walked. Cases whose nodes cannot be
                                            emitted must fail with exit code 13 and a message
                                            naming them; they are counted, not failed.
  check_emit.py ANVIL WORK random N [--seed S]
                                            N random graphs, GEMM/elementwise ones and CNNs in
                                            turn: the unoptimized runtime (--opt-level 0), the
                                            optimized one and the emitted library must agree.
  check_emit.py ANVIL WORK make MODEL.onnx NAME=DIMS...
                                            one model built with its own Makefile and its
                                            CMakeLists.txt (the files a user runs), with and
                                            without --embed-weights, plus the error paths of
                                            its runner (bad weights file, wrong input shape).

The copied kernel sources are identical across libraries, so their objects are cached by
content in WORK/objcache: hundreds of graphs then cost one compile of NET.c each.
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CFLAGS = ["-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE", "-DANVIL_EMITTED"]
ISA = {"_avx512.c": ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mavx2", "-mfma",
                     "-mf16c"],
       "_avx2.c": ["-mavx2", "-mfma", "-mf16c"]}
ISA["_avx512bf16.c"] = ISA["_avx512.c"] + ["-mavx512bf16"]
ISA["_avx512fp16.c"] = ISA["_avx512.c"] + ["-mavx512fp16", "-DANVIL_CC_AVX512FP16"]


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def build(lib, name, cache):
    """Compiles lib (an emitted folder) into lib/name_run with cached kernel objects."""
    src = os.path.join(lib, "src")
    headers = b""
    for root, _, files in sorted(os.walk(src)):
        for f in sorted(files):
            if f.endswith(".h"):
                with open(os.path.join(root, f), "rb") as fh:
                    headers += fh.read()
    objs = []
    for root, _, files in os.walk(src):
        for f in sorted(files):
            if not f.endswith(".c"):
                continue
            path = os.path.join(root, f)
            flags = CFLAGS + next((v for k, v in ISA.items() if f.endswith(k)), [])
            with open(path, "rb") as fh:
                key = hashlib.sha1(fh.read() + headers + " ".join(flags).encode()).hexdigest()
            obj = os.path.join(cache, key + ".o")
            if not os.path.exists(obj):
                r = sh(["cc"] + flags + ["-I", src, "-c", path, "-o", obj + ".tmp"])
                if r.returncode:
                    raise RuntimeError(f"cc {path}:\n{r.stderr}")
                os.replace(obj + ".tmp", obj)
            objs.append(obj)
    exe = os.path.join(lib, name + "_run")
    r = sh(["cc"] + CFLAGS + ["-I", src, "-I", lib, "-o", exe, os.path.join(lib, name + ".c"),
                              os.path.join(lib, name + "_run.c")] + objs + ["-lpthread", "-lm"])
    if r.returncode:
        raise RuntimeError(f"cc {lib}/{name}.c:\n{r.stderr}")
    return exe


def compare(got_dir, want_dir, label, scale_tol=1e-5):
    """Every .npy of want_dir must be in got_dir with equal values (within scale_tol of the
    output's largest value, plus 1e-4 relative); returns the max abs diff."""
    worst = 0.0
    for f in sorted(os.listdir(want_dir)):
        if not f.endswith(".npy"):
            continue
        g = os.path.join(got_dir, f)
        if not os.path.exists(g):
            raise AssertionError(f"{label}: the library wrote no {f} (anvil run did)")
        a, b = np.load(g), np.load(os.path.join(want_dir, f))
        if a.shape != b.shape or a.dtype != b.dtype:
            raise AssertionError(f"{label}: {f}: {a.dtype}{a.shape} vs anvil's {b.dtype}{b.shape}")
        if a.size == 0:
            continue
        if a.dtype.kind == "f":
            # infinities and NaNs must sit at the same places; the rest is compared in tolerance
            fin = np.isfinite(b)
            if not np.array_equal(a[~fin], b[~fin], equal_nan=True):
                raise AssertionError(f"{label}: {f}: infinities or NaNs differ")
            a, b = a[fin], b[fin]
            if a.size == 0:
                continue
            scale = float(np.max(np.abs(b)))
            diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
            tol = scale_tol * max(scale, 1.0) + 1e-4 * np.abs(b.astype(np.float64))
            if not np.all(diff <= tol):
                raise AssertionError(f"{label}: {f}: max abs diff {diff.max():.3g} "
                                     f"(scale {scale:.3g})")
            worst = max(worst, float(diff.max()))
        elif not np.array_equal(a, b):
            raise AssertionError(f"{label}: {f}: values differ")
    return worst


# --precision P: every compile and every `anvil run` reference computes in P, so the library must
# reproduce anvil's own bf16 arithmetic (the same kernels), not fp32's.
PRECISION = []


def run_anvil(anvil, model, inputs, out, *extra):
    # the plan `anvil compile` makes: a CPU may run other kernels where they cannot be emitted
    # (AMX, oneDNN), whose bf16 rounding the library would not reproduce
    cmd = [anvil, "run", model, "-o", out, "--no-db", "--emittable-only", *PRECISION, *extra]
    for k, v in inputs.items():
        cmd += ["-i", f"{k}={v}"]
    r = sh(cmd)
    if r.returncode:
        raise RuntimeError(f"anvil run {model}: {r.stderr}")


def emit_and_check(anvil, model, inputs, work, label, cache, extra_refs=()):
    """Compiles, builds and compares one model; returns (status, detail)."""
    lib = os.path.join(work, "lib")
    shutil.rmtree(lib, ignore_errors=True)
    cmd = [anvil, "compile", model, "-o", lib, "--name", "net", "--no-db", *PRECISION]
    for k, v in inputs.items():
        cmd += ["-i", f"{k}={v}"]
    r = sh(cmd)
    if r.returncode == 13:
        if "cannot be emitted" not in r.stderr and "control flow" not in r.stderr and \
                "UNSUPPORTED" not in r.stderr:
            raise AssertionError(f"{label}: exit 13 without a clear message: {r.stderr}")
        return "unsupported", r.stderr.strip().splitlines()
    if r.returncode:
        raise AssertionError(f"{label}: anvil compile failed ({r.returncode}): {r.stderr}")
    exe = build(lib, "net", cache)
    got = os.path.join(work, "got")
    shutil.rmtree(got, ignore_errors=True)
    cmd = [exe, "-o", got, "--weights", os.path.join(lib, "net.weights")]
    for k, v in inputs.items():
        cmd += ["-i", f"{k}={v}"]
    r = sh(cmd)
    if r.returncode:
        raise AssertionError(f"{label}: net_run failed: {r.stderr}")
    want = os.path.join(work, "want")
    shutil.rmtree(want, ignore_errors=True)
    run_anvil(anvil, model, inputs, want)
    worst = compare(got, want, label)
    for i, ref in enumerate(extra_refs):
        ref_dir = os.path.join(work, f"ref{i}")
        shutil.rmtree(ref_dir, ignore_errors=True)
        run_anvil(anvil, model, inputs, ref_dir, *ref)
        # another graph (opt-level 0) rounds other products to bf16: bf16's tolerance there
        worst = max(worst, compare(got, ref_dir, f"{label} vs anvil run {' '.join(ref)}",
                                   3e-2 if "bf16" in PRECISION or "fp16" in PRECISION
                                   else 1e-5))
    return "ok", worst


def case_inputs(case, work):
    """The case's test_data_set_0 inputs as .npy files, by input name."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load(os.path.join(case, "model.onnx"), load_external_data=False)
    init = {t.name for t in m.graph.initializer}
    names = [i.name for i in m.graph.input if i.name not in init]
    data = os.path.join(case, "test_data_set_0")
    inputs = {}
    for k, name in enumerate(names):
        pb = os.path.join(data, f"input_{k}.pb")
        if not os.path.exists(pb):
            return None
        t = onnx.TensorProto()
        with open(pb, "rb") as f:
            t.ParseFromString(f.read())
        path = os.path.join(work, f"in{k}.npy")
        np.save(path, numpy_helper.to_array(t))
        inputs[name] = path
    return inputs


def find_cases(dirs):
    for d in dirs:
        if os.path.exists(os.path.join(d, "model.onnx")):
            yield d
            continue
        for sub in sorted(os.listdir(d)):
            p = os.path.join(d, sub)
            if os.path.isdir(p):
                yield from find_cases([p])


def cmd_cases(a):
    cache = os.path.join(a.work, "objcache")
    os.makedirs(cache, exist_ok=True)
    ok, unsupported, reasons, failures = 0, 0, {}, []
    for case in find_cases(a.dirs):
        label = os.path.relpath(case)
        work = os.path.join(a.work, "case")
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        inputs = case_inputs(case, work)
        if inputs is None:
            continue
        try:
            status, detail = emit_and_check(a.anvil, os.path.join(case, "model.onnx"), inputs,
                                            work, label, cache)
        except (AssertionError, RuntimeError) as e:
            failures.append(str(e).strip())
            continue
        if status == "ok":
            ok += 1
            if a.verbose:
                print(f"ok {label} (max diff {detail:.3g})")
        else:
            unsupported += 1
            for line in detail:
                if "): " in line:
                    why = line.split("): ", 1)[1]
                    reasons[why] = reasons.get(why, 0) + 1
    print(f"emitted and equal to anvil run: {ok}; not emittable: {unsupported}")
    for why, n in sorted(reasons.items(), key=lambda kv: -kv[1])[:15]:
        print(f"  {n:4d}  {why}")
    for f in failures:
        print(f"FAIL: {f}")
    if ok == 0:
        print("FAIL: no case could be emitted")
    return 1 if failures or ok == 0 else 0


def random_graph(rng, path):
    """A random chain/DAG of MatMul, Gemm, Add, Relu, Sigmoid, Tanh, Mul on [M, K] tensors."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    m = int(rng.integers(1, 40))
    width = int(rng.integers(1, 70))
    nodes, inits, vals = [], [], [("x", width)]
    for i in range(int(rng.integers(1, 7))):
        name, w = vals[int(rng.integers(0, len(vals)))]
        op = rng.choice(["MatMul", "Gemm", "GemmT", "Add", "Relu", "Mul", "AddConst"])
        out = f"v{i}"
        if op in ("MatMul", "Gemm", "GemmT"):
            n = int(rng.integers(1, 70))
            wt = rng.standard_normal((n, w) if op == "GemmT" else (w, n)).astype(np.float32)
            inits.append(numpy_helper.from_array(wt, f"w{i}"))
            if op == "MatMul":
                nodes.append(helper.make_node("MatMul", [name, f"w{i}"], [out]))
            else:
                b = rng.standard_normal((n,)).astype(np.float32)
                inits.append(numpy_helper.from_array(b, f"b{i}"))
                nodes.append(helper.make_node("Gemm", [name, f"w{i}", f"b{i}"], [out],
                                              transB=int(op == "GemmT"),
                                              alpha=float(rng.choice([1.0, 0.5])),
                                              beta=float(rng.choice([1.0, 2.0]))))
            vals.append((out, n))
        elif op in ("Relu",):
            nodes.append(helper.make_node(op, [name], [out]))
            vals.append((out, w))
        else:
            same = [v for v in vals if v[1] == w]
            other = same[int(rng.integers(0, len(same)))][0]
            if op == "AddConst":
                c = rng.standard_normal((w,)).astype(np.float32)
                inits.append(numpy_helper.from_array(c, f"c{i}"))
                other = f"c{i}"
                op = "Add"
            nodes.append(helper.make_node(op, [name, other], [out]))
            vals.append((out, w))
    outs = {vals[-1][0]} | {vals[int(rng.integers(1, len(vals)))][0]} if len(vals) > 1 else set()
    if not outs:
        return False
    g = helper.make_graph(nodes, "random", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                          [m, width])],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
                           for o in sorted(outs)], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    np.save(path + ".x.npy", rng.standard_normal((m, width)).astype(np.float32))
    return True


def random_cnn(rng, path):
    """A random CNN: Conv (1x1 to 5x5, strides, pads, dilation, groups, depthwise, with and
    without bias), BatchNormalization, Relu, Clip, residual Add, MaxPool, AveragePool and
    GlobalAveragePool on NCHW tensors, so the conv family's variants (GEMM, Winograd, direct,
    depthwise, channels-last chains) and their fused epilogues all get drawn."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    n, c = int(rng.integers(1, 3)), int(rng.choice([1, 3, 4, 8, 16]))
    h, w = int(rng.integers(6, 26)), int(rng.integers(6, 26))
    nodes, inits, vals = [], [], [("x", c, h, w)]
    for i in range(int(rng.integers(1, 7))):
        name, vc, vh, vw = vals[-1] if rng.random() < 0.7 else vals[int(rng.integers(0, len(vals)))]
        op = rng.choice(["Conv", "Conv", "Conv", "Relu", "Clip", "Add", "MaxPool", "AveragePool",
                         "BatchNormalization"])
        out = f"v{i}"
        if op == "Conv":
            k = int(rng.choice([1, 3, 3, 5]))
            stride = int(rng.choice([1, 1, 2]))
            dil = int(rng.choice([1, 1, 1, 2])) if k > 1 else 1
            pad = int(rng.integers(0, k // 2 * dil + 1))
            kind = rng.choice(["dense", "dense", "depthwise", "grouped"])
            if kind == "depthwise":
                group, m = vc, vc
            elif kind == "grouped" and vc % 2 == 0:
                group, m = 2, 2 * int(rng.integers(1, 9))
            else:
                group, m = 1, int(rng.choice([1, 4, 8, 16, 24, 32]))
            oh = (vh + 2 * pad - dil * (k - 1) - 1) // stride + 1
            ow = (vw + 2 * pad - dil * (k - 1) - 1) // stride + 1
            if oh < 1 or ow < 1:
                continue
            wt = (rng.standard_normal((m, vc // group, k, k)) * 0.3).astype(np.float32)
            inits.append(numpy_helper.from_array(wt, f"w{i}"))
            ins = [name, f"w{i}"]
            if rng.random() < 0.7:
                inits.append(numpy_helper.from_array(rng.standard_normal(m).astype(np.float32),
                                                     f"b{i}"))
                ins.append(f"b{i}")
            nodes.append(helper.make_node("Conv", ins, [out], kernel_shape=[k, k],
                                          strides=[stride, stride], pads=[pad] * 4,
                                          dilations=[dil, dil], group=group))
            vals.append((out, m, oh, ow))
        elif op in ("MaxPool", "AveragePool"):
            k, stride = int(rng.choice([2, 3])), int(rng.choice([1, 2]))
            oh, ow = (vh - k) // stride + 1, (vw - k) // stride + 1
            if oh < 1 or ow < 1:
                continue
            nodes.append(helper.make_node(op, [name], [out], kernel_shape=[k, k],
                                          strides=[stride, stride]))
            vals.append((out, vc, oh, ow))
        elif op == "BatchNormalization":
            for t, v in (("scale", rng.uniform(0.5, 1.5, vc)), ("off", rng.standard_normal(vc)),
                         ("mean", rng.standard_normal(vc)), ("var", rng.uniform(0.5, 2.0, vc))):
                inits.append(numpy_helper.from_array(v.astype(np.float32), f"bn_{t}{i}"))
            nodes.append(helper.make_node(op, [name] + [f"bn_{t}{i}" for t in
                                                        ("scale", "off", "mean", "var")], [out]))
            vals.append((out, vc, vh, vw))
        elif op == "Add":
            same = [v for v in vals if v[1:] == (vc, vh, vw)]
            nodes.append(helper.make_node("Add", [name, same[int(rng.integers(0, len(same)))][0]],
                                          [out]))
            vals.append((out, vc, vh, vw))
        elif op == "Clip":
            for t, v in (("lo", 0.0), ("hi", 6.0)):
                inits.append(numpy_helper.from_array(np.array(v, np.float32), f"{t}{i}"))
            nodes.append(helper.make_node("Clip", [name, f"lo{i}", f"hi{i}"], [out]))
            vals.append((out, vc, vh, vw))
        else:
            nodes.append(helper.make_node(op, [name], [out]))
            vals.append((out, vc, vh, vw))
    if len(vals) < 2:
        return False
    last = vals[-1][0]
    if rng.random() < 0.3:
        nodes.append(helper.make_node("GlobalAveragePool", [last], ["gap"]))
        last = "gap"
    g = helper.make_graph(nodes, "random_cnn",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c, h, w])],
                          [helper.make_tensor_value_info(last, TensorProto.FLOAT, None)], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    np.save(path + ".x.npy", rng.standard_normal((n, c, h, w)).astype(np.float32))
    return True


def cmd_random(a):
    cache = os.path.join(a.work, "objcache")
    os.makedirs(cache, exist_ok=True)
    rng = np.random.default_rng(a.seed)
    ok = unsupported = bf16_libs = 0
    reasons = {}
    for i in range(a.n):
        work = os.path.join(a.work, "random")
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        path = os.path.join(work, "g.onnx")
        if not (random_cnn if i % 2 else random_graph)(rng, path):
            continue
        status, detail = emit_and_check(a.anvil, path, {"x": path + ".x.npy"}, work,
                                        f"random graph {i} (seed {a.seed})", cache,
                                        extra_refs=[("--opt-level", "0")])
        ok += status == "ok"
        unsupported += status != "ok"
        if status == "ok":
            with open(os.path.join(work, "lib", "net.c")) as f:
                bf16_libs += f"_avx512{PRECISION[1] if PRECISION else 'bf16'}" in f.read()
        if status != "ok":
            for line in detail:
                if "): " in line:
                    why = line.split("): ", 1)[1]
                    reasons[why] = reasons.get(why, 0) + 1
    print(f"random graphs: {ok} agree (opt-level 0, 1 and the library), {unsupported} not "
          f"emittable, 0 mismatches")
    fmt = PRECISION[1] if PRECISION else None
    if fmt in ("bf16", "fp16") and reduced_pays(a.anvil, fmt):
        print(f"graphs whose library runs {fmt} tiles: {bf16_libs}")
        if not bf16_libs:
            print(f"FAIL: --precision {fmt} emitted no {fmt} tile on a CPU where {fmt} "
                  "measures faster than fp32")
            return 1
    for why, k in sorted(reasons.items(), key=lambda kv: -kv[1])[:10]:
        print(f"  {k:4d}  {why}")
    return 0 if ok else 1


def reduced_pays(anvil, fmt):
    """Whether this CPU has fmt's instruction (AVX512_BF16, AVX512-FP16) and it measures faster
    than its fp32 FMA (anvil sysinfo's peaks): where it does not (a Xeon without AMX runs
    vdpbf16ps at half its FMA rate) anvil keeps fp32 under --precision fmt, by measurement, and
    there is nothing to see."""
    try:
        with open("/proc/cpuinfo") as f:
            if f" avx512_{fmt}" not in f.read():
                return False
    except OSError:
        return False
    r = subprocess.run([anvil, "sysinfo", "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        return False
    info = json.loads(r.stdout)
    return info[f"peak.{fmt}.gflops"] > 1.2 * info["peak.fp32.gflops"]


def cmd_make(a):
    """The user's path: make, cmake, embedded weights, and the runner's errors."""
    inputs = {}
    for spec in a.inputs:
        name, path = spec.split("=", 1)
        inputs[name] = path
    for embed in (False, True):
        lib = os.path.join(a.work, "make_embed" if embed else "make")
        shutil.rmtree(lib, ignore_errors=True)
        cmd = [a.anvil, "compile", a.model, "-o", lib, "--name", "demo", "--no-db"]
        cmd += ["--embed-weights"] if embed else []
        for k, v in inputs.items():
            cmd += ["-i", f"{k}={v}"]
        r = sh(cmd)
        assert r.returncode == 0, r.stderr
        r = sh(["make", "-C", lib, "-j2", "CFLAGS=-O2 -Werror"])
        assert r.returncode == 0, r.stdout + r.stderr
        want = os.path.join(a.work, "want")
        shutil.rmtree(want, ignore_errors=True)
        run_anvil(a.anvil, a.model, inputs, want)
        got = os.path.join(a.work, "got_make")
        shutil.rmtree(got, ignore_errors=True)
        cmd = [os.path.join(lib, "demo_run"), "-o", got]
        if embed:
            os.rename(os.path.join(lib, "demo.weights"), os.path.join(lib, "moved.weights"))
        for k, v in inputs.items():
            cmd += ["-i", f"{k}={v}"]
        r = sh(cmd)
        assert r.returncode == 0, r.stderr
        compare(got, want, f"make{' --embed-weights' if embed else ''}")
        r = sh([os.path.join(lib, "demo_run"), "--bench", "5"])
        assert r.returncode == 0 and "median" in r.stdout, r.stdout + r.stderr
    lib = os.path.join(a.work, "make")
    # a corrupt weights file and a wrong shape are refused with a message, never a crash
    bad = os.path.join(a.work, "bad.weights")
    with open(os.path.join(lib, "demo.weights"), "rb") as f:
        data = bytearray(f.read())
    data[-1] ^= 0xFF
    with open(bad, "wb") as f:
        f.write(data)
    r = sh([os.path.join(lib, "demo_run"), "--weights", bad, "--bench", "1"])
    assert r.returncode != 0 and "corrupt" in r.stderr, r.stderr
    with open(bad, "wb") as f:
        f.write(b"not weights")
    r = sh([os.path.join(lib, "demo_run"), "--weights", bad, "--bench", "1"])
    assert r.returncode != 0 and "weights" in r.stderr, r.stderr
    name = next(iter(inputs))
    wrong = os.path.join(a.work, "wrong.npy")
    np.save(wrong, np.zeros((1, 2, 3), np.float32))
    r = sh([os.path.join(lib, "demo_run"), "-i", f"{name}={wrong}", "-o", a.work])
    assert r.returncode != 0 and "shape" in r.stderr, r.stderr
    # CMake, out of tree
    build_dir = os.path.join(a.work, "cmake_build")
    shutil.rmtree(build_dir, ignore_errors=True)
    r = sh(["cmake", "-S", lib, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release"])
    assert r.returncode == 0, r.stdout + r.stderr
    r = sh(["cmake", "--build", build_dir, "-j2"])
    assert r.returncode == 0, r.stdout + r.stderr
    r = sh([os.path.join(build_dir, "demo_run"), "--weights", os.path.join(lib, "demo.weights"),
            "--bench", "3"])
    assert r.returncode == 0 and "median" in r.stdout, r.stdout + r.stderr
    print("make, cmake, --embed-weights and the runner's errors: ok")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("anvil")
    ap.add_argument("work")
    ap.add_argument("--precision", help="fp32, bf16, fp16 or auto: what every compile and run "
                    "uses")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("cases")
    c.add_argument("dirs", nargs="+")
    c.add_argument("-v", "--verbose", action="store_true")
    r = sub.add_parser("random")
    r.add_argument("n", type=int)
    r.add_argument("--seed", type=int, default=1)
    m = sub.add_parser("make")
    m.add_argument("model")
    m.add_argument("inputs", nargs="+", help="NAME=FILE.npy")
    a = ap.parse_args()
    if a.precision:
        PRECISION.extend(["--precision", a.precision])
    os.makedirs(a.work, exist_ok=True)
    return {"cases": cmd_cases, "random": cmd_random, "make": cmd_make}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
