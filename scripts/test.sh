#!/usr/bin/env bash
# Builds and tests every configuration; exits non-zero if anything failed.
#
#   scripts/test.sh [release|asan|fuzz]...     (default: all three)
#
#   format   scripts/check_format.sh (always; differences fail the run unless ANVIL_FORMAT=warn)
#   release  build-release, full ctest
#   asan     build-asan (AddressSanitizer + UBSan), full ctest
#   fuzz     build-fuzz (clang + libFuzzer): only the fuzz targets, only the fuzz tests (ctest -R '^fuzz\.')
#
# Every step runs even after an earlier one failed, and a summary closes the output. Run
# scripts/setup.sh first (it installs the dependencies and the Python environment the tests use).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
JOBS=${ANVIL_JOBS:-$(nproc 2>/dev/null || echo 2)}
CONFIGS=("$@")
[ ${#CONFIGS[@]} -gt 0 ] || CONFIGS=(release asan fuzz)

summary=()
total_pass=0
total_fail=0
status=0

step_failed() {
    summary+=("$1: FAILED ($2)")
    status=1
}

# Formatting differences fail the run; ANVIL_FORMAT=warn only reports them (for local work).
if "$ROOT/scripts/check_format.sh"; then
    summary+=("format: ok")
elif [ "${ANVIL_FORMAT:-strict}" = strict ]; then
    step_failed format "clang-format differences"
else
    summary+=("format: WARNING, files differ from .clang-format (scripts/check_format.sh)")
fi

# Sessions read the user's tuning database by default; the tests must see the built-in rules
# unless they name a database themselves, whatever this machine has tuned before.
export ANVIL_TUNING_DB=off

for cfg in "${CONFIGS[@]}"; do
    echo
    echo "==================== $cfg ===================="
    # The fuzz configuration runs only the fuzz tests, so it builds only their targets.
    case "$cfg" in
    release | asan) filter=() targets=() ;;
    fuzz) filter=(-R '^fuzz\.') targets=(fuzz_load fuzz_npy fuzz_npz fuzz_ckpt fuzz_db_import fuzz_graph) ;;
    *)
        echo "test.sh: unknown configuration '$cfg'" >&2
        exit 2
        ;;
    esac
    t0=$SECONDS
    if ! "$ROOT/scripts/build.sh" "$cfg" "${targets[@]}"; then
        step_failed "$cfg" "build"
        total_fail=$((total_fail + 1))
        continue
    fi
    t1=$SECONDS
    log="$ROOT/build-$cfg/ctest.log"
    # A per-test time limit (tests may set their own) so that a hang fails instead of eating CI.
    ctest --test-dir "$ROOT/build-$cfg" --output-on-failure --no-tests=error -j "$JOBS" --timeout 300 \
        "${filter[@]}" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    # ctest closes with "NN% tests passed, F tests failed out of T".
    line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -n 1)
    if [ -n "$line" ]; then
        f=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$line")
        t=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\2/' <<<"$line")
        total_pass=$((total_pass + t - f))
        total_fail=$((total_fail + f))
    fi
    times="build $((t1 - t0)) s, tests $((SECONDS - t1)) s"
    if [ "$rc" -eq 0 ]; then
        summary+=("$cfg: ok (${line:-no summary}; $times)")
    else
        [ -n "$line" ] || total_fail=$((total_fail + 1))
        step_failed "$cfg" "${line:-ctest exit $rc}; $times"
    fi
done

echo
echo "==================== summary ===================="
printf '%s\n' "${summary[@]}"
echo "total: $total_pass passed, $total_fail failed"
exit $status
