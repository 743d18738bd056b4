#!/usr/bin/env bash
# large_corpus_measure.sh STEP SIZE [BIN]: memory, time and disk of data preparation and pretraining at scale on a
# synthetic corpus made by tools/bench/scripts/make_large_corpus.py SIZE $WORK/corpus_SIZE (SIZE: 250M, 1G, 2G). Every command
# runs under nice -n $NICE (default 19); create and pretrain run through tools/bench/scripts/peak_rss.py, which writes
# $WORK/results/STEP_SIZE.json (peak RSS, wall time, load averages).
#   create    create-pretraining-data, dupe_factor 1, T=128, P=20, uncased, shards of at most 2048 instances
#   pretrain  bert-mini, T=128, batch 32, $STEPS (default 200) steps on those shards, windows of one shard: 200 x 32 =
#             6400 samples > 3 x 2048, so at least three window (shard) boundaries; metrics.jsonl has each step's
#             data wait, summarised at the end
#   rnext     (SIZE ignored) the random-next share of create-pretraining-data on the Gutenberg corpus, dupe_factor 1,
#             for each seed of $SEEDS (default 1-8) and windows of 64 MB (one window: the whole-corpus rule), 4 and
#             1 MB: $WORK/results/rnext.tsv and the mean and standard deviation per window size
# BIN defaults to build/bertrain; WORK to ../runs/large (beside the clone); THREADS sets --num_threads. Another binary's runs get
# another STEP name via TAG (e.g. TAG=old BIN=/path/to/old/bertrain: create_old_SIZE; the old
# create-pretraining-data takes no --max_instances_per_shard, so it writes --num_shards 8).
set -euo pipefail
cd "$(dirname "$0")/../../.."
step=$1 size=${2:-} bin=${3:-build/bertrain}
W=${WORK:-../runs/large}
tag=${TAG:+_$TAG}
vocab=data/vocab/bert-base-uncased-vocab.txt
mkdir -p "$W/results"
measure() {  # NAME COMMAND...
  local name=$1
  shift
  /usr/bin/python3 tools/bench/scripts/peak_rss.py --json "$W/results/$name.json" -- nice -n "${NICE:-19}" "$@"
}
case "$step" in
  create)
    rm -rf "$W/shards${tag}_$size"
    if [ -n "$tag" ]; then shard_flag=(--num_shards 8); else shard_flag=(--max_instances_per_shard 2048); fi
    measure "create${tag}_$size" "$bin" create-pretraining-data --input_file "$W/corpus_$size/*.txt" \
      --output_dir "$W/shards${tag}_$size" --vocab_file "$vocab" --do_lower_case=true --max_seq_length 128 \
      --max_predictions_per_seq 20 --dupe_factor 1 --random_seed 12345 "${shard_flag[@]}" > "$W/results/create${tag}_$size.log" 2>&1
    tail -n 1 "$W/results/create${tag}_$size.log"
    ;;
  pretrain)
    rm -rf "$W/pretrain${tag}_$size"
    steps=${STEPS:-200}
    extra=()
    [ -n "$tag" ] || extra=(--shuffle_window_shards=1)
    measure "pretrain${tag}_$size" "$bin" ${THREADS:+--num_threads "$THREADS"} pretrain --no_progress --bert_config_file=configs/model/bert-mini.json \
      --vocab_file="$vocab" --input_file="$W/shards_$size" --output_dir="$W/pretrain${tag}_$size" \
      --max_seq_length=128 --max_predictions_per_seq=20 --train_batch_size=32 --micro_batch_size=32 \
      --num_train_steps="$steps" --learning_rate=1e-3 --num_warmup_steps=$(( steps < 20 ? steps : 20 )) --optimizer.name=lamb \
      --save_checkpoints_steps=100000 --seed=1 "${extra[@]}" > "$W/results/pretrain${tag}_$size.log" 2>&1
    # Data wait: per step, and the mean over steps 2.. (the first step waits for the first window).
    /usr/bin/python3 - "$W/pretrain${tag}_$size/metrics.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"eval"' not in l]
if "data_wait_fraction" not in rows[0]:
    sys.exit(0)
w = [r["data_wait_fraction"] for r in rows[1:]]
sec = [r["data_wait_seconds"] for r in rows[1:]]
step = [32 / r["sequences_per_second"] for r in rows[1:]]
print(f"steps {len(rows)}: first step waited {rows[0]['data_wait_seconds']:.2f} s; steps 2-{len(rows)}: data wait "
      f"{100 * sum(sec) / sum(step):.3f}% of step time in all, max {100 * max(w):.2f}% of a step; mean step "
      f"{statistics.mean(step):.2f} s")
PY
    ;;
  rnext)
    corpus=$W/rnext/pretrain_corpus.txt
    mkdir -p "$W/rnext"
    [ -s "$corpus" ] || xz -dc ../shared/data/gutenberg_en/pretrain_corpus.txt.xz > "$corpus"
    : > "$W/results/rnext.tsv"
    for seed in ${SEEDS:-1 2 3 4 5 6 7 8}; do
      for mb in 64 4 1; do
        out=$W/rnext/seed${seed}_window$mb
        rm -rf "$out"
        line=$(nice -n "${NICE:-19}" "$bin" create-pretraining-data --input_file "$corpus" --output_dir "$out" \
          --vocab_file "$vocab" --do_lower_case=true --max_seq_length 128 --max_predictions_per_seq 20 \
          --dupe_factor 1 --random_seed "$seed" --window_mb "$mb" 2>&1 | grep "done:")
        printf '%s\t%s\t%s\n' "$seed" "$mb" "$line" >> "$W/results/rnext.tsv"
        rm -rf "$out"
      done
    done
    /usr/bin/python3 - "$W/results/rnext.tsv" <<'PY'
import re, statistics, sys
share = {}
for line in open(sys.argv[1]):
    seed, mb, done = line.rstrip("\n").split("\t", 2)
    windows = int(re.search(r"done: (\d+) windows", done).group(1))
    share.setdefault((int(mb), windows), []).append(float(re.search(r"([0-9.]+)% random next", done).group(1)))
for (mb, windows), v in sorted(share.items(), reverse=True):
    sd = statistics.stdev(v) if len(v) > 1 else 0.0
    print(f"window {mb} MB ({windows} windows): random next {statistics.mean(v):.2f}% mean, sd {sd:.2f}, "
          f"{min(v):.2f}-{max(v):.2f}% over {len(v)} seeds")
PY
    ;;
  *)
    echo "usage: $0 create|pretrain|rnext SIZE [BIN]" >&2
    exit 2
    ;;
esac
