// char_vocab.h: a character-level BERT vocab for Chinese, as bert-base-chinese's is laid out: every CJK character
// a token of its own (BasicTokenizer isolates them), the other characters as word-initial tokens and as "##"
// continuation pieces, so WordPiece covers any word made of seen characters without [UNK].
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace bertrain::text {

struct CharVocabOptions {
  std::vector<std::string> input_files;  ///< UTF-8 text; lines that are not UTF-8 are skipped and counted
  std::string output_file;               ///< vocab.txt
  int64_t vocab_size = 21128;            ///< upper bound on the lines written, specials included
  int64_t min_count = 1;                 ///< a character seen fewer times is left out
  bool do_lower_case = true;             ///< as the tokenizer that will use the vocab (bert-base-chinese: true)
};

struct CharVocabResult {
  int64_t lines = 0, invalid_utf8_lines = 0;
  int64_t characters = 0;     ///< word-initial tokens written (single characters)
  int64_t continuations = 0;  ///< "##" pieces written
  int64_t vocab_size = 0;     ///< lines of vocab.txt
  double coverage = 0;        ///< fraction of the corpus's basic-token characters the vocab covers
};

/// Counts, over BasicTokenizer(do_lower_case) tokens of every line: each character of a token (word-initial
/// when it starts the token, a continuation otherwise; a CJK character is always a whole token). Writes
/// [PAD] [UNK] [CLS] [SEP] [MASK], then the characters seen as token starts by descending count (ties by code
/// point), then "##c" for characters seen inside non-CJK tokens (digits and Latin letters of "iphone12"), by
/// descending count, until vocab_size lines. Throws bertrain::Error when an input cannot be read, nothing is
/// counted, vocab_size < 6, or the output cannot be written.
CharVocabResult build_char_vocab(const CharVocabOptions& options);

}  // namespace bertrain::text
