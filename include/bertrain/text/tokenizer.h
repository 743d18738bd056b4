// tokenizer.h: BERT's tokenizers (BasicTokenizer, WordpieceTokenizer, FullTokenizer), matching
// google-research/bert tokenization.py (commit eedf571) token for token.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bertrain/text/vocab.h"

namespace bertrain::text {

/// Callback receiving one token (UTF-8). The view is valid only during the call; the callback must not
/// itself call a BasicTokenizer on the same thread (the tokenizer's per-thread buffers are in use).
using TokenSink = std::function<void(std::string_view token)>;

/// BERT's BasicTokenizer: text cleaning, CJK isolation, whitespace split, optional lowercasing and accent
/// stripping, punctuation split. Steps and character classes are those of tokenization.py:
///  - `_clean_text`: drops U+0000, U+FFFD and Cc/Cf characters (except \t \n \r); `_is_whitespace`
///    characters (space, \t, \n, \r, Zs) become token boundaries, as do the other characters Python's
///    `str.split()` splits on (U+2028, U+2029).
///  - `_tokenize_chinese_chars`: every code point in the CJK Unified Ideographs ranges of
///    `_is_chinese_char` becomes a token of its own (unless tokenize_chinese_chars is false, Hugging Face's
///    BertTokenizer switch: then a run of CJK characters stays one word for WordPiece, CASES.md C35).
///    Full-width forms (U+FF01-FF5E) are not CJK: they follow the punctuation rule, so ＋ ＄ ～ (Sm/Sc) stay
///    inside a word while ％ ＃ （ (Po/Ps) are split off; nothing is NFKC-normalised; U+3000 is whitespace;
///    U+200B (Cf) and U+FFFD are deleted.
///  - if do_lower_case: Python `str.lower()` of each whitespace token (full mapping: U+0130 -> i + U+0307;
///    Final_Sigma: Σ -> ς at the end of a word), never Turkish-locale.
///  - if strip_accents: `_run_strip_accents` = NFD, then drop category Mn.
///  - `_run_split_on_punc`: ASCII 33-47, 58-64, 91-96, 123-126 and Unicode P* are tokens of their own.
/// Unicode data come from utf8proc. Thread-safe (const methods only).
class BasicTokenizer {
 public:
  /// `strip_accents` follows Hugging Face's BertTokenizer flag: unset means "same as do_lower_case" (the
  /// reference behaviour); true strips even without lowercasing; false keeps accents when lowercasing.
  explicit BasicTokenizer(bool do_lower_case = true, std::optional<bool> strip_accents = std::nullopt,
                          bool tokenize_chinese_chars = true);

  /// The tokens of `text`. Throws bertrain::Error if `text` is not well-formed UTF-8 (the reference decodes
  /// with errors="ignore" and silently drops such bytes; bertrain rejects them so callers can report them).
  std::vector<std::string> tokenize(std::string_view text) const;

  /// Same, streaming each token to `sink` without building a vector. Same throws.
  void tokenize(std::string_view text, const TokenSink& sink) const;

  bool do_lower_case() const { return do_lower_case_; }
  bool strip_accents() const { return strip_accents_; }
  bool tokenize_chinese_chars() const { return tokenize_chinese_chars_; }

 private:
  friend class FullTokenizer;
  template <class Sink>
  void run(std::string_view text, Sink&& sink) const;

  bool do_lower_case_;
  bool strip_accents_;
  bool tokenize_chinese_chars_;
};

/// BERT's WordpieceTokenizer: greedy longest-match-first over code points, continuation pieces prefixed
/// with "##"; a word that cannot be covered entirely, or has more than `max_input_chars_per_word` code
/// points, becomes the single token `unk_token`. Thread-safe.
class WordpieceTokenizer {
 public:
  /// The vocab need not contain `unk_token` or any special token; only encoding an unknown word needs it.
  explicit WordpieceTokenizer(std::shared_ptr<const Vocab> vocab, std::string unk_token = std::string(Vocab::kUnk),
                              int max_input_chars_per_word = 200);

  /// As the reference `tokenize`: splits `text` on whitespace (Python `str.split()`), then pieces each word.
  /// Throws bertrain::Error if `text` is not well-formed UTF-8.
  std::vector<std::string> tokenize(std::string_view text) const;

  /// Appends the pieces of one word (no whitespace inside; well-formed UTF-8) to `out`.
  void tokenize_word(std::string_view word, std::vector<std::string>& out) const;

  /// Appends the ids of the pieces of one word to `out`. Throws bertrain::Error if the word is unknown and the
  /// vocab has no `unk_token` (the reference raises KeyError there).
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  const Vocab& vocab() const { return *vocab_; }
  const std::string& unk_token() const { return unk_token_; }
  int max_input_chars_per_word() const { return max_chars_; }

 private:
  struct Tables;
  // Calls emit(id) for each piece in order; returns false when the word is [UNK] (pieces emitted before the
  // failure must then be discarded by the caller).
  template <class Emit>
  bool split(std::string_view word, Emit&& emit) const;

  std::shared_ptr<const Vocab> vocab_;
  std::shared_ptr<const Tables> tables_;
  std::string unk_token_;
  int32_t unk_id_;
  int max_chars_;
};

/// BERT's FullTokenizer: BasicTokenizer, then WordpieceTokenizer on each of its tokens.
class FullTokenizer {
 public:
  FullTokenizer(std::shared_ptr<const Vocab> vocab, bool do_lower_case,
                std::optional<bool> strip_accents = std::nullopt, bool tokenize_chinese_chars = true);

  /// Loads `vocab_file` (see Vocab::load, which says what it throws) and builds the tokenizer.
  static FullTokenizer from_vocab_file(const std::string& vocab_file, bool do_lower_case);

  /// Word pieces of `text`. Throws bertrain::Error if `text` is not well-formed UTF-8.
  std::vector<std::string> tokenize(std::string_view text) const;

  /// Ids of word pieces, as the reference `convert_tokens_to_ids`: throws bertrain::Error naming the token
  /// when one is not in the vocab (the reference raises KeyError).
  std::vector<int32_t> convert_tokens_to_ids(const std::vector<std::string>& tokens) const;

  /// Tokens of ids. Throws bertrain::Error on an id outside the vocab.
  std::vector<std::string> convert_ids_to_tokens(const std::vector<int32_t>& ids) const;

  /// convert_tokens_to_ids(tokenize(text)), without building strings. Same throws as both.
  std::vector<int32_t> encode(std::string_view text) const;

  /// Appends encode(text) to `ids`.
  void encode_append(std::string_view text, std::vector<int32_t>& ids) const;

  const Vocab& vocab() const { return *vocab_; }
  const std::shared_ptr<const Vocab>& vocab_ptr() const { return vocab_; }
  const BasicTokenizer& basic_tokenizer() const { return basic_; }
  const WordpieceTokenizer& wordpiece_tokenizer() const { return wordpiece_; }

 private:
  std::shared_ptr<const Vocab> vocab_;
  BasicTokenizer basic_;
  WordpieceTokenizer wordpiece_;
};

}  // namespace bertrain::text
