#!/usr/bin/env bash
# `pip install ./python` as a user does it: from a copy of the checkout that has no .venv, into a
# fresh virtual environment, with nothing from scripts/setup.sh. The build requirements
# (scikit-build-core, onnx for onnx.proto) come from PyPI into pip's isolated build environment,
# and the build must take onnx.proto from there (checked in its log). Then the core tests run
# against that installed copy, from outside the source tree so nothing there is imported.
#
#   python/tests/check_package.sh WORK_DIR
#
# The copy is the working tree (tracked files and the untracked ones git does not ignore), so
# uncommitted work is tested too. Compiles through ccache where installed (ANVIL_CCACHE=0: not),
# as scripts/build.sh does; pip's own cache serves the wheels.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
WORK=${1:?usage: check_package.sh WORK_DIR}
rm -rf "$WORK"
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
fail() {
    echo "check_package.sh: $*" >&2
    exit 1
}

# the onnx pin is the same in the three places that name it
onnx_pin=$(sed -n 's/^onnx==\([0-9.]*\)$/\1/p' "$ROOT/scripts/requirements.txt")
cmake_pin=$(sed -n 's/^set(ANVIL_ONNX_VERSION \([0-9.]*\))$/\1/p' "$ROOT/cmake/onnx_proto.cmake")
[ -n "$onnx_pin" ] && [ "$onnx_pin" = "$cmake_pin" ] ||
    fail "onnx pin: scripts/requirements.txt has '$onnx_pin', cmake/onnx_proto.cmake '$cmake_pin'"
grep -q "\"onnx==$onnx_pin\"" "$ROOT/python/pyproject.toml" ||
    fail "python/pyproject.toml's build requirements do not pin onnx==$onnx_pin"

# the source: the working tree without .venv (or the whole folder but .venv and build* where
# this is no git checkout)
SRC="$WORK/src"
mkdir -p "$SRC"
if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    files=()
    while IFS= read -r -d '' f; do
        case "$f" in
        .venv | .venv/* | .venv-*) continue ;;
        esac
        # a tracked file deleted in the working tree is not there to copy
        if [ -e "$ROOT/$f" ] || [ -L "$ROOT/$f" ]; then
            files+=("$f")
        fi
    done < <(git -C "$ROOT" ls-files -z -co --exclude-standard)
    tar -C "$ROOT" -cf - -- "${files[@]}" | tar -C "$SRC" -xf -
else
    tar -C "$ROOT" --exclude=./.venv --exclude='./.venv-*' --exclude='./build*' -cf - . |
        tar -C "$SRC" -xf -
fi
[ ! -e "$SRC/.venv" ] || fail "the copy has a .venv"

if command -v ccache >/dev/null 2>&1 && [ "${ANVIL_CCACHE:-1}" = 1 ]; then
    export CMAKE_C_COMPILER_LAUNCHER=ccache CCACHE_BASEDIR="$WORK"
fi

python3 -m venv "$WORK/venv"
PY="$WORK/venv/bin/python"
start=$SECONDS
# -v: the CMake log, to check where onnx.proto came from; the build's scratch folder goes to WORK
if ! env -u PYTHONPATH "$PY" -m pip install -v --disable-pip-version-check \
    --config-settings=build-dir="$WORK/build" "$SRC/python" >"$WORK/pip.log" 2>&1; then
    tail -n 60 "$WORK/pip.log" >&2
    fail "pip install failed (the whole log: $WORK/pip.log)"
fi
echo "pip install ./python: $((SECONDS - start)) s"
# onnx.proto from the onnx that pip put into its isolated build environment, nowhere else
grep -E "ONNX parser from .*/pip-build-env-[^/]*/.*/onnx/onnx.proto \(onnx $onnx_pin\)" \
    "$WORK/pip.log" ||
    fail "the build did not report onnx.proto from the build environment's onnx $onnx_pin"
grep -E "nanopb generator: " "$WORK/pip.log" || fail "the build did not report its nanopb generator"

"$PY" -m pip install -q --disable-pip-version-check "onnx==$onnx_pin" \
    "$(grep '^numpy==' "$ROOT/scripts/requirements.txt")" \
    "$(grep '^pytest==' "$ROOT/scripts/requirements.txt")"
cd "$WORK"
env -u PYTHONPATH -u ANVIL_LIBRARY -u ANVIL_TOOL ANVIL_TUNING_DB=off \
    "$PY" -m pytest -q -p no:cacheprovider "$SRC/python/tests/test_core.py"
"$PY" -c "import anvil, sys; sys.exit(0 if '$WORK/venv' in anvil._lib.path else 1)" ||
    fail "anvil was not imported from the installed package"
echo "installed package: $("$PY" -c 'import anvil; print(anvil._lib.path)')"
