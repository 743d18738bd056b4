#!/usr/bin/env bash
# consumer_test.sh BUILD_DIR SOURCE_DIR: installs bertrain into a temporary prefix, builds tests/consumer
# against the installed package only, and runs it (XOR must reach 100% accuracy).
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cmake -S "$src/tests/consumer" -B "$tmp/build" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/build"
# The consumer must not see bertrain's private dependencies through the package.
if grep -rqE '#include *[<"](Eigen/|oneapi/dnnl|dnnl|spdlog/|CLI/|sentencepiece|hdf5|utf8proc)' "$tmp/prefix/include"; then
  echo "installed headers include private dependencies" >&2
  exit 1
fi
out=$("$tmp/build/xor_mlp")
echo "$out"
grep -q "accuracy 100%" <<<"$out"
