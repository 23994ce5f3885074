#!/usr/bin/env bash
# Optional: a virtual environment with ONNX Runtime training for bench/train_ort.py.
#
#   scripts/setup_ort_training.sh            # creates .venv-ort-train (or $ORT_TRAIN_VENV)
#   .venv-ort-train/bin/python bench/train_ort.py --threads 1,2 --rounds 3
#
# onnxruntime-training-cpu installs the same `onnxruntime` module as the inference package in
# .venv, so it gets a venv of its own. Pins: onnxruntime-training-cpu 1.19.2 (the last release on
# PyPI); onnx 1.16.2, because a newer onnx makes generate_artifacts write IR version 14 models,
# which ORT 1.19 refuses ("max supported IR version: 10"); numpy below 2 and protobuf as tested.
# No torch: train_ort.py uses only the on-device training API (artifacts, api), and the export of
# the models runs in .venv. Not run by CI or scripts/setup.sh; re-runs skip when the pins hold.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${ORT_TRAIN_VENV:-$ROOT/.venv-ort-train}
PINS=(onnxruntime-training-cpu==1.19.2 onnx==1.16.2 numpy==1.26.4 protobuf==7.36.2)

case "${1:-}" in
-h | --help)
    sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
esac

PY=python3
[ -x "$ROOT/.venv/bin/python" ] && PY="$ROOT/.venv/bin/python"
if [ ! -x "$VENV/bin/python" ]; then
    echo "setup_ort_training: creating $VENV"
    "$PY" -m venv "$VENV"
fi
if "$VENV/bin/python" - "${PINS[@]}" <<'EOF' 2>/dev/null; then
import sys
from importlib.metadata import version
sys.exit(any(version(n) != v for n, v in (p.split("==") for p in sys.argv[1:])))
EOF
    echo "setup_ort_training: pins satisfied in $VENV"
else
    "$VENV/bin/python" -m pip install -q --upgrade pip
    "$VENV/bin/python" -m pip install -q "${PINS[@]}"
fi
# onnxruntime.training's own __init__ imports torch; train_ort.py bypasses it, so check the parts
# it uses.
"$VENV/bin/python" "$ROOT/bench/train_ort.py" --version-check
