#!/usr/bin/env bash
# bench_compare.sh: bertrain vs PyTorch training throughput, alternating repeats; see tools/bench/scripts/bench_compare.py.
# Usage: tools/bench/scripts/bench_compare.sh [--repeats 3] [--models tiny,mini,small,base] [--seq_lens 128,512] [--steps N]
exec /usr/bin/python3 "$(dirname "$0")/bench_compare.py" "$@"
