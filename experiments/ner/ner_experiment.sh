#!/usr/bin/env bash
# ner_experiment.sh [CHECKPOINT]: what pretraining gives token classification. `bertrain run-ner` on WNUT-17 and the Broad Twitter
# Corpus (entity F1 on dev) and UPOS tagging on UD English-EWT (token accuracy on dev), from random
# initialisation and, when CHECKPOINT (an English bert-mini pretraining checkpoint) is given, from it too, with
# the same flags and steps. Outputs under $OUT (default ../runs/ner_experiment beside the clone), never in the repository.
# STEPS (default 300) caps each run (--max_steps); EPOCHS (default 3, --num_train_epochs); LR (default 1e-4);
# TASKS (default "wnut17 btc ewt_upos": which tasks to run); THREADS (default 2); NICE (default 19).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${BIN:-$root/build/bertrain}
DATA=${DATA:-$root/../shared/data}
OUT=${OUT:-$root/../runs/ner_experiment}
STEPS=${STEPS:-300}
EPOCHS=${EPOCHS:-3}
LR=${LR:-1e-4}
TASKS=${TASKS:-wnut17 btc ewt_upos}
THREADS=${THREADS:-2}
NICE=${NICE:-19}
CKPT=${1:-}
mkdir -p "$OUT/data"
[ -f "$OUT/data/en_ewt-ud-train.conllu" ] || xz -dc "$DATA/ud/en_ewt/en_ewt-ud-train.conllu.xz" > "$OUT/data/en_ewt-ud-train.conllu"
[ -f "$OUT/data/en_ewt-ud-dev.conllu" ] || xz -dc "$DATA/ud/en_ewt/en_ewt-ud-dev.conllu.xz" > "$OUT/data/en_ewt-ud-dev.conllu"

# name train dev extra-flags...
tasks=(
  "wnut17 $DATA/ner/wnut17/wnut17train.conll $DATA/ner/wnut17/emerging.dev.conll"
  "btc $DATA/ner/btc/btc.train $DATA/ner/btc/btc.dev"
  "ewt_upos $OUT/data/en_ewt-ud-train.conllu $OUT/data/en_ewt-ud-dev.conllu --label_column upos"
)
inits=(random)
[ -n "$CKPT" ] && inits+=(pretrained)
for init in "${inits[@]}"; do
  for t in "${tasks[@]}"; do
    set -- $t
    name=$1 train=$2 dev=$3; shift 3
    [[ " $TASKS " == *" $name "* ]] || continue
    dir=$OUT/$name-$init
    [ -f "$dir/eval_results.json" ] && continue
    if [ "$init" = pretrained ]; then model=(--init_checkpoint "$CKPT"); else model=(--bert_config_file "$root/configs/model/bert-mini.json"); fi
    echo "== $name $init: $(date -u +%H:%M:%S)"
    nice -n "$NICE" "$BIN" --num_threads "$THREADS" run-ner --train_file "$train" --validation_file "$dev" "$@" \
      "${model[@]}" --vocab_file "$root/data/vocab/bert-base-uncased-vocab.txt" --do_lower_case=true \
      --max_seq_length 128 --doc_stride 64 --train_batch_size 32 --learning_rate "$LR" --num_train_epochs "$EPOCHS" \
      --max_steps "$STEPS" --warmup_proportion 0.1 --save_checkpoints_steps 0 --seed 1 \
      --output_dir "$dir" --do_train --do_eval --return_entity_level_metrics > "$dir.log" 2>&1
  done
done
/usr/bin/python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
print("| task | init | steps | dev metric | value | loss |")
print("|---|---|---|---|---|---|")
for d in sorted(os.listdir(out)):
    p = os.path.join(out, d, "eval_results.json")
    if not os.path.exists(p): continue
    r = json.load(open(p))
    name, init = d.rsplit("-", 1)
    key = "eval_accuracy" if name.endswith("upos") else "eval_f1"
    print(f"| {name} | {init} | {r['global_step']} | {key[5:]} | {r[key]:.4f} | {r['eval_loss']:.4f} |")
PY
