#!/usr/bin/env bash
# setup.sh: installs every build, test and script dependency of bertrain from Debian packages.
# Idempotent: packages already present are left alone; nothing is downloaded from anywhere but apt and, for the
# ONNX export's tests and benchmark, the npm registry (ONNX Runtime's Node package, below).
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(
  build-essential cmake ninja-build pkg-config git xz-utils
  libeigen3-dev libdnnl-dev ocl-icd-opencl-dev opencl-c-headers
  libsentencepiece-dev sentencepiece
  libabsl-dev libgtest-dev libgmock-dev
  libcli11-dev libspdlog-dev libfmt-dev
  libhdf5-dev nlohmann-json3-dev libutf8proc-dev
  libopenmpi-dev openmpi-bin
  slurm-wlm munge iperf3 iputils-ping
  python3 python3-numpy python3-torch python3-h5py python3-matplotlib python3-protobuf
  ccache
  libleveldb-dev libsnappy-dev libprotobuf-dev protobuf-compiler
  libzip-dev
  clang libclang-rt-14-dev libfuzzer-14-dev libomp-dev
  opencc python3-jieba
  python3-onnx
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "setup.sh: all ${#PKGS[@]} packages already installed"
else
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  echo "setup.sh: done"
fi

# ONNX Runtime for checking `bertrain export-onnx` (tests/io/onnx_export_test.cpp) and `bertrain bench predict`:
# the npm package onnxruntime-node, which carries libonnxruntime for linux-x64, into the git-ignored .deps/onnxruntime
# (the tests look there). --ignore-scripts: its install script would download a CUDA build. Needs Node.js and npm;
# without them the ONNX Runtime tests skip with a printed reason.
ORT_VERSION=1.31.1
ORT_DIR=.deps/onnxruntime
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "setup.sh: node or npm not found: ONNX Runtime not installed (its tests will skip)"
elif [ "$(node -p "require('./$ORT_DIR/node_modules/onnxruntime-node/package.json').version" 2>/dev/null)" = "$ORT_VERSION" ]; then
  echo "setup.sh: onnxruntime-node $ORT_VERSION already in $ORT_DIR"
else
  mkdir -p "$ORT_DIR"
  echo "setup.sh: installing onnxruntime-node $ORT_VERSION into $ORT_DIR"
  (cd "$ORT_DIR" && npm install --ignore-scripts --no-audit --no-fund --no-save --loglevel=error \
     "onnxruntime-node@$ORT_VERSION")
fi
