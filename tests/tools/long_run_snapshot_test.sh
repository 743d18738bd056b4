#!/usr/bin/env bash
# long_run_snapshot_test.sh BUILD_DIR SOURCE_DIR: experiments/long-run/long_run_snapshot.py (the long run across a lost
# machine) on a tiny AdamW run with gradient accumulation:
# - save takes the newest checkpoint; one saved in the middle of a step (by SIGTERM) is rewound to the step's start
#   (micro_batch_index and cursor 0, partial losses and gradient sum dropped), and metrics.jsonl is cut at its step;
# - a save never replaces a snapshot that is further on, nor one of another CONFIG, and restore refuses another CONFIG;
# - its weights and exp_avg_sq are the f32 values rounded to bf16 as torch rounds them (round to nearest even);
# - restore writes them back as f32 exactly, exp_avg as zeros, and metrics.jsonl up to the snapshot's step; it refuses
#   an OUT that has a checkpoint (exit 1) and a directory without SNAPSHOT.json (exit 2);
# - the trainer resumes from the restored checkpoint, and its next two steps' losses are within 1e-3 of an exact resume.
. "$(dirname "$0")/p32_prelude.sh"
snap=(/usr/bin/python3 "$src/experiments/long-run/long_run_snapshot.py")
common=(--num_threads 1 pretrain --no_progress --vocab_file="$src/data/vocab/bert-base-uncased-vocab.txt"
        --bert_config_file="$build/trainer_test/tiny.json" --input_file="$data" --max_seq_length=32
        --max_predictions_per_seq=5 --train_batch_size=4 --micro_batch_size=2 --num_warmup_steps=1
        --learning_rate=1e-3 --optimizer.name=adamw --seed=3 --save_checkpoints_steps=2 --save_total_limit=3)
"$build/bertrain" "${common[@]}" --num_train_steps=6 --output_dir="$t/a/run" > "$t/a.log" 2>&1
# Back to step 4 (metrics.jsonl still holds steps 5 and 6, which the snapshot must not carry), and checkpoint-4 made
# into what a SIGTERM after the first micro-batch of step 5 leaves: named after the last complete step, with
# micro_batch_index 1, the cursor one micro-batch on, partial losses and the partial gradient sum.
rm -r "$t/a/run/checkpoint-6"
cp -r "$t/a/run/checkpoint-4" "$t/exact-4"
/usr/bin/python3 - "$t/a/run/checkpoint-4" <<'PY'
import json, shutil, sys
p = sys.argv[1] + "/trainer_state.json"
s = json.load(open(p))
assert s["global_step"] == 4 and s["micro_batch_index"] == 0 and s["data_cursor"]["micro"] == 0, s
s["micro_batch_index"], s["data_cursor"]["micro"], s["partial_losses"] = 1, 1, [7.0, 6.3, 0.7]
json.dump(s, open(p, "w"), indent=2)
shutil.copy(sys.argv[1] + "/model.safetensors", sys.argv[1] + "/partial_gradients.safetensors")
PY
echo "[test] a line of the long run's log" > "$t/a/stop_rule.log"
"${snap[@]}" save "$t/a" "$t/snap" CFG | grep -q "checkpoint-4 (global step 4" || { echo "FAIL: save did not take checkpoint-4" >&2; exit 1; }
# The exact reference: the checkpoint as it was before the SIGTERM-like edit.
rm -r "$t/a/run/checkpoint-4" && mv "$t/exact-4" "$t/a/run/checkpoint-4"
# A save never goes back: a run behind the snapshot (checkpoint-2 only) leaves it as it is (exit 1).
mkdir -p "$t/behind/run" && cp -r "$t/a/run/checkpoint-2" "$t/behind/run/"
rc=0; "${snap[@]}" save "$t/behind" "$t/snap" CFG 2> "$t/err" || rc=$?
[ "$rc" -eq 1 ] && grep -q "ahead of" "$t/err" || { cat "$t/err"; echo "FAIL: an older save replaced the snapshot" >&2; exit 1; }
# Another run's CONFIG: neither saved over nor restored (exit 2).
rc=0; "${snap[@]}" save "$t/a" "$t/snap" OTHER 2> "$t/err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "not replaced" "$t/err" || { cat "$t/err"; echo "FAIL: save over another run's snapshot" >&2; exit 1; }
mkdir -p "$t/o"
rc=0; "${snap[@]}" restore "$t/snap" "$t/o" OTHER 2> "$t/err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "not restored" "$t/err" || { cat "$t/err"; echo "FAIL: restore into another run" >&2; exit 1; }

mkdir -p "$t/b"
"${snap[@]}" restore "$t/snap" "$t/b" CFG > /dev/null
rc=0; "${snap[@]}" restore "$t/snap" "$t/b" CFG 2> "$t/err" || rc=$?
[ "$rc" -eq 1 ] && grep -q "already has a checkpoint" "$t/err" || { cat "$t/err"; echo "FAIL: restore over a checkpoint" >&2; exit 1; }
mkdir -p "$t/empty"
rc=0; "${snap[@]}" restore "$t/empty" "$t/c" CFG 2> "$t/err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "no SNAPSHOT.json" "$t/err" || { cat "$t/err"; echo "FAIL: restore of a non-snapshot" >&2; exit 1; }

/usr/bin/python3 - "$t/a/run/checkpoint-4" "$t/snap" "$t/b/run/checkpoint-4" "$t/b" <<'PY'
import json, struct, sys
import torch

def read(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    h = json.loads(raw[8:8 + n])
    h.pop("__metadata__", None)
    body = raw[8 + n:]
    dt = {"F32": torch.float32, "BF16": torch.bfloat16}
    return {k: torch.frombuffer(bytearray(body[v["data_offsets"][0]:v["data_offsets"][1]]), dtype=dt[v["dtype"]])
               .reshape(v["shape"]) for k, v in h.items()}

orig, snap, rest, out = sys.argv[1:]
w, o = read(orig + "/model.safetensors"), read(orig + "/optimizer.safetensors")
wb, vb = read(snap + "/model.bf16.safetensors"), read(snap + "/exp_avg_sq.bf16.safetensors")
wr, orr = read(rest + "/model.safetensors"), read(rest + "/optimizer.safetensors")
assert set(w) == set(wb) == set(wr) and len(w) > 0, "tensor names differ"
moved = 0
for k in w:
    want = w[k].to(torch.bfloat16)  # torch: round to nearest even
    assert torch.equal(wb[k].view(torch.int16), want.view(torch.int16)), "weights not rounded as torch rounds: " + k
    assert wr[k].dtype == torch.float32 and torch.equal(wr[k], want.float()), "restored weights: " + k
    assert torch.equal(vb["exp_avg_sq." + k].view(torch.int16), o["exp_avg_sq." + k].to(torch.bfloat16).view(torch.int16)), k
    assert torch.equal(orr["exp_avg_sq." + k], o["exp_avg_sq." + k].to(torch.bfloat16).float()), "restored exp_avg_sq: " + k
    assert torch.count_nonzero(orr["exp_avg." + k]) == 0, "exp_avg not zero: " + k
    rel = ((wr[k] - w[k]).abs() / w[k].abs().clamp_min(1e-30)).max().item()
    assert rel <= 2.0 ** -8, (k, rel)  # half a bf16 ulp: 8 significant bits
    moved += int((wr[k] != w[k]).sum())
assert moved > 0, "nothing was rounded: the test would not see a missing rounding"
steps = [json.loads(l).get("step", 0) for l in open(out + "/run/metrics.jsonl")]
assert steps and max(steps) == 4, steps  # the source run's metrics go to step 6
st = json.load(open(rest + "/trainer_state.json"))
assert st["micro_batch_index"] == 0 and st["data_cursor"]["micro"] == 0 and st["partial_losses"] == [], st
import os
assert not os.path.exists(rest + "/partial_gradients.safetensors")
assert json.load(open(snap + "/SNAPSHOT.json"))["global_step"] == 4
print("snapshot: %d tensors rounded to bf16 as torch does, %d values moved, restored exactly" % (len(w), moved))
PY
grep -q "^\[test\] a line" "$t/b/stop_rule.log" || { echo "FAIL: stop_rule.log not restored" >&2; exit 1; }

# Both resume to step 6: the exact checkpoint and the restored snapshot.
for d in a b; do
  "$build/bertrain" "${common[@]}" --num_train_steps=6 --output_dir="$t/$d/run" --resume > "$t/$d.resume.log" 2>&1
done
loss() { sed -n "s/.*\"mlm_loss\":\([0-9.e+-]*\).*\"step\":$2,.*/\1/p" "$1/run/metrics.jsonl" | tail -1; }
for s in 5 6; do
  la=$(loss "$t/a" $s) lb=$(loss "$t/b" $s)
  echo "step $s masked-LM loss: exact resume $la, restored snapshot $lb"
  /usr/bin/python3 -c "import sys; a, b = map(float, sys.argv[1:]); sys.exit(0 if abs(a - b) <= 1e-3 * abs(a) else 1)" "$la" "$lb" \
    || { echo "FAIL: step $s differs by more than 1e-3" >&2; exit 1; }
done
echo "long_run_snapshot_test: ok"
