#!/usr/bin/env bash
# test.sh: configure, build (optimised, assertions on) and run the default test suite.
# Usage: scripts/test.sh [extra ctest args], e.g. scripts/test.sh -L slow for the slow checks.
# BUILD_DIR (default build) and JOBS (default: all cores) may be set in the environment.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
# ccache (installed by setup.sh) makes rebuilds in other directories of the same sources cheap.
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(cd .. && pwd)}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBERTRAIN_BUILD_TESTS=ON "${launcher[@]}"
cmake --build "$BUILD_DIR" -j "$JOBS"
if [ "$#" -eq 0 ]; then
  set -- -LE slow
fi
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" --timeout 1200 "$@"
