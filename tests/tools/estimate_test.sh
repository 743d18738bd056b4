#!/usr/bin/env bash
# estimate_test.sh BUILD_DIR SOURCE_DIR: `bertrain estimate` projects the evaluations the trainer runs. On a
# two-phase recipe with eval_every_steps, the number of evaluations per phase and the batches of each (counted here
# from the shards with h5py) equal what `pretrain` with the same recipe logs; without eval_dir no evaluation is
# projected. (Times are not asserted.)
. "$(dirname "$0")/p32_prelude.sh"
cat > "$t/recipe.json" <<JSON
{"bert_config_file": "$build/trainer_test/tiny.json", "vocab_file": "$src/data/vocab/bert-base-uncased-vocab.txt",
 "eval_dir": "$data", "eval_every_steps": 4, "save_checkpoints_steps": 100, "seed": 5,
 "phases": [
  {"input_dir": "$data", "max_seq_length": 32, "max_predictions_per_seq": 5, "train_batch_size": 8, "micro_batch_size": 4,
   "learning_rate": 1e-3, "warmup_proportion": 0.1, "num_train_steps": 10},
  {"input_dir": "$data", "max_seq_length": 32, "max_predictions_per_seq": 5, "train_batch_size": 6, "micro_batch_size": 3,
   "learning_rate": 1e-3, "warmup_proportion": 0.1, "num_train_steps": 7}]}
JSON
"$build/bertrain" --num_threads 1 estimate --config "$t/recipe.json" --micro_steps 1 > "$t/estimate.txt"
cat "$t/estimate.txt"
# Batches of one evaluation at micro-batch B: ceil(samples / B) per shard of eval_dir.
batches() {
  /usr/bin/python3 - "$data" "$1" <<'PY'
import glob, os, sys
import h5py
d, b = sys.argv[1], int(sys.argv[2])
n = 0
for p in sorted(glob.glob(os.path.join(d, "*.hdf5"))):
    with h5py.File(p, "r") as f:
        n += -(-f["input_ids"].shape[0] // b)
print(n)
PY
}
"$build/bertrain" --num_threads 1 pretrain --config "$t/recipe.json" --output_dir "$t/run" --no_progress > "$t/train.log" 2>&1
# Evaluations the trainer ran in each phase: steps 4, 8, 10 (end of phase 1), then 12, 16, 17 (end of phase 2);
# counting phase 2 from step 0 instead of 10 would give 2, not 3.
ran1=$(grep -cE "eval at step (4|8|10) " "$t/train.log")
ran2=$(grep -cE "eval at step (12|16|17) " "$t/train.log")
all=$(grep -c "eval at step" "$t/train.log")
[ "$all" -eq $((ran1 + ran2)) ] || { echo "FAIL: unexpected evaluations: $(grep 'eval at step' "$t/train.log")" >&2; exit 1; }
grep -qE "^1 .* \(with $ran1 evaluations of $(batches 4) batches," "$t/estimate.txt" ||
  { echo "FAIL: phase 1 should project $ran1 evaluations of $(batches 4) batches" >&2; exit 1; }
grep -qE "^2 .* \(with $ran2 evaluations of $(batches 3) batches," "$t/estimate.txt" ||
  { echo "FAIL: phase 2 should project $ran2 evaluations of $(batches 3) batches" >&2; exit 1; }
# Without eval_dir: no evaluation in the projection.
"$build/bertrain" --num_threads 1 estimate --config "$t/recipe.json" --micro_steps 1 --eval_dir= > "$t/no_eval.txt"
! grep -q "evaluations" "$t/no_eval.txt" || { cat "$t/no_eval.txt"; echo "FAIL: evaluations without eval_dir" >&2; exit 1; }
echo "estimate_test: ok (phase 1: $ran1 evaluations, phase 2: $ran2)"
# The cluster model: a table per phase for 1, 2, 4, ... 1024 ranks and --ranks 3, the rows whose global batch does
# not split marked, and the whole recipe only for rank counts every phase splits into (1 and 2 here: batch 8 and 6).
"$build/bertrain" --num_threads 1 estimate --config "$t/recipe.json" --micro_steps 1 --eval_dir= --ranks 3 \
  --network_gbps 10 --price_per_hour 2 > "$t/cluster.txt"
cat "$t/cluster.txt"
grep -q "^phase 1: global batch 8, [0-9]* gradient buckets" "$t/cluster.txt"
grep -qE "^ +3 +3 +- +\(the global batch of 8 does not split over 3 ranks\)" "$t/cluster.txt"
grep -qE "^ +3 +3 +2 " "$t/cluster.txt"  # phase 2: 6 / 3 = 2 sequences per rank
grep -qE "^ +1024 +1024 +- " "$t/cluster.txt"
[ "$(sed -n '/^whole recipe:/,$p' "$t/cluster.txt" | grep -cE '^ +[0-9]+ ')" -eq 2 ] ||
  { echo "FAIL: the whole recipe should have rows for 1 and 2 ranks only" >&2; exit 1; }
echo "estimate_test: cluster table ok"
