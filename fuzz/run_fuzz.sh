#!/usr/bin/env bash
# run_fuzz.sh BIN NAME FUZZ_DIR WORK RUNS SEED: the `fuzz` ctest label's check of one target. Replays every committed
# regression input and seed once under the instrumented binary, then fuzzes for exactly RUNS executions with
# libFuzzer seed SEED from the committed seeds into a fresh scratch corpus, so the result depends neither on earlier
# runs nor on machine load. Any finding (crash, sanitizer report, leak, hang > 60 s, a single allocation > 512 MB)
# fails the test; libFuzzer leaves the input in WORK (reproduce with `BIN WORK/crash-...`).
set -euo pipefail
bin=$1 name=$2 fuzz=$3 work=$4 runs=$5 seed=$6
rm -rf "$work"
mkdir -p "$work/corpus"
opts=(-timeout=60 -rss_limit_mb=2048 -malloc_limit_mb=512 -artifact_prefix="$work/")
[ -f "$fuzz/dict/$name.dict" ] && opts+=(-dict="$fuzz/dict/$name.dict")
shopt -s nullglob
committed=("$fuzz/regressions/$name"/* "$fuzz/corpus/$name"/*)
if [ ${#committed[@]} -gt 0 ]; then
  "$bin" "${opts[@]}" "${committed[@]}" 2>"$work/replay.log" || { tail -50 "$work/replay.log"; exit 1; }
  echo "replayed ${#committed[@]} committed inputs"
fi
"$bin" "${opts[@]}" -seed="$seed" -runs="$runs" -print_final_stats=1 "$work/corpus" "$fuzz/corpus/$name" \
  2>"$work/fuzz.log" || { tail -80 "$work/fuzz.log"; exit 1; }
grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)' "$work/fuzz.log" || true
