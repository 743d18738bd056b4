#!/usr/bin/env bash
# bench_predict_test.sh BUILD_DIR SOURCE_DIR: a smoke run of `bertrain bench predict` on bert-mini-en and the QNLI
# fixture (one dev example, a few latency requests): all three ran (bertrain, ONNX Runtime on export-onnx's model and
# on PyTorch's torch.onnx.export of the same weights), the JSON line has every field and sane values (speed itself
# is measured by the benchmark, not by tests); then --model (a random-weight tiny checkpoint) and its bad
# combinations and the outputs a run needs at its end (one error line before any timing, no temporary directory left). Exit 77 (skip) without node, ONNX Runtime or python3-torch.
set -euo pipefail
build=$1
src=$2
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
if ! command -v node > /dev/null || [ ! -f "$src/.deps/onnxruntime/node_modules/onnxruntime-node/package.json" ]; then
  echo "skipped: node or ONNX Runtime (.deps/onnxruntime, scripts/setup.sh) is missing"
  exit 77
fi
if ! /usr/bin/python3 -c 'import torch' 2> /dev/null; then
  echo "skipped: python3-torch (scripts/setup.sh) is missing"
  exit 77
fi
"$build/bertrain" --num_threads 1 bench predict --checkpoint "$src/data/checkpoints/bert-mini-en" \
  --data_dir "$src/tests/fixtures/glue/QNLI" --batch_size 4 --latency_requests 5 --json_out "$t/out.jsonl" | tee "$t/stdout"
grep -q "^bertrain length-sorted (prediction path)" "$t/stdout"
grep -q "^onnxruntime length-sorted, padded to longest" "$t/stdout"
grep -q "^onnxruntime (torch.onnx.export) file order, padded to longest" "$t/stdout"
/usr/bin/python3 - "$t/out.jsonl" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[-1])
assert r["task"] == "encoder" and r["examples"] == 1 and r["threads"] == 1, r
for side in ("bertrain", "onnxruntime", "onnxruntime_torch_export"):
    for path in ("length_sorted", "file_order"):
        x = r[side][path]
        assert x["sequences_per_s"] > 0 and x["real_tokens_per_s"] > x["sequences_per_s"], (side, path, x)
        assert 0 <= x["padding_share"] < 1, x
    lat = r[side]["latency"]
    assert lat["requests"] == 5 and 0 < lat["p50_ms"] <= lat["p99_ms"], lat
print("bench predict smoke: ok")
PY
# --model: a random-weight checkpoint of a named size with the given vocabulary, written into --work_dir and
# exported from there; the temporary work directory of a run without --work_dir is removed, errors included.
"$build/bertrain" --num_threads 1 bench predict --model tiny --vocab_file "$src/data/checkpoints/bert-mini-en/vocab.txt" \
  --data_dir "$src/tests/fixtures/glue/QNLI" --batch_size 4 --latency_requests 5 --torch_export=false \
  --work_dir "$t/work" --json_out "$t/tiny.jsonl" > "$t/stdout-tiny"
grep -q "^onnxruntime length-sorted, padded to longest" "$t/stdout-tiny"
test -f "$t/work/random-tiny/model.safetensors" && test -f "$t/work/random-tiny/vocab.txt"
/usr/bin/python3 - "$t/tiny.jsonl" "$t/work/random-tiny/config.json" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[-1])
c = json.load(open(sys.argv[2]))
assert r["random_model"] == "tiny" and r["task"] == "encoder", r
assert c["num_hidden_layers"] == 2 and c["hidden_size"] == 128, c
assert r["onnxruntime"]["latency"]["requests"] == 5 and "onnxruntime_torch_export" not in r, r
print("bench predict --model: ok")
PY
mkdir -p "$t/tmp"
for bad in "--model tiny" "--model tiny --vocab_file $t/missing.txt" \
  "--model tiny --vocab_file $src/data/checkpoints/bert-mini-en/vocab.txt --checkpoint $src/data/checkpoints/bert-mini-en" \
  "--checkpoint $src/data/checkpoints/bert-mini-en --vocab_file $src/data/checkpoints/bert-mini-en/vocab.txt" \
  "--checkpoint $t/no_such_checkpoint" "--checkpoint $src/data/checkpoints/bert-mini-en --json_out $t/no_dir/out.jsonl" \
  "--checkpoint $src/data/checkpoints/bert-mini-en --ort_script $t/no_such.js"; do
  # shellcheck disable=SC2086  # the flags split on spaces on purpose
  if TMPDIR="$t/tmp" "$build/bertrain" bench predict $bad --data_dir "$src/tests/fixtures/glue/QNLI" 2> "$t/err"; then
    echo "bench predict $bad: expected a non-zero exit"; exit 1
  fi
  [ "$(wc -l < "$t/err")" -eq 1 ] || { echo "bench predict $bad: expected one error line:"; cat "$t/err"; exit 1; }
  cat "$t/err"
done
[ -z "$(ls -A "$t/tmp")" ] || { echo "temporary work directories left behind"; exit 1; }
echo "bench predict bad --model combinations: ok"
