#!/usr/bin/env bash
# setup.sh: installs every build, test and script dependency of bertrain from Debian packages.
# Idempotent: packages already present are left alone; nothing is downloaded from anywhere but apt.
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build pkg-config git xz-utils
  libeigen3-dev libdnnl-dev ocl-icd-opencl-dev opencl-c-headers
  libsentencepiece-dev sentencepiece
  libabsl-dev libgtest-dev libgmock-dev
  libcli11-dev libspdlog-dev libfmt-dev
  libhdf5-dev nlohmann-json3-dev libutf8proc-dev
  libopenmpi-dev openmpi-bin
  slurm-wlm munge iperf3 iputils-ping
  python3 python3-numpy python3-torch python3-h5py python3-matplotlib
  ccache
  libleveldb-dev libsnappy-dev libprotobuf-dev protobuf-compiler
  clang libclang-rt-14-dev libfuzzer-14-dev libomp-dev
  opencc python3-jieba
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "setup.sh: all ${#PKGS[@]} packages already installed"
  exit 0
fi

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "setup.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup.sh: done"
