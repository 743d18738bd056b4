#!/usr/bin/env bash
# squad_predict_compare.sh: the batch paths' SQuAD answers compared (run-squad --do_predict on the shared SQuAD v1.1 dev file: padded
# vs dynamic padding vs the unpadded encoder, alternating rounds, wall-time medians, EM/F1, answers compared
# question by question); see experiments/squad-transfer/squad_predict_compare.py. Usage:
#   experiments/squad-transfer/squad_predict_compare.sh --init_checkpoint FINETUNED_CHECKPOINT [--rounds 3] [--out_dir DIR] ...
exec /usr/bin/python3 "$(dirname "$0")/squad_predict_compare.py" "$@"
