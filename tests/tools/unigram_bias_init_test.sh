#!/usr/bin/env bash
# unigram_bias_init_test.sh BUILD_DIR SOURCE_DIR: scripts/unigram_bias_init.py (the bias-unigram row) on a
# tiny checkpoint: every tensor but cls.predictions.bias is byte-identical, the bias is the centred log of the
# add-one smoothed masked-token counts of the shards (counted here independently), the first step's masked-LM loss
# from it is lower than from the original weights, and a checkpoint without the bias is refused with exit 2.
. "$(dirname "$0")/p32_prelude.sh"
common=(--num_threads 1 pretrain --no_progress --vocab_file="$src/data/vocab/bert-base-uncased-vocab.txt"
        --input_file="$data" --max_seq_length=32 --max_predictions_per_seq=5 --num_train_steps=1 --num_warmup_steps=1
        --train_batch_size=4 --seed=3)
# Step 1 of a warmup from 0 runs at lr 0: checkpoint-1 holds the initial weights.
"$build/bertrain" "${common[@]}" --bert_config_file="$build/trainer_test/tiny.json" --output_dir="$t/a" > "$t/a.log" 2>&1
/usr/bin/python3 "$src/scripts/unigram_bias_init.py" "$t/a/checkpoint-1" "$data" "$t/init"
/usr/bin/python3 - "$t/a/checkpoint-1/model.safetensors" "$t/init/model.safetensors" "$data" <<'PY'
import glob, json, os, struct, sys
import h5py
import numpy as np

def read(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    h = json.loads(raw[8:8 + n])
    body = raw[8 + n:]
    return {k: body[v["data_offsets"][0]:v["data_offsets"][1]] for k, v in h.items() if k != "__metadata__"}, h

a, ha = read(sys.argv[1])
b, hb = read(sys.argv[2])
assert ha == hb, "headers differ"
changed = [k for k in a if a[k] != b[k]]
assert changed == ["cls.predictions.bias"], changed
vocab = len(a["cls.predictions.bias"]) // 4
counts = np.zeros(vocab)
for p in glob.glob(os.path.join(sys.argv[3], "*training*.hdf5")):
    with h5py.File(p, "r") as f:
        pos, ids = f["masked_lm_positions"][:], f["masked_lm_ids"][:]
    for i, q in zip(ids.ravel(), pos.ravel()):
        if q != 0:
            counts[i] += 1
logq = np.log((counts + 1) / (counts + 1).sum())
want = logq - logq.mean()
got = np.frombuffer(b["cls.predictions.bias"], dtype="<f4").astype(np.float64)
err = np.abs(got - want).max()
assert err < 1e-5, err
print("bias: max error %.2e over %d tokens, %d masked tokens counted" % (err, vocab, counts.sum()))
PY
"$build/bertrain" "${common[@]}" --init_checkpoint="$t/init" --output_dir="$t/b" > "$t/b.log" 2>&1
mlm() { sed -n 's/.*"mlm_loss":\([0-9.e+-]*\).*/\1/p' "$1/metrics.jsonl" | head -1; }
echo "step-1 masked-LM loss: original weights $(mlm "$t/a"), unigram bias $(mlm "$t/b")"
/usr/bin/python3 -c "import sys; a, b = map(float, sys.argv[1:]); sys.exit(0 if b < a - 1.0 else 1)" "$(mlm "$t/a")" "$(mlm "$t/b")"
# A checkpoint without the bias: one line, exit 2.
mkdir -p "$t/bad"
printf '\x02\x00\x00\x00\x00\x00\x00\x00{}' > "$t/bad/model.safetensors"
rc=0
/usr/bin/python3 "$src/scripts/unigram_bias_init.py" "$t/bad" "$data" "$t/out" 2> "$t/err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "has no tensor 'cls.predictions.bias'" "$t/err" || { cat "$t/err"; echo "FAIL: bad checkpoint" >&2; exit 1; }
echo "unigram_bias_init_test: ok"
