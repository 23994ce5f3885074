#!/usr/bin/env bash
# Configures and builds one anvil configuration (incrementally).
#
#   scripts/build.sh [release|asan|fuzz] [TARGET...]     (default: release, every target)
#
#   release  build-release/  optimised (-DCMAKE_BUILD_TYPE=Release)
#   asan     build-asan/     AddressSanitizer + UndefinedBehaviorSanitizer (-DANVIL_SANITIZE=ON)
#   fuzz     build-fuzz/     clang with libFuzzer targets and sanitizers (-DANVIL_FUZZ=ON)
#
# Every configuration treats warnings as errors. ANVIL_JOBS sets the parallel build jobs (default:
# the number of cores); ANVIL_CCACHE=0 builds without ccache.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CONFIG=${1:-release}
shift || true
TARGETS=()
for t in "$@"; do TARGETS+=(--target "$t"); done
JOBS=${ANVIL_JOBS:-$(nproc 2>/dev/null || echo 2)}

case "$CONFIG" in
release) ARGS=(-DCMAKE_BUILD_TYPE=Release) ;;
asan) ARGS=(-DANVIL_SANITIZE=ON) ;;
fuzz) ARGS=(-DCMAKE_C_COMPILER=clang -DANVIL_FUZZ=ON) ;;
-h | --help)
    sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
*)
    echo "build.sh: unknown configuration '$CONFIG' (release, asan or fuzz)" >&2
    exit 2
    ;;
esac

# ccache, where installed, makes rebuilds after a branch switch (or in a second worktree) cheap.
if command -v ccache >/dev/null 2>&1 && [ "${ANVIL_CCACHE:-1}" = 1 ]; then
    ARGS+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi

DIR="$ROOT/build-$CONFIG"
echo "[build] $CONFIG in $DIR (-j$JOBS)"
mkdir -p "$DIR"
cmake -S "$ROOT" -B "$DIR" -DANVIL_WERROR=ON "${ARGS[@]}" >"$DIR/configure.log" 2>&1 || {
    cat "$DIR/configure.log" >&2
    echo "build.sh: configuring $CONFIG failed" >&2
    exit 1
}
cmake --build "$DIR" -j "$JOBS" "${TARGETS[@]}"
