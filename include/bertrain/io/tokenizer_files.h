// tokenizer_files.h: the tokenizer files of a checkpoint directory (vocab.txt, tokenizer_config.json,
// special_tokens_map.json), as transformers' BertTokenizer.save_pretrained writes them, so that
// AutoTokenizer.from_pretrained(dir) loads the tokenizer a run was trained with.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace bertrain {

/// BertTokenizer's saved settings, under transformers' names and defaults (tokenization_bert.py).
struct BertTokenizerFiles {
  /// The vocabulary copied to DIR/vocab.txt; empty: no vocab.txt is written (a run without a vocab file).
  std::string vocab_file;
  bool do_lower_case = true;
  /// The model's max_position_embeddings: transformers warns when an input is longer.
  int64_t model_max_length = 512;
  bool tokenize_chinese_chars = true;
  /// nullopt (JSON null): accents are stripped exactly when do_lower_case, as BertTokenizer's default.
  std::optional<bool> strip_accents;
  std::string unk_token = "[UNK]", sep_token = "[SEP]", pad_token = "[PAD]", cls_token = "[CLS]",
              mask_token = "[MASK]";
};

/// tokenizer_config.json's text: keys sorted, indent 2, trailing newline: clean_up_tokenization_spaces true,
/// cls_token, do_basic_tokenize true, do_lower_case, mask_token, model_max_length, never_split null, pad_token,
/// sep_token, strip_accents, tokenize_chinese_chars, tokenizer_class "BertTokenizer", unk_token.
std::string tokenizer_config_json(const BertTokenizerFiles& t);
/// special_tokens_map.json's text: the five special tokens (cls, mask, pad, sep, unk), keys sorted.
std::string special_tokens_map_json(const BertTokenizerFiles& t);

/// Writes DIR/vocab.txt (a byte copy of t.vocab_file, when given), DIR/tokenizer_config.json and
/// DIR/special_tokens_map.json, each atomically (write_text_atomic). DIR must exist.
/// Throws bertrain::Error naming the file when the vocab cannot be read or a file cannot be written.
void save_tokenizer_files(const std::string& dir, const BertTokenizerFiles& t);

}  // namespace bertrain
