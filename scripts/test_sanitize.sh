#!/usr/bin/env bash
# test_sanitize.sh: the whole default test suite under AddressSanitizer (+ LeakSanitizer) and UBSan. Builds
# everything with -DBERTRAIN_SANITIZE=ON in its own directory (default build-asan; gcc, -O1 to keep the build and
# the run short), runs `ctest -LE slow` with every sanitizer report written to a log file instead of stderr, and
# fails when a test fails or when any process left a report: a report in a subprocess whose exit code a test does
# not look at still counts. Third-party reports are suppressed in tests/sanitizers/*.supp, one documented entry each.
# Usage: scripts/test_sanitize.sh [ctest args] (they replace the default `-LE slow`, e.g. `-LE slow -R Tf`). BUILD_DIR and JOBS may be set in the environment.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-asan}
JOBS=${JOBS:-$(nproc)}
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(cd .. && pwd)}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
  -DCMAKE_C_FLAGS_RELEASE="-O1 -DNDEBUG" -DBERTRAIN_SANITIZE=ON -DBERTRAIN_BUILD_TESTS=ON -DBERTRAIN_WERROR=ON "${launcher[@]}" >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"

sup=$PWD/tests/sanitizers
logs=$PWD/$BUILD_DIR/sanitizer-reports
rm -rf "$logs"
mkdir -p "$logs"
export ASAN_OPTIONS="log_path=$logs/asan:detect_leaks=1:exitcode=86:suppressions=$sup/asan.supp:check_initialization_order=1:strict_init_order=1"
export LSAN_OPTIONS="suppressions=$sup/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="log_path=$logs/ubsan:halt_on_error=1:exitcode=87:print_stacktrace=1:suppressions=$sup/ubsan.supp"
[ "$#" -eq 0 ] && set -- -LE slow
rc=0
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" --timeout 3600 "$@" || rc=$?
# A log holding nothing but "WARNING: AddressSanitizer failed to allocate 0x... bytes" lines is not a report: it
# comes from a fuzz replay binary (fuzz_regress_hdf5_shard), whose documented allocation policy (fuzz/fuzz_util.h,
# dependency finding H1 in README "Reliability") makes malloc of more than 512 MiB return NULL, as glibc's does, and
# ASan prints that line whenever it does so. Such logs are listed, not counted. Every other log is a report.
reports=() policy=()
for r in "$logs"/*; do
  [ -e "$r" ] || continue
  if ! grep -qvE '^==[0-9]+==WARNING: AddressSanitizer failed to allocate 0x[0-9a-f]+ bytes$' "$r"; then
    policy+=("$r")
  else
    reports+=("$r")
  fi
done
[ ${#policy[@]} -gt 0 ] && echo "test_sanitize.sh: ${#policy[@]} process(es) had malloc return NULL under the fuzz" \
  "replays' allocation policy (H1; not reports): $(cat "${policy[@]}" | tr '\n' ' ')"
if [ ${#reports[@]} -gt 0 ]; then
  echo "test_sanitize.sh: ${#reports[@]} sanitizer report(s):" >&2
  for r in "${reports[@]}"; do echo "==== $r" >&2; head -60 "$r" >&2; done
  rc=1
else
  echo "test_sanitize.sh: no sanitizer report"
fi
exit $rc
