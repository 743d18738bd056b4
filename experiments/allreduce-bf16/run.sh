#!/usr/bin/env bash
# run.sh: does a bf16 gradient exchange change what data-parallel pretraining learns? bert-mini
# (configs/model/bert-mini.json) on 2 ranks for STEPS steps, once with the gradients summed in f32
# (--allreduce_dtype f32) and once in bf16, from the same seed and data; passes when the mean training loss of the
# last 100 steps (901-1000 by default) of the bf16 run is within 1% of the f32 run's, and prints both and the
# bytes each rank sent per step (metrics.jsonl allreduce_bytes: half with bf16).
# Usage: experiments/allreduce-bf16/run.sh [SHARD_DIR] [STEPS] [OUT_DIR]
#   SHARD_DIR  HDF5 shards of length 128 (default out/gutenberg_data/train128, made by experiments/pretrain-bert-mini/pretrain_bert_mini.sh)
#   STEPS      training steps (default 1000)           OUT_DIR  (default out/allreduce-bf16)
# Environment: BIN (default build/bertrain), THREADS per rank (default 1), BATCH global batch (default 64),
# SAVE_STEPS (checkpoint interval, default 100: an interrupted run goes on with the same command, bit for bit),
# MPIRUN_ARGS (default: one rank per core, bound). About 2 x STEPS x 3 s on a 2-core machine: run it on a quiet one.
set -euo pipefail
cd "$(dirname "$0")/../.."
shards=${1:-out/gutenberg_data/train128}
steps=${2:-1000}
out=${3:-out/allreduce-bf16}
bin=${BIN:-build/bertrain}
threads=${THREADS:-1}
batch=${BATCH:-64}
save=${SAVE_STEPS:-100}
read -r -a mpirun_args <<< "${MPIRUN_ARGS:---map-by core --bind-to core}"
[ "$(id -u)" -eq 0 ] && mpirun_args+=(--allow-run-as-root)
[ -d "$shards" ] || { echo "no shards in $shards (experiments/pretrain-bert-mini/pretrain_bert_mini.sh makes them)" >&2; exit 1; }
((steps > 100)) || { echo "STEPS must be above 100 (the comparison takes the last 100)" >&2; exit 1; }
export OMP_NUM_THREADS=$threads
mkdir -p "$out"
for dt in f32 bf16; do
  echo "== $dt exchange: $out/$dt"
  mpirun "${mpirun_args[@]}" -np 2 -x OMP_NUM_THREADS "$bin" --num_threads "$threads" --log_level warn pretrain \
    --no_progress --bert_config_file=configs/model/bert-mini.json --vocab_file=data/vocab/bert-base-uncased-vocab.txt \
    --input_file="$shards" --max_seq_length=128 --max_predictions_per_seq=20 --optimizer.name=lamb \
    --learning_rate=2e-3 --warmup_proportion=0.1 --decay=poly --decay_power=0.5 --train_batch_size="$batch" \
    --num_train_steps="$steps" --save_checkpoints_steps="$save" --save_total_limit=2 --seed=12345 --allreduce_dtype="$dt" \
    --output_dir="$out/$dt" --resume
done
/usr/bin/python3 - "$out/f32/metrics.jsonl" "$out/bf16/metrics.jsonl" "$steps" <<'PY'
import json, sys
steps = int(sys.argv[3])
def last100(path):
    recs = [json.loads(l) for l in open(path) if '"eval"' not in l]
    tail = [r for r in recs if steps - 100 < r["step"] <= steps]
    assert len(tail) == 100, (path, len(tail))
    return sum(r["loss"] for r in tail) / 100, tail[-1]["allreduce_bytes"]
(f, fb), (b, bb) = last100(sys.argv[1]), last100(sys.argv[2])
rel = abs(b - f) / f
print(f"mean loss of steps {steps - 99}-{steps}: f32 exchange {f:.4f}, bf16 exchange {b:.4f} ({100 * rel:.2f}% apart)")
print(f"bytes sent per rank per step: f32 {fb}, bf16 {bb} ({bb / fb:.3f}x)")
sys.exit(0 if rel <= 0.01 else 1)
PY
