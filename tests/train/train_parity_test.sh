#!/usr/bin/env bash
# train_parity_test.sh BUILD_DIR SOURCE_DIR CASE [FLAG...]: `bertrain pretrain` against the PyTorch reference of
# tests/train/gen_train_parity.py, step by step. CASE: adamw | lamb (50 steps, every step's loss within
# 1e-5 relative) or adamw_bf16 | lamb_bf16 (--bf16, the first 20 steps within 2%; exit 77 = skipped where
# `bertrain info` says bf16 matmuls are unavailable). Extra FLAGs go to `bertrain pretrain` (to check that a
# perturbed run fails, e.g. --learning_rate=1.01e-3).
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
case_name=$3
shift 3
bin="$build/bertrain"
data="$src/tests/fixtures/train_parity"
out="$build/train_parity/$case_name"

case "$case_name" in
  adamw | lamb) opt=$case_name steps=50 rtol=1e-5 flags=() ;;
  adamw_bf16 | lamb_bf16)
    opt=${case_name%_bf16} steps=20 rtol=0.02 flags=(--bf16 --num_train_steps=20)
    if "$bin" info | grep -q "^bf16 matmuls (--bf16) unavailable"; then
      echo "SKIP: $("$bin" info | grep '^bf16')"
      exit 77
    fi
    ;;
  *)
    echo "unknown case $case_name" >&2
    exit 2
    ;;
esac

rm -rf "$out"
mkdir -p "$(dirname "$out")"
# The recipe's paths (config, vocab, initial weights, shards) are relative to the data directory. Full batch:
# the loader's shuffle only reorders the 125 instances inside each step (5 micro-batches of 25).
(cd "$data" && "$bin" --num_threads 1 pretrain --config "recipe_$opt.json" --output_dir="$out" --no_progress \
  "${flags[@]}" "$@")

/usr/bin/python3 - "$data/expected.json" "$out/metrics.jsonl" "$opt" "$steps" "$rtol" <<'PY'
import json, sys
expected_path, metrics_path, opt, steps, rtol = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
want = json.load(open(expected_path))[opt]["loss"][:steps]
rows = [json.loads(line) for line in open(metrics_path)]
rows = [r for r in rows if not r.get("eval")]
assert [r["step"] for r in rows] == list(range(1, steps + 1)), f"metrics.jsonl steps: {[r['step'] for r in rows]}"
assert not any(r["skipped"] for r in rows), "a step was skipped"
rel = [abs(r["loss"] - w) / abs(w) for r, w in zip(rows, want)]
worst = max(range(steps), key=rel.__getitem__)
print(f"{opt}: {steps} steps, loss {want[0]:.6f} -> {want[-1]:.6f}; max relative difference {rel[worst]:.3e} at "
      f"step {worst + 1} (tolerance {rtol:g})")
bad = [(i + 1, rows[i]["loss"], want[i], rel[i]) for i in range(steps) if not rel[i] <= rtol]
for step, got, ref, r in bad:
    print(f"  step {step}: bertrain {got!r} PyTorch {ref!r} relative {r:.3e}", file=sys.stderr)
sys.exit(1 if bad else 0)
PY
