#!/usr/bin/env bash
# quickstart.sh: everything from a fresh machine to a pretrained tiny BERT on the bundled sample:
# installs the dependencies (Debian packages), builds, makes pretraining shards from data/gutenberg (two books
# to train on, one held out for evaluation), pretrains bert-tiny through both phases (length 128, then 512
# with the learning rate warmed up again from zero), and draws the loss curves to out/quickstart/curves.png.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
scripts/setup.sh
# ccache (installed by setup.sh) as scripts/test.sh uses it, so the quickstart and the tests share one cache.
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(cd .. && pwd)}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" > /dev/null
cmake --build build
t1=$(date +%s)

D=out/quickstart_data
VOCAB=data/vocab/bert-base-uncased-vocab.txt
mkdir -p "$D"
# Documents are separated by blank lines; PG 43 (documents 16-26) is held out for evaluation.
awk -v train="$D/train.txt" -v eval="$D/eval.txt" '
  function out() { return (doc >= 15 && doc < 26) ? eval : train }
  BEGIN { doc = 0; prev = "" }
  /^$/ { if (prev != "") { print "" > out(); doc++ } prev = ""; next }
  { print > out(); prev = $0 }' data/gutenberg/sample_small.txt
make_shards() {  # input output_dir max_seq_length max_predictions dupe_factor seed
  [ -f "$2/dataset_info.json" ] || build/bertrain --log_level warn create-pretraining-data --input_file "$1" \
    --output_dir "$2" --vocab_file "$VOCAB" --do_lower_case=true --max_seq_length "$3" \
    --max_predictions_per_seq "$4" --dupe_factor "$5" --random_seed "$6"
}
make_shards "$D/train.txt" "$D/phase1_128" 128 20 3 1
make_shards "$D/train.txt" "$D/phase2_512" 512 80 1 2
make_shards "$D/eval.txt" "$D/eval128" 128 20 1 3
t2=$(date +%s)

rm -rf out/quickstart
build/bertrain pretrain --config configs/pretrain/quickstart.json "$@"
t3=$(date +%s)
/usr/bin/python3 scripts/plot_metrics.py out/quickstart/metrics.jsonl out/quickstart/curves.png
echo "set-up and build: $((t1 - t0)) s; data: $((t2 - t1)) s; pretraining (both phases): $((t3 - t2)) s"
echo "checkpoints: out/quickstart/checkpoint-*; held-out evaluation: out/quickstart/eval_results.json; curves: out/quickstart/curves.png"
