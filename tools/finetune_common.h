// finetune_common.h: what run-classifier and run-squad share on the command line: the google-research/bert
// finetuning flags, model construction from --init_checkpoint / --bert_config_file, and checkpoint extras.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "bertrain/models/bert_config.h"
#include "bertrain/nn/module.h"
#include "bertrain/train/finetune.h"

namespace bertrain::cli {

struct FinetuneFlags {
  std::string init_checkpoint, bert_config_file, vocab_file, output_dir, do_lower_case = "true";
  int max_seq_length = 128;
  int64_t eval_batch_size = 8, predict_batch_size = 8;
  bool do_train = false, do_eval = false, do_predict = false;
  bool bf16 = false;  ///< --bf16: matmuls in bf16 (MatmulPrecision::bf16) for training, evaluation and prediction
  FinetuneOptions opt;
  /// Adds --init_checkpoint --bert_config_file --vocab_file --do_lower_case --max_seq_length --train_batch_size
  /// --eval_batch_size --predict_batch_size --learning_rate --num_train_epochs --warmup_proportion --output_dir
  /// --do_train [--do_eval] --do_predict --seed --save_checkpoints_steps --max_steps --resume --bf16.
  /// with_do_eval: run-classifier has --do_eval; run-squad has not (run_squad.py evaluates through --do_predict).
  void add_to(CLI::App& app, double default_lr, int default_seq_len, bool with_do_eval = true);
  bool lower() const;
  /// Sets the process-wide matmul precision from --bf16 (and logs it when bf16); the commands call it first.
  void apply_precision() const;
};

/// The model config: --bert_config_file, else config.json beside --init_checkpoint. Throws when neither exists.
BertConfig finetune_config(const FinetuneFlags& f);
/// Loads --init_checkpoint into `model` (pretraining heads ignored, task head reported and initialised).
void load_init_checkpoint(const FinetuneFlags& f, Module& model);
/// Writes vocab.txt, tokenizer_config.json and special_tokens_map.json into a checkpoint directory.
void write_tokenizer_files(const FinetuneFlags& f, const std::string& dir);

}  // namespace bertrain::cli
