#!/usr/bin/env bash
# torch_checkpoint_cli_test.sh BUILD_DIR SOURCE_DIR fast|bert_mini: PyTorch checkpoints through the `bertrain` binary.
#   fast      (files of the torch_checkpoints_gen fixture) `bertrain inspect` on every hostile or broken file exits
#             1 with one error line naming the file and the cause, an empty stdout, and no marker file; inspect
#             lists a pytorch_model.bin's tensors with its tied storages; `bertrain convert` of pytorch_model.bin
#             (f32, f16, bf16, views) writes the model.safetensors the Python side wrote, byte for byte, and
#             --output_format tf a checkpoint that converts back to the same file.
#   bert_mini bert-mini-en saved by torch.save: convert gives the original model.safetensors back byte for byte;
#             the sequence classifier finetuned in PyTorch predicts PyTorch's labels (and probabilities within 1e-4) on QNLI
#             pairs through run-classifier --init_checkpoint DIR.
set -euo pipefail
build=$1 src=$2 mode=$3
bin=$build/bertrain
/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "skipped: /usr/bin/python3 has no torch"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }

if [ "$mode" = fast ]; then
  gen=$build/torch_checkpoints
  [ -f "$gen/golden/pytorch_model.bin" ] || fail "$gen not generated (torch_checkpoints_gen)"
  work=$build/torch_checkpoint_cli_test
  rm -rf "$work" && mkdir -p "$work"
  for f in os_system:"refused global 'posix.system'" builtins_eval:"refused global 'builtins.eval'" \
           subprocess_popen:"refused global 'subprocess.Popen'" whole_module:"refused global 'torch.nn.modules" \
           forged_size:"address element 399 of a storage of 4" forged_numel:"needs 4000 bytes, its record has 16" \
           truncated:"not a readable zip archive" bomb_declared:"a zip bomb" \
           bomb_inflates:"holds more than its declared"; do
    name=${f%%:*} want=${f#*:}
    rc=0
    "$bin" inspect "$gen/hostile/$name.bin" >"$work/$name.out" 2>"$work/$name.err" || rc=$?
    [ "$rc" = 1 ] || fail "$name: inspect exited $rc"
    [ ! -s "$work/$name.out" ] || fail "$name: stdout not empty"
    [ "$(wc -l <"$work/$name.err")" = 1 ] || fail "$name: not one error line: $(cat "$work/$name.err")"
    grep -qF -- "$want" "$work/$name.err" || fail "$name: expected '$want' in: $(cat "$work/$name.err")"
    grep -qF -- "$gen/hostile/$name.bin" "$work/$name.err" || fail "$name: the error does not name the file"
  done
  for m in os_system builtins_eval subprocess_popen; do
    [ ! -e "$gen/hostile/MARKER_$m" ] || fail "MARKER_$m exists: a pickle ran"
  done

  "$bin" inspect "$gen/golden" >"$work/inspect.txt"
  grep -q "^format: PyTorch zip (torch.save), records under 'pytorch_model/', version 3$" "$work/inspect.txt" ||
    fail "inspect: format line: $(cat "$work/inspect.txt")"
  grep -q "^cls.predictions.decoder.weight *F32 *(99, 32)  (shares its storage with bert.embeddings.word_embeddings.weight)$" \
    "$work/inspect.txt" || fail "inspect: tied decoder line"
  grep -q "^bert.embeddings.position_ids *I64 *(1, 64)$" "$work/inspect.txt" ||
    fail "inspect: position_ids line"

  for v in golden golden_f16 golden_bf16 golden_views; do
    "$bin" --log_level warn convert --input "$gen/$v" --output "$work/$v" 2>"$work/$v.log"
    cmp "$work/$v/model.safetensors" "$gen/$v/expected.safetensors" || fail "$v: convert differs from Python's file"
  done
  # To TF and back: the same safetensors file (every tensor was f32), without the position_ids buffer.
  "$bin" --log_level warn convert --input "$gen/golden/pytorch_model.bin" --output "$work/tf" --output_format tf
  "$bin" --log_level warn convert --input "$work/tf" --output "$work/back"
  cmp "$work/back/model.safetensors" "$gen/golden/expected_without_buffers.safetensors" ||
    fail "pytorch_model.bin -> TF -> safetensors differs from Python's file"
  echo "torch_checkpoint_cli fast: ok"
  exit 0
fi

[ "$mode" = bert_mini ] || fail "mode '$mode': fast or bert_mini"
mini=$src/data/checkpoints/bert-mini-en
[ -f "$mini/model.safetensors" ] || { echo "skipped: $mini missing"; exit 77; }
gen=$build/torch_checkpoints_bert_mini
work=$build/torch_checkpoint_bert_mini_test
rm -rf "$gen" "$work" && mkdir -p "$work"
/usr/bin/python3 "$src/tests/io/gen_torch_checkpoints.py" "$gen" "$src" --bertrain "$bin" --bert_mini "$mini"
"$bin" --log_level warn convert --input "$gen/bert_mini/pytorch_model.bin" --output "$work/bert_mini"
cmp "$work/bert_mini/model.safetensors" "$mini/model.safetensors" || fail "bert-mini-en: convert differs from the original"
cmp "$gen/bert_mini/expected.safetensors" "$mini/model.safetensors" || fail "bert-mini-en: Python's file differs"
"$bin" --num_threads 2 --log_level warn run-classifier --task_name QNLI --data_dir "$gen/classifier/data" \
  --init_checkpoint "$gen/classifier" --vocab_file "$gen/classifier/vocab.txt" --max_seq_length 64 \
  --output_dir "$work/rc" --do_predict
/usr/bin/python3 - "$gen/classifier/expected_labels.tsv" "$work/rc/test_results.tsv" <<'PY'
import sys
want = [l.split("\t") for l in open(sys.argv[1]).read().splitlines()]
rows = open(sys.argv[2]).read().splitlines()
labels = ["entailment", "not_entailment"]
assert rows[0].split("\t") == labels, rows[0]  # the header names the labels in column order
got = [[float(x) for x in l.split("\t")] for l in rows[1:]]
assert len(want) == len(got) == 8, (len(want), len(got))
for w, g in zip(want, got):
    lab = labels[max(range(2), key=lambda i: g[i])]
    assert lab == w[1], f"pair {w[0]}: bertrain says {lab} ({g}), PyTorch {w[1]} ({w[2:]})"
    for i in range(2):
        assert abs(g[i] - float(w[2 + i])) < 1e-4, (w, g)
print("labels:", " ".join(w[1] for w in want))
PY
echo "torch_checkpoint_bert_mini: ok"
