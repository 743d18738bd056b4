#!/usr/bin/env bash
# consumer_test.sh BUILD_DIR SOURCE_DIR [shared|static]: installs bertrain into a temporary prefix and builds
# tests/project/consumer against the installed package only (find_package + the umbrella header), then runs it: XOR must
# reach 100% accuracy, and a tiny BertForSequenceClassification is finetuned for 20 steps on a GLUE-format task,
# evaluated with the task's metric, with atomic checkpoints that load back, converted to a TF bundle and loaded back
# from it (LevelDB), and a TF bundle with snappy-compressed index blocks is read; the task pipeline examples
# (classify, tag, answer, embed) build and run against finetuned checkpoints (tests/tasks/pipeline_predict_test.sh).
#   shared: installs BUILD_DIR (a shared build).
#   static: configures and builds the libraries again with -DBERTRAIN_BUILD_SHARED=OFF (no tests, no tools) and
#           installs that, so the package's find_dependency list is what links the consumer.
set -euo pipefail
build=$1
src=$2
kind=${3:-shared}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
if [ "$kind" = static ]; then
  cmake -S "$src" -B "$tmp/lib" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBERTRAIN_BUILD_SHARED=OFF \
    -DBERTRAIN_BUILD_TESTS=OFF -DBERTRAIN_BUILD_TOOLS=OFF "${launcher[@]}" >/dev/null
  cmake --build "$tmp/lib" >/dev/null
  cmake --install "$tmp/lib" --prefix "$tmp/prefix" >/dev/null
  ls "$tmp/prefix"/lib*/libbertrain_core.a >/dev/null
  ! ls "$tmp/prefix"/lib*/libbertrain_core.so* >/dev/null 2>&1 || { echo "static install has shared libraries" >&2; exit 1; }
else
  cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
  ls "$tmp/prefix"/lib*/libbertrain_core.so.0.1 >/dev/null  # SOVERSION
fi
cmake -S "$src/tests/project/consumer" -B "$tmp/build" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" > "$tmp/configure.log"
# find_package(bertrain 0.1) finds the package and sets bertrain_VERSION (the consumer checks it is 0.1.x) ...
version=$(sed -n 's/^-- bertrain_VERSION //p' "$tmp/configure.log")
[ -n "$version" ] || { echo "the consumer's configure printed no bertrain_VERSION" >&2; exit 1; }
echo "installed package: bertrain $version"
# ... and the package refuses a version it is not compatible with (SameMinorVersion: 0.2 and 1.0 are not 0.1.x).
for v in 0.2 1.0; do
  if cmake -S "$src/tests/project/consumer" -B "$tmp/build-$v" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" \
       -DBERTRAIN_REQUIRED_VERSION=$v > "$tmp/configure-$v.log" 2>&1; then
    echo "find_package(bertrain $v) accepted bertrain $version" >&2
    exit 1
  fi
  grep -q 'version' "$tmp/configure-$v.log" || { cat "$tmp/configure-$v.log" >&2; exit 1; }
done
# The installed command reports the same version (and the source revision) as the package.
if [ -x "$tmp/prefix/bin/bertrain" ]; then
  line=$("$tmp/prefix/bin/bertrain" --version)
  echo "$line"
  [[ "$line" == "bertrain $version (git "?*")" ]] || { echo "bertrain --version: '$line'" >&2; exit 1; }
fi
cmake --build "$tmp/build"
# The consumer must not see bertrain's private dependencies through the package.
if grep -rqE '#include *[<"](Eigen/|oneapi/dnnl|dnnl|spdlog/|CLI/|sentencepiece|hdf5|utf8proc|nlohmann/|mpi\.h|leveldb/|snappy|google/protobuf)' "$tmp/prefix/include"; then
  echo "installed headers include private dependencies" >&2
  exit 1
fi
out=$("$tmp/build/xor_mlp")
echo "$out"
grep -q "accuracy 100%" <<<"$out"
"$tmp/build/finetune_glue" "$src/data/vocab/bert-base-uncased-vocab.txt" "$tmp/work" \
  "$src/tests/fixtures/tf_checkpoints/tf_serving/saved_model_half_plus_two_cpu/variables"
# The task pipeline examples (one per task, built above): the feature-extraction one runs on the tiny TF checkpoint
# directory (bert_config.json and vocab.txt beside the prefix); tests/tasks/pipeline_predict_test.sh runs all four
# on finetuned checkpoints against the training commands' own predictions.
vec=$(echo "all work and no play" | "$tmp/build/embed" "$src/tests/fixtures/tf_checkpoints/keras_bert_tiny")
[ "$(wc -w <<<"$vec")" = 4 ] || { echo "embed: expected 4 values, got '$vec'" >&2; exit 1; }
# The other three need finetuned checkpoints: the pipeline test finetunes them with the build's bertrain and checks
# these installed-package programs against the commands' own predictions (to 1e-6) and `bertrain predict`.
"$src/tests/tasks/pipeline_predict_test.sh" "$build" "$src" "$tmp/build" "$tmp/pipeline_predict"
