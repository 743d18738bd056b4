#!/usr/bin/env bash
# qnli_experiment.sh: issue 7's experiment. Splits ../shared/data/glue_qnli_dev by SQuAD article
# (scripts/split_qnli.py: 35 articles / 4073 rows train, 8 articles / 962 rows dev), then finetunes bert-mini
# on it from the pretrained Gutenberg checkpoint and from random initialisation, same hyper-parameters and
# number of steps, for seeds 1-3, and prints the dev accuracies and their means.
# Usage: scripts/qnli_experiment.sh PRETRAINED_CHECKPOINT [extra run-classifier flags]
set -euo pipefail
cd "$(dirname "$0")/.."
CKPT=$1
shift
BIN=${BIN:-build/bertrain}
OUT=${OUT:-out/qnli_experiment}  # a new OUT for a new checkpoint: finished runs there are kept
mkdir -p "$OUT"
[ -f "$OUT/data/train.tsv" ] || /usr/bin/python3 scripts/split_qnli.py "$OUT/data"
common=(run-classifier --task_name QNLI --data_dir "$OUT/data" --vocab_file data/vocab/bert-base-uncased-vocab.txt
        --do_lower_case=true --max_seq_length 96 --train_batch_size 32 --learning_rate 1e-4
        --num_train_epochs 2 --warmup_proportion 0.1 --eval_batch_size 64 --save_checkpoints_steps 0
        --do_train --do_eval)
for seed in 1 2 3; do
  for init in pretrained random; do
    dir="$OUT/$init-seed$seed"
    [ -f "$dir/done" ] && continue
    rm -rf "$dir"
    if [ "$init" = pretrained ]; then
      "$BIN" --log_level warn "${common[@]}" --seed "$seed" --output_dir "$dir" --init_checkpoint "$CKPT" "$@"
    else
      "$BIN" --log_level warn "${common[@]}" --seed "$seed" --output_dir "$dir" --bert_config_file "$CKPT/config.json" "$@"
    fi
    touch "$dir/done"
  done
done
/usr/bin/python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
rows = {}
for init in ("pretrained", "random"):
    accs = []
    for seed in (1, 2, 3):
        best = 0.0
        with open(os.path.join(out, "%s-seed%d" % (init, seed), "metrics.jsonl")) as f:
            evals = [json.loads(l) for l in f if '"eval"' in l]
        last = evals[-1]["accuracy"]
        accs.append(last)
    rows[init] = accs
    print("%-10s dev accuracy after 2 epochs, seeds 1-3: %s  mean %.4f" % (init, " ".join("%.4f" % a for a in accs), sum(accs) / 3))
d = sum(rows["pretrained"]) / 3 - sum(rows["random"]) / 3
print("pretrained - random: %+.2f points" % (100 * d))
json.dump(rows, open(os.path.join(out, "summary.json"), "w"), indent=2)
PY
