# shards.sh: sourced by the pretraining scripts. Needs BIN (the bertrain binary) and VOCAB (vocab.txt).
# make_shards INPUT OUT_DIR MAX_SEQ_LENGTH MAX_PREDICTIONS DUPE_FACTOR RANDOM_SEED [NUM_SHARDS]
# runs create-pretraining-data (uncased) unless OUT_DIR already exists. It writes into OUT_DIR.tmp and renames that
# to OUT_DIR when complete, so an interrupted run never leaves a partial OUT_DIR (create-pretraining-data itself
# continues an OUT_DIR.tmp it finds, window by window).
make_shards() {
  [ -d "$2" ] && return 0
  "$BIN" create-pretraining-data --input_file "$1" --output_dir "$2.tmp" --vocab_file "$VOCAB" --do_lower_case=true \
    --max_seq_length "$3" --max_predictions_per_seq "$4" --dupe_factor "$5" --random_seed "$6" ${7:+--num_shards "$7"}
  mv "$2.tmp" "$2"
}
