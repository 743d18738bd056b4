#!/bin/sh
# check_create_pretraining_data.sh: runs `bertrain create-pretraining-data` on the sample corpus (data/gutenberg/sample_small.txt) with
# 1 and 2 threads, checks the shards are byte-identical, then checks NVIDIA's keys/dtypes/shapes with h5py.
# Usage: check_create_pretraining_data.sh BERTRAIN_BINARY SOURCE_DIR WORK_DIR
set -eu
bin=$1; src=$2; work=$3
corpus=$src/data/gutenberg/sample_small.txt
vocab=$src/data/vocab/bert-base-uncased-vocab.txt

rm -rf "$work"; mkdir -p "$work"
for t in 1 2; do
  OMP_NUM_THREADS=$t "$bin" --log_level warn create-pretraining-data --input_file "$corpus" \
    --output_dir "$work/t$t" --vocab_file "$vocab" --do_lower_case=true --max_seq_length 128 \
    --max_predictions_per_seq 20 --masked_lm_prob 0.15 --dupe_factor 2 --short_seq_prob 0.1 \
    --random_seed 12345 --num_shards 2
done
for f in "$work"/t1/part-*-training.hdf5; do
  cmp "$f" "$work/t2/$(basename "$f")" || { echo "shards differ between 1 and 2 threads: $f"; exit 1; }
done
/usr/bin/python3 "$src/scripts/check_shard_h5py.py" "$work/t1" 128 20
# A missing input file is fatal with a clear message.
if "$bin" create-pretraining-data --input_file /nonexistent/x.txt --output_dir "$work/bad" \
     --vocab_file "$vocab" >"$work/err.txt" 2>&1; then echo "missing input accepted"; exit 1; fi
grep -q "/nonexistent/x.txt" "$work/err.txt" || { cat "$work/err.txt"; exit 1; }
rm -rf "$work"
echo "check_create_pretraining_data: OK"
