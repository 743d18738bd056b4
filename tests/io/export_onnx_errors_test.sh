#!/usr/bin/env bash
# export_onnx_errors_test.sh BUILD_DIR SOURCE_DIR: `bertrain export-onnx` on bad input fails with one error line
# naming what is wrong (stdout empty) and leaves no model file, partial or temporary, behind; a model already at
# the output path stays as it was. Cases: a checkpoint without the head asked for, an unknown --task, an opset
# outside 13..17, an output directory that does not exist, is a file, or is not writable, a missing vocab, and a
# write that fails half way (a file-size limit).
set -euo pipefail
bin=$1/bertrain
src=$2
t=$(mktemp -d)
trap 'chmod -R u+w "$t"; rm -rf "$t"' EXIT

# A checkpoint directory from the golden tiny BERT (pretraining heads, no classifier or qa_outputs), 99 tokens.
ck=$t/ckpt
mkdir -p "$ck" "$t/out"
cp "$src/tests/fixtures/golden/model_gelu.safetensors" "$ck/model.safetensors"
cp "$src/tests/fixtures/golden/config_gelu.json" "$ck/config.json"
for i in $(seq 0 98); do echo "tok$i"; done > "$ck/vocab.txt"

fails=0
# expect_error NAME PATTERN OUTPUT ARGS...: exit non-zero, stdout empty, exactly one stderr line matching PATTERN,
# and no OUTPUT nor OUTPUT.tmp.* afterwards.
expect_error() {
  local name=$1 pattern=$2 out=$3
  shift 3
  local rc=0
  "$bin" export-onnx "$@" > "$t/stdout" 2> "$t/stderr" || rc=$?
  local lines
  lines=$(wc -l < "$t/stderr")
  if [ "$rc" -eq 0 ] || [ -s "$t/stdout" ] || [ "$lines" -ne 1 ] || ! grep -q -- "$pattern" "$t/stderr"; then
    echo "FAIL $name: rc=$rc, stderr ($lines lines):"; cat "$t/stderr"; echo "stdout:"; cat "$t/stdout"
    fails=$((fails + 1))
  elif [ -e "$out" ] || compgen -G "$out.tmp.*" > /dev/null; then
    echo "FAIL $name: $out (or a temporary file) left behind"; ls -la "$(dirname "$out")"
    fails=$((fails + 1))
  else
    echo "ok $name: $(cat "$t/stderr")"
  fi
}

out=$t/out/model.onnx
expect_error "no such head" "has no question-answering head: qa_outputs.weight is missing" "$out" \
  --checkpoint "$ck" --output "$out" --task question-answering
expect_error "no classifier" "has no sequence-classification head: classifier.weight is missing" "$out" \
  --checkpoint "$ck" --output "$out" --task sequence-classification
expect_error "unknown task" "unknown task 'qa'" "$out" --checkpoint "$ck" --output "$out" --task qa
expect_error "opset" "opset: expected 13 to 17, got 12" "$out" --checkpoint "$ck" --output "$out" --opset 12
expect_error "missing directory" "directory $t/nowhere/deeper does not exist" "$t/nowhere/deeper/model.onnx" \
  --checkpoint "$ck" --output "$t/nowhere/deeper/model.onnx"
touch "$t/afile"
expect_error "directory is a file" "$t/afile is not a directory" "$t/afile/model.onnx" \
  --checkpoint "$ck" --output "$t/afile/model.onnx"
expect_error "output is a directory" "is a directory; give the .onnx file's name" "$t/out/model.onnx" \
  --checkpoint "$ck" --output "$t/out"
# Not writable: a read-only directory stops a normal user, not root; sysfs stops root too.
if [ "$(id -u)" -eq 0 ]; then ro=/sys; else ro=$t/readonly; mkdir -p "$ro"; chmod 555 "$ro"; fi
expect_error "not writable" "directory $ro is not writable" "$ro/model.onnx" --checkpoint "$ck" --output "$ro/model.onnx"
mkdir -p "$t/novocab"
cp "$ck/model.safetensors" "$ck/config.json" "$t/novocab/"
expect_error "no vocab" "no vocab.txt beside the checkpoint" "$out" --checkpoint "$t/novocab" --output "$out"
expect_error "no checkpoint" "checkpoint $t/missing: no checkpoint directory" "$out" --checkpoint "$t/missing" --output "$out"

# A model already at the output path is left untouched by a failed export.
echo "previous model" > "$out"
expect_error "keeps the previous model" "has no token-classification head" "$t/out/never.onnx" \
  --checkpoint "$ck" --output "$out" --task token-classification
if [ "$(cat "$out")" != "previous model" ]; then echo "FAIL: the previous model.onnx was changed"; fails=$((fails + 1)); fi
rm -f "$out"

# A write that fails half way (the file-size limit stops it after 40 KiB of the ~95 KiB model): one error line,
# no model file, no temporary file (the tokenizer files, written first, are small enough).
(ulimit -f 40; fails=0; expect_error "write fails half way" "model.onnx" "$out" --checkpoint "$ck" --output "$out" \
  --task encoder; exit "$fails") || fails=$((fails + 1))

if [ "$fails" -ne 0 ]; then echo "$fails case(s) failed"; exit 1; fi
# And the same checkpoint exports fine.
"$bin" export-onnx --checkpoint "$ck" --output "$out" 2> "$t/stderr"
test -s "$out"
echo "all cases passed"
