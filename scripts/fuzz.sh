#!/usr/bin/env bash
# fuzz.sh: builds the libFuzzer targets of fuzz/ with clang (ASan + UBSan + libFuzzer, build directory build-fuzz)
# and fuzzes them. README "Reliability" has the results.
#
#   scripts/fuzz.sh --ci [TARGET...]     build, then the `fuzz` ctest label (fixed runs and seed per target), of the
#                                        named targets only when some are named
#   scripts/fuzz.sh [--runs N] [--time S] [TARGET...]
#                                        long runs, one target at a time under `nice -n 19`, each until N executions
#                                        (default 1,000,000) or S seconds (default 1800), whichever comes first, with
#                                        a growing corpus and findings in OUT/TARGET/ (OUT default ../runs/fuzz
#                                        beside the clone); one summary line per target in OUT/summary.tsv
#   scripts/fuzz.sh --build-only
# BUILD_DIR (default build-fuzz) and JOBS (default: all cores) may be set in the environment.
#
# Dependency findings that bertrain cannot guard against (a crash inside libhdf5 on a corrupt file) are listed in
# fuzz/dependency/excluded.tsv by the stack frame that identifies them. A target listed there runs in libFuzzer's
# fork mode with -ignore_crashes=1, so one such crash does not end its campaign; afterwards every crash input of the
# run is replayed, and one whose stack has a listed frame among its top frames is moved to OUT/TARGET/excluded/ID/
# with its stack and counted in the summary line's last column. Any other crash, leak, timeout or out-of-memory
# input is a finding.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-fuzz}
JOBS=${JOBS:-$(nproc)}
mode=long runs=1000000 seconds=1800 targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --ci) mode=ci ;;
    --build-only) mode=build ;;
    --runs) runs=$2; shift ;;
    --time) seconds=$2; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1") ;;
  esac
  shift
done

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(cd .. && pwd)}
# -O1 and line tables: libFuzzer's recommendation (fast enough, stacks with file:line). No tests, no CLI.
CC=clang CXX=clang++ cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
  -DBERTRAIN_FUZZ=ON -DBERTRAIN_WITH_MPI=OFF "${launcher[@]}" >/dev/null
ci_only=()  # --ci with named targets: their fuzz tests only (the others are not built)
[ ${#targets[@]} -gt 0 ] && ci_only=(-R "^fuzz_($(IFS='|'; echo "${targets[*]}"))\$")
[ ${#targets[@]} -eq 0 ] && read -r -a targets <<<"$(cd fuzz/targets && ls *.cpp | sed 's/\.cpp$//' | tr '\n' ' ')"
cmake --build "$BUILD_DIR" -j "$JOBS" --target $(printf 'fuzz_%s ' "${targets[@]}")
case $mode in
  build) exit 0 ;;
  ci) exec ctest --test-dir "$BUILD_DIR" -L fuzz "${ci_only[@]}" --output-on-failure -j "$JOBS" ;;
esac

OUT=${OUT:-$(cd .. && pwd)/runs/fuzz}
mkdir -p "$OUT"
for t in "${targets[@]}"; do
  d="$OUT/$t"
  mkdir -p "$d/corpus"
  opts=(-timeout=60 -rss_limit_mb=2048 -malloc_limit_mb=512 -artifact_prefix="$d/" -print_final_stats=1
        -runs="$runs" -max_total_time="$seconds")
  [ -f "fuzz/dict/$t.dict" ] && opts+=(-dict="fuzz/dict/$t.dict")
  # This target's exclusions: "ID FRAME" per line of fuzz/dependency/excluded.tsv (id, target, frame).
  mapfile -t exclusions < <(awk -F'\t' -v t="$t" '!/^#/ && $2 == t { print $1 " " $3 }' fuzz/dependency/excluded.tsv)
  [ ${#exclusions[@]} -gt 0 ] && opts+=(-fork=1 -ignore_crashes=1)
  echo "fuzz.sh: $t: up to $runs executions or $seconds s; log $d/log${exclusions:+ (fork mode: excluded ${exclusions[*]})}"
  start=$(date +%s)
  touch "$d/.started"  # findings are the artifacts of this run only (earlier runs' stay in $d)
  rc=0
  nice -n 19 "$BUILD_DIR/fuzz/fuzz_$t" "${opts[@]}" "$d/corpus" "fuzz/corpus/$t" >"$d/log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$d/log" | tail -1)
  # Fork mode prints no final stats of its jobs: its last progress line "#N: cov: ..." counts every job's runs.
  [ -z "$execs" ] && execs=$(sed -n 's/^#\([0-9][0-9]*\): cov:.*/\1/p' "$d/log" | tail -1)
  finding="" excluded=0 excluded_ids=""
  while IFS= read -r f; do
    id=""
    if [ ${#exclusions[@]} -gt 0 ] && [[ $(basename "$f") == crash-* ]]; then
      stack=$("$BUILD_DIR/fuzz/fuzz_$t" "$f" 2>&1 || true)
      for e in "${exclusions[@]}"; do
        if grep -qE "^ *#[0-3] 0x[0-9a-f]+ in ${e#* }( |\$)" <<<"$stack"; then id=${e%% *}; break; fi
      done
    fi
    if [ -n "$id" ]; then
      mkdir -p "$d/excluded/$id"
      mv "$f" "$d/excluded/$id/"
      printf '%s\n' "$stack" >"$d/excluded/$id/$(basename "$f").stack"
      excluded=$((excluded + 1))
      case " $excluded_ids " in *" $id "*) ;; *) excluded_ids="${excluded_ids:+$excluded_ids }$id" ;; esac
    elif [ -z "$finding" ]; then
      finding=$f
    fi
  done < <(find "$d" -maxdepth 1 -newer "$d/.started" \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
            -o -name 'oom-*' -o -name 'slow-unit-*' \) | sort)
  line=$(printf '%s\t%s\t%s\t%s\t%s\t%s\t%s' "$t" "${execs:-?}" "$(( $(date +%s) - start ))" "$rc" \
         "$(date -u +%Y-%m-%dT%H:%MZ)" "${finding:-none}" \
         "$([ "$excluded" -gt 0 ] && echo "excluded $excluded ($excluded_ids)" || echo "excluded 0")")
  echo "$line" | tee -a "$OUT/summary.tsv"
done
