#!/usr/bin/env bash
# pretrain_long_run.sh: the long pretraining run. The recipe chosen by the search (experiments/recipe-search,
# CONFIG below) on the English corpus of the search: the Gutenberg training books and the SQuAD v1.1 train
# contexts (experiments/common/split_corpus.py, experiments/common/squad_corpus.py; no SQuAD dev article, from which QNLI comes), in the
# LAMB recipe's two-phase shape: phase 1 at length 128, phase 2 at 512 with the learning rate warmed up again.
#
# The stop rule (experiments/long-run/stop_rule.py --phase N, after every evaluation): when the held-out masked-LM loss improves
# by less than 0.02 nats per hour of training within the current phase, the phase ends. The decision is written
# first (OUT/fired-phaseN), then the trainer gets SIGTERM (it saves a checkpoint and exits). Phase 1 then ends by a
# resume with its num_train_steps cut to the steps done (OUT/phase1_cut; the trainer drops an unfinished step,
# evaluates, keeps weights and optimizer moments, and starts phase 2 with its own warm-up); phase 2's decision ends
# the run. Every decision goes to OUT/stop_rule.log. At the end: OUT/final/ = the last checkpoint, and its held-out
# masked-LM loss, accuracy and next-sentence accuracy on the held-out Gutenberg books and the held-out Wikipedia
# articles separately (OUT/final_eval/{gutenberg,wiki}.json, summary.txt) against their unigram entropies.
#
# Usage: experiments/long-run/pretrain_long_run.sh [extra bertrain pretrain flags]
# Resumable: run the same command again, in this or a later session (a started run continues with --resume; a
# decision taken before a kill is carried out). Pause: kill -TERM the script (it passes SIGTERM on to its
# children: the trainer saves and exits). One script per OUT at a time (OUT/lock, held by its trainer too).
# Environment: BIN (default build/bertrain), OUT (default ../runs/long-run, outside the clone), SHARED (default
# ../shared), CONFIG (default configs/pretrain/bert-mini-long.json), INIT=unigram (start from the recipe's own
# initial weights with the masked-LM bias at the log unigram distribution, scripts/unigram_bias_init.py),
# MIN_RATE (default 0.02 nats per hour), WINDOW (default 1 hour of training), THREADS (default: all cores),
# SNAPSHOT (default: none; e.g. a directory on other storage): a 45 MB near-exact snapshot kept apart from OUT, so
# that the run survives the loss of OUT (experiments/long-run/long_run_snapshot.py: bf16 weights and second moment).
# Each evaluation and each pause save it; a start whose OUT has no checkpoint, or an older one, continues from it.
# MODEL_DIR (default data/checkpoints/bert-mini-en, in the clone; empty: none): at the end, the final model's weights,
# config.json, vocab.txt and a SOURCE.md with the recipe, corpus, steps, hours and held-out numbers
# (experiments/long-run/long_run_model_card.py), to be committed.
set -euo pipefail
cd "$(dirname "$0")/../.."
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
mkdir -p "$OUT"
exec 9> "$OUT/lock"
flock -n 9 || { echo "pretrain_long_run.sh: another run (or a trainer it started) holds $OUT/lock" >&2; exit 2; }
say() { echo "[$(date -u +%FT%TZ)] $*" | tee -a "$OUT/stop_rule.log"; }
# Pause: SIGTERM to every descendant (the trainer saves a checkpoint; data preparation stops, and its .tmp output is
# continued or redone next time), then wait for them.
descendants() { local c; for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do echo "$c"; descendants "$c"; done; }
on_term() {
  trap '' TERM INT
  kill -TERM $(descendants $$) 2>/dev/null || true
  wait || true
  segment end
  save_snapshot
  say "paused by a signal: run the same command to continue"
  exit 143
}
bg() { "$@" & wait $!; }  # a child in the background, so that a signal reaches on_term at once
# OUT/wall.log: "start|end EPOCH ISO-TIME" around each trainer segment (the model card's wall time sums them).
in_segment=0
segment() {
  [ "$1" = start ] || [ "$in_segment" = 1 ] || return 0
  echo "$1 $(date +%s) $(date -u +%FT%TZ)" >> "$OUT/wall.log"
  if [ "$1" = start ]; then in_segment=1; else in_segment=0; fi
}
SNAPSHOT=${SNAPSHOT-}
MODEL_DIR=${MODEL_DIR-data/checkpoints/bert-mini-en}
save_snapshot() {
  [ -n "$SNAPSHOT" ] && [ ! -f "$OUT/TRAINED" ] || return 0
  /usr/bin/python3 experiments/long-run/long_run_snapshot.py save "$OUT" "$SNAPSHOT" "$CONFIG" >> "$OUT/snapshot.log" 2>&1 || true
  tail -1 "$OUT/snapshot.log"
}
trap on_term TERM INT   # after everything on_term calls is defined

# ---- data ----
. experiments/common/shards.sh
bg english_corpus "$D"
# dupe_factor 5 (five maskings of every instance, the run passes over the corpus several times in each phase):
# 650,625 instances at 128, 203,754 at 512.
bg make_shards "$D/gutenberg/train.txt,$D/wiki/train.txt" "$D/train128" 128 20 5 5101 8
bg make_shards "$D/gutenberg/train.txt,$D/wiki/train.txt" "$D/train512" 512 80 5 5102 8
bg held_out_sets "$D"

args=(--config "$CONFIG" --output_dir="$RUN" --phases.1.input_dir="$D/train128" --phases.2.input_dir="$D/train512"
      --eval_dir="$D/eval128")
if [ "${INIT:-}" = unigram ]; then  # phase 1 alone, one step at lr 0: the recipe's own initial weights
  bg unigram_init "$D" "${args[@]}" --phases.1.num_train_steps=1 --phases.1.warmup_proportion=1.0 --phase 1
  args+=(--init_checkpoint="$D/init-unigram")
fi

# ---- a lost run continues from the committed snapshot ----
snapshot_step() { /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["global_step"])' "$1/SNAPSHOT.json"; }
newest_ckpt() {  # the newest complete checkpoint-N (as the trainer's --resume chooses it), or nothing
  local n
  n=$(ls "$RUN" 2>/dev/null | sed -n 's/^checkpoint-\([0-9]\{1,\}\)$/\1/p' | sort -n | while read -r k; do
        [ -f "$RUN/checkpoint-$k/trainer_state.json" ] && echo "$k"; done | tail -1)
  [ -z "$n" ] || echo "$RUN/checkpoint-$n"
}
state_field() { /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1/trainer_state.json" "$2"; }
# A lost OUT (or one behind the committed snapshot, made on another machine) continues from the snapshot (or from
# SNAPSHOT.old, which a save killed half-way leaves). The snapshot must be of this CONFIG (long_run_snapshot.py checks).
snap=$SNAPSHOT; [ -n "$snap" ] && [ ! -f "$snap/SNAPSHOT.json" ] && snap=$SNAPSHOT.old
if [ -n "$SNAPSHOT" ] && [ -f "$snap/SNAPSHOT.json" ] && [ ! -f "$OUT/TRAINED" ]; then
  ck=$(newest_ckpt)
  if [ -z "$ck" ] || [ "$(state_field "$ck" global_step)" -lt "$(snapshot_step "$snap")" ]; then
    [ -d "$RUN" ] && mv "$RUN" "$RUN.superseded-$(date -u +%Y%m%dT%H%M%S)"
    /usr/bin/python3 experiments/long-run/long_run_snapshot.py restore "$SNAPSHOT" "$OUT" "$CONFIG"
    say "continuing from the snapshot $snap (global step $(snapshot_step "$snap"))"
  fi
fi

# ---- the projection first (every run starts with `bertrain estimate` of its budget, so a plan that cannot finish is seen at once) ----
if [ ! -s "$OUT/estimate.txt" ]; then
  bg nice "$BIN" "${thr[@]}" estimate "${args[@]}" "$@" > "$OUT/estimate.txt.tmp"
  mv "$OUT/estimate.txt.tmp" "$OUT/estimate.txt"
  say "estimate: $(tail -1 "$OUT/estimate.txt")"
fi

# ---- train, with the stop rule watching every evaluation ----
eval_phase() {  # "PHASE LATER": the phase of the newest evaluation's step, and 1 if a later phase has begun since
  /usr/bin/python3 -c '
import json, sys
phase, last = {}, None
for line in open(sys.argv[1]).read().split("\n")[:-1]:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("eval"): last = m["step"]
    elif "phase" in m: phase[m["step"]] = m["phase"]
p = phase.get(last, 1)
print(p, int(any(v > p for v in phase.values())))' "$RUN/metrics.jsonl"
}
# A decision taken before the script was stopped is carried out first.
cut_phase1() {
  local ck; ck=$(newest_ckpt)
  if [ -n "$ck" ] && [ "$(state_field "$ck" phase)" = 1 ]; then
    state_field "$ck" phase_step > "$OUT/phase1_cut.tmp" && mv "$OUT/phase1_cut.tmp" "$OUT/phase1_cut"
    say "phase 1 ends at step $(cat "$OUT/phase1_cut") (stop rule, $(cat "$OUT/fired-phase1")); phase 2 follows"
  else
    say "phase 1 had already ended when the rule fired ($(cat "$OUT/fired-phase1")): no cut"
    echo none > "$OUT/phase1_cut"
  fi
}
while [ ! -f "$OUT/TRAINED" ]; do
  if [ -f "$OUT/fired-phase2" ]; then say "the stop rule fired in phase 2 ($(cat "$OUT/fired-phase2")): the run ends"; touch "$OUT/TRAINED"; break; fi
  [ -f "$OUT/fired-phase1" ] && [ ! -f "$OUT/phase1_cut" ] && cut_phase1
  cut=(); [ -f "$OUT/phase1_cut" ] && [ "$(cat "$OUT/phase1_cut")" != none ] && cut=(--phases.1.num_train_steps="$(cat "$OUT/phase1_cut")")
  resume=(); [ -f "$RUN/recipe.json" ] && resume=(--resume)
  segment start
  nice "$BIN" "${thr[@]}" pretrain "${args[@]}" --no_progress "${cut[@]}" "${resume[@]}" "$@" >> "$OUT/train.log" 2>&1 &
  pid=$!
  evals=0 fired=""
  while kill -0 "$pid" 2>/dev/null; do
    sleep 20 & wait $!
    n=$(grep -c '"eval"' "$RUN/metrics.jsonl" 2>/dev/null || true)
    [ "${n:-0}" -gt "$evals" ] || continue
    evals=$n
    read -r phase later < <(eval_phase) || continue
    [ "$later" = 1 ] && continue                                     # that phase has ended already
    [ "$phase" = 1 ] && [ -f "$OUT/phase1_cut" ] && continue          # phase 1's end, already decided
    save_snapshot > /dev/null                                        # the newest checkpoint, into the clone
    rc=0; line=$(/usr/bin/python3 experiments/long-run/stop_rule.py "$RUN" --phase "$phase" --min_rate "$MIN_RATE" --window "$WINDOW" 2>&1) || rc=$?
    say "phase $phase: $line"
    if [ "$rc" -eq 1 ] && grep -q 'stop and report' <<<"$line"; then
      fired=$phase
      echo "$line" > "$OUT/fired-phase$phase.tmp" && mv "$OUT/fired-phase$phase.tmp" "$OUT/fired-phase$phase"
      kill -TERM "$pid" 2>/dev/null || true
      break
    fi
  done
  rc=0; wait "$pid" || rc=$?
  segment end
  if [ -n "$fired" ]; then
    [ "$rc" -eq 0 ] || [ "$rc" -eq 143 ] || { say "the trainer exited with $rc after the stop rule's SIGTERM (see $OUT/train.log)"; exit "$rc"; }
    continue  # the top of the loop carries the decision out
  fi
  if [ "$rc" -eq 0 ]; then
    say "both phases finished"
    touch "$OUT/TRAINED"
  else
    say "the trainer exited with $rc (see $OUT/train.log); run the same command again to continue"
    exit "$rc"
  fi
done

# ---- final checkpoint and held-out numbers, per corpus ----
if [ ! -f "$OUT/final/model.safetensors" ]; then
  ck=$(newest_ckpt)
  [ -n "$ck" ] || { echo "pretrain_long_run.sh: no checkpoint in $RUN" >&2; exit 1; }
  rm -rf "$OUT/final.tmp" && cp -r "$ck" "$OUT/final.tmp" && mv "$OUT/final.tmp" "$OUT/final"
  say "final checkpoint: $ck (global step $(state_field "$OUT/final" global_step))"
fi
mkdir -p "$OUT/final_eval"
for e in gutenberg wiki; do
  [ -f "$OUT/final_eval/$e.json" ] && continue
  rm -rf "$OUT/final_eval/$e.dir"
  bg nice "$BIN" "${thr[@]}" pretrain --config "$CONFIG" --do_train=false --do_eval=true --init_checkpoint="$OUT/final" \
    --eval_dir="$D/eval_${e}128" --output_dir="$OUT/final_eval/$e.dir" --no_progress "$@" >> "$OUT/train.log" 2>&1
  cp "$OUT/final_eval/$e.dir/eval_results.json" "$OUT/final_eval/$e.json.tmp"
  mv "$OUT/final_eval/$e.json.tmp" "$OUT/final_eval/$e.json"
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
done > "$OUT/final_eval/summary.txt.tmp"
mv "$OUT/final_eval/summary.txt.tmp" "$OUT/final_eval/summary.txt"
cat "$OUT/final_eval/summary.txt"
# ---- the model for the repository (committed once, at most 50 MB) ----
[ -z "$MODEL_DIR" ] || /usr/bin/python3 experiments/long-run/long_run_model_card.py "$OUT" "$MODEL_DIR" "$CONFIG"
