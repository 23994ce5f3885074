#!/usr/bin/env bash
# Configures the project with its required libraries hidden (the Debian header and library folders
# ignored, nanopb's CMake package disabled, a generator whose Python has no protobuf) and checks
# that the configure fails with one message that names each of them and the apt-get line for all.
#
#   tests/deps/check_missing.sh SOURCE_DIR WORK_DIR C_COMPILER LIBRARY_ARCHITECTURE
set -euo pipefail
SRC=${1:?} WORK=${2:?} CC=${3:?} ARCH=${4:?}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
rm -rf "$WORK"
mkdir -p "$WORK"
if cmake -S "$SRC" -B "$WORK/build" -DCMAKE_C_COMPILER="$CC" -DANVIL_BUILD_TESTS=OFF \
    -DANVIL_BUILD_BENCH=OFF "-DCMAKE_IGNORE_PATH=/usr/include;/usr/lib/$ARCH" \
    -DCMAKE_DISABLE_FIND_PACKAGE_nanopb=ON \
    -DANVIL_NANOPB_GENERATOR="$HERE/no_protobuf_generator.py" >"$WORK/log" 2>&1; then
    cat "$WORK/log"
    echo "check_missing.sh: the configure succeeded with its dependencies hidden" >&2
    exit 1
fi
sed -n '/anvil cannot be built/,/README.md lists/p' "$WORK/log"
status=0
for want in "zlib (zlib.h" "SQLite 3 (sqlite3.h" "cJSON (cjson/cJSON.h" \
    "a working nanopb generator: .*No module named 'google" \
    "the nanopb runtime" \
    "apt-get install zlib1g-dev libsqlite3-dev libcjson-dev python3-protobuf protobuf-compiler libnanopb-dev"; do
    if ! grep -q -- "$want" "$WORK/log"; then
        echo "check_missing.sh: the configure's error lacks: $want" >&2
        status=1
    fi
done
[ $status -eq 0 ] && echo "every missing dependency named, with its Debian package"
exit $status
