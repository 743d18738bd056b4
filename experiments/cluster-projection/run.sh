#!/usr/bin/env bash
# run.sh: projects finetuning and pretraining BERT-base on a CPU cluster with `bertrain estimate`: each recipe's steps are timed on
# this machine (every core busy), scaled to CORES cores per node (one rank per node), and the ring-allreduce
# model of docs/guides/cluster.md adds each network's communication, for 1, 2, 4, ... 1024 nodes.
#   (a) finetune-bert-base-qnli-like.json: bert-base, 100,000 examples x 10 epochs at batch 32 (31,250 steps), as a
#       one-phase recipe of 50-token sequences (QNLI's mean real length under bertrain's unpadded path)
#   (b) configs/pretrain/lamb-bert-base.json (the LAMB recipe) and bert-base-500k-b256.json (500,000 steps at
#       batch 256: 450,000 at length 128, 50,000 at 512)
# Usage: experiments/cluster-projection/run.sh [OUT_DIR]   (default out/cluster-projection)
# Environment: BIN (build/bertrain), CORES per node (64), PRICE per node-hour (3.00), GBPS ("25 100"),
# LATENCY_US (10), MICRO_STEPS (3), COMM_CPU_NS (the sums' CPU time per byte sent, estimate's
# --comm_cpu_ns_per_byte; default 0). 10-20 minutes on a 2-core machine; run it on a quiet one.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-out/cluster-projection}
bin=${BIN:-build/bertrain}
cores=${CORES:-64}
price=${PRICE:-3.00}
latency=${LATENCY_US:-10}
micro=${MICRO_STEPS:-3}
comm_cpu=${COMM_CPU_NS:-0}
threads=$(nproc --all)
mkdir -p "$out"
here=experiments/cluster-projection
for job in finetune:$here/finetune-bert-base-qnli-like.json lamb:configs/pretrain/lamb-bert-base.json \
           bert500k:$here/bert-base-500k-b256.json; do
  name=${job%%:*}; recipe=${job#*:}
  for gbps in ${GBPS:-25 100}; do
    echo "== $name, $gbps Gb/s: $out/$name-${gbps}g.txt"
    OMP_NUM_THREADS=$threads "$bin" --num_threads "$threads" estimate --config "$recipe" --micro_steps "$micro" \
      --ranks 1024 --ranks_per_node 1 --cores_per_rank "$cores" --network_gbps "$gbps" \
      --network_latency_us "$latency" --price_per_hour "$price" --comm_cpu_ns_per_byte "$comm_cpu" \
      > "$out/$name-${gbps}g.txt"
    sed -n '/^whole recipe/,$p' "$out/$name-${gbps}g.txt"
  done
done
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $threads cores timed; $(date -u +%F), git $(git rev-parse --short HEAD)" \
  | tee "$out/machine.txt"
