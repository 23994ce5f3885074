#!/usr/bin/env bash
# Checks that every C source and header follows the repository's .clang-format.
#
#   scripts/check_format.sh [--fix]
#
# Lists the files that differ and exits 1; --fix rewrites them in place instead.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
if ! command -v clang-format >/dev/null 2>&1; then
    echo "check_format.sh: clang-format not found (scripts/setup.sh installs it)" >&2
    exit 2
fi

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    mapfile -t files < <(git ls-files -co --exclude-standard -- '*.c' '*.h')
else
    mapfile -t files < <(find include src tools tests bench -name '*.c' -o -name '*.h' 2>/dev/null)
fi

bad=()
for f in "${files[@]}"; do
    [ -f "$f" ] || continue
    if [ "${1:-}" = "--fix" ]; then
        clang-format -i "$f"
    elif ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
        bad+=("$f")
    fi
done
if [ ${#bad[@]} -gt 0 ]; then
    echo "not formatted (run scripts/check_format.sh --fix):"
    printf '  %s\n' "${bad[@]}"
    exit 1
fi
echo "format: ${#files[@]} files follow .clang-format"
