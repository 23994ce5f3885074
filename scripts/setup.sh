#!/usr/bin/env bash
# Sets up a machine to build and test anvil, then builds the release configuration.
#
#   scripts/setup.sh [--no-build]
#
# Idempotent and fast on re-runs: Debian packages are installed only when one is missing (checked
# with dpkg-query), the Python virtual environment (.venv, pinned by scripts/requirements.txt) only
# when a pin is not satisfied, and the build is incremental. Runs as root, or through sudo when
# that is available. Meant for Debian 12; other apt-based systems may work.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=1
for arg in "$@"; do
    case "$arg" in
    --no-build) BUILD=0 ;;
    -h | --help)
        sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *)
        echo "setup.sh: unknown argument '$arg' (try --help)" >&2
        exit 2
        ;;
    esac
done

# Build and test dependencies. nanopb's generator runs on /usr/bin/python3 and needs
# python3-protobuf; libclang-rt-14-dev provides libFuzzer and the sanitizer runtimes for clang.
APT_PACKAGES=(
    build-essential cmake pkg-config git
    nanopb libnanopb-dev protobuf-compiler python3-protobuf
    libcmocka-dev libcjson-dev
    # the tuning database (src/tune)
    libsqlite3-dev
    zlib1g-dev
    clang clang-format libclang-rt-14-dev
    python3 python3-venv
    libsleef-dev
    # vendor kernel variants (cmake/vendor.cmake): oneDNN (OpenMP build) and the pthread
    # flavours of OpenBLAS and BLIS, whose thread counts anvil sets per call
    libdnnl-dev libopenblas-pthread-dev libblis-pthread-dev
)

log() { printf '[setup] %s\n' "$*"; }

missing=()
for p in "${APT_PACKAGES[@]}"; do
    if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]; then
        missing+=("$p")
    fi
done
if [ ${#missing[@]} -gt 0 ]; then
    SUDO=()
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then
            SUDO=(sudo)
        else
            echo "setup.sh: missing packages (${missing[*]}) and not root without sudo;" \
                "install them as root: apt-get install -y ${missing[*]}" >&2
            exit 1
        fi
    fi
    log "installing Debian packages: ${missing[*]}"
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${APT_PACKAGES[@]}"
else
    log "Debian packages: all ${#APT_PACKAGES[@]} present"
fi

# Python environment for the ONNX Runtime comparisons and the generators. The venv's python must
# run (a venv copied from another machine or a removed interpreter does not) or it is remade.
VENV="$ROOT/.venv"
REQ="$ROOT/scripts/requirements.txt"
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1; then
    PY=$(command -v python3 || true)
    if [ -z "$PY" ]; then
        echo "setup.sh: python3 not found" >&2
        exit 1
    fi
    log "creating $VENV with $("$PY" --version 2>&1)"
    rm -rf "$VENV"
    "$PY" -m venv "$VENV"
fi
# Checks every pin of requirements.txt against what is installed; exit 1 if any is unmet.
pins_ok() {
    "$VENV/bin/python" - "$REQ" <<'PY'
import sys
from importlib import metadata
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if not line:
        continue
    name, _, version = line.partition("==")
    try:
        if metadata.version(name) != version:
            sys.exit(1)
    except metadata.PackageNotFoundError:
        sys.exit(1)
PY
}
if pins_ok; then
    log "Python packages: pins in scripts/requirements.txt satisfied"
else
    log "installing Python packages from scripts/requirements.txt"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$REQ"
    pins_ok || {
        echo "setup.sh: pip finished but the pins in $REQ are still not met" >&2
        exit 1
    }
fi

# PyTorch, torchvision, transformers and onnx2torch: the Python package's torch front end and its
# tests (python.torch), the training comparisons (train.torch), the torch column of bench/peer.py
# and the zoo.torch_twin test. Several GB (PyPI's torch wheel comes with its CUDA libraries), so
# ANVIL_TORCH=0 leaves them out (those tests then skip, saying so); skipped when the pins hold.
# Before the real-model packages: those go in without their dependencies, which pip's resolver
# would then report as missing on every later install.
if [ "${ANVIL_TORCH:-1}" = 1 ]; then
    if REQ="$ROOT/scripts/requirements-torch.txt" pins_ok; then
        log "PyTorch packages: pins in scripts/requirements-torch.txt satisfied"
    else
        log "installing PyTorch packages from scripts/requirements-torch.txt"
        "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
            -r "$ROOT/scripts/requirements-torch.txt"
    fi
fi

# Packages that ship trained ONNX models (tests/models/fetch_real.py: the real.* tests and
# bench/peer.py). A few tens of MB, so installed by default (ANVIL_ZOO_REAL=0 skips them). Only
# their model files are used, so their dependencies (torch among them) are not installed.
if [ "${ANVIL_ZOO_REAL:-1}" = 1 ]; then
    if REQ="$ROOT/scripts/requirements-zoo.txt" pins_ok; then
        log "real-model packages: pins in scripts/requirements-zoo.txt satisfied"
    else
        log "installing the real-model packages from scripts/requirements-zoo.txt"
        "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps \
            -r "$ROOT/scripts/requirements-zoo.txt"
    fi
fi

# Optional: PyTorch, torchvision, transformers and OpenVINO for the model corpus
# (scripts/gen_corpus.py) and the OpenVINO column of bench/peer.py. Several GB, so only when
# ANVIL_CORPUS=1; skipped when the pins hold.
if [ "${ANVIL_CORPUS:-0}" = 1 ]; then
    if REQ="$ROOT/scripts/requirements-corpus.txt" pins_ok; then
        log "corpus packages: pins in scripts/requirements-corpus.txt satisfied"
    else
        log "installing corpus packages from scripts/requirements-corpus.txt"
        "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
            -r "$ROOT/scripts/requirements-corpus.txt"
        REQ="$ROOT/scripts/requirements-corpus.txt" pins_ok || {
            echo "setup.sh: pip finished but the pins in scripts/requirements-corpus.txt are" \
                "still not met" >&2
            exit 1
        }
    fi
fi

if [ "$BUILD" -eq 1 ]; then
    "$ROOT/scripts/build.sh" release
fi
log "done"
