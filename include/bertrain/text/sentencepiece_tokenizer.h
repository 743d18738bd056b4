// sentencepiece_tokenizer.h: sentencepiece tokenization with ALBERT's preprocessing, and `build-vocab`
// training of a sentencepiece model plus a BERT-style vocab.txt. sentencepiece stays behind a pimpl.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bertrain/text/vocab.h"

namespace bertrain::text {

/// ALBERT's `preprocess_text` (google-research/albert tokenization.py), in its order:
///  1. if remove_space: `" ".join(text.strip().split())` (Python whitespace: Zs, bidi WS/B/S);
///  2. if replace_quotes: "``" and "''" become '"' (XLNet prepro_utils / Hugging Face AlbertTokenizer; the
///     google-research/albert version has no such step, pass false to match it exactly);
///  3. NFKD, then every character with `unicodedata.combining(c) != 0` (canonical combining class) dropped,
///     unlike BERT's NFD + drop Mn (U+0E31 THAI MAI HAN-AKAT is Mn with class 0, so it stays);
///  4. if lower: Python `str.lower()` (full mapping with Final_Sigma).
/// Throws bertrain::Error if `text` is not well-formed UTF-8.
std::string albert_preprocess_text(std::string_view text, bool lower, bool remove_space = true,
                                   bool replace_quotes = true);

/// A sentencepiece model (.model) used the ALBERT way: preprocess_text, then encode_pieces. Thread-safe for
/// concurrent const calls (sentencepiece's Encode is const).
class SentencePieceTokenizer {
 public:
  /// Loads `model_file`. Throws bertrain::Error naming the file if it is missing or not a sentencepiece model.
  static SentencePieceTokenizer load(const std::string& model_file, bool do_lower_case);
  /// The same from the bytes of a .model file already in memory (a serialized ModelProto); `source` names it in
  /// errors and is what model_file() returns. Throws bertrain::Error naming `source` if it is not a model.
  static SentencePieceTokenizer from_serialized(std::string_view model_proto, const std::string& source,
                                                bool do_lower_case);
  ~SentencePieceTokenizer();
  SentencePieceTokenizer(SentencePieceTokenizer&&) noexcept;
  SentencePieceTokenizer& operator=(SentencePieceTokenizer&&) noexcept;

  /// encode_pieces(albert_preprocess_text(text, do_lower_case)). Throws on non-UTF-8 text.
  std::vector<std::string> tokenize(std::string_view text) const;

  /// Ids of tokenize(text) (PieceToId; an unknown piece maps to the model's unk id, as sentencepiece does).
  std::vector<int32_t> encode(std::string_view text) const;

  /// ALBERT's `encode_pieces` on already preprocessed text: the model's pieces, except that a piece of more
  /// than one code point ending in a digit and ',' (e.g. "▁7,") is replaced by split_digit_comma_piece().
  std::vector<std::string> encode_pieces(std::string_view text) const;

  /// ALBERT's re-split of a `<digit>,` piece: the pieces of the piece without its ',' (with '▁' removed
  /// before encoding), the leading '▁' dropped when the original piece had none, then ",". Always text
  /// (ALBERT under Python 3 returned bytes pieces here and kept a spurious '▁', google/sentencepiece#567);
  /// the concatenation of the result equals `piece` whenever the model reproduces its own pieces.
  std::vector<std::string> split_digit_comma_piece(std::string_view piece) const;

  int32_t piece_to_id(std::string_view piece) const;
  /// Throws bertrain::Error when id is outside [0, size()).
  const std::string& id_to_piece(int32_t id) const;
  std::size_t size() const;
  bool do_lower_case() const { return do_lower_case_; }
  const std::string& model_file() const { return model_file_; }

 private:
  struct Impl;
  SentencePieceTokenizer(std::unique_ptr<Impl> impl, std::string model_file, bool do_lower_case);
  std::unique_ptr<Impl> impl_;
  std::string model_file_;
  bool do_lower_case_;
};

/// Options of `bertrain build-vocab` (flag names as sentencepiece's spm_train where they overlap).
struct SentencePieceTrainOptions {
  std::vector<std::string> input_files;  // UTF-8 text, one sentence per line (blank lines are skipped)
  std::string output_dir;                // receives spm.model, spm.vocab and vocab.txt
  int vocab_size = 8000;                 // sentencepiece vocab size (vocab.txt differs; see train_sentencepiece)
  std::string model_type = "unigram";    // "unigram" or "bpe"
  bool do_lower_case = false;
  double character_coverage = 0.9995;
  int64_t input_sentence_size = 0;       // 0: all sentences; else a seeded sample of that many
  int num_threads = 1;
  uint32_t seed = 12345;                 // sentencepiece's random seed (sampling), for repeatable runs
  bool bert_pre_split = true;            // split training lines with BERT's BasicTokenizer (see below)
};

/// Summary of a training run.
struct SentencePieceTrainResult {
  std::string model_file, spm_vocab_file, vocab_file;
  std::size_t sentences = 0;            // sentences fed to the trainer
  std::size_t invalid_utf8_lines = 0;   // skipped input lines that are not well-formed UTF-8
  std::string first_invalid_utf8_line;  // "file:line" of the first of them (1-based), for the report
  std::size_t bert_vocab_size = 0;
};

/// Trains a sentencepiece model and derives a BERT WordPiece vocab.txt from it.
///
/// Training text: each non-blank input line, split by BERT's BasicTokenizer(do_lower_case) and re-joined
/// with single spaces, so that no piece crosses a boundary BERT's tokenizer would cut (punctuation, CJK,
/// whitespace) and the vocab.txt is usable by FullTokenizer. With bert_pre_split=false the lines go in as
/// they are (ALBERT-style: then only `albert_preprocess_text` lowercasing applies when do_lower_case).
/// byte_fallback is off; hard_vocab_limit is off (a small corpus yields fewer pieces instead of failing).
///
/// vocab.txt mapping (written in this order, ids = line numbers):
///  1. [PAD] [UNK] [CLS] [SEP] [MASK] (ids 0-4);
///  2. every sentencepiece piece in id order, except the control/unknown pieces (<unk>, <s>, </s>) and the
///     bare "▁": a word-initial piece "▁x" becomes "x", any other piece "x" becomes "##x";
///  3. completions so that WordPiece can spell any word over the learnt characters: for every single
///     character c seen in step 2 only as "c" or only as "##c", the missing form is appended.
/// Non-UTF-8 input lines are skipped and counted in the result (with the first one's file and line).
/// Throws bertrain::Error for bad options (vocab_size < 8, unknown model_type), a missing or unreadable
/// input file, no training text, or a sentencepiece training error.
SentencePieceTrainResult train_sentencepiece(const SentencePieceTrainOptions& options);

/// The BERT vocab derived from a loaded sentencepiece model by the mapping documented at train_sentencepiece.
Vocab bert_vocab_from_sentencepiece(const SentencePieceTokenizer& spm);

}  // namespace bertrain::text
