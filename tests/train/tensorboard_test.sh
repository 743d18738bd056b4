#!/usr/bin/env bash
# tensorboard_test.sh BUILD_DIR SOURCE_DIR CASE: TensorBoard event files of real runs, read by the independent
# reader tests/train/tensorboard_check.py (its own TFRecord/CRC-32C reader and protoc-generated classes), which
# checks that every scalar equals metrics.jsonl's value at the same step and that each step appears once.
# Cases:
#   pretrain    the tiny shards of the trainer_data fixture: read while the run writes, stopped by SIGTERM, the
#               newest checkpoint removed, resumed from an earlier one: the steps after it are written once.
#   switches    --tensorboard=false writes no event file; --tensorboard_dir moves them (pretrain and
#               run-classifier).
#   classifier  run-classifier (generic jsonl task, the tiny TF checkpoint fixture) with evaluations; resumed from
#               an earlier checkpoint, the event files again hold each step once.
set -euo pipefail
build=$1
src=$2
case_name=$3
bin="$build/bertrain"
work="$build/tensorboard_test/$case_name"
data="$build/trainer_test/data"
check=(/usr/bin/python3 "$src/tests/train/tensorboard_check.py")
vocab="$src/data/vocab/bert-base-uncased-vocab.txt"
ck="$src/tests/fixtures/tf_checkpoints/keras_bert_tiny"
command -v protoc > /dev/null && /usr/bin/python3 -c 'import google.protobuf' 2> /dev/null || {
  echo "skipped: protoc or python3-protobuf missing (scripts/setup.sh installs them)"
  exit 77
}
rm -rf "$work"
mkdir -p "$work"

pretrain=(--num_threads 1 pretrain --no_progress --bert_config_file="$build/trainer_test/tiny.json"
          --vocab_file="$vocab" --input_file="$data/p32" --max_seq_length=32 --max_predictions_per_seq=5 --seed=7
          --optimizer.name=lamb --learning_rate=1e-2 --num_warmup_steps=2 --train_batch_size=8 --micro_batch_size=2)

classifier_data() {  # $1 = directory
  mkdir -p "$1"
  for i in $(seq 1 8); do
    printf '{"sentence": "all work and no play", "label": "0"}\n{"sentence": "jack a dull boy", "label": "1"}\n'
  done > "$1/train.jsonl"
  head -n 6 "$1/train.jsonl" > "$1/dev.jsonl"
}
classifier=(--num_threads 1 run-classifier --task_name generic --format jsonl --text_a_column sentence
            --label_column label --labels 0,1 --init_checkpoint "$ck/bert_model.ckpt" --vocab_file "$ck/vocab.txt"
            --max_seq_length 16 --train_batch_size 4 --num_train_epochs 2 --do_train --do_eval)

lines() { if [ -f "$1" ]; then wc -l < "$1"; else echo 0; fi; }

case "$case_name" in
  pretrain)
    out="$work/run"
    flags=(--output_dir="$out" --num_train_steps=40 --save_checkpoints_steps=5 --save_total_limit=0
           --eval_dir="$data/p32" --eval_every_steps=10 --max_eval_steps=2)
    "$bin" "${pretrain[@]}" "${flags[@]}" > "$work/first.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 1200); do
      [ "$(lines "$out/metrics.jsonl")" -ge 14 ] && break
      sleep 0.05
    done
    # Read while the run writes: whatever whole records are there are right (an incomplete last one is allowed).
    "${check[@]}" "$out" "$out/metrics.jsonl" --live --min_steps 12
    kill -TERM "$pid"
    set +e
    wait "$pid"
    rc=$?
    set -e
    [ "$rc" -eq 143 ] || { echo "expected exit code 143 (SIGTERM), got $rc" >&2; cat "$work/first.log" >&2; exit 1; }
    "${check[@]}" "$out" "$out/metrics.jsonl" --expect_files 1 --min_steps 12
    # Resume from the checkpoint before the newest, so that steps the first run logged are run and logged again.
    newest="$out/$(ls "$out" | grep '^checkpoint-[0-9]*$' | sort -t- -k2 -n | tail -1)"
    rm -rf "$newest"
    from="$out/$(ls "$out" | grep '^checkpoint-[0-9]*$' | sort -t- -k2 -n | tail -1)"
    last_logged=$(tail -1 "$out/metrics.jsonl" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["step"])')
    echo "stopped after step $last_logged; resuming from $(basename "$from") ($(basename "$newest") removed)"
    [ "$last_logged" -gt "${from##*-}" ] || { echo "nothing to drop: the test needs logged steps after $from" >&2; exit 1; }
    "$bin" "${pretrain[@]}" "${flags[@]}" --resume > "$work/resume.log" 2>&1 || { cat "$work/resume.log" >&2; exit 1; }
    grep "TensorBoard: resumed at step" "$work/resume.log"
    "${check[@]}" "$out" "$out/metrics.jsonl" --expect_files 2 --min_steps 40
    ;;
  switches)
    "$bin" "${pretrain[@]}" --output_dir="$work/off" --num_train_steps=2 --tensorboard=false > "$work/off.log" 2>&1
    [ -f "$work/off/metrics.jsonl" ]
    ! ls "$work/off" | grep -q tfevents || { echo "--tensorboard=false wrote an event file" >&2; exit 1; }
    "$bin" "${pretrain[@]}" --output_dir="$work/moved" --num_train_steps=2 --tensorboard_dir="$work/tb/pretrain" \
      > "$work/moved.log" 2>&1
    ! ls "$work/moved" | grep -q tfevents || { echo "--tensorboard_dir: an event file in output_dir" >&2; exit 1; }
    "${check[@]}" "$work/tb/pretrain" "$work/moved/metrics.jsonl" --expect_files 1 --min_steps 2
    classifier_data "$work/cls"
    "$bin" "${classifier[@]}" --data_dir "$work/cls" --output_dir "$work/cls_off" --max_steps 2 --tensorboard=false \
      > "$work/cls_off.log" 2>&1
    [ -f "$work/cls_off/metrics.jsonl" ]
    ! ls "$work/cls_off" | grep -q tfevents || { echo "run-classifier --tensorboard=false wrote an event file" >&2; exit 1; }
    "$bin" "${classifier[@]}" --data_dir "$work/cls" --output_dir "$work/cls_on" --max_steps 2 \
      --tensorboard_dir "$work/tb/cls" > "$work/cls_on.log" 2>&1
    "${check[@]}" "$work/tb/cls" "$work/cls_on/metrics.jsonl" --expect_files 1 --min_steps 2
    echo "switches: off writes none, --tensorboard_dir moves them"
    ;;
  classifier)
    classifier_data "$work/cls"
    out="$work/rc"
    # 16 rows, batch 4: 4 steps per epoch, 8 in all; evaluations at steps 4 and 8; checkpoints every 2 steps.
    "$bin" "${classifier[@]}" --data_dir "$work/cls" --output_dir "$out" --save_checkpoints_steps 2 > "$work/first.log" 2>&1
    "${check[@]}" "$out" "$out/metrics.jsonl" --expect_files 1 --min_steps 8
    grep -q '"eval":true' "$out/metrics.jsonl"
    rm -rf "$out/checkpoint-8"  # resume from step 6: steps 7, 8 and the evaluation at 8 are logged again
    "$bin" "${classifier[@]}" --data_dir "$work/cls" --output_dir "$out" --save_checkpoints_steps 2 --resume \
      > "$work/resume.log" 2>&1 || { cat "$work/resume.log" >&2; exit 1; }
    grep "TensorBoard: resumed at step 6" "$work/resume.log"
    "${check[@]}" "$out" "$out/metrics.jsonl" --expect_files 2 --min_steps 8
    ;;
  *)
    echo "unknown case $case_name" >&2
    exit 2
    ;;
esac
