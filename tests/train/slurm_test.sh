#!/usr/bin/env bash
# slurm_test.sh BUILD_DIR SOURCE_DIR: bertrain under a real single-node Slurm that the test starts for itself (munged,
# slurmctld, slurmd with a generated slurm.conf, all under a temporary directory, stopped by PID on exit). Trains the
# tiny BERT of the trainer_data fixture on 2 ranks twice: `srun --mpi=pmix -n 2` (OpenMPI started directly by Slurm
# through PMIx) and `sbatch` of a script that runs `mpirun -np 2` inside its allocation; both must end with the
# weights of 1 process running the same global batch in twice the micro-batches (to 1e-6, as mpi_equivalence).
# Exit 77 (skipped) when Slurm, munge or MPI are not installed (scripts/setup.sh installs them).
set -euo pipefail
build=$1
src=$2
bin="$build/bertrain"
data="$build/trainer_test/data"
tiny="$build/trainer_test/tiny.json"
vocab="$src/data/vocab/bert-base-uncased-vocab.txt"

for t in munged mungekey slurmctld slurmd srun sbatch sinfo scontrol mpirun; do
  command -v "$t" > /dev/null || { echo "skipped: $t is not installed (scripts/setup.sh installs slurm-wlm, munge)"; exit 77; }
done
[ -f "$tiny" ] || { echo "the trainer_data fixture is missing: $tiny" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bertrain-slurm.XXXXXX")
chmod 700 "$tmp"
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 1 50); do kill -0 "$p" 2> /dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2> /dev/null || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
show_logs() {
  local f
  for f in "$tmp"/*.log; do echo "---- $f"; tail -n 30 "$f"; done
}

# munge: a fresh key (mode 0600) and a socket of our own, so that nothing of the machine's own setup is used.
mkdir -p "$tmp/munge"
chmod 700 "$tmp/munge"
mungekey --create --keyfile="$tmp/munge/munge.key" --bits=1024
chmod 600 "$tmp/munge/munge.key"
munged --foreground --force --socket="$tmp/munge/munge.sock" --key-file="$tmp/munge/munge.key" \
  --pid-file="$tmp/munge/munged.pid" --log-file="$tmp/munged.log" --seed-file="$tmp/munge/munged.seed" \
  > "$tmp/munged.out.log" 2>&1 &
pids+=($!)

# Two free TCP ports for slurmctld and slurmd (bound and released by the kernel's choice).
read -r ctld_port slurmd_port < <(/usr/bin/python3 - <<'PY'
import socket
s = [socket.socket() for _ in range(2)]
for x in s:
    x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))
PY
)
host=$(hostname -s)
cpus=$(nproc)
mkdir -p "$tmp/state" "$tmp/spool"
cat > "$tmp/slurm.conf" <<EOF
ClusterName=bertrain-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$tmp/munge/munge.sock
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
EOF
export SLURM_CONF="$tmp/slurm.conf"
for _ in $(seq 1 50); do [ -S "$tmp/munge/munge.sock" ] && break; sleep 0.1; done
[ -S "$tmp/munge/munge.sock" ] || { echo "munged did not start" >&2; show_logs; exit 1; }
slurmctld -D -i -f "$SLURM_CONF" > "$tmp/slurmctld.out.log" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" -N "$host" > "$tmp/slurmd.out.log" 2>&1 &
pids+=($!)
t0=$(date +%s%3N)
state=""
for _ in $(seq 1 300); do
  state=$(sinfo -h -n "$host" -o %t 2> /dev/null || true)
  [ "$state" = idle ] && break
  sleep 0.1
done
[ "$state" = idle ] || { echo "the node is not idle after 30 s (state '$state')" >&2; show_logs; exit 1; }
echo "single-node Slurm idle after $(($(date +%s%3N) - t0)) ms"

work="$tmp/work"
mkdir -p "$work"
common=(--num_threads 1 pretrain --no_progress --bert_config_file="$tiny" --vocab_file="$vocab"
        --input_file="$data/p32" --max_seq_length=32 --max_predictions_per_seq=5 --seed=7
        --optimizer.name=lamb --learning_rate=1e-2 --num_warmup_steps=2 --train_batch_size=8 --micro_batch_size=2
        --num_train_steps=4)
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# 1 process x 4 micro-batches: the reference.
"$bin" "${common[@]}" --output_dir="$work/one" > "$work/one.log" 2>&1 || { cat "$work/one.log"; exit 1; }

# srun starts the 2 ranks itself; OpenMPI wires them up through Slurm's PMIx server.
timeout 300 srun --mpi=pmix -n 2 -c 1 --time=5 "$bin" "${common[@]}" --output_dir="$work/srun" \
  > "$work/srun.log" 2>&1 || { cat "$work/srun.log"; show_logs; exit 1; }
grep "data parallel: MPI" "$work/srun.log"
grep -q '"world_size": 2' "$work/srun/checkpoint-4/trainer_state.json"
/usr/bin/python3 "$src/scripts/compare_checkpoints.py" "$work/one/checkpoint-4" "$work/srun/checkpoint-4" \
  --rtol 1e-6 --atol 1e-8 --metrics

# sbatch: a batch script whose mpirun finds the allocation (2 tasks) from Slurm's environment.
cat > "$work/job.sh" <<EOF
#!/usr/bin/env bash
#SBATCH --ntasks=2
#SBATCH --cpus-per-task=1
#SBATCH --time=5
#SBATCH --output=$work/sbatch.log
set -euo pipefail
echo "allocation: \$SLURM_JOB_ID, \$SLURM_NTASKS tasks on \$SLURM_JOB_NODELIST"
mpirun --bind-to none -np \$SLURM_NTASKS "$bin" $(printf '%q ' "${common[@]}") --output_dir="$work/sbatch"
EOF
timeout 300 sbatch --wait "$work/job.sh" || { cat "$work/sbatch.log"; show_logs; exit 1; }
cat "$work/sbatch.log" | grep -E "allocation|data parallel"
grep -q '"world_size": 2' "$work/sbatch/checkpoint-4/trainer_state.json"
/usr/bin/python3 "$src/scripts/compare_checkpoints.py" "$work/one/checkpoint-4" "$work/sbatch/checkpoint-4" \
  --rtol 1e-6 --atol 1e-8 --metrics
echo "srun --mpi=pmix and sbatch + mpirun: the 1-process weights to 1e-6"
