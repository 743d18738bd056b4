// reader.h: token-classification files: CoNLL-style column files (WNUT-17, BTC, WikiGold, CoNLL-2003), the
// Universal NER .iob2 layout, and CoNLL-U treebanks (POS tags from the UPOS or XPOS column).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bertrain/tasks/ner/tags.h"

namespace bertrain::ner {

/// How the columns of a file are laid out.
///  - conll: token first, label last, separated by tabs (when the line has one) or runs of spaces; every token
///    line of a file has the same number of columns; `-DOCSTART-` lines are document breaks; '#' starts no
///    comment (WNUT and BTC tokens may be hashtags).
///  - iob2: Universal NER: `# ...` comment lines, then INDEX TAB TOKEN TAB LABEL TAB ... (label = column 3).
///  - conllu: CoNLL-U (10 TAB-separated columns); the label is UPOS (column 4) or XPOS (column 5); comment lines,
///    multiword-token lines (ID "3-4") and empty nodes (ID "8.1") are skipped.
enum class NerFormat { conll, iob2, conllu };

/// "conll", "iob2", "conllu"; "auto" picks by file name: *.conllu -> conllu, *.iob2 -> iob2, else conll.
/// Throws bertrain::Error on another value.
NerFormat parse_ner_format(std::string_view name, const std::string& path);

/// One sentence: parallel vectors over its words.
struct NerSentence {
  std::vector<std::string> words;
  std::vector<std::string> labels;  ///< as written in the file (its own tag scheme)
  std::vector<std::string> lines;   ///< each word's line as read (for predictions.txt)
  std::vector<int64_t> line_numbers;  ///< 1-based
  /// Lines that came before the sentence and are not words (comments, -DOCSTART-), kept for predictions.txt.
  std::vector<std::string> preamble;
  /// Lines inside the sentence that are not words (CoNLL-U multiword tokens "1-2" and empty nodes "2.1"), each
  /// with the index of the word it comes before (words.size() after the last word), kept for predictions.txt.
  std::vector<std::pair<size_t, std::string>> interludes;
};

struct NerReadOptions {
  NerFormat format = NerFormat::conll;
  /// conllu only: "upos" or "xpos"; empty: "upos". Any other format throws when it is not empty.
  std::string label_column;
  /// Every label must be well-formed in this scheme (tag_problem); `none` accepts any label.
  TagScheme scheme = TagScheme::iob2;
};

struct NerFile {
  std::string path;
  std::vector<NerSentence> sentences;
  int64_t words = 0;
  /// Lines whose token is empty (e.g. a TAB followed by a tag): skipped and counted; `warnings` names the first.
  int64_t skipped_empty_tokens = 0;
  std::vector<std::string> warnings;
};

/// Reads one file. Sentences end at empty or whitespace-only lines (runs of them count once) and at document
/// breaks; empty sentences are dropped. Throws bertrain::Error naming the file and the 1-based line when the
/// file cannot be read, a line is not UTF-8, the column count differs from the file's first token line (conll),
/// a line has too few columns, a label is empty or not well-formed under options.scheme (an unknown tag
/// scheme), or the file has no sentence.
NerFile read_ner_file(const std::string& path, const NerReadOptions& options);

/// The same on text in memory; `source` names it in errors.
NerFile parse_ner_text(std::string_view text, const NerReadOptions& options, const std::string& source);

}  // namespace bertrain::ner
