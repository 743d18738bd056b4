// checkpoint_files.h: what a checkpoint directory says about itself: its config, its vocabulary, the tokenizer's
// settings and the sequence length it was trained with, read from the files bertrain, Hugging Face and
// google-research/bert put beside the weights. The finetuning commands, extract-features, `bertrain predict` and
// the task pipelines (tasks/pipeline.h) take their defaults from here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "bertrain/models/bert_config.h"

namespace bertrain {

/// Model-class names of config.json's "architectures", as transformers spells them.
inline constexpr const char* kArchPreTraining = "BertForPreTraining";
inline constexpr const char* kArchSequenceClassification = "BertForSequenceClassification";
inline constexpr const char* kArchQuestionAnswering = "BertForQuestionAnswering";
inline constexpr const char* kArchTokenClassification = "BertForTokenClassification";

/// A checkpoint's own description. Every optional is empty when the checkpoint does not say.
struct CheckpointFiles {
  std::string checkpoint;   ///< the path as given
  std::string dir;          ///< the directory holding the files (the path itself, or the parent of a file or prefix)
  std::string config_file;  ///< config.json, else bert_config.json (default_config_file)
  BertConfig config;        ///< load_bert_config(config_file)
  std::string vocab_file;   ///< DIR/vocab.txt when it exists, else empty
  /// tokenizer_config.json's do_lower_case; for a TF checkpoint without one, google-research/bert's model-name
  /// convention (tokenization.validate_case_matches_checkpoint: uncased_L-12_H-768_A-12,
  /// uncased_L-24_H-1024_A-16, multilingual_L-12_H-768_A-12, chinese_L-12_H-768_A-12 are lower-cased;
  /// cased_L-12_H-768_A-12, cased_L-24_H-1024_A-16, multi_cased_L-12_H-768_A-12 are not); failing both, the
  /// vocabulary: no token with an upper-case letter is uncased, upper-case letters in 1% of the tokens or more is
  /// cased (bert-base-chinese's 2 tokens in 21,128 decide nothing); else unset.
  std::optional<bool> do_lower_case;
  std::string do_lower_case_source;  ///< where do_lower_case came from, for messages
  std::optional<bool> tokenize_chinese_chars;  ///< tokenizer_config.json's
  /// tokenizer_config.json's model_max_length when it is at most max_position_embeddings (transformers writes
  /// int(1e30) for "no limit"). bertrain's finetuning commands write their --max_seq_length here.
  std::optional<int64_t> model_max_length;
  /// True for a checkpoint directory with trainer_state.json (written by bertrain's training loops).
  bool written_by_bertrain = false;

  /// "BertForSequenceClassification" ... from config.architecture; "BertForPreTraining" when it names none.
  std::string architecture() const;
};

/// Reads the description of `checkpoint`: a checkpoint directory (bertrain's or Hugging Face's: config.json,
/// vocab.txt, tokenizer_config.json), a .safetensors file (the files beside it), a TF checkpoint prefix
/// (dir/bert_model.ckpt) or a directory holding one (bert_config.json and vocab.txt beside it).
/// `config_file`, when given, is read instead of the config beside the checkpoint (--bert_config_file).
/// Throws bertrain::Error naming the file when the checkpoint does not exist, its config is missing or invalid,
/// or tokenizer_config.json is not a JSON object or has a do_lower_case / tokenize_chinese_chars that is not a
/// boolean or a model_max_length that is not an integer.
CheckpointFiles read_checkpoint_files(const std::string& checkpoint, const std::string& config_file = "");

/// True when the two files hold the same bytes. Throws bertrain::Error naming a file that cannot be read.
bool same_file_contents(const std::string& a, const std::string& b);

}  // namespace bertrain
