#!/usr/bin/env bash
# pretrain_long_run.sh: issue 16's long run (part 3). The recipe chosen by the search (docs/pretraining-recipes.md,
# CONFIG below) on the English corpus of the search: the Gutenberg training books and the SQuAD v1.1 train
# contexts (scripts/split_corpus.py, scripts/squad_corpus.py; no SQuAD dev article, from which QNLI comes), in the
# LAMB recipe's two-phase shape: phase 1 at length 128, phase 2 at 512 with the learning rate warmed up again.
#
# The stop rule (scripts/stop_rule.py --phase N, after every evaluation): when the held-out masked-LM loss improves
# by less than 0.02 nats per hour of training within the current phase, the phase ends there. Phase 1 ends by a
# resume with its num_train_steps cut to the step reached (the trainer then evaluates, keeps weights and optimizer
# moments, and starts phase 2 with its own warm-up); phase 2 ends the run. Every decision goes to OUT/stop_rule.log.
# At the end: held-out masked-LM loss, accuracy and next-sentence accuracy on the held-out Gutenberg books and
# the held-out Wikipedia articles separately (OUT/final_eval/{gutenberg,wiki}.json) against their unigram
# entropies (OUT/data/eval_*.unigram.txt), and OUT/final/ = the last checkpoint.
#
# Usage: scripts/pretrain_long_run.sh [extra bertrain pretrain flags]
# Resumable: run the same command again (a started run continues with --resume). To pause (e.g. while a
# benchmark needs a quiet machine): kill -TERM the script (it passes SIGTERM on; the trainer saves and exits).
# Environment: BIN (default build/bertrain), OUT (default ../runs/long-run, outside the clone), SHARED (default
# ../shared), CONFIG (default configs/pretrain/bert-mini-long.json), INIT=unigram (start from the recipe's own
# initial weights with the masked-LM bias at the log unigram distribution, scripts/unigram_bias_init.py),
# MIN_RATE (default 0.02 nats per hour), WINDOW (default 1 hour of training), THREADS (default: all cores).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/bertrain}
OUT=${OUT:-../runs/long-run}
SHARED=${SHARED:-../shared}
CONFIG=${CONFIG:-configs/pretrain/bert-mini-long.json}
MIN_RATE=${MIN_RATE:-0.02}
WINDOW=${WINDOW:-1}
VOCAB=data/vocab/bert-base-uncased-vocab.txt
D=$OUT/data
RUN=$OUT/run
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
thr=(); [ -n "${THREADS:-}" ] && thr=(--num_threads "$THREADS")
say() { echo "[$(date -u +%FT%TZ)] $*" | tee -a "$OUT/stop_rule.log"; }
mkdir -p "$OUT"

# ---- data ----
mkdir -p "$D"
if [ ! -f "$D/gutenberg/train.txt" ]; then
  xz -dc "$SHARED/data/gutenberg_en/pretrain_corpus.txt.xz" > "$D/pretrain_corpus.txt"
  /usr/bin/python3 scripts/split_corpus.py "$D/pretrain_corpus.txt" "$D/gutenberg"
  rm "$D/pretrain_corpus.txt"
fi
[ -f "$D/wiki/train.txt" ] || /usr/bin/python3 scripts/squad_corpus.py "$D/wiki"
. scripts/shards.sh
# dupe_factor 5 (five maskings of every instance, the run passes over the corpus several times in each phase):
# 650,625 instances at 128, about 200,000 at 512.
make_shards "$D/gutenberg/train.txt,$D/wiki/train.txt" "$D/train128" 128 20 5 5101 8
make_shards "$D/gutenberg/train.txt,$D/wiki/train.txt" "$D/train512" 512 80 5 5102 8
make_shards "$D/gutenberg/heldout.txt" "$D/eval_gutenberg128" 128 20 1 99
make_shards "$D/wiki/heldout.txt" "$D/eval_wiki128" 128 20 1 99
if [ ! -d "$D/eval128" ]; then  # one directory with both held-out sets: the trainer's pooled evaluation
  mkdir -p "$D/eval128.tmp"
  ln -s ../eval_gutenberg128/part-00000-training.hdf5 "$D/eval128.tmp/gutenberg-training.hdf5"
  ln -s ../eval_wiki128/part-00000-training.hdf5 "$D/eval128.tmp/wiki-training.hdf5"
  mv "$D/eval128.tmp" "$D/eval128"
fi
for e in eval128 eval_gutenberg128 eval_wiki128; do
  [ -s "$D/$e.unigram.txt" ] || /usr/bin/python3 scripts/unigram_baseline.py "$D/$e" "$D/train128" > "$D/$e.unigram.txt"
done

args=(--config "$CONFIG" --output_dir="$RUN" --phases.1.input_dir="$D/train128" --phases.2.input_dir="$D/train512"
      --eval_dir="$D/eval128" --no_progress)
if [ "${INIT:-}" = unigram ]; then
  if [ ! -f "$D/init-unigram/model.safetensors" ]; then  # the recipe's own initial weights: step 1 of a warmup from 0
    rm -rf "$D/init0"
    "$BIN" "${thr[@]}" pretrain "${args[@]}" --output_dir="$D/init0" --phases.1.num_train_steps=1 \
      --phases.1.warmup_proportion=1.0 --save_checkpoints_steps=1 --phase 1 > "$D/init0.log" 2>&1
    /usr/bin/python3 scripts/unigram_bias_init.py "$D/init0/checkpoint-1" "$D/train128" "$D/init-unigram"
  fi
  args+=(--init_checkpoint="$D/init-unigram")
fi
[ -f "$OUT/phase1_cut" ] && args+=(--phases.1.num_train_steps="$(cat "$OUT/phase1_cut")")

# ---- train, with the stop rule watching every evaluation ----
newest_state() { ls -d "$RUN"/checkpoint-* 2>/dev/null | sort -t- -k2 -n | tail -1; }
field() { /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$@"; }
eval_phase() {  # the phase of the newest evaluation (the phase of the step it followed)
  /usr/bin/python3 -c '
import json, sys
phase, last = {}, None
for line in open(sys.argv[1]):
    m = json.loads(line)
    if m.get("eval"): last = m["step"]
    elif "phase" in m: phase[m["step"]] = m["phase"]
print(phase.get(last, 1))' "$RUN/metrics.jsonl"
}
while [ ! -f "$OUT/TRAINED" ]; do
  resume=(); [ -f "$RUN/recipe.json" ] && resume=(--resume)
  nice "$BIN" "${thr[@]}" pretrain "${args[@]}" "${resume[@]}" "$@" >> "$OUT/train.log" 2>&1 &
  pid=$!
  trap 'kill -TERM $pid 2>/dev/null; wait $pid; exit 143' TERM INT
  evals=0 fired=""
  while kill -0 "$pid" 2>/dev/null; do
    sleep 20
    n=$(grep -c '"eval"' "$RUN/metrics.jsonl" 2>/dev/null || true)
    [ "${n:-0}" -gt "$evals" ] || continue
    evals=$n
    phase=$(eval_phase)
    [ "$phase" = 1 ] && [ -f "$OUT/phase1_cut" ] && continue  # phase 1's end, already decided
    rc=0; line=$(/usr/bin/python3 scripts/stop_rule.py "$RUN" --phase "$phase" --min_rate "$MIN_RATE" --window "$WINDOW") || rc=$?
    say "phase $phase: $line"
    if [ "$rc" -eq 1 ]; then fired=$phase; kill -TERM "$pid" 2>/dev/null || true; break; fi
  done
  rc=0; wait "$pid" || rc=$?
  trap - TERM INT
  if [ -n "$fired" ]; then
    ckpt=$(newest_state)
    step=$(field "$ckpt/trainer_state.json" global_step)
    if [ "$fired" = 1 ]; then
      say "stop rule fired in phase 1 at global step $step: phase 1 ends there, phase 2 follows"
      echo "$step" > "$OUT/phase1_cut.tmp" && mv "$OUT/phase1_cut.tmp" "$OUT/phase1_cut"
      args+=(--phases.1.num_train_steps="$step")
      continue
    fi
    say "stop rule fired in phase 2 at global step $step: the run ends"
    touch "$OUT/TRAINED"
  elif [ "$rc" -eq 0 ]; then
    say "both phases finished"
    touch "$OUT/TRAINED"
  else
    say "the trainer exited with $rc (see $OUT/train.log); run the same command again to continue"
    exit "$rc"
  fi
done

# ---- final checkpoint and held-out numbers, per corpus ----
ckpt=$(newest_state)
if [ ! -f "$OUT/final/model.safetensors" ]; then
  rm -rf "$OUT/final.tmp" && cp -r "$ckpt" "$OUT/final.tmp" && mv "$OUT/final.tmp" "$OUT/final"
fi
mkdir -p "$OUT/final_eval"
for e in gutenberg wiki; do
  [ -f "$OUT/final_eval/$e.json" ] && continue
  rm -rf "$OUT/final_eval/$e.dir"
  nice "$BIN" "${thr[@]}" pretrain --config "$CONFIG" --do_train=false --do_eval=true --init_checkpoint="$OUT/final" \
    --eval_dir="$D/eval_${e}128" --output_dir="$OUT/final_eval/$e.dir" --no_progress >> "$OUT/train.log" 2>&1
  cp "$OUT/final_eval/$e.dir/eval_results.json" "$OUT/final_eval/$e.json"
done
for e in gutenberg wiki; do
  /usr/bin/python3 - "$OUT/final_eval/$e.json" "$D/eval_${e}128.unigram.txt" "$e" <<'PY'
import json, re, sys
r = json.load(open(sys.argv[1]))
h = float(re.search(r"unigram entropy ([0-9.]+) nats", open(sys.argv[2]).read()).group(1))
print("%-9s held-out masked-LM loss %.4f (unigram entropy %.4f: %+.3f nats), masked-LM accuracy %.4f, "
      "next-sentence accuracy %.4f, step %d" % (sys.argv[3], r["masked_lm_loss"], h, r["masked_lm_loss"] - h,
      r["masked_lm_accuracy"], r["next_sentence_accuracy"], r["global_step"]))
PY
done | tee "$OUT/final_eval/summary.txt"
