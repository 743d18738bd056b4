// finetune_command.h: what the two finetuning commands (glue::run_classifier, squad::run_squad) share: the
// google-research/bert flags common to run_classifier.py and run_squad.py, the model config, loading
// --init_checkpoint with its report, the bf16 switch and the tokenizer files of every checkpoint.
// Why tasks/ and not io/: this is the set-up of a finetuning run, not a file format. It logs what it loaded,
// switches the process's matmul precision (ops) and feeds the finetuning loop (train), and io sits below train.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "bertrain/io/checkpoint.h"
#include "bertrain/io/checkpoint_files.h"
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
  /// BERT vocab.txt; empty: init_checkpoint's vocab.txt (apply_checkpoint_defaults).
  std::string vocab_file;
  /// Lower-case and strip accents before WordPiece; nullopt: init_checkpoint's tokenizer_config.json (or a
  /// Google model's name), else true.
  std::optional<bool> do_lower_case;
  /// T: word pieces per sequence, [CLS] and [SEP] included; 0: the model_max_length of an init_checkpoint
  /// finetuned for the same task (bertrain writes its max_seq_length there), else the command's default (128;
  /// 384 for SQuAD).
  int max_seq_length = 0;
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
  /// by default the unpadded encoder for training batches with at least kUnpadMinPaddingFraction padding, and for
  /// any padding in evaluation and prediction (kUnpadMinPaddingFractionNoGrad).
  Unpad unpad = Unpad::automatic;
  /// The finetuning loop's options (train/finetune.h), with the flags' names: output_dir, train_batch_size,
  /// learning_rate, num_train_epochs, warmup_proportion, max_steps, seed, save_checkpoints_steps, optimizer,
  /// resume. output_dir also receives the evaluation and prediction files.
  FinetuneOptions finetune;

  /// do_lower_case, or true when unset.
  bool lower_case() const { return do_lower_case.value_or(true); }
};

/// The tokenizer settings a checkpoint decides: an empty `vocab_file` becomes its vocab.txt and an unset
/// `do_lower_case` its own (tokenizer_config.json, or a Google model's name). Throws bertrain::Error with one line
/// when a given vocab_file's contents differ from its vocab.txt or a given do_lower_case differs from its own.
/// Logs nothing (the pipelines use it; the commands log what they took).
void take_tokenizer_defaults(const CheckpointFiles& checkpoint, std::string& vocab_file,
                             std::optional<bool>& do_lower_case);

/// Fills what `options` leaves open from init_checkpoint's own files (io/checkpoint_files.h): vocab_file from
/// its vocab.txt, do_lower_case from its tokenizer_config.json (or a Google model's name), max_seq_length from
/// its model_max_length when its config's architecture is `architecture` (a checkpoint finetuned for this task
/// kind), else `default_max_seq_length`. Returns the checkpoint's description (nullopt without init_checkpoint).
/// Throws bertrain::Error with one line when a given flag contradicts the checkpoint (a --vocab_file whose
/// contents differ from its vocab.txt, a --do_lower_case other than its own), when no vocab is given or found,
/// or as read_checkpoint_files.
std::optional<CheckpointFiles> apply_checkpoint_defaults(FinetuneCommandOptions& options, const std::string& architecture,
                                                         int default_max_seq_length);

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

/// The FinetuneTask::write_extra_files of the finetuning commands: vocab.txt, tokenizer_config.json and
/// special_tokens_map.json (save_tokenizer_files) with do_lower_case, tokenize_chinese_chars and
/// model_max_length = max_seq_length (the length the model is trained with, read back as the default length
/// of prediction).
std::function<void(const std::string& dir)> tokenizer_files_writer(const FinetuneCommandOptions& options,
                                                                   bool tokenize_chinese_chars = true);

}  // namespace bertrain::tasks
