#!/usr/bin/env bash
# The newcomer's tour: builds anvil, generates a ResNet-18-style CNN with the project's own
# generator, shows `anvil info`, runs it with `anvil run` and checks the result against ONNX
# Runtime, and benchmarks it with `anvil bench`.
#
#   scripts/demo.sh
#
# Environment: ANVIL_DEMO_SIZE (tiny|small|resnet18|resnet34, default resnet18),
# ANVIL_DEMO_ITERS (benchmark iterations, default 5). Run scripts/setup.sh first.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SIZE=${ANVIL_DEMO_SIZE:-resnet18}
ITERS=${ANVIL_DEMO_ITERS:-5}
PY="$ROOT/.venv/bin/python"
BIN="$ROOT/build-release/anvil"
CASE="$ROOT/build-release/demo/$SIZE"
MODEL="$CASE/model.onnx"
GEN="$ROOT/tests/models/gen_resnet.py"

if [ ! -x "$PY" ]; then
    echo "demo.sh: $PY not found; run scripts/setup.sh first" >&2
    exit 1
fi
"$ROOT/scripts/build.sh" release anvil

banner() { printf '\n==== %s\n' "$*"; }

banner "generating the $SIZE model (tests/models/gen_resnet.py, fixed seed)"
if [ -f "$MODEL" ] && [ "$MODEL" -nt "$GEN" ]; then
    echo "up to date: $MODEL"
else
    "$PY" "$GEN" "$CASE" --size "$SIZE" --batches 1
fi

banner "anvil info $MODEL"
"$BIN" info "$MODEL"

banner "anvil run (input from the generator's seeded data set; output checked against ONNX Runtime)"
"$PY" "$ROOT/tests/models/check_cli_run.py" "$BIN" "$CASE" "$ROOT/build-release/demo/run"

case "$SIZE" in
tiny) HW=56 ;;
small) HW=112 ;;
*) HW=224 ;;
esac
banner "anvil bench $MODEL --iters $ITERS --warmup 1 --shape input=1x3x${HW}x${HW}"
"$BIN" bench "$MODEL" --iters "$ITERS" --warmup 1 --shape "input=1x3x${HW}x${HW}"

banner "anvil tune $MODEL (measures every problem's alternatives on this machine; a rerun is instant)"
"$BIN" tune "$MODEL" --shape "input=1x3x${HW}x${HW}" --runs 20

banner "ONNX Runtime on the same model and input shape, for comparison"
"$PY" - "$MODEL" "$HW" <<'PY' || echo "(ONNX Runtime not available in .venv)"
import sys, time
import numpy as np
import onnxruntime as ort
model, hw = sys.argv[1], int(sys.argv[2])
sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
name = sess.get_inputs()[0].name
x = np.random.default_rng(0).uniform(-1, 1, (1, 3, hw, hw)).astype(np.float32)
for _ in range(3):
    sess.run(None, {name: x})
t = []
for _ in range(20):
    t0 = time.perf_counter()
    sess.run(None, {name: x})
    t.append((time.perf_counter() - t0) * 1e3)
print(f"onnxruntime {ort.__version__}: median of 20 runs {sorted(t)[10]:.3f} ms")
PY
