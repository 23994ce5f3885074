#!/usr/bin/env python3
"""Rewrites tests/onnx/expected_failures.tsv from a fresh conformance run, and prints the numbers
and the failures grouped by reason (the summary tests/onnx/README.md shows).

Usage (with the project's venv, after `make -C BUILD anvil_run_cases`):
    .venv/bin/python tests/onnx/update_expected.py BUILD [NODE_DIR]

It runs BUILD/tests/anvil_run_cases over the node suite with excluded.tsv (and no expected-failures
list), then writes one line per failing test: "name<TAB>reason<TAB>message", where reason is
    unsupported op: X[, Y]   the model uses operators anvil does not implement
    opset N                  the model's default-domain opset is outside anvil's range
    unsupported: <what>      an implemented op refuses this case (dtype, attribute, version)
    bug: untyped subgraph... a value reached an op with dtype UNDEFINED (subgraph typing)
    tolerance                outputs differ numerically beyond the suite's tolerances
    bug: <first words>       any other failure (wrong shape or dtype, a failing run)
The message is the runner's, shortened. Review the file before committing it: a "bug" line is a
defect to fix, not a state to record."""

import collections
import os
import re
import subprocess
import sys

import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_NODE_DIR = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")


def reason_of(tag, msg):
    m = re.search(r"unsupported operators: (.*?); anvil runs", msg)
    if m:
        ops = re.sub(r" \(opset \d+, \d+ nodes?\)", "", m.group(1))
        return "unsupported op: " + ops
    m = re.search(r"opset (\d+) is (older|newer) than anvil supports", msg)
    if m:
        return f"opset {m.group(1)}"
    if "dtype UNDEFINED" in msg:
        # a value whose type nobody inferred: the untyped inputs of If / Loop / Scan bodies
        return "bug: untyped subgraph value (dtype UNDEFINED)"
    if tag == "UNSUPPORTED":
        m = re.search(r"\): (.*)", msg)
        what = (m.group(1) if m else msg).split(";")[0]
        return "unsupported: " + " ".join(what.split()[:8])
    if "elements differ (rtol" in msg and "dtype" not in msg and "shape" not in msg:
        return "tolerance"
    return "bug: " + " ".join(msg.split()[:6])


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    build = sys.argv[1]
    node_dir = sys.argv[2] if len(sys.argv) > 2 else DEFAULT_NODE_DIR
    runner = os.path.join(build, "tests", "anvil_run_cases")
    cmd = [runner, "--quiet", "--threads", "1", "--exclude", os.path.join(HERE, "excluded.tsv"),
           node_dir]
    out = subprocess.run(cmd, capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        m = re.match(r"(FAIL|UNSUPPORTED) (\S+): (.*)", line)
        if not m:
            continue
        tag, name, msg = m.groups()
        msg = msg.replace(node_dir + "/", "").replace("\t", " ")
        rows.append((name, reason_of(tag, msg), msg[:300]))
    counts = re.search(r"(\d+) passed, (\d+) failed", out)
    excluded = re.search(r"(\d+) excluded", out)
    passed, failed = int(counts.group(1)), int(counts.group(2))
    with open(os.path.join(HERE, "expected_failures.tsv"), "w") as fh:
        fh.write("# Written by tests/onnx/update_expected.py: the node tests (outside excluded.tsv) "
                 "that anvil fails today.\n# onnx.conformance fails when a test not listed here "
                 "fails or a listed one passes.\n# name\treason\tmessage\n")
        for r in sorted(rows):
            fh.write("\t".join(r) + "\n")
    run = passed + failed
    print(f"{passed} passed, {failed} failed of {run} run ({100.0 * passed / run:.1f}% passing), "
          f"{excluded.group(1) if excluded else 0} excluded")
    groups = collections.Counter(r[1] for r in rows)
    for reason, n in sorted(groups.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"| {reason} | {n} |")


if __name__ == "__main__":
    main()
