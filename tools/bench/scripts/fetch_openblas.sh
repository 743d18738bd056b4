#!/usr/bin/env bash
# fetch_openblas.sh: unpacks Debian's libopenblas0-pthread into build/openblas/root without installing it, for
# tools/bench/scripts/bench_torch.py (--blas_dir auto). Installing the package instead would switch the system's
# libblas.so.3 alternative for every program (numpy, the golden generators), which a benchmark must not do.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../../.." && pwd)"
dest="$repo/build/openblas"
lib="$dest/root/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3"
if [ -f "$lib" ]; then
  echo "fetch_openblas.sh: $lib already there"
  exit 0
fi
mkdir -p "$dest"
cd "$dest"
apt-get download libopenblas0-pthread
dpkg-deb -x libopenblas0-pthread_*.deb root
test -f "$lib"
echo "fetch_openblas.sh: unpacked to $dest/root ($(basename libopenblas0-pthread_*.deb))"
