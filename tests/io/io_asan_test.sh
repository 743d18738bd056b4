#!/usr/bin/env bash
# io_asan_test.sh SOURCE_DIR BUILD_DIR: builds io_test and the CLI with AddressSanitizer + UBSan in a separate
# build directory (Release flags, no -g, to keep the build short) and runs all io tests, above all the
# bad-input cases (bad safetensors files and configs, through the library and through `bertrain inspect`):
# each must give one clear error and no sanitizer report.
set -euo pipefail
src=$1
bdir=$2
cmake -S "$src" -B "$bdir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBERTRAIN_SANITIZE=ON >/dev/null
cmake --build "$bdir" -j 2 --target io_test bertrain_cli
# Sanitizer findings abort with their own exit code, distinct from bertrain's error exit (1).
export ASAN_OPTIONS=exitcode=86:abort_on_error=0:detect_leaks=1
export UBSAN_OPTIONS=halt_on_error=1:exitcode=87:print_stacktrace=1
# All io tests: the bad-file cases (library and CLI) plus round trips; a few seconds once built.
"$bdir/tests/io/io_test"
