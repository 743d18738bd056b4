#!/usr/bin/env bash
# tf_init_checkpoint_test.sh BUILD_DIR SOURCE_DIR: --init_checkpoint PREFIX (a google-research/bert TF checkpoint,
# as its run_*.py flags take it) in pretrain, run-classifier, run-squad and run-ner: each runs a step or two from the
# tiny checkpoint, loads its weights (46 / 39 / 37 / 37 tensors: pretraining heads; backbone with pooler for the
# classifier; without for the QA and token-classification heads) and skips its 93 optimizer variables. pretrain,
# run-classifier and run-ner find bert_config.json beside the prefix; run-squad is given it.
set -euo pipefail
bin=$1/bertrain
ck=$2/tests/fixtures/tf_checkpoints/keras_bert_tiny
work=$1/tf_init_checkpoint_test
rm -rf "$work"
mkdir -p "$work/cls"
cd "$work"
expect() {  # $1 = log file, $2 = pattern
  grep -q -- "$2" "$1" || { echo "expected '$2' in $1:" >&2; cat "$1" >&2; exit 1; }
}
for i in $(seq 1 30); do
  printf 'all work and no play makes jack a dull boy\njack makes a dull play\nno work and no play\n\n'
done > corpus.txt
"$bin" --log_level warn create-pretraining-data --input_file corpus.txt --output_dir shards --vocab_file "$ck/vocab.txt" \
  --do_lower_case=true --max_seq_length 16 --max_predictions_per_seq 2 --dupe_factor 2 --random_seed 1
"$bin" --num_threads 1 pretrain --no_progress --init_checkpoint "$ck/bert_model.ckpt" --vocab_file "$ck/vocab.txt" \
  --input_file shards --output_dir pt --train_batch_size 4 --max_seq_length 16 --max_predictions_per_seq 2 \
  --num_train_steps 2 --num_warmup_steps 0 --learning_rate 1e-4 --do_train > pretrain.log 2>&1
expect pretrain.log "bert_model.ckpt: 46 tensors loaded"
expect pretrain.log "93 optimizer variables skipped"
[ -f pt/checkpoint-2/model.safetensors ]

for i in $(seq 1 8); do
  printf '{"sentence": "all work and no play", "label": "0"}\n{"sentence": "jack a dull boy", "label": "1"}\n'
done > cls/train.jsonl
cp cls/train.jsonl cls/dev.jsonl
"$bin" --num_threads 1 run-classifier --task_name generic --data_dir cls --format jsonl --text_a_column sentence \
  --label_column label --labels 0,1 --init_checkpoint "$ck/bert_model.ckpt" \
  --vocab_file "$ck/vocab.txt" --max_seq_length 16 --train_batch_size 4 --num_train_epochs 1 --output_dir rc \
  --do_train --do_eval > classifier.log 2>&1
expect classifier.log "bert_model.ckpt: 39 tensors loaded"
expect classifier.log "93 optimizer variables skipped"

cat > squad.json <<'JSON'
{"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": "all work and no play makes jack a dull boy",
 "qas": [{"id": "q1", "question": "what makes jack", "answers": [{"text": "all work and no play", "answer_start": 0}]},
         {"id": "q2", "question": "jack a", "answers": [{"text": "dull boy", "answer_start": 34}]}]}]}]}
JSON
"$bin" --num_threads 1 run-squad --train_file squad.json --predict_file squad.json --init_checkpoint "$ck/bert_model.ckpt" \
  --bert_config_file "$ck/bert_config.json" --vocab_file "$ck/vocab.txt" --max_seq_length 16 --doc_stride 8 \
  --max_query_length 4 --train_batch_size 2 --num_train_epochs 1 --output_dir rs --do_train --do_predict > squad.log 2>&1
expect squad.log "bert_model.ckpt: 37 tensors loaded"
expect squad.log "93 optimizer variables skipped"
[ -f rs/predictions.json ]

for i in $(seq 1 6); do printf 'jack\tB-PER\nmakes\tO\na\tO\ndull\tO\nboy\tO\n\nall\tO\nwork\tO\n\n'; done > ner.conll
"$bin" --num_threads 1 run-ner --train_file ner.conll --validation_file ner.conll --init_checkpoint "$ck/bert_model.ckpt" \
  --vocab_file "$ck/vocab.txt" --max_seq_length 16 --train_batch_size 4 --num_train_epochs 1 --output_dir rn \
  --do_train --do_eval > ner.log 2>&1
expect ner.log "bert_model.ckpt: 37 tensors loaded"
expect ner.log "93 optimizer variables skipped"
[ -f rn/eval_results.json ]
echo "tf_init_checkpoint: pretrain, run-classifier, run-squad and run-ner started from the TF checkpoint"
rm -rf "$work"
