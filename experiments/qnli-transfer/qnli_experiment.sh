#!/usr/bin/env bash
# qnli_experiment.sh: what pretraining gives sentence-pair classification. Splits ../shared/data/glue_qnli_dev by SQuAD article
# (experiments/qnli-transfer/split_qnli.py: 35 articles / 4073 rows train, 8 articles / 962 rows dev), then finetunes bert-mini
# on it from a pretrained checkpoint and from random initialisation (the checkpoint's config.json), with the same
# hyper-parameters and number of steps, for every learning rate of the grid LRS and seeds 1-3. Each init is
# scored by its best learning rate, chosen by the mean dev accuracy over the 3 seeds (the accuracy after the last
# epoch, as run_classifier.py reports it); the difference of the two means is the result.
# Usage: experiments/qnli-transfer/qnli_experiment.sh PRETRAINED_CHECKPOINT [extra run-classifier flags]
# Environment: BIN (default build/bertrain); OUT (default out/qnli_experiment; finished runs there are kept, so a
# new checkpoint needs a new OUT); LRS (default "3e-5 1e-4 3e-4": the learning rates google-research/bert's README
# searches for its small BERTs); SEEDS (default "1 2 3"); INITS (default "pretrained random").
# Writes OUT/summary.json and prints a table of mean accuracies per learning rate.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ "$#" -ge 1 ] || { echo "usage: experiments/qnli-transfer/qnli_experiment.sh PRETRAINED_CHECKPOINT [extra run-classifier flags]" >&2; exit 2; }
CKPT=$1
shift
[ -f "$CKPT/config.json" ] || { echo "qnli_experiment.sh: $CKPT/config.json not found (a checkpoint directory is expected)" >&2; exit 2; }
BIN=${BIN:-build/bertrain}
OUT=${OUT:-out/qnli_experiment}
LRS=${LRS:-3e-5 1e-4 3e-4}
SEEDS=${SEEDS:-1 2 3}
INITS=${INITS:-pretrained random}
mkdir -p "$OUT"
[ -f "$OUT/data/train.tsv" ] || /usr/bin/python3 experiments/qnli-transfer/split_qnli.py "$OUT/data"
common=(run-classifier --task_name QNLI --data_dir "$OUT/data" --vocab_file data/vocab/bert-base-uncased-vocab.txt
        --do_lower_case=true --max_seq_length 96 --train_batch_size 32
        --num_train_epochs 2 --warmup_proportion 0.1 --eval_batch_size 64 --save_checkpoints_steps 0
        --do_train --do_eval)
for lr in $LRS; do
  for seed in $SEEDS; do
    for init in $INITS; do
      dir="$OUT/$init-lr$lr-seed$seed"
      [ -f "$dir/done" ] && continue
      rm -rf "$dir"
      if [ "$init" = pretrained ]; then
        src=(--init_checkpoint "$CKPT")
      else
        src=(--bert_config_file "$CKPT/config.json")
      fi
      "$BIN" --log_level warn "${common[@]}" --learning_rate "$lr" --seed "$seed" --output_dir "$dir" "${src[@]}" "$@"
      touch "$dir/done"
    done
  done
done
/usr/bin/python3 - "$OUT" "$LRS" "$SEEDS" "$INITS" <<'PY'
import json, os, sys
out, lrs, seeds, inits = sys.argv[1], sys.argv[2].split(), [int(s) for s in sys.argv[3].split()], sys.argv[4].split()
def last_accuracy(path):
    with open(path) as f:
        evals = [json.loads(l) for l in f if '"eval"' in l]
    if not evals:
        sys.exit("%s: no evaluation line" % path)
    return evals[-1]["accuracy"]
summary = {}
print("%-10s %-7s %s  mean" % ("init", "lr", " ".join("seed %-2d" % s for s in seeds)))
for init in inits:
    by_lr = {}
    for lr in lrs:
        accs = [last_accuracy(os.path.join(out, "%s-lr%s-seed%d" % (init, lr, s), "metrics.jsonl")) for s in seeds]
        by_lr[lr] = {"accuracy": accs, "mean": sum(accs) / len(accs)}
        print("%-10s %-7s %s  %.4f" % (init, lr, " ".join("%.4f " % a for a in accs), by_lr[lr]["mean"]))
    best = max(lrs, key=lambda lr: by_lr[lr]["mean"])
    summary[init] = {"by_learning_rate": by_lr, "best_learning_rate": best, "best_mean": by_lr[best]["mean"]}
    print("%-10s best lr %s: mean dev accuracy %.4f" % (init, best, by_lr[best]["mean"]))
if "pretrained" in summary and "random" in summary:
    d = summary["pretrained"]["best_mean"] - summary["random"]["best_mean"]
    summary["pretrained_minus_random_points"] = 100 * d
    print("pretrained - random (each at its best lr): %+.2f points" % (100 * d))
with open(os.path.join(out, "summary.json.tmp"), "w") as f:
    json.dump(summary, f, indent=2)
os.replace(os.path.join(out, "summary.json.tmp"), os.path.join(out, "summary.json"))
PY
