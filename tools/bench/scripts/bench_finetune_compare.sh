#!/usr/bin/env bash
# bench_finetune_compare.sh: the finetuning speed table (bertrain's batch paths vs PyTorch, alternating rounds,
# medians, resumable); see tools/bench/scripts/bench_finetune_compare.py. Usage:
#   tools/bench/scripts/bench_finetune_compare.sh [--rounds 3] [--models mini,base] [--tasks qnli,questions] [--out_dir DIR] ...
exec /usr/bin/python3 "$(dirname "$0")/bench_finetune_compare.py" "$@"
