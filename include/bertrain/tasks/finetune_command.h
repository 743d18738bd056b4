// finetune_command.h: what the two finetuning commands (glue::run_classifier, squad::run_squad) share: the
// google-research/bert flags common to run_classifier.py and run_squad.py, the model config, loading
// --init_checkpoint with its report, the bf16 switch and the tokenizer files of every checkpoint.
// Why tasks/ and not io/: this is the set-up of a finetuning run, not a file format. It logs what it loaded,
// switches the process's matmul precision (ops) and feeds the finetuning loop (train), and io sits below train.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "bertrain/io/checkpoint.h"
#include "bertrain/models/bert.h"
#include "bertrain/models/bert_config.h"
#include "bertrain/nn/module.h"
#include "bertrain/tasks/batching.h"
#include "bertrain/train/finetune.h"

namespace bertrain::text {
class FullTokenizer;
}  // namespace bertrain::text

namespace bertrain::tasks {

/// The flags run_classifier.py and run_squad.py share, under their names. Each command's options struct
/// (glue::RunClassifierOptions, squad::RunSquadOptions) derives from it and adds its own.
struct FinetuneCommandOptions {
  /// Checkpoint directory or .safetensors file (bertrain's or Hugging Face's); empty: random initialisation.
  std::string init_checkpoint;
  /// Model config (config.json or bert_config.json); empty: config.json beside init_checkpoint.
  std::string bert_config_file;
  std::string vocab_file;  ///< BERT vocab.txt
  bool do_lower_case = true;
  int max_seq_length = 128;  ///< T: word pieces per sequence, [CLS] and [SEP] included
  int64_t eval_batch_size = 8;
  int64_t predict_batch_size = 8;
  bool do_train = false;
  bool do_predict = false;
  /// Mixed precision for training, evaluation and prediction: bf16 matmuls with f32 accumulation and f32
  /// master weights (MatmulPrecision::bf16).
  bool bf16 = false;
  /// Batch padding in training, evaluation and prediction (--pad_to_max_length, --pad_to_multiple_of):
  /// by default each batch is padded to its longest example rounded up to a multiple of 8.
  PaddingOptions padding;
  /// The encoder path (--unpad auto|always|never, models/bert.h Unpad) in training, evaluation and prediction:
  /// by default the unpadded encoder for batches with at least kUnpadMinPaddingFraction padding.
  Unpad unpad = Unpad::automatic;
  /// The finetuning loop's options (train/finetune.h), with the flags' names: output_dir, train_batch_size,
  /// learning_rate, num_train_epochs, warmup_proportion, max_steps, seed, save_checkpoints_steps, optimizer,
  /// resume. output_dir also receives the evaluation and prediction files.
  FinetuneOptions finetune;
};

/// The model config: bert_config_file, else config.json in init_checkpoint (a directory) or beside it (a
/// .safetensors file or a TF prefix), or Google's bert_config.json there when config.json does not exist
/// (io/checkpoint.h default_config_file). Throws bertrain::Error when neither flag is given, or as
/// load_bert_config.
BertConfig finetune_model_config(const FinetuneCommandOptions& options);

/// The checks both commands make before building the model: max_seq_length <= max_position_embeddings, and
/// a vocab no larger than the model's vocab_size. Throws bertrain::Error naming the flag and the config value.
void check_finetune_inputs(const FinetuneCommandOptions& options, const BertConfig& config,
                           const text::FullTokenizer& tokenizer);

/// Loads init_checkpoint into `model` with load_model (pretraining heads ignored; the task head, when absent,
/// keeps its initialisation) and logs the report; logs that training starts from random initialisation when
/// init_checkpoint is empty (and returns an empty report). Throws as load_model.
LoadReport load_init_checkpoint(const std::string& init_checkpoint, Module& model);

/// Sets the process-wide matmul precision: bf16 (logging whether this CPU has AVX512_BF16 or oneDNN emulates
/// it, slower than f32) or f32. Throws bertrain::Error when bf16 is asked and unavailable (no AVX-512).
void set_bf16(bool bf16);

/// The FinetuneTask::write_extra_files of both commands: vocab.txt, tokenizer_config.json and
/// special_tokens_map.json (save_tokenizer_files) with do_lower_case and model_max_length from `config`.
std::function<void(const std::string& dir)> tokenizer_files_writer(const FinetuneCommandOptions& options,
                                                                   const BertConfig& config);

}  // namespace bertrain::tasks
