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
# -Werror: bertrain's own code builds without a single warning (BERTRAIN_WERROR; packagers keep it off).
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBERTRAIN_BUILD_TESTS=ON -DBERTRAIN_WERROR=ON \
  "${launcher[@]}"
# The compiler's output also goes to $BUILD_DIR/build.log (.ci/run counts the warnings in it).
cmake --build "$BUILD_DIR" -j "$JOBS" 2>&1 | tee "$BUILD_DIR/build.log"
if [ "$#" -eq 0 ]; then
  set -- -LE slow
fi
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" --timeout 1200 "$@"
