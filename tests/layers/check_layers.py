#!/usr/bin/env python3
"""Checks that calls between anvil's layers only go down (ARCHITECTURE.md, "what each may call").

    check_layers.py OBJECT_FILE...

The objects are the libraries' and the anvil tool's own (CMake's $<TARGET_OBJECTS:...>). Each
belongs to the layer named by its folder under src/ (the generated ONNX parser counts as onnx);
the tool's (tools/*.c) are the layer "tools". For every symbol an object uses, `nm` says which
object defines it; a use of a layer the user may not call is printed as
`user.o -> symbol (defined in layer/file)`. Exits 1 if there is any. A row's entry "layer/file"
(e.g. "runtime/infer.c") allows that one file of a layer; a row keyed "layer/file" holds for
that file instead of its layer's row.
"""
import os
import re
import subprocess
import sys

MAY_CALL = {
    "core": {"core"},
    "ir": {"ir", "core"},
    "ops": {"ops", "ir", "core"},
    "onnx": {"onnx", "ir", "core"},
    "kernels": {"kernels", "ops", "ir", "core"},
    "passes": {"passes", "ops", "ir", "core"},
    "tune": {"tune", "kernels", "ops", "ir", "core"},
    "runtime": {"runtime", "tune", "kernels", "passes", "ops", "ir", "core"},
    # the training graph: built on the IR with the ops' inference (runtime/infer.c)
    "autodiff": {"autodiff", "runtime/infer.c", "ops", "ir", "core"},
    # measured selection's drivers: offline tuning, the in-model check, timing sessions
    "autotune": {"autotune", "runtime", "tune", "kernels", "passes", "ops", "ir", "core"},
    # training sessions: the training graph (autodiff) run as runtime sessions, tuned offline
    # (autotune); export writes ONNX
    "train": {"train", "autodiff", "autotune", "runtime", "tune", "onnx", "ir", "core"},
    # anvil compile: a session's plan written out as C
    "emit": {"emit", "runtime", "tune", "kernels", "ops", "ir", "core"},
    "api": {"api", "train", "autotune", "emit", "runtime", "tune", "kernels", "passes", "onnx",
            "ops", "ir", "core"},
    # loading a model: in the loader library, which holds no more than these (CMakeLists.txt)
    "api/model.c": {"api/env.c", "onnx", "runtime/infer.c", "ops", "ir", "core"},
    # the anvil CLI: the public API, src/api/api.h's internal API, and core's utilities
    "tools": {"tools", "api", "core"},
}


def layer_of(obj):
    path = obj.replace(os.sep, "/")
    if "/onnx_proto/" in path:
        return "onnx", os.path.basename(path)
    m = re.search(r"/src/([a-z]+)/(.+?)\.o(bj)?$", path)
    if m:
        return m.group(1), m.group(2)
    m = re.search(r"\.dir/tools/([^/]+?)\.o(bj)?$", path)
    return ("tools", m.group(1)) if m else (None, None)


def symbols(obj):
    out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            used.add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDRBCV":
            defined.add(parts[2])
    return defined, used


def main(argv):
    # CMake may hand an object list as one ';'-separated argument
    objects = [o for a in argv[1:] for o in a.split(";") if o]
    if not objects:
        sys.exit(__doc__)
    owner, uses = {}, {}
    for obj in objects:
        layer, name = layer_of(obj)
        if layer is None:
            continue
        if layer not in MAY_CALL:
            print(f"{obj}: folder src/{layer}/ has no row in check_layers.py's MAY_CALL")
            return 1
        defined, used = symbols(obj)
        for s in defined:
            owner[s] = (layer, name)
        uses[(layer, name)] = used
    bad = 0
    for (layer, name), used in sorted(uses.items()):
        row = MAY_CALL.get(f"{layer}/{name}", MAY_CALL[layer])
        for s in sorted(used):
            if s in owner and owner[s][0] not in row and "/".join(owner[s]) not in row:
                print(f"{layer}/{name} -> {s} (defined in {owner[s][0]}/{owner[s][1]})")
                bad += 1
    print(f"{len(uses)} objects, {bad} calls against the layering")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
