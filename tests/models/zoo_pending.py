#!/usr/bin/env python3
"""Runs the zoo models listed in zoo_pending.txt and reports them; never fails.

Usage: zoo_pending.py RUN_CASES ZOODIR PENDING_TXT

For each pending model, runs the case runner on ZOODIR/<name> and prints whether it now passes
(then its line should be removed from PENDING_TXT so it becomes a CI test) or still fails, with
the runner's last lines. Exit status 0 whatever the results: pending models are information, not
a CI gate. Exit 2 only on a usage error.
"""

import os
import subprocess
import sys


def read_pending(path):
    pending = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                name, _, reason = line.partition(":")
                pending.append((name.strip(), reason.strip()))
    return pending


def main():
    if len(sys.argv) != 4:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    runner, zoodir, pending_txt = sys.argv[1:]
    pending = read_pending(pending_txt)
    now_pass = []
    for name, reason in pending:
        case = os.path.join(zoodir, name)
        if not os.path.isdir(case):
            print(f"MISSING {name}: {case} was not generated")
            continue
        try:
            r = subprocess.run([runner, case], capture_output=True, text=True, timeout=600)
            ok, tail = r.returncode == 0, (r.stdout + r.stderr).strip().splitlines()[-3:]
        except subprocess.TimeoutExpired:
            ok, tail = False, ["timed out after 600 s"]
        if ok:
            now_pass.append(name)
            print(f"NOW PASSES {name} (listed as: {reason})")
        else:
            print(f"STILL PENDING {name} (listed as: {reason})")
            for line in tail:
                print(f"    {line[:300]}")
    print(f"{len(pending)} pending, {len(now_pass)} now pass"
          + (f": remove {', '.join(now_pass)} from {pending_txt}" if now_pass else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
