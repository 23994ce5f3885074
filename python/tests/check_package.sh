#!/usr/bin/env bash
# `pip install ./python` into a fresh virtual environment (scikit-build-core drives the project's
# CMake: libanvil.so and the tool land inside the package), then the core tests against that
# installed copy, run from outside the source tree so nothing there is imported.
#
#   python/tests/check_package.sh WORK_DIR
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
WORK=${1:?usage: check_package.sh WORK_DIR}
rm -rf "$WORK"
mkdir -p "$WORK"
python3 -m venv "$WORK/venv"
PIP=("$WORK/venv/bin/python" -m pip install -q --disable-pip-version-check)
# the build's own scratch folder goes to WORK, not into the source tree
"${PIP[@]}" --config-settings=build-dir="$WORK/build" "$ROOT/python"
"${PIP[@]}" pytest "$(grep '^onnx==' "$ROOT/scripts/requirements.txt")" \
    "$(grep '^numpy==' "$ROOT/scripts/requirements.txt")"
cd "$WORK"
env -u PYTHONPATH -u ANVIL_LIBRARY -u ANVIL_TOOL ANVIL_TUNING_DB=off \
    "$WORK/venv/bin/python" -m pytest -q -p no:cacheprovider "$ROOT/python/tests/test_core.py"
"$WORK/venv/bin/python" -c "import anvil, sys; sys.exit(0 if '$WORK' in anvil._lib.path else 1)"
echo "installed package: $("$WORK/venv/bin/python" -c 'import anvil; print(anvil._lib.path)')"
