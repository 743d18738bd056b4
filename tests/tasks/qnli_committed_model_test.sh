#!/usr/bin/env bash
# qnli_committed_model_test.sh BUILD_DIR SOURCE_DIR: the committed model transfers. Finetunes the committed pretrained
# bert-mini (data/checkpoints/bert-mini-en: the long run's final model) on the QNLI slice shipped in data/qnli
# (experiments/qnli-transfer/split_qnli.py of the shared GLUE QNLI dev file: 4073 training and 962 dev pairs, split by SQuAD article;
# CC BY-SA 4.0, data/qnli/SOURCE.md) with the hyper-parameters of experiments/qnli-transfer/qnli_experiment.sh (length 96, batch 32,
# 2 epochs, warmup 10%, lr 1e-4), and asserts that the dev accuracy run-classifier writes to eval_results.json is at
# least 5 points above the majority class of dev.tsv (counted here from the file, not written in).
# Label slow: a few minutes on 2 cores.
set -euo pipefail
bin=$1/bertrain
src=$2
model=$src/data/checkpoints/bert-mini-en
data=$src/data/qnli
work=$1/qnli_committed_model_test
for f in "$data/train.tsv" "$data/dev.tsv" "$model/model.safetensors" "$model/config.json" "$model/vocab.txt"; do
  [ -f "$f" ] || { echo "qnli_committed_model_test: $f is missing" >&2; exit 1; }
done
rm -rf "$work"
"$bin" --log_level warn run-classifier --task_name QNLI --data_dir "$data" --init_checkpoint "$model" \
  --vocab_file "$model/vocab.txt" --do_lower_case=true --max_seq_length 96 --train_batch_size 32 \
  --num_train_epochs 2 --warmup_proportion 0.1 --learning_rate 1e-4 --eval_batch_size 64 --seed 1 \
  --save_checkpoints_steps 0 --output_dir "$work" --do_train --do_eval
/usr/bin/python3 - "$work/eval_results.json" "$data/dev.tsv" <<'PY'
import collections, json, sys
acc = json.load(open(sys.argv[1]))["eval_accuracy"]
with open(sys.argv[2], encoding="utf-8") as f:
    labels = [line.rstrip("\n").split("\t")[-1] for line in f.read().split("\n")[1:] if line]
counts = collections.Counter(labels)
majority = max(counts.values()) / len(labels)
print("dev accuracy %.4f, majority class %.4f (%d of %d rows), margin %+.2f points (need >= +5)"
      % (acc, majority, max(counts.values()), len(labels), 100 * (acc - majority)))
sys.exit(0 if acc >= majority + 0.05 else 1)
PY
