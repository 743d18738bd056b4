#!/usr/bin/env bash
# profile_train.sh [BENCH TRAIN FLAGS...]: perf profile of `bertrain bench train` (default: bert-mini, length 128),
# with oneDNN's JIT kernels named through its perf map (DNNL_JIT_PROFILE=2: oneDNN writes /tmp/perf-<pid>.map).
# Writes build/profile/perf.data and build/profile/{by_dso,by_symbol,callers}.txt; prints the top of each.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../../.." && pwd)"
out="$repo/build/profile"
mkdir -p "$out"
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(--models mini --seq_lens 128 --steps 20 --warmup 2 --peak_seconds 0.05)
DNNL_JIT_PROFILE=2 ONEDNN_JIT_PROFILE=2 perf record -F 999 -g -o "$out/perf.data" -- \
  "$repo/build/bertrain" bench train "${args[@]}" | tee "$out/bench.txt"
perf report -i "$out/perf.data" --no-children --sort dso --stdio 2>/dev/null | grep -v '^$' > "$out/by_dso.txt"
perf report -i "$out/perf.data" --no-children --sort dso,sym --stdio -g none --percent-limit 0.3 2>/dev/null |
  grep -v '^$' > "$out/by_symbol.txt"
perf report -i "$out/perf.data" --no-children --sort sym --stdio -g caller,0.5,callee --percent-limit 2 2>/dev/null \
  > "$out/callers.txt"
echo "== by DSO"; grep -v '^#' "$out/by_dso.txt" | head -15
echo "== by symbol"; grep -v '^#' "$out/by_symbol.txt" | head -40
echo "(full reports in $out)"
echo "== grouped (tools/bench/scripts/profile_summary.py)"
/usr/bin/python3 "$repo/tools/bench/scripts/profile_summary.py" "$out/perf.data" | tee "$out/summary.txt"
