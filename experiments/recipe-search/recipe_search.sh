#!/usr/bin/env bash
# recipe_search.sh: a pretraining recipe search in miniature. Each row is one hypothesis: the base
# recipe (configs/pretrain/search/base.json: bert-mini, LAMB lr 2e-3, global batch 128, warmup 10%, linear decay,
# dropout 0.1, next-sentence on, 15% masking, length 128, fp32) with one thing changed, trained on the same
# shards for the same token budget (49,152 sequences of 128 = 6.29 M tokens, about 20-25 minutes of bert-mini on
# this 2-core machine when it is quiet), evaluated on held-out text every 8,192 sequences.
#
# Usage: experiments/recipe-search/recipe_search.sh [ROW ...]        (rows in the order given; none: every row of ROWS below)
#        experiments/recipe-search/recipe_search.sh --list
#        experiments/recipe-search/recipe_search.sh --reestimate ROW ...   (estimate again, with EST_BIN, on a quiet machine: the old
#                                                        projection is kept as estimate.before-<time>.txt)
# ROW@xK (e.g. adamw-lr1e-3@x4) is ROW at K times the budget, successive halving's longer second run: the row's
# num_train_steps times K (so warmup and decay stretch with it), evaluated every 8,192 sequences as before, in
# its own directory OUT/ROW@xK.
# Environment: BIN (bertrain binary, default build/bertrain), EST_BIN (the one that runs `estimate`, default BIN:
# a newer binary may project better while the rows keep training with one binary), OUT (default ../runs/recipe-search: outside the
# clone), SHARED (default ../shared), THREADS (default: all cores), EST_ARGS (extra flags for `estimate` only, e.g.
# --unpad=never when EST_BIN is newer than BIN: the rows' binary has only the padded encoder, and on synthetic
# batches (12.5% padding) `estimate`'s default would time the unpadded one).
# Resumable: a finished row has OUT/<row>/DONE and is skipped; an unfinished one continues with --resume. To
# pause (e.g. while benchmarks need a quiet machine): kill -TERM the script's process group (the trainer saves a
# checkpoint and exits); run the same command again to continue. Each row first runs `bertrain estimate` of
# its own recipe (OUT/<row>/estimate.txt); OUT/<row>/wall.log records the start and end of every segment.
# experiments/recipe-search/recipe_table.py OUT prints the table of docs/pretraining-recipes.md.
# ARCHIVE=DIR (e.g. experiments/recipe-search/runs in a clone): each finished row's small files (metrics.jsonl as .xz, recipe.json,
# estimate*.txt, wall.log, overrides.txt, DONE) and the held-out unigram baseline are copied to DIR/<row>/ and
# DIR/data/, so that the table and curves survive the loss of OUT (checkpoints and shards are not kept):
# recipe_table.py DIR. A finished row is archived when the search passes it and again after --reestimate.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-build/bertrain}
EST_BIN=${EST_BIN:-$BIN}
read -r -a est_args <<< "${EST_ARGS:-}"
OUT=${OUT:-../runs/recipe-search}
SHARED=${SHARED:-../shared}
VOCAB=data/vocab/bert-base-uncased-vocab.txt
BASE=configs/pretrain/search/base.json
D=$OUT/data
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
thr=(); [ -n "${THREADS:-}" ] && thr=(--num_threads "$THREADS")

# name | overrides of the base recipe (input_dir and eval_dir are added below). Budget: 49,152 sequences.
# Batch rows scale LAMB's lr with sqrt(batch) from the base (You et al. 2019, section 4) and keep the budget.
# bias-unigram starts from the base's initial weights with the output bias at the log unigram distribution
# (scripts/unigram_bias_init.py): the budget then goes to learning context instead of token frequencies.
ROWS=(
  "base|"
  "lamb-lr1e-3|--learning_rate=1e-3"
  "lamb-lr4e-3|--learning_rate=4e-3"
  "adamw-lr5e-4|--optimizer.name=adamw --learning_rate=5e-4"
  "adamw-lr1e-3|--optimizer.name=adamw --learning_rate=1e-3"
  "adamw-lr2e-3|--optimizer.name=adamw --learning_rate=2e-3"
  "dropout-0|--bert_config_file=configs/pretrain/search/bert-mini-nodropout.json"
  "nsp-off|--next_sentence=false"
  "warmup-0.02|--warmup_proportion=0.02"
  "warmup-0.3|--warmup_proportion=0.3"
  "batch-32|--train_batch_size=32 --num_train_steps=1536 --learning_rate=1e-3 --eval_every_steps=256 --save_checkpoints_steps=256"
  "batch-64|--train_batch_size=64 --num_train_steps=768 --learning_rate=1.414e-3 --eval_every_steps=128 --save_checkpoints_steps=128"
  "batch-256|--train_batch_size=256 --num_train_steps=192 --learning_rate=2.828e-3 --eval_every_steps=32 --save_checkpoints_steps=32"
  "mask-30|--input_dir=@train128m30 --max_predictions_per_seq=40"
  "seq-64|--input_dir=@train64 --max_seq_length=64 --max_predictions_per_seq=10 --train_batch_size=256 --micro_batch_size=64"
  "bf16|--bf16=true"
  "lamb-b1024|--train_batch_size=1024 --num_train_steps=48 --learning_rate=5.657e-3 --eval_every_steps=8 --save_checkpoints_steps=8"
  "adamw-b32|--optimizer.name=adamw --train_batch_size=32 --num_train_steps=1536 --learning_rate=5e-4 --eval_every_steps=256 --save_checkpoints_steps=256"
  "bias-unigram|--init_checkpoint=@init-unigram"
  "bias-unigram-adamw-lr1e-3|--init_checkpoint=@init-unigram --optimizer.name=adamw --learning_rate=1e-3"
  "bias-unigram-lamb-lr4e-3|--init_checkpoint=@init-unigram --learning_rate=4e-3"
  "bias-unigram-adamw-b32|--init_checkpoint=@init-unigram --optimizer.name=adamw --train_batch_size=32 --num_train_steps=1536 --learning_rate=5e-4 --eval_every_steps=256 --save_checkpoints_steps=256"
)

# archive_row ROW: ROW's small files into ARCHIVE/ROW (replaced whole), the unigram baseline into ARCHIVE/data.
archive_row() {
  local name=$1 dst=$ARCHIVE/$1
  rm -rf "$dst.tmp" && mkdir -p "$dst.tmp" "$ARCHIVE/data"
  cp "$OUT/$name"/{metrics.jsonl,recipe.json,estimate*.txt,wall.log,overrides.txt,DONE} "$dst.tmp/"
  cp "$D/eval128.unigram.txt" "$ARCHIVE/data/"
  xz -9 "$dst.tmp/metrics.jsonl"  # thousands of lines: kept compressed (recipe_table.py and plot_metrics.py read .xz)
  rm -rf "$dst" && mv "$dst.tmp" "$dst"
}

if [ "${1:-}" = "--reestimate" ]; then
  shift
  for name in "$@"; do
    dir=$OUT/$name
    [ -f "$dir/overrides.txt" ] || { echo "recipe_search: $dir has no overrides.txt (never started)" >&2; exit 2; }
    mapfile -t args < "$dir/overrides.txt"
    nice "$EST_BIN" "${thr[@]}" estimate --config "$BASE" "${args[@]}" "${est_args[@]}" > "$dir/estimate.txt.tmp"
    [ -s "$dir/estimate.txt" ] && mv "$dir/estimate.txt" "$dir/estimate.before-$(date +%Y%m%dT%H%M).txt"
    mv "$dir/estimate.txt.tmp" "$dir/estimate.txt"
    [ -n "${ARCHIVE:-}" ] && [ -f "$dir/DONE" ] && archive_row "$name"
    echo "recipe_search: $name: $(tail -1 "$dir/estimate.txt")"
  done
  exit 0
fi
if [ "${1:-}" = "--list" ]; then
  for r in "${ROWS[@]}"; do echo "${r%%|*}: ${r#*|}"; done
  exit 0
fi

# ---- data: Gutenberg training books + Wikipedia (SQuAD v1.1 train contexts), held-out books and articles ----
prepare_data() {
  . experiments/common/shards.sh
  english_corpus "$D"
  make_shards "$D/gutenberg/train.txt,$D/wiki/train.txt" "$D/train128" 128 20 2 4101 4
  [ -d "$D/train64" ] || "$BIN" create-pretraining-data --input_file "$D/gutenberg/train.txt,$D/wiki/train.txt" \
    --output_dir "$D/train64" --vocab_file "$VOCAB" --do_lower_case=true --max_seq_length 64 \
    --max_predictions_per_seq 10 --dupe_factor 2 --random_seed 4102 --num_shards 4
  [ -d "$D/train128m30" ] || "$BIN" create-pretraining-data --input_file "$D/gutenberg/train.txt,$D/wiki/train.txt" \
    --output_dir "$D/train128m30" --vocab_file "$VOCAB" --do_lower_case=true --max_seq_length 128 \
    --max_predictions_per_seq 40 --masked_lm_prob 0.3 --dupe_factor 2 --random_seed 4103 --num_shards 4
  # bias-unigram's start: the base recipe's own initial weights with the masked-LM bias at the log unigram
  # distribution of the training shards' masked tokens.
  unigram_init "$D" --config "$BASE" --input_dir="$D/train128" --num_train_steps=1 --warmup_proportion=1.0
  held_out_sets "$D"
}

run_row() {
  local name=$1 ov=$2 dir=$OUT/$1
  [ -f "$dir/DONE" ] && { echo "recipe_search: $name done"; return 0; }
  mkdir -p "$dir"
  local args=(--output_dir="$dir" --input_dir="$D/train128" --eval_dir="$D/eval128")
  for a in $ov; do args+=("${a/@/$D/}"); done
  printf '%s\n' "${args[@]}" > "$dir/overrides.txt"
  # Written whole or not at all: a search stopped during the estimate must not leave an empty one behind.
  if [ ! -s "$dir/estimate.txt" ]; then
    nice "$EST_BIN" "${thr[@]}" estimate --config "$BASE" "${args[@]}" "${est_args[@]}" > "$dir/estimate.txt.tmp"
    mv "$dir/estimate.txt.tmp" "$dir/estimate.txt"
  fi
  local resume=(); ls -d "$dir"/checkpoint-* >/dev/null 2>&1 && resume=(--resume)
  echo "start $(date +%s) $(date -Is) load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$dir/wall.log"
  set +e
  nice "$BIN" "${thr[@]}" pretrain --config "$BASE" "${args[@]}" --no_progress "${resume[@]}" >> "$dir/train.log" 2>&1
  local rc=$?
  set -e
  echo "end $(date +%s) $(date -Is) rc $rc load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$dir/wall.log"
  [ $rc -eq 0 ] || { echo "recipe_search: $name stopped (exit $rc); run again to continue" >&2; exit $rc; }
  touch "$dir/DONE"
  echo "recipe_search: $name finished"
}

prepare_data
# Rows in the order given on the command line (all of ROWS in table order when none is given).
want=("$@")
[ ${#want[@]} -gt 0 ] || for r in "${ROWS[@]}"; do want+=("${r%%|*}"); done
for name in "${want[@]}"; do
  base=${name%@x*} k=1
  if [ "$base" != "$name" ]; then
    k=${name##*@x}
    [[ $k =~ ^[1-9][0-9]*$ ]] || { echo "recipe_search: '$name': K in ROW@xK must be a positive integer" >&2; exit 2; }
  fi
  row=""
  for r in "${ROWS[@]}"; do [ "${r%%|*}" = "$base" ] && row=$r; done
  [ -n "$row" ] || { echo "recipe_search: unknown row '$base' (see --list)" >&2; exit 2; }
  ov=${row#*|}
  if [ "$k" -gt 1 ]; then
    steps=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["phases"][0]["num_train_steps"])' "$BASE")
    [[ $ov =~ --num_train_steps=([0-9]+) ]] && steps=${BASH_REMATCH[1]}
    ov="$(sed -E 's/--num_train_steps=[0-9]+//' <<<"$ov") --num_train_steps=$((steps * k))"
  fi
  run_row "$name" "$ov"
  if [ -n "${ARCHIVE:-}" ] && [ ! -d "$ARCHIVE/$name" ]; then archive_row "$name"; fi
done
