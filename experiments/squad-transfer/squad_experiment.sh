#!/usr/bin/env bash
# squad_experiment.sh: what pretraining gives SQuAD. Finetunes bert-mini on the first N questions of the shared
# SQuAD v1.1 train file (one epoch) from a pretrained checkpoint and, with the same seed, hyper-parameters and
# number of steps, from random initialisation; predicts the shared v1.1 dev file with both and scores them
# with squad-evaluate. The two runs go side by side with one thread each (OMP_NUM_THREADS=1), which uses the
# 2-core development machine fully without OpenMP threads of two processes competing for the same cores.
# Usage: experiments/squad-transfer/squad_experiment.sh PRETRAINED_CHECKPOINT [N_QUESTIONS=10000] [extra run-squad flags]
# Environment: BIN (default build/bertrain), SHARED (default ../shared), OUT (default out/squad_experiment; finished
# runs there are kept and an unfinished one resumes, so a new checkpoint needs a new OUT).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ "$#" -ge 1 ] || { echo "usage: experiments/squad-transfer/squad_experiment.sh PRETRAINED_CHECKPOINT [N_QUESTIONS=10000] [extra run-squad flags]" >&2; exit 2; }
CKPT=$1
N=${2:-10000}
shift; [ "$#" -gt 0 ] && shift
SHARED=${SHARED:-../shared}
BIN=${BIN:-build/bertrain}
OUT=${OUT:-out/squad_experiment}
DEV=$SHARED/data/squad_v1.1/dev-v1.1-shared.json
mkdir -p "$OUT"
[ -f "$OUT/train-v1.1.json" ] || xz -dc "$SHARED/data/squad_v1.1/train-v1.1-reconstructed.json.xz" > "$OUT/train-v1.1.json"
common=(run-squad --train_file "$OUT/train-v1.1.json" --predict_file "$DEV"
        --vocab_file data/vocab/bert-base-uncased-vocab.txt --do_lower_case=true --max_seq_length 384
        --doc_stride 128 --max_query_length 64 --train_batch_size 32 --learning_rate 1e-4 --num_train_epochs 1
        --warmup_proportion 0.1 --predict_batch_size 32 --max_train_examples "$N" --seed 1
        --save_checkpoints_steps 100 --do_train --do_predict)
run() {  # init dir
  local init=$1 dir=$2
  shift 2
  [ -f "$dir/done" ] && return 0
  local resume=()
  [ -d "$dir" ] && resume=(--resume)
  if [ "$init" = pretrained ]; then
    OMP_NUM_THREADS=1 "$BIN" "${common[@]}" --output_dir "$dir" --init_checkpoint "$CKPT" "${resume[@]}" "$@" > "$dir.log" 2>&1
  else
    OMP_NUM_THREADS=1 "$BIN" "${common[@]}" --output_dir "$dir" --bert_config_file "$CKPT/config.json" "${resume[@]}" "$@" > "$dir.log" 2>&1
  fi
  "$BIN" squad-evaluate --data_file "$DEV" --prediction_file "$dir/predictions.json" > "$dir/squad_evaluate.json"
  touch "$dir/done"
}
run pretrained "$OUT/pretrained" "$@" &
p1=$!
run random "$OUT/random" "$@" &
p2=$!
wait $p1 && wait $p2
for init in pretrained random; do
  printf '%-10s %s\n' "$init" "$(cat "$OUT/$init/squad_evaluate.json")"
done
