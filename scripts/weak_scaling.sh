#!/usr/bin/env bash
# weak_scaling.sh: data-parallel weak scaling of `bertrain pretrain` on this machine: 1 rank vs R ranks, each rank
# with the same work per step (micro_batch_size rows, one micro-batch) and THREADS threads; prints sequences/s
# per rank and the efficiency (per-rank rate with R ranks / rate with 1 rank).
# Usage: scripts/weak_scaling.sh [SHARD_DIR] [RANKS] [STEPS]
#   SHARD_DIR  HDF5 shards of length 128 (default out/gutenberg_data/train128)
#   RANKS      ranks of the scaled run (default 2)          STEPS  timed steps after 2 warm-up steps (default 8)
# Environment: BIN (default build/bertrain), CONFIG (default configs/model/bert-mini.json), MICRO (default 32),
# THREADS (default 1), SEQ and PRED (the shards' max_seq_length and max_predictions_per_seq, default 128 and 20),
# MPIRUN_ARGS (default: bind each rank to its own core).
set -euo pipefail
cd "$(dirname "$0")/.."
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
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMP_NUM_THREADS=$threads
out=$(mktemp -d /tmp/weak_scaling.XXXXXX)
trap 'rm -rf "$out"' EXIT

# run R: pretrains warmup + steps steps with R ranks; prints the mean global sequences/s over the timed steps.
run() {
  local r=$1 dir="$out/r$1"
  mpirun "${mpirun_args[@]}" -np "$r" "$bin" --num_threads "$threads" --log_level warn pretrain --no_progress \
    --bert_config_file="$config" --vocab_file=data/vocab/bert-base-uncased-vocab.txt --input_file="$shards" \
    --max_seq_length="$seq" --max_predictions_per_seq="$pred" --optimizer.name=lamb --learning_rate=1e-3 \
    --num_warmup_steps=1 --train_batch_size=$((micro * r)) --micro_batch_size="$micro" \
    --num_train_steps=$((warmup + steps)) --save_checkpoints_steps=100000 --output_dir="$dir" > "$out/log$r" 2>&1 ||
    { cat "$out/log$r" >&2; exit 1; }
  # Whole-step wall time from metrics.jsonl (sequences_per_second = global batch / step time).
  /usr/bin/python3 - "$dir/metrics.jsonl" "$warmup" "$((micro * r))" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"eval"' not in l]
timed = rows[int(sys.argv[2]):]
seconds = sum(float(sys.argv[3]) / r["sequences_per_second"] for r in timed)
print("%.4f" % (len(timed) * float(sys.argv[3]) / seconds))
PY
}

echo "weak scaling: $(basename "$config" .json), T=$seq, $micro sequences per rank per step, $threads thread(s) per rank," \
  "$steps timed steps, $(getconf _NPROCESSORS_ONLN) cores"
g1=$(run 1)
gr=$(run "$ranks")
/usr/bin/python3 - "$g1" "$gr" "$ranks" <<'PY'
import sys
g1, gr, r = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
print("1 rank : %8.2f sequences/s (per rank %.2f)" % (g1, g1))
print("%d ranks: %8.2f sequences/s (per rank %.2f)" % (r, gr, gr / r))
print("weak-scaling efficiency: %.1f%%" % (100 * gr / r / g1))
PY
