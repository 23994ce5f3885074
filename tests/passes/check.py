"""Checks the graph passes on the cases gen_cases.py wrote.

    check.py ANVIL RUN_CASES CASES_DIR

For every case: `ANVIL dump --opt-level 1` must show exactly the nodes of expect.txt (op type and
fused[...] annotation, in order), and so must the ONNX model `dump --opt-level 1 --onnx` writes;
the model must match ONNX Runtime's outputs with the passes off (--opt-level 0) and on
(--opt-level 1), on 1 and 2 threads; and for layout_mobilenet, that forced
variants pin the layout of their node (check_forces). Exit status 0 only if all hold.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

NODE = re.compile(r"^  #\d+ \S+ = ([\w.]+)\(")
FUSED = re.compile(r" fused\[([^\]]*)\]$")


def rewritten(anvil, model, env=None):
    out = subprocess.run([anvil, "dump", model, "--opt-level", "1"], check=True,
                         capture_output=True, text=True, env=env).stdout
    got = []
    for line in out.splitlines():
        m = NODE.match(line)
        if m:
            f = FUSED.search(line)
            got.append(f"{m.group(1)} fused[{f.group(1)}]" if f else f"{m.group(1)} -")
    return got


def exported(anvil, model, env, tmp):
    """The rewritten graph as `dump --opt-level 1 --onnx` writes it: "<op> <fused or ->" per node,
    fused nodes and anvil's ops read back from the ai.anvil domain; and the model checks as
    protobuf (onnx.load) with its initializers present."""
    import onnx
    out = os.path.join(tmp, "exported.onnx")
    subprocess.run([anvil, "dump", model, "--opt-level", "1", "--onnx", out], check=True,
                   capture_output=True, env=env)
    m = onnx.load(out)
    names = {t.name for t in m.graph.initializer}
    got = []
    for n in m.graph.node:
        fused = [a.s.decode() for a in n.attribute if a.name == "fused"]
        # in ai.anvil: anvil's own ops, and standard ops with a fused epilogue
        own = n.domain == "ai.anvil" and not onnx.defs.has(n.op_type)
        op = "anvil." + n.op_type if own else n.op_type
        got.append(f"{op} fused[{fused[0]}]" if fused else f"{op} -")
        for i in n.input:
            assert not i or i in names or any(i in x.output for x in m.graph.node) or \
                any(i == v.name for v in m.graph.input), f"{n.name} reads '{i}', defined nowhere"
    return got


def traced_ops(anvil, model, env, *args):
    """{node: op} of one profiled run of `anvil bench MODEL ARGS` with environment env added."""
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "trace.json")
        subprocess.run([anvil, "bench", model, "--iters", "1", "--warmup", "0", "--profile", trace,
                        *args], check=True, capture_output=True, env={**os.environ, **env})
        with open(trace) as f:
            return {e["name"]: e["args"]["op"] for e in json.load(f)["traceEvents"]
                    if e.get("cat") == "op"}


def check_forces(anvil, model):
    """The layout pass and forced variants: a node forced onto a Conv variant stays Conv and splits
    its chain, whose parts are judged apart; one forced onto a channels-last variant is turned even where the
    pass is off (ANVIL_LAYOUT=nchw). Returns the number of failures."""
    bad = 0
    ops = traced_ops(anvil, model, {}, "--variant", "n_conv_12=conv_im2col_gemm")
    # n_conv_4 is then alone, with no depthwise conv, so it stays Conv; the rest holds two
    if (ops.get("n_conv_12") != "Conv" or ops.get("n_conv_4") != "Conv" or
            ops.get("n_conv_20") != "anvil.ConvNhwc"):
        print(f"FAIL layout_mobilenet: a Conv variant forced on n_conv_12: {ops}")
        bad += 1
    ops = traced_ops(anvil, model, {"ANVIL_LAYOUT": "nchw"}, "--variant", "n_conv_12=convnhwc_gemm")
    if ops.get("n_conv_12") != "anvil.ConvNhwc" or ops.get("n_conv_4") != "Conv":
        print(f"FAIL layout_mobilenet: convnhwc_gemm forced on n_conv_12 with ANVIL_LAYOUT=nchw: {ops}")
        bad += 1
    return bad


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    anvil, run_cases, root = sys.argv[1:]
    bad = 0
    names = sorted(n for n in os.listdir(root) if os.path.isfile(os.path.join(root, n, "model.onnx")))
    if not names:
        sys.exit(f"no cases under {root}")
    for name in names:
        before = bad
        d = os.path.join(root, name)
        with open(os.path.join(d, "expect.txt")) as f:
            want = [l.strip() for l in f if l.strip()]
        # env.txt (optional): KEY=VALUE lines the case runs with (a measured rewrite's override)
        env = dict(os.environ)
        if os.path.exists(os.path.join(d, "env.txt")):
            with open(os.path.join(d, "env.txt")) as f:
                env.update(l.strip().split("=", 1) for l in f if "=" in l)
        got = rewritten(anvil, os.path.join(d, "model.onnx"), env)
        if got != want:
            bad += 1
            print(f"FAIL {name}: rewrite\n  want {want}\n  got  {got}")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            onnx_got = exported(anvil, os.path.join(d, "model.onnx"), env, tmp)
        if onnx_got != want:
            bad += 1
            print(f"FAIL {name}: dump --onnx\n  want {want}\n  got  {onnx_got}")
            continue
        for level in ("0", "1"):
            for threads in ("1", "2"):
                r = subprocess.run([run_cases, "--opt-level", level, "--threads", threads, "--quiet",
                                    d], capture_output=True, text=True, env=env)
                if r.returncode != 0:
                    bad += 1
                    print(f"FAIL {name}: opt-level {level}, {threads} threads vs ONNX Runtime:\n"
                          f"{r.stdout}{r.stderr}")
        if name == "layout_mobilenet":
            bad += check_forces(anvil, os.path.join(d, "model.onnx"))
        print(f"{'FAIL' if bad > before else 'PASS'} {name}")
    print(f"{len(names)} cases, {bad} failures")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
