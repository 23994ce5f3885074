#!/usr/bin/env bash
# The installed anvil, used from outside the project; tests/install.cmake runs one mode per test.
#
#   check.sh tree       cmake --install the build into PREFIX (emptied first); check the files
#   check.sh exports    libanvil.so exports exactly the functions of anvil.h, and loads on its own
#   check.sh pkgconfig  build consumer.c with `cc $(pkg-config --cflags --libs anvil)`, run it
#   check.sh cmake      build tests/install (find_package(anvil)) against PREFIX, run both programs
#
# Environment (set by tests/install.cmake): BUILD (the build folder), PREFIX, LIBDIR (relative to
# PREFIX), SOVERSION, CC, CMAKE (the cmake executable), MODEL (the ONNX model consumer.c runs),
# WORK (a scratch folder), SRC (tests/install), HEADER (include/anvil.h of the source tree).
set -euo pipefail

fail() {
    echo "install test: $*" >&2
    exit 1
}

lib="$PREFIX/$LIBDIR"

# The dynamic loader must take libanvil.so.N from PREFIX, not some other copy.
check_loads_from_prefix() {
    local prog=$1
    if command -v ldd >/dev/null 2>&1; then
        local line
        line=$(ldd "$prog" | grep "libanvil\.so" || true)
        echo "$prog: $line"
        [[ "$line" == *"=> $lib/libanvil.so.$SOVERSION "* ]] ||
            fail "$prog does not load libanvil.so.$SOVERSION from $lib"
    fi
}

case "${1:-}" in
tree)
    rm -rf "$PREFIX"
    "$CMAKE" --install "$BUILD" --prefix "$PREFIX"
    for f in include/anvil.h "$LIBDIR/libanvil.a" "$LIBDIR/libanvil.so" \
        "$LIBDIR/libanvil.so.$SOVERSION" bin/anvil "$LIBDIR/pkgconfig/anvil.pc" \
        "$LIBDIR/cmake/anvil/anvilConfig.cmake" "$LIBDIR/cmake/anvil/anvilConfigVersion.cmake" \
        "$LIBDIR/cmake/anvil/anvilTargets.cmake"; do
        [ -e "$PREFIX/$f" ] || fail "cmake --install did not install $f"
    done
    soname=$(readelf -d "$lib/libanvil.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    [ "$soname" = "libanvil.so.$SOVERSION" ] || fail "SONAME is '$soname', not libanvil.so.$SOVERSION"
    grep -qx "prefix=$PREFIX" "$lib/pkgconfig/anvil.pc" || fail "anvil.pc does not name the prefix $PREFIX"
    # the installed tool runs (it links the static library: no library path needed)
    "$PREFIX/bin/anvil" --version
    ;;
exports)
    # every function the header declares, and nothing else
    grep -oE '\banvil_[a-z0-9_]+\(' "$HEADER" | tr -d '(' | sort -u >"$WORK.header"
    nm -D --defined-only "$lib/libanvil.so" | awk '{print $NF}' | sed 's/@.*//' | sort -u >"$WORK.so"
    if ! diff -u "$WORK.header" "$WORK.so"; then
        fail "libanvil.so's exported symbols (+) differ from the functions of anvil.h (-)"
    fi
    echo "libanvil.so exports the $(wc -l <"$WORK.so") functions of anvil.h, nothing else"
    if command -v ldd >/dev/null 2>&1; then
        ldd "$lib/libanvil.so"
        if ldd "$lib/libanvil.so" | grep -q "not found"; then
            fail "libanvil.so needs a library that is not found"
        fi
    fi
    ;;
pkgconfig)
    if ! command -v pkg-config >/dev/null 2>&1; then
        echo "SKIP: pkg-config not found (Debian: pkg-config)"
        exit 0
    fi
    export PKG_CONFIG_PATH="$lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    echo "pkg-config --cflags --libs anvil: $(pkg-config --cflags --libs anvil)"
    rm -rf "$WORK" && mkdir -p "$WORK"
    # shellcheck disable=SC2046 # the flags are meant to split
    "$CC" -std=c11 -Wall -Wextra -Werror -o "$WORK/consumer" "$SRC/consumer.c" \
        $(pkg-config --cflags --libs anvil)
    export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    check_loads_from_prefix "$WORK/consumer"
    "$WORK/consumer" "$MODEL"
    ;;
cmake)
    rm -rf "$WORK" && mkdir -p "$WORK"
    "$CMAKE" -S "$SRC" -B "$WORK" -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_C_COMPILER="$CC" \
        -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" \
        -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
    grep -q "^anvil_DIR:PATH=$lib/cmake/anvil$" "$WORK/CMakeCache.txt" ||
        fail "find_package(anvil) did not find the copy in $PREFIX"
    "$CMAKE" --build "$WORK"
    check_loads_from_prefix "$WORK/consumer_shared"
    if command -v ldd >/dev/null 2>&1 && ldd "$WORK/consumer_static" | grep -q libanvil; then
        fail "consumer_static loads libanvil.so"
    fi
    "$WORK/consumer_shared" "$MODEL"
    "$WORK/consumer_static" "$MODEL"
    ;;
*)
    sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
