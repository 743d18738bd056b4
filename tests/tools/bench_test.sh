#!/usr/bin/env bash
# bench_test.sh BUILD_DIR SOURCE_DIR MODE: smoke tests of the training benchmarks.
#   train: `bertrain bench train` on bert-tiny, built in and from configs/model/bert-tiny.json: every printed and
#          JSON field present, the FLOP count equal to the documented formula, positive rates, MFU = GFLOP/s / peak.
#   train_bf16: the same with --bf16 (one model): the JSON says bf16, mfu_fp32_peak = GFLOP/s / fp32 peak.
#   No check compares two timings: they depend on how busy the machine is (DESIGN.md section 9).
#   torch: scripts/bench_torch.py on bert-tiny (batch 4): the same JSON fields. Exit 77 (skipped) without torch.
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
case "$mode" in
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
    /usr/bin/python3 "$src/scripts/bench_torch.py" --models tiny --seq_lens 128 --batch_size 4 --steps 2 --warmup 1 \
      --peak_gflops 1000 --json_out "$tmp/out.jsonl" | tee "$tmp/out.txt"
    for h in "OMP_WAIT_POLICY=PASSIVE" "OpenBLAS:" "AdamW" seq_s mfu rss_mib; do
      grep -q "$h" "$tmp/out.txt" || { echo "missing '$h' in the printed output"; exit 1; }
    done
    check_json "$tmp/out.jsonl" 1 torch
    ;;
  *) echo "bench_test.sh: unknown mode $mode"; exit 2 ;;
esac
