#!/usr/bin/env bash
# mpi_test.sh BUILD_DIR SOURCE_DIR CASE: data-parallel behaviour of the real binary under `mpirun -np 2`, on the
# tiny shards of the trainer_data fixture (tests/train/trainer_test.sh). Cases:
#   equivalence   2 ranks x 2 micro-batches == 1 rank x 4 (weights and losses to 1e-6), pretraining and run-classifier
#   kill_resume   SIGKILL of rank 1 mid-run ends the job within 10 s naming the rank; --resume finishes it
#   elastic_resume  a checkpoint of 1 process resumed by 2 ranks, and the reverse, continue the same run
#   rank_throws   an error on one rank only (its eval_dir is missing) ends the job within 10 s naming the rank
#   default_micro  without micro_batch_size each of 2 ranks runs train_batch_size / 2 in one micro-batch (as
#                 google-research/bert's flags under mpirun), equal to 1 rank x 2 micro-batches; an explicit
#                 micro_batch_size that does not divide is refused
#   comm_metrics  over TCP (btl self,tcp), bert-tiny (configs/model/bert-tiny.json, 16 MB of gradients): every step's
#                 metrics.jsonl record has allreduce_seconds, comm_exposed_seconds, allreduce_bytes (2 (R-1)/R x the
#                 gradient bytes), and compute + exposed + optimizer + data time is the step's time within 5%
#   bf16_exchange  --allreduce_dtype bf16: half the bytes, the weights the same on both ranks at every checkpoint,
#                 losses within 1% of the f32 exchange's
#   bench_allreduce  `bench allreduce` (its sums checked inside) runs on 2 ranks in f32 and bf16 and reports the
#                 bytes each rank sends; 1 rank is refused
#   unequal_shards  CASES.md C41: shards of 10, 7 and 4 samples, 2 ranks x micro-batch 2, 2 epochs: 5 steps per
#                 epoch on both ranks, the job ends, the same samples and weights as 1 rank
# BERTRAIN_PROGRESS_THREAD is passed on to the ranks (mpi_*_progress_thread run some cases with it set to 1).
# Runs as root in CI: --allow-run-as-root; --oversubscribe and --bind-to none for small machines; shared memory
# (vader) without the CMA single-copy path, which containers usually forbid.
set -euo pipefail
build=$1
src=$2
case_name=$3
bin="$build/bertrain"
work="$build/mpi_test"
data="$build/trainer_test/data"
tiny="$build/trainer_test/tiny.json"
vocab="$src/data/vocab/bert-base-uncased-vocab.txt"
mkdir -p "$work"
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# Under scripts/test_sanitize.sh: OpenMPI's libraries have no frame pointers, so LeakSanitizer's default (fast)
# unwinder stops one frame into them and the suppressions of OpenMPI's own leaks (tests/sanitizers/lsan.supp:
# libmpi.so, libevent_core) could not match; the slow unwinder gives the whole stack, for the ranks only.
[ -n "${ASAN_OPTIONS:-}" ] && export ASAN_OPTIONS="$ASAN_OPTIONS:fast_unwind_on_malloc=0"
export OMPI_MCA_rmaps_base_oversubscribe=1
mpi=(mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader -np 2)

common=(--num_threads 1 pretrain --no_progress --bert_config_file="$tiny" --vocab_file="$vocab"
        --input_file="$data/p32" --max_seq_length=32 --max_predictions_per_seq=5 --seed=7
        --optimizer.name=lamb --learning_rate=1e-2 --num_warmup_steps=2)

# ends_within SECONDS LOG PATTERN: waits for the background job $job_pid, fails when it outlives SECONDS (measured
# from now), exits 0, or its log lacks PATTERN.
ends_within() {
  local limit_ms=$(($1 * 1000)) log=$2 pat=$3 t0 rc dt
  t0=$(date +%s%3N)
  while kill -0 "$job_pid" 2> /dev/null; do
    if (($(date +%s%3N) - t0 > limit_ms + 5000)); then
      echo "job still running $((limit_ms / 1000 + 5)) s after the failure: a hang" >&2
      kill -KILL "$job_pid" 2> /dev/null || true
      exit 1
    fi
    sleep 0.05
  done
  set +e
  wait "$job_pid"
  rc=$?
  set -e
  dt=$(($(date +%s%3N) - t0))
  echo "job ended ${dt} ms after the failure with exit code $rc"
  echo "---- its last lines:"
  tail -n 15 "$log"
  echo "----"
  ((dt <= limit_ms)) || { echo "took longer than $1 s" >&2; exit 1; }
  [ "$rc" -ne 0 ] || { echo "the job reported success" >&2; exit 1; }
  grep -q -- "$pat" "$log" || { echo "no '$pat' in the job's output" >&2; exit 1; }
}

# rank_pid MPIRUN_PID RANK: the pid of that rank (a child of mpirun with OMPI_COMM_WORLD_RANK=RANK).
rank_pid() {
  local p
  for p in $(pgrep -P "$1"); do
    if tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then
      echo "$p"
      return 0
    fi
  done
  return 1
}

case "$case_name" in
  equivalence)
    rm -rf "$work/one" "$work/two" "$work/cls_one" "$work/cls_two"
    flags=(--train_batch_size=8 --micro_batch_size=2 --num_train_steps=6 --do_eval --eval_dir="$data/p32"
           --max_eval_steps=5)
    "$bin" "${common[@]}" --output_dir="$work/one" "${flags[@]}"
    # Small buckets (50 KB) so that the tiny model's gradients are summed in several, most during backward.
    "${mpi[@]}" "$bin" --log_level debug "${common[@]}" --output_dir="$work/two" "${flags[@]}" \
      --allreduce_bucket_mb=0.05 > "$work/two.log" 2>&1 || { cat "$work/two.log"; exit 1; }
    grep "gradient buckets started during backward" "$work/two.log" | tail -n 1
    # BERTRAIN_PROGRESS_THREAD=1 (mpi_equivalence_progress_thread): the sums advanced by the communicator's thread.
    if [ "${BERTRAIN_PROGRESS_THREAD:-}" = 1 ]; then
      grep -q "2 ranks, progress thread" "$work/two.log" || { echo "no progress thread in the start-up line" >&2; exit 1; }
    else
      ! grep -q "progress thread" "$work/two.log" || { echo "a progress thread without BERTRAIN_PROGRESS_THREAD=1" >&2; exit 1; }
    fi
    # From step 2 on (unused parameters learned) every bucket but the embeddings' starts during backward.
    grep -q "step 6: \([2-9]\|[1-9][0-9]\) of [0-9]* gradient buckets started during backward" "$work/two.log"
    grep -q '"world_size": 2' "$work/two/checkpoint-6/trainer_state.json"
    grep -q '"grad_accum_steps": 2' "$work/two/checkpoint-6/trainer_state.json"
    # 1 x 4 sums ((g0 + g1) + g2) + g3, 2 x 2 sums (g0 + g1) + (g2 + g3): float rounding, a few ulps of weights
    # whose scale is 0.02 (atol 1e-8 = 5e-7 of it; the worst difference measured is 7.5e-9).
    /usr/bin/python3 "$src/scripts/compare_checkpoints.py" "$work/one/checkpoint-6" "$work/two/checkpoint-6" \
      --rtol 1e-6 --atol 1e-8 --metrics
    # Evaluation is split over the ranks and summed: the same figures.
    /usr/bin/python3 - "$work/one/eval_results.json" "$work/two/eval_results.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for k in a:
    assert abs(a[k] - b[k]) <= 1e-9 + 1e-6 * abs(a[k]), (k, a[k], b[k])
print("eval_results.json match:", a)
PY
    # Finetuning: run-classifier from that checkpoint, batch 8 as 1 x 8 rows and as 2 ranks x 4 rows. The kernels
    # then reduce over 8 rows vs 4 (other f32 rounding, as trainer_accumulation's 1 x 8 vs 4 x 2): 1e-4 relative.
    glue="$work/sst"
    mkdir -p "$glue"
    { printf 'sentence\tlabel\n'; awk 'NF > 3 && n < 48 { print $0 "\t" (length($0) % 2); n++ }' "$src/data/gutenberg/sample_small.txt"; } > "$glue/train.tsv"
    head -n 9 "$glue/train.tsv" > "$glue/dev.tsv"
    cls=(--num_threads 1 run-classifier --task_name SST-2 --data_dir "$glue" --vocab_file "$vocab"
         --init_checkpoint "$work/one/checkpoint-6" --max_seq_length 32 --train_batch_size 8 --learning_rate 1e-3
         --max_steps 5 --save_checkpoints_steps 5 --num_train_epochs 1 --do_train --seed 3)
    "$bin" "${cls[@]}" --output_dir "$work/cls_one" > /dev/null
    "${mpi[@]}" "$bin" "${cls[@]}" --output_dir "$work/cls_two"
    /usr/bin/python3 "$src/scripts/compare_checkpoints.py" "$work/cls_one/checkpoint-5" "$work/cls_two/checkpoint-5" \
      --rtol 1e-4 --atol 1e-6
    /usr/bin/python3 - "$work/cls_one/metrics.jsonl" "$work/cls_two/metrics.jsonl" <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(p) if '"eval"' not in l] for p in sys.argv[1:3])
assert len(a) == len(b) == 5, (len(a), len(b))
for x, y in zip(a, b):
    assert abs(x["loss"] - y["loss"]) <= 1e-6 + 1e-4 * abs(x["loss"]), (x, y)
print("run-classifier losses match over", len(a), "steps")
PY
    ;;
  kill_resume)
    rm -rf "$work/kill" "$work/nokill"
    flags=(--train_batch_size=8 --micro_batch_size=2 --num_train_steps=60 --save_checkpoints_steps=5)
    "${mpi[@]}" "$bin" "${common[@]}" --output_dir="$work/nokill" "${flags[@]}" > /dev/null 2>&1
    "${mpi[@]}" "$bin" "${common[@]}" --output_dir="$work/kill" "${flags[@]}" > "$work/kill.log" 2>&1 &
    job_pid=$!
    for _ in $(seq 1 1200); do
      [ -d "$work/kill/checkpoint-10" ] && break
      sleep 0.05
    done
    [ -d "$work/kill/checkpoint-10" ] || { echo "no checkpoint-10 after 60 s" >&2; cat "$work/kill.log"; exit 1; }
    victim=$(rank_pid "$job_pid" 1) || { echo "rank 1 not found (finished already?)" >&2; exit 1; }
    kill -KILL "$victim"
    echo "SIGKILL sent to rank 1 (pid $victim)"
    ends_within 10 "$work/kill.log" "process rank 1 .*exited on signal 9"
    ls "$work/kill"
    "${mpi[@]}" "$bin" "${common[@]}" --output_dir="$work/kill" "${flags[@]}" --resume 2>&1 | tee "$work/resume.log" | tail -n 3
    grep -q "resumed from" "$work/resume.log"
    # Same world size, same reduction order: the resumed run ends where the uninterrupted one does, bit for bit.
    /usr/bin/python3 "$src/scripts/compare_checkpoints.py" "$work/nokill/checkpoint-60" "$work/kill/checkpoint-60" \
      --exact --metrics
    ;;
  elastic_resume)
    # A 1-process checkpoint resumed by 2 ranks, and a 2-rank checkpoint resumed by 1 process (at step 40): the data cursor
    # (epoch, sample, micro-batch) does not depend on the rank count, so the resumed runs read the samples the
    # uninterrupted 1-process run reads (checked from the debug log, which names each micro-batch's samples), and
    # end where it does (to 1e-6: the summation order differs). Shards of 40 samples, windows of 2 shards, so the
    # resumed steps cross windows and the epoch's end (429 samples: 53 steps of 8).
    rm -rf "$work/el_ref" "$work/el" "$work/el2" "$work/el_data"
    "$bin" --log_level warn create-pretraining-data --input_file "$build/trainer_test/sample.txt" \
      --output_dir "$work/el_data" --vocab_file "$vocab" --do_lower_case=true --max_seq_length 32 \
      --max_predictions_per_seq 5 --dupe_factor 2 --random_seed 3 --window_mb 0.005 --max_instances_per_shard 40
    flags=(--input_file="$work/el_data" --train_batch_size=8 --micro_batch_size=2 --num_train_steps=80
           --save_checkpoints_steps=40 --save_total_limit=0 --shuffle_window_shards=2)
    "$bin" --log_level debug "${common[@]}" "${flags[@]}" --output_dir="$work/el_ref" > "$work/el_ref.log" 2>&1
    cp -r "$work/el_ref" "$work/el"
    rm -r "$work/el/checkpoint-80"
    "${mpi[@]}" "$bin" --log_level debug "${common[@]}" "${flags[@]}" --output_dir="$work/el" --resume \
      > "$work/el.log" 2>&1 || { cat "$work/el.log"; exit 1; }
    grep "resumed from" "$work/el.log"
    grep -q '"grad_accum_steps": 4' "$work/el/checkpoint-40/trainer_state.json"
    grep -q '"grad_accum_steps": 2' "$work/el/checkpoint-80/trainer_state.json"
    /usr/bin/python3 "$src/scripts/compare_checkpoints.py" "$work/el_ref/checkpoint-80" "$work/el/checkpoint-80" \
      --rtol 1e-6 --atol 1e-8 --metrics
    # The reverse: the checkpoint-40 of a 2-rank run (of the same 80-step schedule), then 1 process.
    "${mpi[@]}" "$bin" "${common[@]}" "${flags[@]}" --output_dir="$work/el2" > /dev/null 2>&1
    rm -r "$work/el2/checkpoint-80"
    grep -q '"world_size": 2' "$work/el2/checkpoint-40/trainer_state.json"
    "$bin" --log_level debug "${common[@]}" "${flags[@]}" --output_dir="$work/el2" --resume > "$work/el2.log" 2>&1 ||
      { cat "$work/el2.log"; exit 1; }
    grep "resumed from" "$work/el2.log"
    # 40 steps on 2 ranks leave more last-bit differences (element-wise up to 1e-5 of an element): each tensor as
    # a whole to 1e-6 (measured 1.9e-7; attention.self.key.bias, whose gradient is zero, holds only 1e-9 noise).
    /usr/bin/python3 "$src/scripts/compare_checkpoints.py" "$work/el_ref/checkpoint-80" "$work/el2/checkpoint-80" \
      --rtol 1e-6 --atol 1e-8 --norm --metrics
    /usr/bin/python3 - "$work/el_ref.log" "$work/el.log" "$work/el2.log" <<'PY'
import re, sys
def samples(path):
    pat = r"step (\d+) rank 0 micro-batch (\d+): epoch (\d+) samples ([\d,]+)"
    return {(int(m[1]), int(m[2])): (int(m[3]), m[4]) for m in re.finditer(pat, open(path).read())}
ref, two, one = (samples(p) for p in sys.argv[1:4])
assert len(two) == 40 * 2 and len(one) == 40 * 4, (len(two), len(one))
for step in range(41, 81):
    for m in range(2):  # rank 0 of 2 reads blocks 0 and 1 of each global batch: 1 process's micro-batches 0 and 1
        assert two[(step, m)] == ref[(step, m)], (step, m)
    for m in range(4):
        assert one[(step, m)] == ref[(step, m)], (step, m)
epochs = sorted({ref[k][0] for k in ref if k[0] > 40})
assert epochs == [0, 1], epochs  # the resumed steps cross the epoch's end
print("resumed steps 41-80 read the uninterrupted run's samples, with 2 ranks and with 1 (epochs", epochs, ")")
PY
    ;;
  rank_throws)
    rm -rf "$work/throw"
    flags=(--output_dir="$work/throw" --train_batch_size=8 --micro_batch_size=2 --num_train_steps=40
           --eval_every_steps=3 --max_eval_steps=2)
    # MPMD: rank 1 gets an eval_dir without shards, so it throws at the first evaluation (step 3) while rank 0
    # waits for it inside the evaluation's sum.
    mkdir -p "$work/empty_eval"
    mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader \
      -np 1 "$bin" "${common[@]}" "${flags[@]}" --eval_dir="$data/p32" : \
      -np 1 "$bin" "${common[@]}" "${flags[@]}" --eval_dir="$work/empty_eval" > "$work/throw.log" 2>&1 &
    job_pid=$!
    for _ in $(seq 1 1200); do
      grep -q "rank 1 of 2" "$work/throw.log" 2> /dev/null && break
      kill -0 "$job_pid" 2> /dev/null || break
      sleep 0.05
    done
    ends_within 10 "$work/throw.log" "rank 1 of 2: eval_dir .*empty_eval"
    ;;
  default_micro)
    rm -rf "$work/dm_one" "$work/dm_two" "$work/dm_bad"
    flags=(--train_batch_size=8 --num_train_steps=4)
    "$bin" "${common[@]}" "${flags[@]}" --micro_batch_size=4 --output_dir="$work/dm_one" > /dev/null 2>&1
    "${mpi[@]}" "$bin" "${common[@]}" "${flags[@]}" --output_dir="$work/dm_two" > "$work/dm_two.log" 2>&1 ||
      { cat "$work/dm_two.log"; exit 1; }
    grep "global batch 8 = 1 micro-batches of 4 x 2 ranks" "$work/dm_two.log"
    grep -q '"grad_accum_steps": 1' "$work/dm_two/checkpoint-4/trainer_state.json"
    grep -q '"micro_batch_size": 4' "$work/dm_two/recipe.json"
    /usr/bin/python3 "$src/scripts/compare_checkpoints.py" "$work/dm_one/checkpoint-4" "$work/dm_two/checkpoint-4" \
      --rtol 1e-6 --atol 1e-8 --metrics
    # An explicit micro-batch keeps its meaning: 8 per rank x 2 ranks does not divide a global batch of 8.
    if "${mpi[@]}" "$bin" "${common[@]}" "${flags[@]}" --micro_batch_size=8 --output_dir="$work/dm_bad" \
      > "$work/dm_bad.log" 2>&1; then
      echo "an explicit micro_batch_size of 8 x 2 ranks was accepted for a global batch of 8" >&2
      exit 1
    fi
    grep -q "must be a multiple of micro_batch_size (8) x 2 ranks" "$work/dm_bad.log"
    # Without micro_batch_size the global batch must split evenly over the ranks.
    if "${mpi[@]}" "$bin" "${common[@]}" --train_batch_size=7 --num_train_steps=4 --output_dir="$work/dm_bad" \
      > "$work/dm_bad.log" 2>&1; then
      echo "a global batch of 7 was accepted on 2 ranks" >&2
      exit 1
    fi
    grep -q "train_batch_size (7) must be a multiple of the 2 ranks" "$work/dm_bad.log"
    ;;
  comm_metrics)
    rm -rf "$work/cm"
    # Bucket of 4 MB: the tiny BERT's 16 MB of gradients in several sums, the heads' started during backward.
    mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl self,tcp -np 2 "$bin" "${common[@]}" \
      --bert_config_file="$src/configs/model/bert-tiny.json" --train_batch_size=8 --num_train_steps=6 \
      --allreduce_bucket_mb=4 --output_dir="$work/cm" > "$work/cm.log" 2>&1 || { cat "$work/cm.log"; exit 1; }
    grep "gradients summed in" "$work/cm.log"
    /usr/bin/python3 - "$work/cm/metrics.jsonl" "$src/configs/model/bert-tiny.json" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if '"eval"' not in l]
assert len(recs) == 6, len(recs)
c = json.load(open(sys.argv[2]))
H, I, L, V, P = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["vocab_size"], c["max_position_embeddings"]
# BertForPreTraining's parameters (the decoder shares the word embeddings): embeddings, layers, pooler, heads.
n = (V + P + c["type_vocab_size"]) * H + 2 * H + L * (4 * (H * H + H) + 2 * H + H * I + I + I * H + H + 2 * H) \
    + (H * H + H) + (H * H + H + 2 * H + V) + (2 * H + 2)
want = 2 * (2 - 1) / 2 * 4 * n  # f32, 2 ranks
for r in recs:
    print({k: r[k] for k in ("step", "step_seconds", "compute_seconds", "optimizer_seconds", "allreduce_seconds",
                             "comm_exposed_seconds", "data_wait_seconds", "allreduce_bytes")})
    assert r["allreduce_bytes"] == round(want), (r["allreduce_bytes"], want)
    assert 0 < r["allreduce_seconds"] < r["step_seconds"], r
    assert 0 <= r["comm_exposed_seconds"] < r["step_seconds"], r
    assert 0 < r["compute_seconds"] < r["step_seconds"] and 0 < r["optimizer_seconds"] < r["step_seconds"], r
    parts = r["compute_seconds"] + r["comm_exposed_seconds"] + r["optimizer_seconds"] + r["data_wait_seconds"]
    # The four are timed back to back: only microseconds of bookkeeping fall between them, even on a busy machine.
    assert 0.95 * r["step_seconds"] <= parts <= r["step_seconds"], (parts, r["step_seconds"])
print("every step: allreduce_bytes", round(want), "= the model's f32 gradient; the parts add up to the step time")
PY
    ;;
  bf16_exchange)
    rm -rf "$work/bx_f32" "$work/bx_bf16"
    flags=(--train_batch_size=8 --micro_batch_size=2 --num_train_steps=8 --save_checkpoints_steps=4
           --allreduce_bucket_mb=0.05)
    "${mpi[@]}" "$bin" --log_level debug "${common[@]}" "${flags[@]}" --output_dir="$work/bx_f32" \
      > "$work/bx_f32.log" 2>&1 || { cat "$work/bx_f32.log"; exit 1; }
    "${mpi[@]}" "$bin" --log_level debug "${common[@]}" "${flags[@]}" --allreduce_dtype bf16 \
      --output_dir="$work/bx_bf16" > "$work/bx_bf16.log" 2>&1 || { cat "$work/bx_bf16.log"; exit 1; }
    grep "gradients summed in" "$work/bx_bf16.log"
    # Every checkpoint (steps 4 and 8) compares both ranks' weights first (a checksum against rank 0's).
    [ "$(grep -c "the weights are the same on all 2 ranks" "$work/bx_bf16.log")" -eq 2 ]
    grep -q '"allreduce_dtype": "bf16"' "$work/bx_bf16/recipe.json"
    /usr/bin/python3 - "$work/bx_f32/metrics.jsonl" "$work/bx_bf16/metrics.jsonl" <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(p) if '"eval"' not in l] for p in sys.argv[1:3])
assert len(a) == len(b) == 8, (len(a), len(b))
for x, y in zip(a, b):
    assert 2 * y["allreduce_bytes"] == x["allreduce_bytes"], (x["allreduce_bytes"], y["allreduce_bytes"])
    assert abs(x["loss"] - y["loss"]) <= 0.01 * abs(x["loss"]), (x["step"], x["loss"], y["loss"])
print("bf16 exchange: bytes", b[0]["allreduce_bytes"], "vs", a[0]["allreduce_bytes"], "; losses",
      [round(y["loss"], 4) for y in b], "vs", [round(x["loss"], 4) for x in a])
PY
    # The exchange changed the training (bf16 rounding), but not much.
    /usr/bin/python3 "$src/scripts/compare_checkpoints.py" "$work/bx_f32/checkpoint-8" "$work/bx_bf16/checkpoint-8" \
      --rtol 1e-2 --atol 1e-3 --norm
    ;;
  bench_allreduce)
    # `bench allreduce` sums bert-tiny's buckets over 2 ranks (f32 and bf16; it checks every element of the first
    # sums and three of every bucket after each timed round, and fails otherwise) and reports the CPU cost.
    for dt in f32 bf16; do
      timeout 300 "${mpi[@]}" "$bin" --num_threads 1 bench allreduce --model tiny --allreduce_dtype "$dt" --rounds 1 \
        --min_workload_seconds 0.05 > "$work/bench_$dt.log" 2>&1 || { cat "$work/bench_$dt.log"; exit 1; }
      cat "$work/bench_$dt.log"
      grep -q "2 ranks, tiny .*, $dt on the wire" "$work/bench_$dt.log"
      grep -Eq "^comm_cpu_ns_per_byte [0-9.]+$" "$work/bench_$dt.log"
    done
    # bert-tiny: 4.4 M parameters (17.7 MB in f32); each of 2 ranks sends 2 (2 - 1) / 2 of them, half in bf16.
    grep -q "each rank sends 17.7 MB" "$work/bench_f32.log"
    grep -q "each rank sends 8.9 MB" "$work/bench_bf16.log"
    # One rank is refused with a line that says how to run it.
    if "$bin" bench allreduce --model tiny > "$work/bench_one.log" 2>&1; then exit 1; fi
    grep -q "run it under mpirun with 2 or more ranks" "$work/bench_one.log"
    ;;
  unequal_shards)
    # C41: three shards of 10, 7 and 4 samples (cut from the fixture's shard with h5py), global batch 4.
    d="$work/c41"
    rm -rf "$d"
    mkdir -p "$d/shards"
    /usr/bin/python3 - "$data/p32/part-00000-training.hdf5" "$d/shards" <<'PY'
import h5py, sys
src = h5py.File(sys.argv[1], "r")
for i, (a, b) in enumerate([(0, 10), (10, 17), (17, 21)]):
    with h5py.File(f"{sys.argv[2]}/part-{i:05d}-training.hdf5", "w") as f:
        for k in src:
            f.create_dataset(k, data=src[k][a:b])
PY
    c41=(--input_file="$d/shards" --train_batch_size=4 --num_train_steps=10 --save_checkpoints_steps=1000
         --shuffle_window_shards=1)
    # 2 ranks x micro-batch 2 (timeout: a rank waiting for another at an epoch's end would hang the job).
    timeout 300 "${mpi[@]}" "$bin" --log_level debug "${common[@]}" "${c41[@]}" --micro_batch_size=2 \
      --output_dir="$d/two" > "$d/two.log" 2>&1 || { cat "$d/two.log"; exit 1; }
    grep "phase 1: 21 samples in 3 shards" "$d/two.log" | grep -q "5 steps of 4 per epoch, so 1 samples" ||
      { echo "not 5 steps per epoch with 1 sample left over" >&2; cat "$d/two.log"; exit 1; }
    [ "$(grep -c '"step"' "$d/two/metrics.jsonl")" -eq 10 ]
    # 1 rank x micro-batch 2 x accumulation 2 (block k = r*A + m: rank r's micro-batch is its micro-batch r) and
    # 1 rank x micro-batch 4.
    "$bin" --log_level debug "${common[@]}" "${c41[@]}" --micro_batch_size=2 --output_dir="$d/acc" > "$d/acc.log" 2>&1
    "$bin" "${common[@]}" "${c41[@]}" --micro_batch_size=4 --output_dir="$d/one" > /dev/null 2>&1
    /usr/bin/python3 - "$d/two.log" "$d/acc.log" <<'PY'
import re, sys
def samples(path, rank):
    out = {}
    for m in re.finditer(r"step (\d+) rank (\d+) micro-batch (\d+): epoch (\d+) samples ([\d,]+)", open(path).read()):
        step, r, micro, epoch, s = int(m[1]), int(m[2]), int(m[3]), int(m[4]), [int(x) for x in m[5].split(",")]
        if rank is None or r == rank:
            out[(step, micro)] = (epoch, s)
    return out
two0, acc = samples(sys.argv[1], 0), samples(sys.argv[2], 0)
assert len(two0) == 10 and len(acc) == 20, (len(two0), len(acc))
for step in range(1, 11):
    assert two0[(step, 0)] == acc[(step, 0)], step  # rank 0 reads block 0 of every global batch
for epoch in (0, 1):
    r0 = [x for s in range(1, 6) for x in acc[(5 * epoch + s, 0)][1]]
    r1 = [x for s in range(1, 6) for x in acc[(5 * epoch + s, 1)][1]]
    assert all(acc[(5 * epoch + s, m)][0] == epoch for s in range(1, 6) for m in (0, 1))
    assert len(set(r0)) == 10 and len(set(r1)) == 10 and not set(r0) & set(r1), (epoch, r0, r1)
    print(f"epoch {epoch + 1}: rank 0 {sorted(r0)}, rank 1 {sorted(r1)}: 20 of 21 samples, none on both ranks")
e1 = [acc[(s, m)][1] for s in range(1, 6) for m in (0, 1)]
e2 = [acc[(s, m)][1] for s in range(6, 11) for m in (0, 1)]
assert e1 != e2, "epoch 2 repeats epoch 1's order"
PY
    # Weights: 2 ranks x 2 against 1 rank x 2 x 2 to 1e-6 (the same samples in the same blocks; not bit for bit,
    # because the embeddings' backward adds micro-batch 1's rows into micro-batch 0's gradient one by one, while
    # the ranks' sum adds two finished gradients). Against 1 rank x 4, where the matmuls have other shapes and
    # LAMB's normalised updates carry the last-bit differences over 10 steps, to 1e-5 relative / 1e-7 absolute
    # (weights of scale 0.02); that the samples are the same is checked exactly above.
    /usr/bin/python3 "$src/scripts/compare_checkpoints.py" "$d/acc/checkpoint-10" "$d/two/checkpoint-10" \
      --rtol 1e-6 --atol 1e-8 --metrics
    /usr/bin/python3 "$src/scripts/compare_checkpoints.py" "$d/one/checkpoint-10" "$d/two/checkpoint-10" \
      --rtol 1e-5 --atol 1e-7 --metrics
    ;;
  *)
    echo "unknown case $case_name" >&2
    exit 2
    ;;
esac
