#!/usr/bin/env bash
# run.sh: checks `bertrain estimate`'s cluster model against a real 2-rank run on one machine, over one of three
# links (LINK):
#   veth  (default) rank 0 in this network namespace, rank 1 in a namespace the script creates, joined by a veth pair
#         on a private /30 subnet (traffic goes only between the two veth ends and loopback), each direction capped
#         at RATE_MBIT with a token-bucket filter (tc tbf; 0 = no cap); OpenMPI over TCP on that subnet only.
#   tcp   both ranks here, OpenMPI over TCP on loopback (--mca btl tcp,self, btl_tcp_if_include lo).
#   shm   both ranks here, OpenMPI's shared-memory transport (--mca btl vader,self).
# The link is measured (iperf3 and ping; for shm the estimate's node link, --node_gbps 80, is used), bert-mini (or
# CONFIG) trains STEPS steps, and the mean step time after the warm-up is compared with
# `estimate --ranks 2 --network_gbps <iperf3's rate> --network_latency_us <ping's half round trip>
# --comm_cpu_ns_per_byte <bench allreduce's, measured over the same transport before the cap>`. The estimate's
# compute is timed with every core busy, as the two ranks keep them: two estimates run at once, one per core, and
# the first one's table is used (on a machine whose cores slow each other down, an idle neighbour would make
# the compute look faster than it is in the run).
# veth needs root (ip netns, tc), iperf3 (Debian), OpenMPI. Removes the namespace, the veth pair and the qdiscs on exit.
# Usage: [LINK=veth|tcp|shm] experiments/cluster-model/run.sh [RATE_MBIT] [STEPS] [OUT_DIR]
#   RATE_MBIT  veth: tbf rate, Mbit/s, 0 = uncapped (default 1000)
#   STEPS      training steps, the first 3 not counted (default 13)   OUT_DIR (default out/cluster-model)
# Environment: BIN (default build/bertrain), CONFIG model config (default configs/model/bert-mini.json), BATCH
# global batch (default 32), THREADS per rank (default 1), COMM_CPU_NS the sums' CPU cost in ns per byte (default:
# measured here with bench allreduce on CONFIG's buckets), SUBNET the /30's first three octets (default: the first
# 10.231.N not used here), SHARDS (default: 128-token shards made from
# data/gutenberg/sample_small.txt into OUT_DIR/data).
# A smoke run: experiments/cluster-model/run.sh 1000 5. Careful measurements need a quiet machine with a core per rank.
set -euo pipefail
cd "$(dirname "$0")/../.."
link=${LINK:-veth}
rate=${1:-1000}
steps=${2:-13}
out=${3:-out/cluster-model}
bin=${BIN:-build/bertrain}
config=${CONFIG:-configs/model/bert-mini.json}
batch=${BATCH:-32}
threads=${THREADS:-1}
warmup=3
vocab=data/vocab/bert-base-uncased-vocab.txt
case "$link" in veth | tcp | shm) ;; *) echo "LINK must be veth, tcp or shm, got '$link'" >&2; exit 1 ;; esac
[ "$link" != veth ] || [ "$(id -u)" -eq 0 ] || { echo "run as root (ip netns, tc)" >&2; exit 1; }
for t in ip tc iperf3 mpirun ping; do command -v "$t" > /dev/null || { echo "$t is not installed" >&2; exit 1; }; done
((steps > warmup)) || { echo "STEPS must be above $warmup" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")

# The link as measured: iperf3 (server at $2, in namespace $1 when not empty) and ping's round trip.
measure_link() {
  local in_ns=() server=$2 client=$3 dev=$4
  [ -z "$1" ] || in_ns=(ip netns exec "$1")
  "${in_ns[@]}" iperf3 -s -B "$server" -1 > "$out/iperf3-server.log" 2>&1 &
  pids+=($!)
  sleep 0.5
  iperf3 -c "$server" -B "$client" -t 3 -J > "$out/iperf3.json"
  gbps=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 1e9)' "$out/iperf3.json")
  rtt_ms=$(ping -c 5 -i 0.2 -q -I "$dev" "$server" | awk -F/ '/^rtt/ { print $5 }')
  lat_us=$(/usr/bin/python3 -c "print(float('$rtt_ms') * 1000 / 2)")
  echo "iperf3: $gbps Gb/s; ping: $rtt_ms ms round trip, so $lat_us us one way"
}

pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
  if [ -n "${va:-}" ]; then
    ip link del "$va" 2> /dev/null || true  # deletes both ends and their qdiscs
    ip netns del "$ns" 2> /dev/null || true
  fi
}
trap cleanup EXIT

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [ "$link" = veth ]; then
  # A private /30 not in use here: 10.231.N.0/30 for the first N that no address or route of this machine mentions
  # (its connected route is more specific than any wider private route, so the traffic stays on the veth pair).
  if [ -z "${SUBNET:-}" ]; then
    used=$(ip -o addr; ip -o route; ip -o -6 route 2> /dev/null || true)
    for n in $(seq 17 250); do
      if ! grep -q "10\.231\.$n\." <<< "$used"; then SUBNET=10.231.$n; break; fi
    done
  fi
  [ -n "${SUBNET:-}" ] || { echo "no free 10.231.x.0/30 here; set SUBNET" >&2; exit 1; }
  a=$SUBNET.1
  b=$SUBNET.2
  cidr=$SUBNET.0/30
  ns=bertrain-cm-$$
  va=btcm$$a
  vb=btcm$$b

  ip netns add "$ns"
  ip link add "$va" type veth peer name "$vb"
  ip link set "$vb" netns "$ns"
  ip addr add "$a/30" dev "$va"
  ip link set "$va" up
  ip -n "$ns" addr add "$b/30" dev "$vb"
  ip -n "$ns" link set "$vb" up
  ip -n "$ns" link set lo up
  echo "link: $a (this namespace, $va) <-> $b (namespace $ns, $vb)"
elif [ "$link" = tcp ]; then
  cidr=127.0.0.0/8
  echo "link: TCP on loopback"
  measure_link "" 127.0.0.1 127.0.0.1 lo
else
  echo "link: shared memory (the estimate takes its node link: --node_gbps 80 --node_latency_us 1)"
fi

# 2 ranks. veth: rank 1 inside the namespace; OpenMPI's TCP transport on the veth subnet only, and PMIx (the
# launcher's connection to the rank in the namespace) over TCP on it too.
export OMP_NUM_THREADS=$threads
# The ring for every gradient sum, as the estimate models it: OpenMPI's non-blocking allreduce otherwise takes a
# binomial reduce then a broadcast, which with 2 ranks sends the bucket one way and then back, twice the ring's time.
export OMPI_MCA_coll_libnbc_iallreduce_algorithm=1
case "$link" in
  veth)
    export PMIX_MCA_ptl_tcp_remote_connections=1 PMIX_MCA_ptl_tcp_if_include=$cidr
    mpi=(mpirun --bind-to none --oversubscribe --mca btl tcp,self --mca btl_tcp_if_include "$cidr"
         --mca oob_tcp_if_include "$cidr" -x OMP_NUM_THREADS -x PMIX_MCA_ptl_tcp_remote_connections
         -x PMIX_MCA_ptl_tcp_if_include -x OMPI_MCA_coll_libnbc_iallreduce_algorithm) ;;
  tcp)
    mpi=(mpirun --map-by core --bind-to core --mca btl tcp,self --mca btl_tcp_if_include lo -x OMP_NUM_THREADS
         -x OMPI_MCA_coll_libnbc_iallreduce_algorithm) ;;
  shm)
    mpi=(mpirun --map-by core --bind-to core --mca btl vader,self -x OMP_NUM_THREADS
         -x OMPI_MCA_coll_libnbc_iallreduce_algorithm) ;;
esac
[ -z "${BERTRAIN_PROGRESS_THREAD:-}" ] || mpi+=(-x BERTRAIN_PROGRESS_THREAD)
# launch ARGS...: `bertrain ARGS...` on the 2 ranks of this link.
launch() {
  if [ "$link" = veth ]; then
    "${mpi[@]}" -np 1 taskset -c 0 "$bin" "$@" : -np 1 ip netns exec "$ns" taskset -c 1 "$bin" "$@"
  else
    "${mpi[@]}" -np 2 "$bin" "$@"
  fi
}

# The sums' CPU cost on this transport (bench allreduce: what summing the model's buckets adds to a workload beside
# them, per byte sent), measured before any cap: over a slow link it would also count the wire's time, which the
# model adds on its own.
# COMM_CPU_NS skips the measurement and uses the figure given (one measured on the same link with bert-base's
# 440 MB: the figure belongs to the link, and bert-mini's 45 MB add too little to a workload to measure it well).
if [ -n "${COMM_CPU_NS:-}" ]; then
  comm_cpu=$COMM_CPU_NS
  echo "the sums' CPU cost: $comm_cpu ns per byte sent (given)"
else
  launch --num_threads "$threads" bench allreduce --model "$PWD/$config" --rounds 3 > "$out/bench-allreduce.txt" 2>&1 ||
    { cat "$out/bench-allreduce.txt"; exit 1; }
  grep -E "^(sums alone|workload|added)" "$out/bench-allreduce.txt"
  comm_cpu=$(awk '$1 == "comm_cpu_ns_per_byte" { print $2 }' "$out/bench-allreduce.txt")
fi

if [ "$link" = veth ]; then
  # Token-bucket filter on both egresses: RATE_MBIT each direction, a burst of 1 ms at that rate (at least 64 KB,
  # which the kernel's timer resolution needs), 50 ms of queue.
  if ((rate > 0)); then
    burst=$((rate * 1000 / 8 > 65536 ? rate * 1000 / 8 : 65536))
    tc qdisc add dev "$va" root tbf rate "${rate}mbit" burst "$burst" latency 50ms
    ip netns exec "$ns" tc qdisc add dev "$vb" root tbf rate "${rate}mbit" burst "$burst" latency 50ms
    cap="tbf ${rate} Mbit/s each way"
  else
    cap="uncapped"
  fi
  echo "link: ${cap}"
  measure_link "$ns" "$b" "$a" "$va"
fi

# Shards (128 tokens) from the bundled sample text, unless given.
shards=${SHARDS:-$out/data}
if [ ! -d "$shards" ]; then
  "$bin" --log_level warn create-pretraining-data --input_file data/gutenberg/sample_small.txt --output_dir "$shards" \
    --vocab_file "$vocab" --do_lower_case=true --max_seq_length 128 --max_predictions_per_seq 20 --dupe_factor 2 \
    --random_seed 3
fi
recipe="$out/recipe.json"
cat > "$recipe" <<JSON
{"bert_config_file": "$PWD/$config", "vocab_file": "$PWD/$vocab", "output_dir": "$out/run",
 "optimizer": {"name": "lamb"}, "save_checkpoints_steps": 100000, "log_every_steps": 1,
 "phases": [{"max_seq_length": 128, "max_predictions_per_seq": 20, "input_dir": "$shards",
             "train_batch_size": $batch, "learning_rate": 1e-3, "num_warmup_steps": 1, "num_train_steps": $steps}]}
JSON

rm -rf "$out/run"
launch --num_threads "$threads" --log_level info pretrain --no_progress --config "$recipe" 2>&1 | tee "$out/train.log" | grep -E "data parallel|step [0-9]+/" | tail -n 3
measured=$(/usr/bin/python3 - "$out/run/metrics.jsonl" "$warmup" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if '"eval"' not in l]
t = recs[int(sys.argv[2]):]
mean = lambda k: sum(r[k] for r in t) / len(t)
print(f"{mean('step_seconds'):.4f} {mean('compute_seconds'):.4f} {mean('allreduce_seconds'):.4f} "
      f"{mean('comm_exposed_seconds'):.4f} {t[0]['allreduce_bytes']}")
PY
)
read -r m_step m_compute m_allreduce m_exposed m_bytes <<< "$measured"

# The model, timed on this machine with the threads one rank has and every core busy: one estimate per core at
# once, each bound to its own core; the first one's table is used.
if [ "$link" = shm ]; then
  cluster=(--ranks 2 --ranks_per_node 2)
  link_note="shared memory, estimate's node link 80 Gb/s, 1 us"
else
  cluster=(--ranks 2 --ranks_per_node 1 --network_gbps "$gbps" --network_latency_us "$lat_us")
  link_note="$link${cap:+ ($cap)}, iperf3 $gbps Gb/s, one-way latency $lat_us us"
fi
est_pids=()
for ((c = 0; c < $(nproc --all); ++c)); do  # --all: nproc alone obeys OMP_NUM_THREADS
  taskset -c "$c" "$bin" --num_threads "$threads" --log_level warn estimate --config "$recipe" --micro_steps 3 \
    "${cluster[@]}" --comm_cpu_ns_per_byte "$comm_cpu" > "$out/estimate.$c.txt" &
  est_pids+=($!)
done
for p in "${est_pids[@]}"; do wait "$p"; done
cp "$out/estimate.0.txt" "$out/estimate.txt"
row=$(awk '/^phase 1: global batch/ { p = 1 } p && $1 == 2 { print; exit }' "$out/estimate.txt")
read -r _ _ _ e_compute e_allreduce e_exposed e_step _ <<< "$row"
{
  echo "link: $link_note; $(basename "$config"), global batch $batch, $threads thread(s) per rank ($(date -u +%F), git $(git rev-parse --short HEAD))"
  echo "                 measured   estimate"
  printf "step s          %9.4f  %9.4f\n" "$m_step" "$e_step"
  printf "compute s       %9.4f  %9.4f\n" "$m_compute" "$e_compute"
  printf "allreduce s     %9.4f  %9.4f\n" "$m_allreduce" "$e_allreduce"
  printf "exposed s       %9.4f  %9.4f\n" "$m_exposed" "$e_exposed"
  echo "bytes per rank per step: $m_bytes; the sums' CPU cost (bench allreduce): $comm_cpu ns per byte sent"
  /usr/bin/python3 -c "print(f'estimate / measured step time: {float(\"$e_step\") / float(\"$m_step\"):.3f}')"
} | tee "$out/summary.txt"
