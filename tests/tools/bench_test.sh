#!/usr/bin/env bash
# bench_test.sh BUILD_DIR SOURCE_DIR MODE: smoke tests of the training benchmarks.
#   train: `bertrain bench train` on bert-tiny, built in and from configs/model/bert-tiny.json: every printed and
#          JSON field present, the FLOP count equal to the documented formula, positive rates, MFU = GFLOP/s / peak.
#   train_bf16: the same with --bf16 (one model): the JSON says bf16, mfu_fp32_peak = GFLOP/s / fp32 peak.
#   No check compares two timings: they depend on how busy the machine is (DESIGN.md section 9).
#   torch: tools/bench/scripts/bench_torch.py on bert-tiny (batch 4): the same JSON fields. Exit 77 (skipped) without torch.
#   finetune: `bertrain bench finetune` on bert-tiny over a generated single-sentence TSV (48 rows, batch 4, T 32),
#          paths padded, dynamic, unpad, auto, dynamic+gbl: the lengths against the reference tokenizer
#          (tests/reference/bert_tokenizer_ref.py), each batch's T by the padding rule, the same batches on every path
#          without +gbl, which steps took the unpadded encoder, FLOPs on real tokens by the formula, the rates as
#          sums; and scripts/make_question_task.py on the SQuAD fixture (labels by its rule).
#   torch_finetune: bench_torch.py --mode finetune on the same file: the same lengths and positions, batches padded
#          to their longest, the same FLOP formula. Exit 77 without torch.
#   request: `bertrain bench request` on bert-tiny at 9 tokens, packed and plain weights: every row, the FLOP count.
set -euo pipefail
build=$1 src=$2 mode=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fields=(sequences_per_second tokens_per_second flops_per_step gflops peak_gflops mfu max_rss_mib step_seconds_median)
check_json() {  # FILE EXPECTED_LINES FRAMEWORK
  /usr/bin/python3 - "$@" "${fields[@]}" <<'PY'
import json, sys
path, n, fw, fields = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
recs = [json.loads(l) for l in open(path)]
assert len(recs) == n, f"{len(recs)} JSON lines, expected {n}"
# bert-tiny, T 128, B 32, P 20 (defaults), model FLOPs by the formula of `bench train --help`:
# dense 6*B*T*L*(4H^2+2HI) + attention 12*B*NH*T^2*HS*L + MLM 6*B*P*(H^2+HV) + pooler/NSP 6*B*(H^2+2H)
B, T, P, H, I, L, NH, HS, V = 32, 128, 20, 128, 512, 2, 2, 64, 30522
if fw == "torch":
    B = 4
expected = 6*B*T*L*(4*H*H+2*H*I) + 12*B*NH*T*T*HS*L + 6*B*P*(H*H+H*V) + 6*B*(H*H+2*H)
for r in recs:
    missing = [f for f in fields if f not in r]
    assert not missing, f"missing fields {missing} in {r}"
    assert r["framework"] == fw.replace("_bf16", "") and r["seq_len"] == T and r["batch_size"] == B, r
    assert r["flops_per_step"] == expected, (r["flops_per_step"], expected)
    assert r["sequences_per_second"] > 0 and abs(r["tokens_per_second"] - T * r["sequences_per_second"]) < 1e-6 * r["tokens_per_second"]
    assert abs(r["gflops"] - r["flops_per_step"] / r["step_seconds_median"] / 1e9) < 1e-6 * r["gflops"]
    # No timing-dependent bound (a busy machine measures a low peak): MFU must be the ratio it claims to be.
    assert r["mfu"] > 0 and r["peak_gflops"] > 0 and abs(r["mfu"] - r["gflops"] / r["peak_gflops"]) < 1e-9 * r["mfu"], r
    assert r["max_rss_mib"] > 10, r["max_rss_mib"]
    assert r["loss_first"] > 5 and r["loss_last"] > 5, "loss of a random model over 30522 ids is ~ln(30522)+ln(2)"
if fw == "bertrain_bf16":
    r = recs[0]
    assert r["precision"] == "bf16", r["precision"]
    assert 0 < r["mfu_fp32_peak"] and abs(r["mfu_fp32_peak"] - r["gflops"] / r["fp32_peak_gflops"]) < 1e-9
if fw == "bertrain":
    a, b = recs
    assert a["precision"] == b["precision"] == "fp32"
    assert a["params"] == b["params"] == 4433468, (a["params"], b["params"])  # tiny with tied decoder
    assert a["flops_per_step"] == b["flops_per_step"]
print(f"{len(recs)} records OK")
PY
}
make_task() {  # DIR: a generic single-sentence train.tsv of 48 rows, 1 to 40 words (some truncated at T 32)
  mkdir -p "$1"
  /usr/bin/python3 - "$1" <<'PY'
import sys
words = "the quick brown fox jumps over a lazy dog while unaffable herons , watch ; what happened next ?".split()
with open(sys.argv[1] + "/train.tsv", "w") as f:
    f.write("sentence\tlabel\n")
    for i in range(48):
        n = (i * 17) % 40 + 1
        f.write(" ".join(words[(i + k) % len(words)] for k in range(n)) + f"\t{i % 2}\n")
PY
}
check_finetune_json() {  # FILE FRAMEWORK DATA_DIR PATHS...
  /usr/bin/python3 - "$src" "$@" <<'PY'
import json, sys
src, path, fw, data_dir, paths = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
sys.path.insert(0, src + "/tests/reference")
import bert_tokenizer_ref as ref
vocab = ref.load_vocab(src + "/data/vocab/bert-base-uncased-vocab.txt")
rows = [l.rstrip("\n").split("\t") for l in open(data_dir + "/train.tsv")][1:]
T_max, B, steps, n = 32, 4, 3, 48
lens = [min(T_max, len([p for t in ref.basic_tokenize(r[0], True) for p in ref.wordpiece(t, vocab)]) + 2) for r in rows]
assert max(lens) == T_max and min(lens) < 8, (min(lens), max(lens))  # some truncated, some short
recs = [json.loads(l) for l in open(path)]
assert [r["path"] for r in recs] == paths, [r["path"] for r in recs]
# bert-tiny: L 2, H 128, NH 2, HS 64, I 512, 2 labels
L, H, NH, HS, I, C = 2, 128, 2, 64, 512, 2
def flops(ls):
    return 6.0 * sum(ls) * L * (4 * H * H + 2 * H * I) + 12.0 * sum(x * x for x in ls) * NH * HS * L + 6.0 * len(ls) * (H * H + H * C)
S = n // B
for r in recs:
    assert r["framework"] == fw and r["examples"] == n and r["batch_size"] == B and r["steps"] == steps, r
    assert abs(r["mean_real_length"] - sum(lens) / n) < 1e-9, (r["mean_real_length"], sum(lens) / n)
    assert r["positions"] == [(2 * k + 1) * S // (2 * steps) for k in range(steps)], r["positions"]
    assert len(r["batch_lengths"]) == steps and all(len(b) == B for b in r["batch_lengths"])
    assert sorted(x for b in r["batch_lengths"] for x in b) != [], r
    assert all(x in lens for b in r["batch_lengths"] for x in b)
    assert r["batch_real_tokens"] == [sum(b) for b in r["batch_lengths"]]
    for b, T in zip(r["batch_lengths"], r["batch_seq_lengths"]):
        if r["path"].startswith("padded"):
            assert T == T_max, T
        elif fw == "torch":
            assert T == max(b), (T, b)  # DataCollatorWithPadding: the batch's longest
        else:
            assert T == min(T_max, -(-max(b) // 8) * 8), (T, b)  # rounded up to a multiple of 8
    real, slots = sum(r["batch_real_tokens"]), B * sum(r["batch_seq_lengths"])
    assert r["real_tokens"] == real and r["padded_tokens"] == slots
    assert abs(r["padding_fraction"] - (1 - real / slots)) < 1e-12
    assert abs(r["flops_real"] - sum(flops(b) for b in r["batch_lengths"])) <= 1e-9 * r["flops_real"]
    assert abs(r["flops_padded"] - sum(flops([T] * B) for T in r["batch_seq_lengths"])) <= 1e-9 * r["flops_padded"]
    total = r["total_seconds"]
    assert total > 0 and abs(total - sum(r["step_seconds"])) < 1e-9 * total
    assert abs(r["real_tokens_per_second"] - real / total) < 1e-9 * r["real_tokens_per_second"]
    assert abs(r["sequences_per_second"] - B * steps / total) < 1e-9 * r["sequences_per_second"]
    assert abs(r["gflops_real"] - r["flops_real"] / total / 1e9) < 1e-9 * r["gflops_real"]
    assert r["mfu"] > 0 and abs(r["mfu"] - r["gflops_real"] / r["peak_gflops"]) < 1e-9 * r["mfu"]
    assert 0.3 < r["loss_first"] < 1.5 and 0.3 < r["loss_last"] < 1.5, "two classes: loss near ln 2"
    if fw == "bertrain":
        # the encoder path each step took, by --unpad and the rule of auto (padding >= 10% of B x T)
        for b, T, u in zip(r["batch_lengths"], r["batch_seq_lengths"], r["batch_unpadded"]):
            want = {"always": 1, "never": 0, "auto": int(1 - sum(b) / (B * T) >= 0.10)}[r["unpad"]]
            assert u == want, (r["path"], b, T, u)
        assert r["unpadded_steps"] == sum(r["batch_unpadded"])
if fw == "bertrain":
    same = [r for r in recs if "+gbl" not in r["path"]]
    assert all(r["batch_lengths"] == same[0]["batch_lengths"] for r in same), "paths must train on the same batches"
    assert recs[0]["unpadded_steps"] == 0 and any(r["unpadded_steps"] == steps for r in recs)
gbl = [r for r in recs if r["path"].endswith("+gbl")]
# group_by_length: each batch lies in one mega-batch (3 batches of 4 here) sorted by length, longest first, so its
# lengths are non-increasing after slot 0 (slot 0 of a mega-batch may hold the row swapped with the longest of all)
assert all(b[1:] == sorted(b[1:], reverse=True) for r in gbl for b in r["batch_lengths"]), gbl
print(f"{len(recs)} records OK")
PY
}
case "$mode" in
  finetune)
    make_task "$tmp/task"
    paths=(padded dynamic unpad auto dynamic+gbl)
    "$build/bertrain" bench finetune --task_name generic --data_dir "$tmp/task" --format tsv --labels 0,1 \
      --vocab_file "$src/data/vocab/bert-base-uncased-vocab.txt" --models tiny --paths "$(IFS=,; echo "${paths[*]}")" \
      --max_seq_length 32 --train_batch_size 4 --steps 3 --warmup 1 --peak_seconds 0.05 \
      --json_out "$tmp/out.jsonl" | tee "$tmp/out.txt"
    for h in real_tok_s seq_s pad_frac mean_T mfu_re unpadded peak_gflops "real tokens per example mean"; do
      grep -q "$h" "$tmp/out.txt" || { echo "missing '$h' in the printed output"; exit 1; }
    done
    check_finetune_json "$tmp/out.jsonl" bertrain "$tmp/task" "${paths[@]}"
    # a path that does not exist: one error line naming it, non-zero exit
    if "$build/bertrain" bench finetune --data_dir "$tmp/task" --vocab_file x --paths padded,unpadded 2>"$tmp/err.txt"; then
      echo "an unknown path was accepted"; exit 1
    fi
    grep -q "unknown path 'unpadded'" "$tmp/err.txt" || { cat "$tmp/err.txt"; exit 1; }
    # the single-sentence task of the SQuAD questions: every question in train.tsv with --every 0, label by rule
    /usr/bin/python3 "$src/scripts/make_question_task.py" "$tmp/q" --squad "$src/tests/fixtures/squad/sample-v1.1.json" \
      --every 0
    printf 'sentence\tlabel\nWhich NFL team represented the AFC at Super Bowl 50?\t0\nWhich NFL team represented the NFC at Super Bowl 50?\t0\nWhere did Super Bowl 50 take place?\t0\nWhich NFL team won Super Bowl 50?\t0\nWhat color was used to emphasize the 50th anniversary of the Super Bowl?\t1\n' \
      | cmp - "$tmp/q/train.tsv"
    test "$(cat "$tmp/q/dev.tsv")" = "$(printf 'sentence\tlabel')"
    ;;
  torch_finetune)
    /usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "skipped: /usr/bin/python3 has no torch"; exit 77; }
    make_task "$tmp/task"
    /usr/bin/python3 "$src/tools/bench/scripts/bench_torch.py" --mode finetune --task_name generic --data_dir "$tmp/task" \
      --labels 0,1 --models tiny --batch_size 4 --max_seq_length 32 --steps 3 --warmup 1 --peak_gflops 1000 \
      --json_out "$tmp/out.jsonl" | tee "$tmp/out.txt"
    for h in "OMP_WAIT_POLICY=PASSIVE" "OpenBLAS:" "group_by_length True" real_tok_s mfu_re; do
      grep -q "$h" "$tmp/out.txt" || { echo "missing '$h' in the printed output"; exit 1; }
    done
    check_finetune_json "$tmp/out.jsonl" torch "$tmp/task" torch_dyn+gbl
    ;;
  train)
    "$build/bertrain" bench train --models "tiny,$src/configs/model/bert-tiny.json" --seq_lens 128 --steps 2 \
      --warmup 1 --peak_seconds 0.05 --json_out "$tmp/out.jsonl" | tee "$tmp/out.txt"
    for h in model seq_s tokens_s gflop_step gflops mfu rss_mib alloc_mib peak_gflops; do
      grep -q "$h" "$tmp/out.txt" || { echo "missing '$h' in the printed output"; exit 1; }
    done
    test "$(grep -c '^tiny ' "$tmp/out.txt")" = 1 || { echo "expected one row for tiny"; exit 1; }
    check_json "$tmp/out.jsonl" 2 bertrain
    ;;
  train_bf16)
    "$build/bertrain" bench train --models tiny --seq_lens 128 --steps 2 --warmup 1 --peak_seconds 0.05 --bf16 \
      --json_out "$tmp/out.jsonl" | tee "$tmp/out.txt"
    grep -q "bf16 matmuls" "$tmp/out.txt" || { echo "missing the bf16 header"; exit 1; }
    check_json "$tmp/out.jsonl" 1 bertrain_bf16
    ;;
  torch)
    /usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "skipped: /usr/bin/python3 has no torch"; exit 77; }
    /usr/bin/python3 "$src/tools/bench/scripts/bench_torch.py" --models tiny --seq_lens 128 --batch_size 4 --steps 2 --warmup 1 \
      --peak_gflops 1000 --json_out "$tmp/out.jsonl" | tee "$tmp/out.txt"
    for h in "OMP_WAIT_POLICY=PASSIVE" "OpenBLAS:" "AdamW" seq_s mfu rss_mib; do
      grep -q "$h" "$tmp/out.txt" || { echo "missing '$h' in the printed output"; exit 1; }
    done
    check_json "$tmp/out.jsonl" 1 torch
    ;;
  request)
    # bench request on bert-tiny (2 layers, hidden 128, intermediate 512), 9 tokens: every row, the FLOP count of one
    # request by the formula 2*T*L*(4H^2 + 2HI) + 4*T^2*H*L + 2*H^2 (pooler), with packed and plain weights.
    for packed in true false; do
      "$build/bertrain" --num_threads 1 bench request --model tiny --tokens 9 --reps 3 --peak_seconds 0.05 \
        --packed=$packed | tee "$tmp/request.txt"
      for h in "embeddings:" "query, key, value" "attention (QK^T" "intermediate linear + GELU" "output linear" \
               "pooler:" "sum of the ops" "between the ops" "whole request"; do
        grep -q "^$h" "$tmp/request.txt" || { echo "missing row '$h'"; exit 1; }
      done
      want=$(( 2 * 9 * 2 * (4 * 128 * 128 + 2 * 128 * 512) + 4 * 9 * 9 * 128 * 2 + 2 * 128 * 128 ))
      mflop=$(sed -n 's/.* \([0-9]*\) MFLOP per request over 2 layers$/\1/p' "$tmp/request.txt")
      [ "$mflop" = "$(( (want + 500000) / 1000000 ))" ] || { echo "MFLOP per request '$mflop', expected $want FLOP"; exit 1; }
      grep -q "tokens, 1 threads, $([ $packed = true ] && echo packed || echo plain) weights" "$tmp/request.txt"
    done
    "$build/bertrain" bench request --tokens 0 2> "$tmp/err" && { echo "--tokens 0 accepted"; exit 1; }
    grep -q "tokens must be >= 1" "$tmp/err"
    "$build/bertrain" bench request --checkpoint "$src/data/checkpoints/bert-mini-en" --model base 2> "$tmp/err" \
      && { echo "--checkpoint with --model accepted"; exit 1; }
    grep -q "excludes" "$tmp/err"
    ;;
  *) echo "bench_test.sh: unknown mode $mode"; exit 2 ;;
esac
