#!/usr/bin/env bash
# bench_predict_test.sh BUILD_DIR SOURCE_DIR: a smoke run of `bertrain bench predict` on bert-mini-en and the QNLI
# fixture (one dev example, a few latency requests): all three ran (bertrain, ONNX Runtime on export-onnx's model and
# on PyTorch's torch.onnx.export of the same weights), the JSON line has every field and sane values (speed itself
# is measured by the benchmark, not by tests). Exit 77 (skip) without node, ONNX Runtime or python3-torch.
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
