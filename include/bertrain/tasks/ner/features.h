// features.h: token-classification features: the label list, words to WordPiece windows with the label on each
// word's first sub-token (Hugging Face run_ner's tokenize_and_align_labels), --doc_stride windows for long
// sentences, and the max-context rule (run_squad.py's) that gives every word exactly one prediction.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "bertrain/tasks/ner/reader.h"
#include "bertrain/tasks/ner/tags.h"
#include "bertrain/text/tokenizer.h"

namespace bertrain::ner {

/// The model's labels, by output index. Matching is by name (CASES.md C43), never by position.
class LabelList {
 public:
  LabelList() = default;
  explicit LabelList(std::vector<std::string> labels);
  /// The labels a model needs for `train` read in `file_scheme` and trained in `model_scheme`: for chunk
  /// schemes, "O" and every prefix of model_scheme (B, I; or B, I, E, S) for each entity type seen in training;
  /// for `none`, the labels seen. Sorted by name, as Hugging Face's run_ner sorts its label list.
  static LabelList from_training(const std::vector<NerSentence>& train, TagScheme file_scheme,
                                 TagScheme model_scheme);
  /// The output index of `label`, or -1.
  int32_t id(const std::string& label) const;
  const std::vector<std::string>& labels() const { return labels_; }
  int64_t size() const { return static_cast<int64_t>(labels_.size()); }

 private:
  std::vector<std::string> labels_;
  std::unordered_map<std::string, int32_t> ids_;
};

struct NerFeatureOptions {
  int max_seq_length = 128;  ///< T, [CLS] and [SEP] included
  /// How far the next window of a long sentence starts (in word pieces), as run_squad.py's doc_stride.
  int doc_stride = 128;
  /// Label every sub-token (the word's chunk spread over its pieces, rendered in the model's scheme, e.g. B-X
  /// then I-X for IOB2; a plain label copied) instead of only the first (Hugging Face's --label_all_tokens).
  bool label_all_tokens = false;
  TagScheme file_scheme = TagScheme::iob2;   ///< the files' scheme (metrics and predictions.txt use it)
  TagScheme model_scheme = TagScheme::iob2;  ///< the scheme the model is trained in
  /// Throws bertrain::Error unless max_seq_length >= 3 and doc_stride >= 1, and both schemes are `none` or
  /// neither is.
  void validate() const;
};

/// One window: [CLS] pieces [start, start + length) of one sentence [SEP], padded to T.
struct NerWindow {
  int32_t sentence = 0;
  int32_t start = 0, length = 0;
  std::vector<int32_t> input_ids;  ///< (T)
  std::vector<int32_t> input_mask;  ///< (T)
  std::vector<int32_t> labels;     ///< (T) label ids, -100 where no loss is taken ([CLS], [SEP], padding, ...)
};

/// Features of a set of sentences.
struct NerFeatures {
  std::vector<NerWindow> windows;
  /// Per sentence, per word: (window index, position in that window) of the word's first piece in the window
  /// where it has the most context. Every word has one.
  std::vector<std::vector<std::pair<int32_t, int32_t>>> word_sources;
  /// Words the tokenizer turns into no piece at all (only removed characters such as U+200B or U+FFFD): each
  /// is given one [UNK] piece so that it still gets a prediction.
  int64_t words_without_pieces = 0;
  int64_t pieces = 0;
};

/// Tokenizes and windows `sentences` (labels from the file, converted to options.model_scheme, looked up in
/// `labels`). Windows hold at most T - 2 pieces; the next starts min(length, doc_stride) pieces later
/// (squad::make_doc_spans); a word's source is the window whose max-context score (squad::max_context_spans)
/// is best for its first piece. Throws bertrain::Error naming `source`, the file line and the label when a
/// label is not in `labels` (a label in dev or test that training never saw), and on invalid options.
NerFeatures convert_sentences_to_features(const std::vector<NerSentence>& sentences,
                                          const text::FullTokenizer& tokenizer, const LabelList& labels,
                                          const NerFeatureOptions& options, const std::string& source);

/// Word-level predictions in the file's scheme from per-window logits: `logits[w]` holds (T, C) row-major
/// values of window w. For chunk schemes the argmax labels (model scheme) are read as chunks (extract_chunks)
/// and rendered in options.file_scheme. Throws bertrain::Error when sizes disagree.
std::vector<std::vector<std::string>> predict_word_labels(const NerFeatures& features, const LabelList& labels,
                                                          const std::vector<std::vector<float>>& logits,
                                                          const NerFeatureOptions& options);

}  // namespace bertrain::ner
