#!/usr/bin/env python3
"""Adds rows to the op table (src/ir/ops.def), keeping it sorted by ONNX name.

    scripts/add_op.py OnnxName [OnnxName ...]

Each row becomes OP(ONNXNAME, "OnnxName", onnxname): enum IR_OP_ONNXNAME, implementation
`const op_impl op_impl_onnxname` (define it in a family file under src/ops/ before adding the row:
a row without its op_impl is a link error). Holds a lock while editing so that several people
adding ops at once do not lose each other's rows. Existing rows are left alone.
"""
import fcntl
import os
import re
import sys

ROW = re.compile(r'^OP\(([A-Z0-9_]+), "([A-Za-z0-9]+)", ([a-z0-9_]+)\)$')


def main(names):
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "ir", "ops.def")
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with open(path) as f:
            lines = f.read().splitlines()
        head = [l for l in lines if not ROW.match(l)]
        rows = {ROW.match(l).group(2): l for l in lines if ROW.match(l)}
        for name in names:
            if not re.fullmatch(r"[A-Z][A-Za-z0-9]*", name):
                sys.exit(f"add_op.py: '{name}' is not an ONNX op name")
            rows.setdefault(name, f'OP({name.upper()}, "{name}", {name.lower()})')
        # ir_op_lookup binary-searches with strcmp: sort by bytes, not case-folded
        body = [rows[k] for k in sorted(rows, key=lambda s: s.encode())]
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write("\n".join(head + body) + "\n")
        os.replace(tmp, path)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
