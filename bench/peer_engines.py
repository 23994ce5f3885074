"""The peers of bench/peer.py and the check of every engine's outputs against ORT's.

peer.py times each round in a fresh child process, itself in child mode (--child-ort, --child-ov,
--child-twin, --child-torch); what those children run is here: one ONNX Runtime, OpenVINO or
PyTorch measurement, printed as JSON, and the building of a torch twin. So is what the parent
needs around them: run_child (a child's peak RSS by wait4) and error_line (a child's failure as a
table note), and the comparison of outputs with ORT's on test_data_set_0: within the zoo's
tolerance (mismatch), or as an error relative to each output's scale (max_rel_error, for bf16).
peer.py keeps the command line, the models, tuning, the rounds and the tables; run that, not
this.
"""

import importlib.util
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# The zoo's tolerance (tests/models/gen_zoo.py writes it as tolerance.txt): |y - ORT| <= RTOL *
# |ORT| + ATOL_SCALE * max|ORT|, per output.
RTOL, ATOL_SCALE = 1e-3, 1e-4


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


# ---- child mode: one ONNX Runtime, OpenVINO or torch measurement -------------------------------


def save_outputs(path, arrays):
    """Saves a first run's outputs to path (when given) as out_0, out_1, ... in graph order, for
    the parent's comparison with test_data_set_0; only the first round's, when path exists
    already nothing is written."""
    import numpy as np
    if path and not os.path.exists(path):
        np.savez(path, **{f"out_{i}": np.asarray(a) for i, a in enumerate(arrays)})


def ort_child(model, inputs_npz, threads, warmup, runs, outputs_npz=None):
    """One ONNX Runtime measurement; the first run's outputs go to outputs_npz when given."""
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
    first = sess.run(None, feeds)
    first_ms = (time.perf_counter() - t0) * 1e3
    save_outputs(outputs_npz, first)
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


def ov_child(model, inputs_npz, threads, warmup, runs, outputs_npz, precision="f32"):
    """One OpenVINO measurement: CPU plugin, T threads, latency mode; like ort_child.

    precision "f32" sets INFERENCE_PRECISION_HINT=f32; "default" leaves the hint out, so the
    plugin computes in its own default precision (bf16 on CPUs with AVX512-BF16 or AMX). The
    precision it chose is printed with the timings. The outputs of the first run go to
    outputs_npz (as out_0, out_1, ... in graph order) unless that file exists already, for the
    parent's comparison with ORT."""
    import numpy as np
    import openvino as ov
    base = vm_hwm_kib()
    feeds = dict(np.load(inputs_npz))
    # No pinning: neither anvil nor ORT (with its thread count set) pins threads, and on a shared
    # machine a thread pinned to a busy core cannot move away from the noise.
    config = {"INFERENCE_NUM_THREADS": str(threads), "PERFORMANCE_HINT": "LATENCY",
              "NUM_STREAMS": "1", "ENABLE_CPU_PINNING": "NO"}
    if precision == "f32":
        config["INFERENCE_PRECISION_HINT"] = "f32"
    t0 = time.perf_counter()
    compiled = ov.Core().compile_model(model, "CPU", config)
    req = compiled.create_infer_request()
    load_ms = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    req.infer(feeds)
    first_ms = (time.perf_counter() - t0) * 1e3
    save_outputs(outputs_npz, [req.get_output_tensor(i).data
                               for i in range(len(compiled.outputs))])
    for _ in range(warmup):
        req.infer(feeds)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        req.infer(feeds)
        times.append((time.perf_counter() - t0) * 1e3)
    used = compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name()
    print(json.dumps({"median": statistics.median(times), "p90": percentile(times, 0.9),
                      "min": min(times), "load_ms": load_ms, "first_run_ms": first_ms,
                      "base_rss_kib": base, "precision": used}))
    return 0


def ov_status():
    """None when OpenVINO can run here, else why not (for the table)."""
    if importlib.util.find_spec("openvino") is None:
        return "openvino not installed (ANVIL_CORPUS=1 scripts/setup.sh): skipped"
    return None


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


# ---- running a child ---------------------------------------------------------------------------


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


def error_line(text, rc):
    """The last line of a child's stderr, shortened to what matters in a table cell."""
    lines = [ln for ln in text.strip().splitlines() if not re.match(r"run '.*' for usage", ln)]
    msg = (lines or [f"exit status {rc}"])[-1]
    if "unsupported operators:" in msg:
        ops = msg.split("unsupported operators:", 1)[1].split(";", 1)[0]
        return f"unsupported {', '.join(re.findall(r'([A-Za-z0-9_]+) [(]opset', ops))}"
    # "anvil: error: ", "anvil tune: ": the note names the engine itself.
    return re.sub(r"^anvil( [a-z]+)?: (error: )?", "", msg)[:160]


def short_error(engine, text, rc):
    return f"{engine}: {error_line(text, rc)}"


# ---- outputs against ORT's ---------------------------------------------------------------------


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


def load_outputs(case):
    """The expected outputs of test_data_set_0 (ORT's) as [(name, array)], in graph order."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    ddir = os.path.join(case, "test_data_set_0")
    outs = []
    while os.path.exists(os.path.join(ddir, f"output_{len(outs)}.pb")):
        t = onnx.TensorProto()
        with open(os.path.join(ddir, f"output_{len(outs)}.pb"), "rb") as f:
            t.ParseFromString(f.read())
        outs.append((t.name, np.asarray(numpy_helper.to_array(t))))
    return outs


def mismatch(expected, got):
    """None when every output in got matches ORT's (expected) within the zoo tolerance, else
    what differs first: a count, a shape, or how many elements are off and by how much."""
    import numpy as np
    if len(got) != len(expected):
        return f"{len(got)} outputs, ORT has {len(expected)}"
    for (name, e), g in zip(expected, got):
        g = np.asarray(g)
        if g.shape != e.shape:
            return f"{name}: shape {list(g.shape)}, ORT {list(e.shape)}"
        if e.dtype.kind not in "fc":
            bad = int(np.count_nonzero(g != e))
            if bad:
                return f"{name}: {bad} of {e.size} values differ"
            continue
        e64, g64 = e.astype(np.float64), g.astype(np.float64)
        scale = float(np.max(np.abs(e64))) if e.size else 0.0
        err = np.abs(g64 - e64)
        bad = ~(err <= RTOL * np.abs(e64) + ATOL_SCALE * scale)  # NaN is bad too
        if bad.any():
            nan = int(np.count_nonzero(np.isnan(g64)))
            worst = float(np.nanmax(err)) if nan < err.size else float("nan")
            return (f"{name}: {int(bad.sum())} of {e.size} off, max|err| {worst:.2g} = "
                    f"{worst / (scale or 1.0):.1e} of max|y| {scale:.3g}"
                    + (f", {nan} NaN" if nan else ""))
    return None


def max_rel_error(expected, got):
    """(error, None) where error is the worst over outputs of max|y - y_ref| / max|y_ref|, the
    error relative to each output's scale (NaN when an output has one), or (None, why) when the
    outputs cannot be compared: another count or shape."""
    import numpy as np
    if len(got) != len(expected):
        return None, f"{len(got)} outputs, ORT has {len(expected)}"
    worst = 0.0
    for (name, e), g in zip(expected, got):
        g = np.asarray(g)
        if g.shape != e.shape:
            return None, f"{name}: shape {list(g.shape)}, ORT {list(e.shape)}"
        if not e.size:
            continue
        e64, g64 = e.astype(np.float64), g.astype(np.float64)
        diff = float(np.max(np.abs(g64 - e64)))  # NaN when g has one
        scale = float(np.max(np.abs(e64)))
        err = diff / scale if scale else (0.0 if diff == 0 else math.inf)
        if math.isnan(err):
            return math.nan, None
        worst = max(worst, err)
    return worst, None


def anvil_outputs(cmd, timeout):
    """Runs `anvil run ... -o DIR` (cmd) and reads back the outputs it lists on stdout
    ('NAME -> PATH DTYPE [DIMS]', in graph order); returns (arrays, error)."""
    import numpy as np
    rc, out, err, _ = run_child(cmd, timeout)
    if rc != 0:
        return None, error_line(err, rc)
    paths = [m.group(1) for m in (re.match(r".* -> (\S+\.npy) ", ln) for ln in out.splitlines())
             if m]
    try:
        return [np.load(p) for p in paths], None
    except (OSError, ValueError) as e:
        return None, f"unreadable output ({type(e).__name__}: {str(e)[:80]})"
