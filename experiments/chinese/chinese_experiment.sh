#!/usr/bin/env bash
# chinese_experiment.sh: pretraining and transfer in Chinese. A Chinese bert-mini (bert-base-chinese vocab) pretrained with
# whole-word masking on the shared Chinese corpus, then finetuned on Chinese NER (UNER zh_gsdsimp) and on CMRC 2018
# (its dev split by article, experiments/chinese/split_cmrc.py), against random initialisation with the same flags and steps.
# Steps: the corpus to Simplified characters with Debian's opencc (t2s); a word segmentation with jieba and the
# reference file (scripts/chinese_ref.py, Hugging Face run_chinese_ref.py's format); shards with
# --do_whole_word_mask --chinese_ref_file; pretraining (configs/pretrain/bert-mini-chinese-wwm.json); finetuning.
# Everything goes to $OUT (default ../runs/chinese_experiment beside the clone). PRETRAIN_STEPS (300), FINETUNE_STEPS (300, NER),
# CMRC_STEPS (150), THREADS (2), NICE (19), INITS ("pretrained random": which finetuning runs; "random" alone
# skips pretraining, so the random-initialisation runs can go beside it). SMALL=1 uses the 12-chapter sample
# corpus instead of the full one.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${BIN:-$root/build/bertrain}
DATA=${DATA:-$root/../shared/data}
OUT=${OUT:-$root/../runs/chinese_experiment}
PRETRAIN_STEPS=${PRETRAIN_STEPS:-300}
FINETUNE_STEPS=${FINETUNE_STEPS:-300}
CMRC_STEPS=${CMRC_STEPS:-150}
INITS=${INITS:-pretrained random}
THREADS=${THREADS:-2}
NICE=${NICE:-19}
VOCAB=$DATA/chinese/vocab/bert-base-chinese-vocab.txt
run() { nice -n "$NICE" "$BIN" --num_threads "$THREADS" "$@"; }
mkdir -p "$OUT"
cd "$OUT"
echo "== corpus $(date -u +%H:%M:%S)"
if [ ! -f corpus_simp.txt ]; then
  if [ "${SMALL:-0}" = 1 ]; then cat "$DATA/chinese/gutenberg_zh/sample_small_zh.txt"; else xz -dc "$DATA/chinese/gutenberg_zh/pretrain_corpus_zh.txt.xz"; fi |
    opencc -c t2s.json > corpus_simp.txt
  # The last 20 documents (chapters) are held out for the masked-LM evaluation (a sixth of them when there are
  # fewer than 120, as in SMALL=1's 12-chapter sample, so that training keeps most of them).
  /usr/bin/python3 - <<'PY'
docs = open("corpus_simp.txt", encoding="utf-8").read().split("\n\n")
docs = [d.strip("\n") for d in docs if d.strip()]
held = min(20, max(1, len(docs) // 6))
assert len(docs) > held, f"corpus_simp.txt: {len(docs)} documents, too few to hold {held} out"
open("train.txt", "w", encoding="utf-8").write("\n\n".join(docs[:-held]) + "\n")
open("eval.txt", "w", encoding="utf-8").write("\n\n".join(docs[-held:]) + "\n")
PY
fi
echo "== reference files (jieba) $(date -u +%H:%M:%S)"
[ -f train.ref ] || /usr/bin/python3 "$root/scripts/chinese_ref.py" --input train.txt --vocab_file "$VOCAB" --bertrain "$BIN" --output train.ref
[ -f eval.ref ] || /usr/bin/python3 "$root/scripts/chinese_ref.py" --input eval.txt --vocab_file "$VOCAB" --bertrain "$BIN" --output eval.ref
echo "== shards $(date -u +%H:%M:%S)"
for s in train eval; do
  [ -d shards_${s}128 ] || run create-pretraining-data --input_file $s.txt --chinese_ref_file $s.ref --do_whole_word_mask \
    --output_dir shards_${s}128 --vocab_file "$VOCAB" --do_lower_case=true --max_seq_length 128 \
    --max_predictions_per_seq 20 --dupe_factor 2 --random_seed 12345
done
echo "== pretraining $(date -u +%H:%M:%S)"
ck=bert-mini-chinese-wwm/checkpoint-$PRETRAIN_STEPS
if [[ " $INITS " == *" pretrained "* && ! -d "$ck" ]]; then
  (cd "$root" && run pretrain --config configs/pretrain/bert-mini-chinese-wwm.json --output_dir="$OUT/bert-mini-chinese-wwm" \
    --phases.1.num_train_steps="$PRETRAIN_STEPS" --eval_dir="$OUT/shards_eval128" \
    --phases.1.input_dir="$OUT/shards_train128" --vocab_file="$VOCAB" --no_progress) > pretrain.log 2>&1
fi

echo "== finetuning $(date -u +%H:%M:%S)"
[ -f zh_gsdsimp-ud-train.iob2 ] || xz -dc "$DATA/ner/uner_zh_gsdsimp/zh_gsdsimp-ud-train.iob2.xz" > zh_gsdsimp-ud-train.iob2
mkdir -p cmrc
[ -f cmrc/train.json ] || { xz -dc "$DATA/chinese/cmrc2018/cmrc2018_dev.json.xz" > cmrc/cmrc2018_dev.json;
  /usr/bin/python3 "$root/experiments/chinese/split_cmrc.py" cmrc/cmrc2018_dev.json "$DATA/chinese/cmrc2018/cmrc2018_trial.json" cmrc; }
for init in $INITS; do
  if [ $init = pretrained ]; then model=(--init_checkpoint "$ck"); else model=(--bert_config_file "$root/configs/model/bert-mini-chinese.json"); fi
  [ -f ner-$init/eval_results.json ] || run run-ner --train_file zh_gsdsimp-ud-train.iob2 \
    --validation_file "$DATA/ner/uner_zh_gsdsimp/zh_gsdsimp-ud-dev.iob2" "${model[@]}" --vocab_file "$VOCAB" \
    --do_lower_case=true --max_seq_length 128 --train_batch_size 32 --learning_rate 1e-4 --num_train_epochs 3 \
    --max_steps "$FINETUNE_STEPS" --save_checkpoints_steps 0 --seed 1 --output_dir ner-$init --do_train --do_eval \
    --return_entity_level_metrics > ner-$init.log 2>&1
  [ -f cmrc-$init/predictions.json ] || run run-squad --train_file cmrc/train.json --predict_file cmrc/dev.json \
    "${model[@]}" --vocab_file "$VOCAB" --do_lower_case=true --max_seq_length 256 --doc_stride 128 \
    --max_query_length 32 --train_batch_size 16 --learning_rate 1e-4 --num_train_epochs 2 --max_steps "$CMRC_STEPS" \
    --save_checkpoints_steps 0 --seed 1 --output_dir cmrc-$init --do_train --do_predict > cmrc-$init.log 2>&1
  "$BIN" squad-evaluate --metric cmrc2018 --data_file cmrc/dev.json --prediction_file cmrc-$init/predictions.json \
    > cmrc-$init/cmrc2018_eval.json
done
echo "== done $(date -u +%H:%M:%S)"
grep -h '"eval' pretrain.log | tail -1 || true
for init in $INITS; do
  echo "$init NER: $(/usr/bin/python3 -c "import json;r=json.load(open('ner-$init/eval_results.json'));print('f1 %.4f accuracy %.4f step %d'%(r['eval_f1'],r['eval_accuracy'],r['global_step']))")"
  echo "$init CMRC: $(cat cmrc-$init/cmrc2018_eval.json)"
done
