#!/usr/bin/env bash
# check_quickstart_identical.sh OLD_BIN NEW_BIN [WORK_DIR]: behaviour-unchanged check for refactorings:
# makes the quickstart's shards with both binaries (they must be byte-identical), pretrains the quickstart recipe
# (bert-tiny, 100 steps at 128 then 10 at 512) with each on the same shards and thread count, and compares
# every metrics.jsonl record except the timing fields, and the final model.safetensors byte for byte.
# OLD_BIN is a build of the commit before the change (e.g. `git worktree add /tmp/old <commit>` and build it);
# WORK_DIR (default /tmp/quickstart-identical) keeps OLD_BIN's run, so a second NEW_BIN is checked in half the time.
set -euo pipefail
cd "$(dirname "$0")/../.."
old=$(realpath "$1") new=$(realpath "$2") W=${3:-/tmp/quickstart-identical}
mkdir -p "$W"
VOCAB=data/vocab/bert-base-uncased-vocab.txt
awk -v train="$W/train.txt" -v eval="$W/eval.txt" '
  function out() { return (doc >= 15 && doc < 26) ? eval : train }
  BEGIN { doc = 0; prev = "" }
  /^$/ { if (prev != "") { print "" > out(); doc++ } prev = ""; next }
  { print > out(); prev = $0 }' data/gutenberg/sample_small.txt
shards() {  # BIN TAG
  for spec in "train 128 20 3 1 phase1_128" "train 512 80 1 2 phase2_512" "eval 128 20 1 3 eval128"; do
    set -- "$1" "$2" $spec
    [ -f "$W/$2/$8/dataset_info.json" ] || "$1" --log_level warn create-pretraining-data --input_file "$W/$3.txt" \
      --output_dir "$W/$2/$8" --vocab_file "$VOCAB" --do_lower_case=true --max_seq_length "$4" \
      --max_predictions_per_seq "$5" --dupe_factor "$6" --random_seed "$7"
  done
}
shards "$old" old
shards "$new" new
for d in phase1_128 phase2_512 eval128; do
  for f in "$W/old/$d"/*.hdf5; do cmp "$f" "$W/new/$d/$(basename "$f")"; done
done
echo "shards: byte-identical"
run() {  # BIN TAG
  [ -f "$W/$2/run/checkpoint-110/model.safetensors" ] && [ "$2" = old ] && return 0
  rm -rf "$W/$2/run"
  OMP_NUM_THREADS=2 "$1" --num_threads 2 --log_level warn pretrain --config configs/pretrain/quickstart.json \
    --output_dir="$W/$2/run" --phases.1.input_dir="$W/old/phase1_128" --phases.2.input_dir="$W/old/phase2_512" \
    --eval_dir="$W/old/eval128" --no_progress
}
run "$old" old
run "$new" new
/usr/bin/python3 - "$W/old/run/metrics.jsonl" "$W/new/run/metrics.jsonl" <<'PY'
import json, sys
# Wall-clock measurements differ from run to run: every *_seconds, *_per_second and *_fraction field.
def timing(k):
    return k.endswith(("_seconds", "_per_second", "_fraction"))
a = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
b = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
assert len(a) == len(b), f"{len(a)} vs {len(b)} metrics records"
n = 0
for x, y in zip(a, b):
    for k in x:
        if timing(k):
            continue
        assert k in y and x[k] == y[k], f"step {x.get('step')}: {k} {x[k]!r} vs {y.get(k)!r}"
        n += 1
print(f"metrics.jsonl: {len(a)} records, {n} values identical (timing fields excluded)")
PY
cmp "$W/old/run/checkpoint-110/model.safetensors" "$W/new/run/checkpoint-110/model.safetensors"
echo "checkpoint-110/model.safetensors: byte-identical"
