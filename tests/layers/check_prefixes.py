#!/usr/bin/env python3
"""Checks that every global a src/kernels object defines carries its folder's prefix
(ARCHITECTURE.md, "Names of the kernels' globals").

    check_prefixes.py OBJECT_FILE...

The objects are the libraries' own (CMake's $<TARGET_OBJECTS:...>); those outside src/kernels/
are left alone. For each symbol that `nm` lists as defined and global, the prefix its file's place
allows:

    src/kernels/*.c               kern_
    src/kernels/cpu/<family>/     <family>_ (eltwise: elt_), and kern_family_<family>, the table
                                  the registry reads
    src/kernels/vendor/           vendor_, and kern_family_vendor

A symbol that breaks it is printed as `object: symbol (wants PREFIX)`. Exits 1 if there is any.
"""
import os
import re
import subprocess
import sys

# the families whose prefix is not their folder's name
SHORT = {"eltwise": "elt"}


def allowed(path):
    """The prefixes an object's globals may take, or None for an object outside src/kernels."""
    path = path.replace(os.sep, "/")
    m = re.search(r"/src/kernels/(.+?)\.c\.o(bj)?$", path) or re.search(
        r"/src/kernels/(.+?)\.o(bj)?$", path)
    if not m:
        return None
    parts = m.group(1).split("/")
    if len(parts) == 1:
        return ("kern_",)
    if parts[0] == "vendor":
        return ("vendor_", "kern_family_vendor")
    if parts[0] == "cpu" and len(parts) >= 3:
        family = parts[1]
        return (SHORT.get(family, family) + "_", "kern_family_" + family)
    return ("kern_",)


def globals_of(obj):
    out = subprocess.run(["nm", "--defined-only", "--extern-only", obj], capture_output=True,
                         text=True, check=True).stdout
    # Symbols the compiler makes (ASan's __odr_asan.<name>, other "__" or dotted names) are not the
    # code's globals.
    return [sym for sym in (line.split()[2] for line in out.splitlines() if len(line.split()) == 3)
            if not sym.startswith("__") and "." not in sym]


def main(argv):
    objects = [o for a in argv[1:] for o in a.split(";") if o]
    if not objects:
        sys.exit(__doc__)
    bad = checked = 0
    for obj in objects:
        prefixes = allowed(obj)
        if prefixes is None:
            continue
        for sym in globals_of(obj):
            checked += 1
            if not any(sym == p or sym.startswith(p) for p in prefixes):
                print(f"{obj}: {sym} (wants {' or '.join(prefixes)})")
                bad += 1
    print(f"{checked} kernel globals, {bad} without their folder's prefix")
    return 1 if bad or not checked else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
