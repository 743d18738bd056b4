#!/usr/bin/env bash
# trainer_test.sh BUILD_DIR SOURCE_DIR CASE: behaviour tests of `bertrain pretrain` through the real binary.
# Cases: data (fixture: makes tiny shards), accumulation, resume_sigterm, c32_resume, sigkill_checkpoint,
# startup_checks, eval_dir_names, bf16, shard_lost, disk_full, create_resume, phase_rerun.
set -euo pipefail
build=$1
src=$2
case_name=$3
bin="$build/bertrain"
work="$build/trainer_test"
data="$work/data"
vocab="$src/data/vocab/bert-base-uncased-vocab.txt"
mkdir -p "$work"

tiny_config() {  # $1 = path, $2 = vocab_size, $3 = max_position_embeddings
  cat > "$1" <<JSON
{"vocab_size": $2, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 16,
 "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
 "max_position_embeddings": $3, "type_vocab_size": 2, "initializer_range": 0.02, "layer_norm_eps": 1e-12}
JSON
}

common=(--num_threads 1 pretrain --no_progress --bert_config_file="$work/tiny.json" --vocab_file="$vocab"
        --input_file="$data/p32" --max_seq_length=32 --max_predictions_per_seq=5 --seed=7
        --optimizer.name=lamb --learning_rate=1e-2 --num_warmup_steps=2)
run() {  # a tiny run in the foreground; extra flags follow
  "$bin" "${common[@]}" "$@"
}
expect_fail() {  # $1 = pattern the error must contain; rest = command
  local pat=$1
  shift
  set +e
  out=$("$@" 2>&1)
  rc=$?
  set -e
  if [ "$rc" -eq 0 ] || ! grep -q -- "$pat" <<<"$out"; then
    echo "expected failure with '$pat', got rc=$rc:" >&2
    echo "$out" >&2
    exit 1
  fi
  echo "ok: $(grep -- "$pat" <<<"$out" | head -1)"
}
expect_one_error() {  # $1 = pattern the one error line must contain; rest = command that must fail with exit code 1
  local pat=$1
  shift
  set +e
  out=$("$@" 2>&1)
  rc=$?
  set -e
  if [ "$rc" -ne 1 ] || [ "$(grep -c '\[error\]' <<<"$out")" -ne 1 ] || ! grep '\[error\]' <<<"$out" | grep -q -- "$pat"; then
    echo "expected one error line with '$pat', got rc=$rc:" >&2
    echo "$out" >&2
    exit 1
  fi
  echo "ok: $(grep '\[error\]' <<<"$out")"
}
# Background runs start the binary itself (not a shell function in a subshell), so $! is bertrain's pid and
# signals reach it.

case "$case_name" in
  data)
    rm -rf "$data"
    head -n 400 "$src/data/gutenberg/sample_small.txt" > "$work/sample.txt"
    "$bin" create-pretraining-data --input_file "$work/sample.txt" --output_dir "$data/p32" --vocab_file "$vocab" \
      --do_lower_case=true --max_seq_length 32 --max_predictions_per_seq 5 --dupe_factor 2 --random_seed 3
    tiny_config "$work/tiny.json" 30522 64
    ;;
  accumulation)
    # One step on a global batch of 8: as one micro-batch of 8 and as 4 micro-batches of 2 (dropout is keyed by
    # sample, the masked-LM loss normalised over the global batch): same losses and weights to 1e-5 relative.
    rm -rf "$work/acc1" "$work/acc4"
    run --output_dir="$work/acc1" --train_batch_size=8 --micro_batch_size=8 --num_train_steps=3
    run --output_dir="$work/acc4" --train_batch_size=8 --micro_batch_size=2 --num_train_steps=3
    /usr/bin/python3 "$src/scripts/compare_checkpoints.py" "$work/acc1/checkpoint-3" "$work/acc4/checkpoint-3" \
      --rtol 1e-4 --atol 1e-6 --metrics
    ;;
  resume_sigterm)
    # Run A straight through; run B gets SIGTERM after a few steps (mid-step or between steps), then resumes.
    # metrics.jsonl losses and the final weights must be identical bit for bit.
    rm -rf "$work/ra" "$work/rb"
    flags=(--train_batch_size=16 --micro_batch_size=2 --num_train_steps=30 --save_checkpoints_steps=1000)
    run --output_dir="$work/ra" "${flags[@]}"
    "$bin" "${common[@]}" --output_dir="$work/rb" "${flags[@]}" &
    pid=$!
    for _ in $(seq 1 600); do
      [ -f "$work/rb/metrics.jsonl" ] && [ "$(wc -l < "$work/rb/metrics.jsonl")" -ge 4 ] && break
      sleep 0.05
    done
    kill -TERM "$pid"
    set +e
    wait "$pid"
    rc=$?
    set -e
    echo "first run exit code $rc (143 = stopped by SIGTERM after saving)"
    [ "$rc" -eq 143 ] || { echo "expected exit code 143" >&2; exit 1; }
    ls "$work/rb"
    run --output_dir="$work/rb" "${flags[@]}" --resume
    /usr/bin/python3 "$src/scripts/compare_checkpoints.py" "$work/ra/checkpoint-30" "$work/rb/checkpoint-30" --exact --metrics
    ;;
  c32_resume)
    # CASES.md C32: tiny model (L=1, H=8), dropout 0.1, shuffled data, 2 epochs x 3 steps (566 samples, global
    # batch 160). Run A: 6 steps straight. Run B: the same run's checkpoint at step 4 (after an epoch rollover),
    # later steps removed, resumed in a new process for steps 5-6. Final weights, optimizer moments and step,
    # and every step's losses and learning rate must be identical (step 5 does not restart warm-up).
    rm -rf "$work/c32a" "$work/c32b"
    flags=(--train_batch_size=160 --micro_batch_size=40 --num_train_steps=6 --num_warmup_steps=3)
    run --output_dir="$work/c32a" "${flags[@]}" --save_checkpoints_steps=1000
    run --output_dir="$work/c32b" "${flags[@]}" --save_checkpoints_steps=4 --save_total_limit=0
    rm -rf "$work/c32b/checkpoint-6"
    grep -q '"step":6' "$work/c32b/metrics.jsonl"
    run --output_dir="$work/c32b" "${flags[@]}" --save_checkpoints_steps=4 --save_total_limit=0 --resume
    /usr/bin/python3 "$src/scripts/compare_checkpoints.py" "$work/c32a/checkpoint-6" "$work/c32b/checkpoint-6" --exact --metrics
    cmp "$work/c32a/checkpoint-6/optimizer.safetensors" "$work/c32b/checkpoint-6/optimizer.safetensors"
    grep -o '"optimizer_step": [0-9]*' "$work/c32b/checkpoint-6/trainer_state.json"
    echo "optimizer state identical"
    ;;
  sigkill_checkpoint)
    # SIGKILL at random moments of a run that saves every step: afterwards the newest complete checkpoint
    # loads, and --resume finishes the run.
    rm -rf "$work/kill"
    flags=(--output_dir="$work/kill" --train_batch_size=4 --micro_batch_size=4 --num_train_steps=40
           --save_checkpoints_steps=1 --save_total_limit=2)
    for delay in 0.7 1.1 1.6; do
      "$bin" "${common[@]}" "${flags[@]}" --resume > /dev/null 2>&1 &
      pid=$!
      sleep "$delay"
      kill -KILL "$pid" 2> /dev/null || true
      wait "$pid" 2> /dev/null || true
      for d in "$work"/kill/checkpoint-*; do
        [ -d "$d" ] || continue
        "$bin" inspect "$d" > /dev/null || { echo "checkpoint $d does not load" >&2; exit 1; }
      done
    done
    run "${flags[@]}" --resume
    "$bin" inspect "$work/kill/checkpoint-40" | head -5
    ;;
  startup_checks)
    tiny_config "$work/small_vocab.json" 1000 64
    expect_fail "has 30522 entries but the model's vocab_size" \
      run --output_dir="$work/sc1" --bert_config_file="$work/small_vocab.json" --num_train_steps=3
    tiny_config "$work/short_pos.json" 30522 16
    expect_fail "exceeds max_position_embeddings" \
      run --output_dir="$work/sc2" --bert_config_file="$work/short_pos.json" --num_train_steps=3
    expect_fail "max_predictions_per_seq 5 but the recipe says 7" \
      run --output_dir="$work/sc3" --max_predictions_per_seq=7 --num_train_steps=3
    rm -rf "$work/sc4"
    run --output_dir="$work/sc4" --num_train_steps=3 --train_batch_size=4 --micro_batch_size=4 > /dev/null
    cat > "$work/other_shape.json" <<JSON
{"vocab_size": 30522, "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 16,
 "max_position_embeddings": 64}
JSON
    expect_fail "shape" run --output_dir="$work/sc5" --bert_config_file="$work/other_shape.json" \
      --init_checkpoint="$work/sc4/checkpoint-3" --num_train_steps=3
    expect_fail "must be a multiple of micro_batch_size" run --output_dir="$work/sc6" --train_batch_size=6 --micro_batch_size=4 --num_train_steps=3
    expect_fail "unknown flag --learning_rat" run --output_dir="$work/sc7" --learning_rat=3 --num_train_steps=3
    ;;
  eval_dir_names)
    # Evaluation reads every *.hdf5 / *.h5 file of eval_dir, whatever its name (NVIDIA's held-out shards are
    # *_test_*.hdf5); training says how many samples each epoch leaves out; an eval_dir without shards is one error.
    rm -rf "$work/ev" "$work/ev_train" "$work/ev_empty"
    mkdir -p "$work/ev" "$work/ev_empty"
    cp "$data"/p32/part-00000-training.hdf5 "$work/ev/wikicorpus_en_test_0.hdf5"
    echo "not a shard" > "$work/ev/README.txt"
    out=$(run --output_dir="$work/ev_train" --num_train_steps=2 --train_batch_size=8 2>&1)
    grep -q "samples of each epoch's order are not used that epoch" <<<"$out" || { echo "no epoch-tail log line" >&2; echo "$out" >&2; exit 1; }
    "$bin" --num_threads 1 pretrain --no_progress --do_train=false --do_eval --init_checkpoint="$work/ev_train/checkpoint-2" \
      --eval_dir="$work/ev" --output_dir="$work/ev_out" --bert_config_file="$work/tiny.json"
    /usr/bin/python3 -c "import json,sys; r=json.load(open(sys.argv[1])); assert r['global_step']==2 and r['masked_lm_loss']>0, r; print('ok:', r)" \
      "$work/ev_out/eval_results.json"
    expect_fail "holds no HDF5 shard" "$bin" --num_threads 1 pretrain --no_progress --do_train=false --do_eval \
      --init_checkpoint="$work/ev_train/checkpoint-2" --eval_dir="$work/ev_empty" --output_dir="$work/ev_out2" \
      --bert_config_file="$work/tiny.json"
    ;;
  bf16)
    # --bf16 (recipe key "bf16"): the resolved recipe records it, the log says so, the losses are finite and
    # within 2% of the f32 run's from the same seed (3 steps: only the matmuls' rounding differs), and not
    # identical to them (the flag took effect). A recipe value of the wrong type is an error naming the key.
    rm -rf "$work/bf_a" "$work/bf_b" "$work/bf_c" "$work/bf_d" "$work/bf_e"
    run --output_dir="$work/bf_a" --num_train_steps=3 --train_batch_size=8 > /dev/null
    out=$(run --output_dir="$work/bf_b" --num_train_steps=3 --train_batch_size=8 --bf16 2>&1)
    grep -q "bf16 mixed precision" <<<"$out" || { echo "no bf16 log line:" >&2; echo "$out" >&2; exit 1; }
    run --output_dir="$work/bf_c" --num_train_steps=2 --train_batch_size=8 --bf16=false > /dev/null
    /usr/bin/python3 - "$work" <<'PY'
import json, math, sys
w = sys.argv[1]
def losses(d):
    return [j["loss"] for j in map(json.loads, open(f"{w}/{d}/metrics.jsonl")) if "loss" in j and not j.get("eval")]
assert json.load(open(f"{w}/bf_a/recipe.json"))["bf16"] is False
assert json.load(open(f"{w}/bf_b/recipe.json"))["bf16"] is True
assert json.load(open(f"{w}/bf_c/recipe.json"))["bf16"] is False
a, b = losses("bf_a"), losses("bf_b")
assert len(a) == len(b) == 3, (a, b)
for x, y in zip(a, b):
    assert math.isfinite(y) and abs(x - y) <= 0.02 * abs(x), (a, b)
assert a != b, "bf16 losses identical to f32: the flag had no effect"
print("ok: f32", a, "bf16", b)
PY
    echo '{"bf16": "yes"}' > "$work/bf16_bad.json"
    expect_fail "key 'bf16' has the wrong type" "$bin" --num_threads 1 pretrain --config "$work/bf16_bad.json" \
      "${common[@]:3}" --output_dir="$work/bf_d" --num_train_steps=2
    # Without AVX-512 (here: oneDNN limited to AVX2) oneDNN 2.6 has no bf16 matmul: a clear error at start-up.
    expect_fail "bf16 matmuls need a CPU with AVX-512" env DNNL_MAX_CPU_ISA=AVX2 "$bin" "${common[@]}" \
      --output_dir="$work/bf_e" --num_train_steps=2 --bf16
    test ! -e "$work/bf_e/metrics.jsonl" || { echo "trained before failing" >&2; exit 1; }
    ;;
  shard_lost)
    # Shards missing or truncated while a run reads them (small shards, one per window, so
    # windows are read all the time): the run stops with one error line naming a shard; the newest checkpoint loads.
    rm -rf "$work/lost_data"
    "$bin" --log_level warn create-pretraining-data --input_file "$work/sample.txt" --output_dir "$work/lost_data" \
      --vocab_file "$vocab" --do_lower_case=true --max_seq_length 32 --max_predictions_per_seq 5 --dupe_factor 2 \
      --random_seed 3 --window_mb 0.005 --max_instances_per_shard 40
    for how in missing truncated; do
      w="$work/lost_$how"
      rm -rf "$w"
      mkdir -p "$w"
      cp -r "$work/lost_data" "$w/data"
      "$bin" "${common[@]}" --input_file="$w/data" --output_dir="$w/run" --train_batch_size=8 --micro_batch_size=8 \
        --num_train_steps=100000 --save_checkpoints_steps=1 --save_total_limit=2 --shuffle_window_shards=1 \
        > "$w/log" 2>&1 &
      pid=$!
      for _ in $(seq 1 1200); do
        [ -d "$w/run/checkpoint-2" ] && break
        sleep 0.05
      done
      for f in "$w"/data/*.hdf5; do
        if [ "$how" = missing ]; then rm "$f"; else truncate -s 2000 "$f"; fi
      done
      set +e
      timeout 300 tail --pid="$pid" -f /dev/null
      wait "$pid"
      rc=$?
      set -e
      tail -n 3 "$w/log"
      [ "$rc" -eq 1 ] || { echo "$how: the run did not fail with exit code 1 (rc=$rc)" >&2; exit 1; }
      [ "$(grep -c '\[error\]' "$w/log")" -eq 1 ] || { echo "$how: not one error line" >&2; exit 1; }
      grep '\[error\]' "$w/log" | grep -q "$w/data/part-[0-9-]*-training.hdf5" ||
        { echo "$how: the error does not name the shard" >&2; exit 1; }
      newest=$(ls -d "$w"/run/checkpoint-* | sort -t- -k2 -n | tail -n 1)
      "$bin" inspect "$newest" > /dev/null
      ! ls -d "$w"/run/.tmp-* 2> /dev/null || { echo "$how: a temporary checkpoint was left" >&2; exit 1; }
      echo "ok: $how shards stop the run; $newest loads"
    done
    ;;
  disk_full)
    # A full disk (a file-size limit, which needs no root) while writing shards or a
    # checkpoint: one error line naming the file; no half shard under its final name, the last checkpoint whole.
    rm -rf "$work/full_data" "$work/full"
    expect_one_error "full_data/part-00000-training.hdf5.*File too large" bash -c 'ulimit -f 64; exec "$@"' _ "$bin" create-pretraining-data \
      --input_file "$work/sample.txt" --output_dir "$work/full_data" --vocab_file "$vocab" --do_lower_case=true \
      --max_seq_length 32 --max_predictions_per_seq 5 --dupe_factor 8 --random_seed 3
    ! ls "$work"/full_data/*.hdf5 "$work"/full_data/*.tmp 2> /dev/null || { echo "a shard was left" >&2; exit 1; }
    run --output_dir="$work/full" --num_train_steps=2 --train_batch_size=8 > /dev/null
    expect_one_error "checkpoint-4.*model.safetensors.*File too large" bash -c 'ulimit -f 600; exec "$@"' _ \
      "$bin" "${common[@]}" --output_dir="$work/full" --num_train_steps=4 --train_batch_size=8 --resume
    "$bin" inspect "$work/full/checkpoint-2" > /dev/null
    ! ls -d "$work"/full/checkpoint-4 "$work"/full/.tmp-* 2> /dev/null || { echo "a partial checkpoint was left" >&2; exit 1; }
    echo "ok: checkpoint-2 loads, no checkpoint-4"
    ;;
  create_resume)
    # create-pretraining-data killed (SIGKILL) after some windows, then run again: the complete windows are
    # skipped, the shards are those of an uninterrupted run, byte for byte, and no temporary file is left.
    rm -rf "$work/cr_a" "$work/cr_b"
    cr=(--num_threads 1 --log_level warn create-pretraining-data --input_file "$src/data/gutenberg/sample_small.txt"
        --vocab_file "$vocab" --do_lower_case=true --max_seq_length 64 --max_predictions_per_seq 10 --dupe_factor 2
        --random_seed 5 --window_mb 0.05 --max_instances_per_shard 300)
    "$bin" "${cr[@]}" --output_dir "$work/cr_a"
    "$bin" "${cr[@]}" --output_dir "$work/cr_b" &
    pid=$!
    for _ in $(seq 1 1200); do
      [ "$(ls "$work"/cr_b/.progress/window-*.json 2> /dev/null | wc -l)" -ge 4 ] && break
      sleep 0.02
    done
    kill -KILL "$pid"
    wait "$pid" 2> /dev/null || true
    echo "killed after $(ls "$work"/cr_b/.progress/window-*.json | wc -l) windows"
    out=$("$bin" --num_threads 1 "${cr[@]:4}" --output_dir "$work/cr_b" 2>&1)
    grep -o "[0-9]* windows ([0-9]* complete from an earlier run)" <<<"$out"
    grep -q "windows ([1-9][0-9]* complete from an earlier run)" <<<"$out" || { echo "$out" >&2; exit 1; }
    n=0
    for f in "$work"/cr_a/*.hdf5; do
      cmp "$f" "$work/cr_b/$(basename "$f")"
      n=$((n + 1))
    done
    [ "$(ls "$work"/cr_b/*.hdf5 | wc -l)" -eq "$n" ] || { echo "other shards in the resumed run" >&2; exit 1; }
    ! ls "$work"/cr_b/*.tmp 2> /dev/null || { echo "a temporary file was left" >&2; exit 1; }
    echo "ok: $n shards byte-identical to the uninterrupted run"
    ;;
  phase_rerun)
    # A two-phase recipe run phase by phase (--phase 1, --phase 2), then --phase 2 again without --resume: the
    # re-run replaces phase 2's records, so metrics.jsonl holds every step once.
    rm -rf "$work/pr"
    mkdir -p "$work/pr"
    cat > "$work/pr/recipe.json" <<JSON
{"bert_config_file": "$work/tiny.json", "vocab_file": "$vocab", "output_dir": "$work/pr/out", "seed": 7,
 "optimizer": {"name": "lamb"}, "log_every_steps": 1, "tensorboard": false,
 "phases": [
  {"max_seq_length": 32, "max_predictions_per_seq": 5, "input_dir": "$data/p32", "train_batch_size": 4,
   "learning_rate": 1e-2, "num_train_steps": 3},
  {"max_seq_length": 32, "max_predictions_per_seq": 5, "input_dir": "$data/p32", "train_batch_size": 4,
   "learning_rate": 5e-3, "num_train_steps": 2}]}
JSON
    pr=(--num_threads 1 --log_level warn pretrain --no_progress --config "$work/pr/recipe.json")
    "$bin" "${pr[@]}" --phase 1
    "$bin" "${pr[@]}" --phase 2
    "$bin" "${pr[@]}" --phase 2
    /usr/bin/python3 - "$work/pr/out/metrics.jsonl" <<'PY'
import json, sys
steps = [json.loads(l)["step"] for l in open(sys.argv[1]) if '"eval"' not in l]
assert steps == [1, 2, 3, 4, 5], steps
print("ok: steps", steps)
PY
    ;;
  *)
    echo "unknown case $case_name" >&2
    exit 2
    ;;
esac
