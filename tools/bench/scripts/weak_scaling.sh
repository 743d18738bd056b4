#!/usr/bin/env bash
# weak_scaling.sh: data-parallel weak scaling of `bertrain pretrain` on this machine: 1 rank vs R ranks, each rank
# with the same work per step (micro_batch_size rows, one micro-batch) and THREADS threads; prints sequences/s
# per rank and the efficiency (per-rank rate with R ranks / rate with 1 rank). It also runs R independent
# 1-process trainings at once (no communication): their per-process rate is what the machine itself allows R
# busy processes (shared memory bandwidth, caches, a VM's CPU quota), so MPI's own cost is the gap to that.
# Usage: tools/bench/scripts/weak_scaling.sh [SHARD_DIR] [RANKS] [STEPS]
#   SHARD_DIR  HDF5 shards of length 128 (default out/gutenberg_data/train128)
#   RANKS      ranks of the scaled run (default 2)          STEPS  timed steps after 2 warm-up steps (default 8)
# Environment: BIN (default build/bertrain), CONFIG (default configs/model/bert-mini.json), MICRO (default 32),
# THREADS (default 1), SEQ and PRED (the shards' max_seq_length and max_predictions_per_seq, default 128 and 20),
# MPIRUN_ARGS (default: bind each rank to its own core).
set -euo pipefail
cd "$(dirname "$0")/../../.."
shards=${1:-out/gutenberg_data/train128}
ranks=${2:-2}
steps=${3:-8}
bin=${BIN:-build/bertrain}
config=${CONFIG:-configs/model/bert-mini.json}
micro=${MICRO:-32}
threads=${THREADS:-1}
seq=${SEQ:-128}
pred=${PRED:-20}
warmup=2
read -r -a mpirun_args <<< "${MPIRUN_ARGS:---map-by core --bind-to core}"
[ "$(id -u)" -eq 0 ] && mpirun_args+=(--allow-run-as-root)
export OMP_NUM_THREADS=$threads
out=$(mktemp -d /tmp/weak_scaling.XXXXXX)
trap 'rm -rf "$out"' EXIT

flags() {  # flags of a run with R ranks into DIR
  echo --num_threads "$threads" --log_level warn pretrain --no_progress --bert_config_file="$config" \
    --vocab_file=data/vocab/bert-base-uncased-vocab.txt --input_file="$shards" --max_seq_length="$seq" \
    --max_predictions_per_seq="$pred" --optimizer.name=lamb --learning_rate=1e-3 --num_warmup_steps=1 \
    --train_batch_size=$((micro * $1)) --micro_batch_size="$micro" --num_train_steps=$((warmup + steps)) \
    --save_checkpoints_steps=100000 --output_dir="$2"
}
rate() {  # rate DIR R: the mean global sequences/s of the timed steps (whole-step wall time, from metrics.jsonl)
  /usr/bin/python3 - "$1/metrics.jsonl" "$warmup" "$((micro * $2))" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"eval"' not in l]
timed = rows[int(sys.argv[2]):]
seconds = sum(float(sys.argv[3]) / r["sequences_per_second"] for r in timed)
print("%.4f" % (len(timed) * float(sys.argv[3]) / seconds))
PY
}
run() {  # run R: R ranks under mpirun; prints the global rate
  # shellcheck disable=SC2046
  mpirun "${mpirun_args[@]}" -np "$1" "$bin" $(flags "$1" "$out/r$1") > "$out/log$1" 2>&1 || { cat "$out/log$1" >&2; exit 1; }
  rate "$out/r$1" "$1"
}
independent() {  # independent R: R separate 1-process runs at once, process k on core k; prints their mean rate
  local k pids=()
  for ((k = 0; k < $1; k++)); do
    # shellcheck disable=SC2046
    taskset -c "$k" "$bin" $(flags 1 "$out/i$k") > "$out/ilog$k" 2>&1 &
    pids+=($!)
  done
  for k in "${pids[@]}"; do wait "$k" || { cat "$out"/ilog* >&2; exit 1; }; done
  for ((k = 0; k < $1; k++)); do rate "$out/i$k" 1; done | awk '{ s += $1 } END { printf "%.4f\n", s / NR }'
}

echo "weak scaling: $(basename "$config" .json), T=$seq, $micro sequences per rank per step, $threads thread(s) per rank," \
  "$steps timed steps, $(getconf _NPROCESSORS_ONLN) cores"
g1=$(run 1)
gr=$(run "$ranks")
gi=$(independent "$ranks")
/usr/bin/python3 - "$g1" "$gr" "$ranks" "$gi" <<'PY'
import sys
g1, gr, r, gi = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
print("1 rank                       : %7.2f sequences/s per rank" % g1)
print("%d ranks (MPI)                : %7.2f sequences/s per rank (%.2f in all)" % (r, gr / r, gr))
print("%d independent processes      : %7.2f sequences/s per process (no communication: the machine's limit)" % (r, gi))
print("weak-scaling efficiency      : %5.1f%%  (%d ranks per rank / 1 rank)" % (100 * gr / r / g1, r))
print("machine's own efficiency     : %5.1f%%  (independent processes / 1 rank)" % (100 * gi / g1))
print("MPI vs independent processes : %5.1f%%  (the cost of data parallelism itself)" % (100 * gr / r / gi))
PY
