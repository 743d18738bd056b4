#!/usr/bin/env bash
# pretrain_bert_mini.sh: rebuilds the bert-mini checkpoint the finetuning experiments start from.
# Splits ../shared/data/gutenberg_en/pretrain_corpus.txt.xz into training books and two held-out books
# (PG 120 Treasure Island, PG 1232 The Prince), makes 128- and 512-token shards, and pretrains
# configs/pretrain/bert-mini-gutenberg.json (phase 1 at 128, phase 2 at 512 with LAMB re-warm-up).
# Usage: experiments/pretrain-bert-mini/pretrain_bert_mini.sh [extra bertrain pretrain flags, e.g. --resume]
set -euo pipefail
cd "$(dirname "$0")/../.."
SHARED=${SHARED:-../shared}
BIN=${BIN:-build/bertrain}
VOCAB=data/vocab/bert-base-uncased-vocab.txt
D=out/gutenberg_data
mkdir -p "$D"
if [ ! -f "$D/split/train.txt" ]; then
  xz -dc "$SHARED/data/gutenberg_en/pretrain_corpus.txt.xz" > "$D/pretrain_corpus.txt"
  /usr/bin/python3 experiments/common/split_corpus.py "$D/pretrain_corpus.txt" "$D/split"
fi
. experiments/common/shards.sh
make_shards "$D/split/train.txt" "$D/train128" 128 20 3 12345 4
make_shards "$D/split/train.txt" "$D/train512" 512 80 1 23456 2
make_shards "$D/split/heldout.txt" "$D/eval128" 128 20 1 99
"$BIN" pretrain --config configs/pretrain/bert-mini-gutenberg.json "$@"
/usr/bin/python3 scripts/plot_metrics.py out/bert-mini-gutenberg/metrics.jsonl out/bert-mini-gutenberg/curves.png
