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

# english_corpus D: the recipe search's English corpus in D (needs SHARED): the Gutenberg books split by
# experiments/common/split_corpus.py into D/gutenberg/{train,heldout}.txt, and the SQuAD v1.1 train contexts split by
# experiments/common/squad_corpus.py into D/wiki/{train,heldout}.txt. Each is written to a .tmp directory and renamed.
english_corpus() {
  mkdir -p "$1"
  if [ ! -f "$1/gutenberg/train.txt" ]; then
    rm -rf "$1/gutenberg.tmp"
    xz -dc "$SHARED/data/gutenberg_en/pretrain_corpus.txt.xz" > "$1/pretrain_corpus.txt"
    /usr/bin/python3 experiments/common/split_corpus.py "$1/pretrain_corpus.txt" "$1/gutenberg.tmp"
    rm -rf "$1/gutenberg" && mv "$1/gutenberg.tmp" "$1/gutenberg" && rm "$1/pretrain_corpus.txt"
  fi
  if [ ! -f "$1/wiki/train.txt" ]; then
    rm -rf "$1/wiki.tmp"
    /usr/bin/python3 experiments/common/squad_corpus.py "$1/wiki.tmp"
    rm -rf "$1/wiki" && mv "$1/wiki.tmp" "$1/wiki"
  fi
}

# held_out_sets D: the held-out books and articles as shards (D/eval_gutenberg128, D/eval_wiki128, T=128/P=20),
# one directory holding both (D/eval128, the trainer's pooled evaluation), and each one's unigram baseline against
# the training shards D/train128 (D/<set>.unigram.txt, experiments/common/unigram_baseline.py).
held_out_sets() {
  make_shards "$1/gutenberg/heldout.txt" "$1/eval_gutenberg128" 128 20 1 99
  make_shards "$1/wiki/heldout.txt" "$1/eval_wiki128" 128 20 1 99
  if [ ! -d "$1/eval128" ]; then
    rm -rf "$1/eval128.tmp" && mkdir -p "$1/eval128.tmp"
    ln -s ../eval_gutenberg128/part-00000-training.hdf5 "$1/eval128.tmp/gutenberg-training.hdf5"
    ln -s ../eval_wiki128/part-00000-training.hdf5 "$1/eval128.tmp/wiki-training.hdf5"
    mv "$1/eval128.tmp" "$1/eval128"
  fi
  local e
  for e in eval128 eval_gutenberg128 eval_wiki128; do
    if [ ! -s "$1/$e.unigram.txt" ]; then
      /usr/bin/python3 experiments/common/unigram_baseline.py "$1/$e" "$1/train128" > "$1/$e.unigram.txt.tmp"
      mv "$1/$e.unigram.txt.tmp" "$1/$e.unigram.txt"
    fi
  done
}

# unigram_init D PRETRAIN_ARGS... (THREADS as the callers'): D/init-unigram, the recipe's own initial weights (a one-step run at lr 0, the
# first step of a warmup from 0: PRETRAIN_ARGS must make it so) with the masked-LM output bias at the log unigram
# distribution of D/train128's masked tokens (scripts/unigram_bias_init.py). Log in D/init0.log.
unigram_init() {
  local d=$1
  shift
  [ -f "$d/init-unigram/model.safetensors" ] && return 0
  rm -rf "$d/init0" "$d/init-unigram.tmp"
  "$BIN" ${THREADS:+--num_threads "$THREADS"} pretrain "$@" --output_dir="$d/init0" --save_checkpoints_steps=1 --no_progress > "$d/init0.log" 2>&1
  /usr/bin/python3 scripts/unigram_bias_init.py "$d/init0/checkpoint-1" "$d/train128" "$d/init-unigram.tmp"
  mv "$d/init-unigram.tmp" "$d/init-unigram"
}
