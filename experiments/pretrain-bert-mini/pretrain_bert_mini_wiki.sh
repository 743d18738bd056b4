#!/usr/bin/env bash
# pretrain_bert_mini_wiki.sh: continues the Gutenberg bert-mini on Wikipedia text (domain-adaptive pretraining
# before the QNLI experiment, experiments/qnli-transfer). The corpus is the SQuAD v1.1 TRAIN contexts (experiments/common/squad_corpus.py:
# 430 articles to train on, the last 12 held out; SQuAD's train and dev articles are disjoint and QNLI comes
# from dev, so no QNLI passage is in it). Shards T=128/P=20, dupe_factor 6; then
# configs/pretrain/bert-mini-wiki-continue.json (3000 steps of 64, LAMB lr 1.5e-3 warmed up again) from
# out/bert-mini-gutenberg-continue/checkpoint-800. That checkpoint is step 800 of the 1800-step
# configs/pretrain/bert-mini-gutenberg-continue.json (itself from experiments/pretrain-bert-mini/pretrain_bert_mini.sh's checkpoint-590),
# interrupted there to give the CPU time to in-domain text: when it is missing, this script runs that recipe and
# sends SIGINT once checkpoint-800 is written (the trainer saves and exits; the schedule is the 1800-step one).
# Usage: experiments/pretrain-bert-mini/pretrain_bert_mini_wiki.sh [extra bertrain pretrain flags, e.g. --resume]
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-build/bertrain}
VOCAB=data/vocab/bert-base-uncased-vocab.txt
D=out/wiki_data
[ -f "$D/split/train.txt" ] || /usr/bin/python3 experiments/common/squad_corpus.py "$D/split"
. experiments/common/shards.sh
make_shards "$D/split/train.txt" "$D/train128" 128 20 6 4242 4
make_shards "$D/split/heldout.txt" "$D/eval128" 128 20 1 99
G=out/bert-mini-gutenberg-continue
if [ ! -f "$G/checkpoint-800/model.safetensors" ]; then
  resume=(); [ -d "$G" ] && resume=(--resume)
  "$BIN" pretrain --config configs/pretrain/bert-mini-gutenberg-continue.json --no_progress "${resume[@]}" &
  pid=$!
  while kill -0 "$pid" 2>/dev/null && [ ! -f "$G/checkpoint-800/model.safetensors" ]; do sleep 5; done
  kill -INT "$pid" 2>/dev/null || true
  wait "$pid" || true
  [ -f "$G/checkpoint-800/model.safetensors" ] || { echo "no $G/checkpoint-800" >&2; exit 1; }
fi
"$BIN" pretrain --config configs/pretrain/bert-mini-wiki-continue.json "$@"
