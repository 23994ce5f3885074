#!/usr/bin/env python3
"""Adds rows to the op table (src/ir/ops.def), keeping it sorted by ONNX name.

    scripts/add_op.py FAMILY/FILE.c OnnxName [OnnxName ...]

Each row becomes OP(ONNXNAME, "OnnxName", onnxname, "FAMILY/FILE.c"): enum IR_OP_ONNXNAME and
implementation `const op_impl op_impl_onnxname`, which you define in src/ops/FAMILY/FILE.c (a row
without its op_impl is a link error, and the test ops.table_files fails if the op is defined in
another file than its row names). Holds a lock while editing so that several people adding ops at
once do not lose each other's rows. Existing rows are left alone.
"""
import fcntl
import os
import re
import sys

ROW = re.compile(r'^OP\(([A-Z0-9_]+), "([A-Za-z0-9.]+)", ([a-z0-9_]+), "([a-z0-9_/]+\.c)"\)$')


def main(file, names):
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    if not re.fullmatch(r"[a-z0-9_]+/[a-z0-9_]+\.c", file):
        sys.exit(f"add_op.py: '{file}' is not FAMILY/FILE.c (a file under src/ops/, e.g. math/unary_math.c)")
    if not os.path.isdir(os.path.join(root, "src", "ops", os.path.dirname(file))):
        sys.exit(f"add_op.py: src/ops/{os.path.dirname(file)}/ does not exist; families are the folders of src/ops/")
    path = os.path.join(root, "src", "ir", "ops.def")
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with open(path) as f:
            lines = f.read().splitlines()
        head = [l for l in lines if not ROW.match(l)]
        rows = {ROW.match(l).group(2): l for l in lines if ROW.match(l)}
        for name in names:
            if not re.fullmatch(r"[A-Z][A-Za-z0-9]*", name):
                sys.exit(f"add_op.py: '{name}' is not an ONNX op name")
            rows.setdefault(name, f'OP({name.upper()}, "{name}", {name.lower()}, "{file}")')
        # ir_op_lookup binary-searches with strcmp: sort by bytes, not case-folded
        body = [rows[k] for k in sorted(rows, key=lambda s: s.encode())]
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write("\n".join(head + body) + "\n")
        os.replace(tmp, path)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2:])
