#!/usr/bin/env bash
# cli_streams_test.sh BUILD_DIR: stdout is for data, stderr for everything else. Every subcommand that
# `bertrain --help` lists (and every `bench` subcommand that `bertrain bench --help` lists) runs with a bad input
# (a missing file, a bad flag value or an unknown flag) and must exit non-zero with stdout empty and stderr
# holding the one-line error: exactly one line, at level error, or CLI11's usage error (its message and "Run with
# --help for more information."). The list comes from --help, so a new subcommand fails here until it has a case.
set -uo pipefail
bin=$1/bertrain
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
no=$tmp/missing
declare -A bad=(
  [bench allreduce]="--model no_such_model"
  [bench ops]="--no_such_flag"
  [bench optim]="--iters 0"
  [bench predict]="--checkpoint $no --data_dir $no"
  [bench peak]="--seconds 0"
  [bench request]="--model no_such_model"
  [bench tokenizer]="--vocab_file $no-vocab.txt --input_file $no.txt"
  [bench finetune]="--data_dir $no --vocab_file $no-vocab.txt"
  [bench train]="--models no_such_model"
  [build-vocab]="--input_file $no.txt --output_dir $tmp/vocab --vocab_size 100"
  [convert]="--input $no --output $tmp/converted"
  [create-pretraining-data]="--input_file $no.txt --output_dir $tmp/shards --vocab_file $no-vocab.txt"
  [estimate]="--config $no.json"
  [export-onnx]="--checkpoint $no --output $tmp/model.onnx"
  [extract-features]="--input_file $no.txt --vocab_file $no-vocab.txt --init_checkpoint $no/bert_model.ckpt"
  [info]="--no_such_flag"
  [inspect]="$no"
  [predict]="--checkpoint $no --input $no.txt"
  [pretrain]="--config $no.json"
  [run-classifier]="--task_name SST-2 --data_dir $no --vocab_file $no-vocab.txt --output_dir $tmp/out --do_eval"
  [run-ner]="--vocab_file $no-vocab.txt --output_dir $tmp/out --do_eval --validation_file $no.conll"
  [run-squad]="--vocab_file $no-vocab.txt --output_dir $tmp/out --do_predict --predict_file $no.json"
  [squad-evaluate]="--data_file $no.json --prediction_file $no-predictions.json"
  [tokenize]="--vocab_file $no-vocab.txt"
)
# Subcommand names: the lines indented by two spaces under "Subcommands:" in a --help text.
subcommands() { awk '/^Subcommands:/ { on = 1; next } on && /^  [^ ]/ { print $1 }' ; }
commands=()
while read -r c; do
  if [ "$c" = bench ]; then
    while read -r b; do commands+=("bench $b"); done < <("$bin" bench --help | subcommands)
  else
    commands+=("$c")
  fi
done < <("$bin" --help | subcommands)
[ ${#commands[@]} -ge 10 ] || { echo "only ${#commands[@]} subcommands found in bertrain --help"; exit 1; }

fail=0
for c in "${commands[@]}"; do
  if [ -z "${bad[$c]+set}" ]; then
    echo "FAIL $c: no bad-input case: add one to tests/tools/cli_streams_test.sh"; fail=1; continue
  fi
  # shellcheck disable=SC2086  # the command and its arguments split on spaces on purpose
  echo hi | "$bin" $c ${bad[$c]} > "$tmp/out" 2> "$tmp/err"
  rc=$?
  lines=$(wc -l < "$tmp/err")
  why=""
  [ $rc -ne 0 ] || why="exit code 0"
  [ -s "$tmp/out" ] && why="$why; stdout not empty: $(head -c 200 "$tmp/out")"
  if [ "$lines" -eq 1 ] && grep -qE '^\[[0-9:.]+\] \[error\] .' "$tmp/err"; then :
  elif [ "$lines" -eq 2 ] && [ "$(tail -n 1 "$tmp/err")" = "Run with --help for more information." ]; then :
  else why="$why; stderr is not one error line"
  fi
  if [ -n "$why" ]; then
    echo "FAIL bertrain $c ${bad[$c]}: ${why#; }"; sed 's/^/  stderr: /' "$tmp/err"; fail=1
  else
    echo "ok   bertrain $c: $(head -n 1 "$tmp/err")"
  fi
done
exit $fail
