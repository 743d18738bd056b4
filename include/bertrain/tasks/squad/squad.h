// squad.h: SQuAD v1.1 / v2.0 examples, features and predictions, matching google-research/bert run_squad.py
// (read_squad_examples, convert_examples_to_features, write_predictions, get_final_text) step for step.
// Evaluation (the official evaluate-v1.1.py / evaluate-v2.0.py) is in squad_evaluate.h.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bertrain/core/tensor.h"
#include "bertrain/tasks/batching.h"
#include "bertrain/text/tokenizer.h"

namespace bertrain::squad {

// ---------------------------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------------------------

/// One question with its (shared) paragraph, as the reference SquadExample.
struct SquadExample {
  std::string qas_id;
  std::string question_text;
  /// The paragraph split on the reference `is_whitespace` (space, \t, \r, \n, U+202F). Shared by all
  /// questions of one paragraph (the reference shares the list object the same way).
  std::shared_ptr<const std::vector<std::string>> doc_tokens;
  /// Per word of doc_tokens: 1 when it directly follows the previous word in the paragraph, with no whitespace
  /// between them (words split apart by the CJK rule of squad_split_paragraph); null: none does (no CJK text).
  std::shared_ptr<const std::vector<uint8_t>> doc_token_glued;
  /// Training only (else empty): the first answer's text; "" for v2 impossible questions.
  std::string orig_answer_text;
  /// Training only: word indexes into doc_tokens of the answer's first and last character; -1 for an
  /// impossible question and for every example read with is_training = false.
  int32_t start_position = -1;
  int32_t end_position = -1;
  bool is_impossible = false;
};

/// What read_squad_examples returns: the examples and the counts for a run's summary.
struct SquadReadResult {
  std::vector<SquadExample> examples;
  std::string version;            ///< the file's "version" field ("" when absent)
  int64_t num_questions = 0;      ///< questions in the file
  int64_t num_impossible = 0;     ///< examples with is_impossible (training with version_2_with_negative)
  /// Training questions skipped because the span text does not contain the cleaned answer text (the
  /// reference's "Could not find answer" warning; it skips them too).
  int64_t num_skipped = 0;
  std::vector<std::string> skipped_ids;  ///< their qas ids, in file order
  /// Training questions of CJK paragraphs whose answer_start did not point at the answer text and were moved to
  /// the text's nearest occurrence (CMRC 2018 as published has about 2% of them).
  int64_t num_repaired = 0;
};

/// Reads a SQuAD JSON file as the reference `read_squad_examples(input_file, is_training)`:
///  - each paragraph is split into words on space, \t, \r, \n and U+202F; `answer_start` and the answer
///    length are counted in Unicode code points (as Python's str indexes them), so char_to_word_offset maps
///    them to word indexes;
///  - training: with version_2_with_negative, `is_impossible` is read (and required); a possible question
///    must have exactly one answer; questions whose words [start, end] joined by spaces do not contain the
///    answer text with its whitespace collapsed are skipped and counted (num_skipped), as the reference does;
///  - prediction (is_training = false): only id and question are used (answers are still validated).
///  - paragraphs with CJK characters (see squad_split_paragraph): an answer_start that does not point at its text
///    (also past the end, or negative) is no error; training takes the text's occurrence nearest to answer_start (counted in
///    num_repaired), or skips the question when the text does not occur.
/// Stricter than the reference (which raises KeyError/IndexError or wraps around negative indexes):
/// throws bertrain::Error naming the file and, where it applies, the question id or the byte offset when
/// the file cannot be read, is not valid JSON (the byte offset nlohmann reports), lacks a field or has one
/// of the wrong type, has an answer whose answer_start is negative or whose answer_start + len(text) runs
/// past the end of its context, or (training) a possible question without exactly one answer.
SquadReadResult read_squad_examples(const std::string& input_file, bool is_training, bool version_2_with_negative);

/// The same on JSON text in memory; `source` names it in error messages.
SquadReadResult parse_squad_examples(std::string_view json_text, bool is_training, bool version_2_with_negative,
                                     const std::string& source = "<squad json>");

/// The reference paragraph split: words and, per code point of `paragraph_text`, the index of the word it
/// belongs to (the previous word for whitespace; -1 before the first word). Throws bertrain::Error if the
/// text is not well-formed UTF-8.
/// Deviation for text without spaces (Chinese, e.g. CMRC 2018): run_squad.py splits only on whitespace, so a
/// whole Chinese paragraph is one "word" and every answer maps to word 0: the trained span is the first
/// occurrence of the answer's pieces, not the one at answer_start, and predicted text comes out wrong, without
/// an error. Here every CJK character (BasicTokenizer's _is_chinese_char, which the tokenizer isolates anyway)
/// is a word of its own, so answer_start maps to its exact character; `glued` (when given) receives, per word,
/// 1 when it follows the previous word without whitespace, so that predictions are the paragraph's characters
/// ("踢爆", not "踢 爆"). Text without CJK characters is split exactly as the reference splits it.
void squad_split_paragraph(std::string_view paragraph_text, std::vector<std::string>& doc_tokens,
                           std::vector<int32_t>& char_to_word_offset, std::vector<uint8_t>* glued = nullptr);

// ---------------------------------------------------------------------------------------------------------
// Features
// ---------------------------------------------------------------------------------------------------------

/// Options of convert_examples_to_features, with google-research/bert flag names and defaults.
struct SquadFeatureOptions {
  int max_seq_length = 384;
  int doc_stride = 128;
  int max_query_length = 64;
  bool is_training = false;
  /// Throws bertrain::Error unless max_seq_length > max_query_length + 3 (the reference's
  /// validate_flags_or_throw), doc_stride >= 1 and max_query_length >= 0.
  void validate() const;
};

/// One window of a document: doc tokens [start, start + length). The reference's _DocSpan.
struct DocSpan {
  int32_t start = 0;
  int32_t length = 0;
  bool operator==(const DocSpan&) const = default;
};

/// The reference's sliding windows: windows of at most max_tokens_for_doc tokens, the next one starting
/// min(length, doc_stride) later, until one reaches the last token. No windows for 0 tokens.
/// Throws bertrain::Error when max_tokens_for_doc < 1 or doc_stride < 1 (the reference loops forever).
std::vector<DocSpan> make_doc_spans(int32_t num_doc_tokens, int32_t max_tokens_for_doc, int32_t doc_stride);

/// For each doc token, the index of its max-context span (the reference's `_check_is_max_context`: the
/// span maximising min(left context, right context) + 0.01 * span length; the first one on ties).
/// -1 for a token no span covers.
std::vector<int32_t> max_context_spans(const std::vector<DocSpan>& doc_spans, int32_t num_doc_tokens);

/// One window of one example, ready for the model, as the reference's InputFeatures. Shapes: T = max_seq_length.
struct SquadFeature {
  int64_t unique_id = 0;         ///< 1000000000, 1000000001, ... in output order (the reference's numbering)
  int32_t example_index = 0;     ///< index into the examples given to convert_examples_to_features
  int32_t doc_span_index = 0;
  /// "[CLS] query [SEP] doc [SEP]" word pieces. Filled only when is_training is false (write_predictions
  /// needs them; training does not, and they would dominate memory).
  std::vector<std::string> tokens;
  /// Per real token (size = number of tokens before padding): the word index in doc_tokens for the doc part,
  /// -1 for [CLS], query and [SEP] (the reference's token_to_orig_map dict, as an array).
  std::vector<int32_t> token_to_orig_map;
  /// Same size: 1 when this window is the max-context window of the doc token at that position.
  std::vector<uint8_t> token_is_max_context;
  std::vector<int32_t> input_ids;    ///< (T) zero-padded
  std::vector<int32_t> input_mask;   ///< (T) 1 for real tokens
  std::vector<int32_t> segment_ids;  ///< (T) 0 for [CLS] query [SEP], 1 for doc [SEP], 0 for padding
  /// Training only: answer positions in the sequence; 0, 0 when the answer is not inside this window and
  /// for impossible questions (the reference's behaviour). 0 when not training.
  int32_t start_position = 0;
  int32_t end_position = 0;
  bool is_impossible = false;
  /// Number of real tokens (len(tokens) in the reference).
  int32_t num_tokens() const { return static_cast<int32_t>(token_to_orig_map.size()); }
};

/// The reference's convert_examples_to_features: query word pieces truncated to max_query_length; doc word
/// pieces per whitespace word (tok_to_orig_index / orig_to_tok_index); for training the answer span
/// projected to word pieces and tightened by `_improve_answer_span` (the first sub-span, by start then
/// longest, whose pieces equal the answer's pieces); windows of max_seq_length - len(query) - 3 doc pieces
/// every min(length, doc_stride) (make_doc_spans); max context per token (max_context_spans); input ids,
/// mask and segment ids zero-padded to max_seq_length; training positions as documented in SquadFeature.
/// Calls `output_fn` once per feature, in the reference's order (examples in order, windows in order).
/// Throws bertrain::Error on invalid options (see SquadFeatureOptions::validate), a training example
/// without positions, or a word piece missing from the vocab (convert_tokens_to_ids).
void convert_examples_to_features(const std::vector<SquadExample>& examples, const text::FullTokenizer& tokenizer,
                                  const SquadFeatureOptions& options,
                                  const std::function<void(SquadFeature&&)>& output_fn);

/// The same, collecting the features into a vector.
std::vector<SquadFeature> convert_examples_to_features(const std::vector<SquadExample>& examples,
                                                       const text::FullTokenizer& tokenizer,
                                                       const SquadFeatureOptions& options);

/// A batch of features as i32 tensors, in the order of `indices`.
struct SquadBatch {
  Tensor input_ids;        ///< (B, T) i32
  Tensor input_mask;       ///< (B, T) i32
  Tensor segment_ids;      ///< (B, T) i32
  Tensor start_positions;  ///< (B) i32
  Tensor end_positions;    ///< (B) i32
  std::vector<size_t> feature_indices;  ///< which features, in batch order
};

/// Stacks features[indices[0]], features[indices[1]], ..., T from tasks::batch_seq_length (the batch's longest
/// window by its mask, rounded up; or max_seq_length with pad_to_max_length, the default here as run_squad.py).
/// Throws bertrain::Error when `indices` is empty, an index is out of range or the features' sequence lengths
/// differ.
SquadBatch make_squad_batch(const std::vector<SquadFeature>& features, const std::vector<size_t>& indices,
                            const tasks::PaddingOptions& padding = {true, 1});

/// make_squad_batch over features [begin, end).
SquadBatch make_squad_batch(const std::vector<SquadFeature>& features, size_t begin, size_t end,
                            const tasks::PaddingOptions& padding = {true, 1});

// ---------------------------------------------------------------------------------------------------------
// Predictions
// ---------------------------------------------------------------------------------------------------------

/// Options of write_predictions, with google-research/bert flag names and defaults.
struct SquadPredictOptions {
  int n_best_size = 20;
  int max_answer_length = 30;
  bool do_lower_case = true;
  bool version_2_with_negative = false;
  double null_score_diff_threshold = 0.0;
};

/// One n-best entry, as the reference's nbest_predictions.json entries.
struct SquadNbestEntry {
  std::string text;
  double probability = 0.0;
  double start_logit = 0.0;
  double end_logit = 0.0;
  /// Where `text` comes from (not in the JSON files): the words [orig_doc_start, orig_doc_end] of the example's
  /// doc_tokens, and within those words joined (by spaces, none between glued CJK words) the code points
  /// [text_begin, text_end). All -1 for the null answer and the "empty" placeholder.
  int32_t orig_doc_start = -1, orig_doc_end = -1;
  int64_t text_begin = -1, text_end = -1;
};

/// Everything write_predictions produces; one entry per example, in example order.
struct SquadPredictions {
  std::vector<std::string> qas_ids;
  std::vector<std::string> predictions;            ///< the predictions.json values
  std::vector<std::vector<SquadNbestEntry>> nbest; ///< the nbest_predictions.json values
  /// v2 only (else empty): score_null - (start_logit + end_logit) of the best non-null entry: the
  /// null_odds.json values.
  std::vector<double> null_odds;
  bool version_2_with_negative = false;

  /// The files' contents exactly as the reference writes them: json.dumps(OrderedDict, indent=4) + "\n"
  /// (ASCII-escaped, keys in example order, a repeated id keeps its first place and its last value).
  std::string predictions_json() const;
  std::string nbest_json() const;
  std::string null_odds_json() const;  ///< "{}\n" unless v2
};

/// The reference's write_predictions, without the files: for each example, over all its features, the
/// n_best_size best start and end logits (`_get_best_indexes`: stable descending sort), kept when start
/// and end are in the doc part (in token_to_orig_map), the start is at a max-context token, end >= start and
/// end - start + 1 <= max_answer_length; with v2 the null candidate from the window of minimal
/// start_logits[0] + end_logits[0] (score_null); candidates sorted by start + end logit (stable); the text
/// of each is the word pieces joined with "##" removed, mapped back onto the original words by
/// get_final_text; repeated texts dropped; at most n_best_size; v2 adds "" when missing; an empty list
/// gets "empty" (0, 0); probabilities are the softmax of start + end. v1 predicts the first entry; v2
/// predicts "" when score_null - best non-null score > null_score_diff_threshold, else the best non-null
/// text. One deviation: when a v2 n-best list holds no non-null entry (the reference crashes there), an
/// "empty" (0, 0) entry is put first, as Hugging Face's port does.
/// `start_logits[i]` / `end_logits[i]` belong to features[i] and have max_seq_length values each (as the
/// model outputs them, padding included). Throws bertrain::Error when the sizes do not match, a feature has
/// no tokens (made with is_training = true) or names an example that does not exist.
SquadPredictions compute_predictions(const std::vector<SquadExample>& examples,
                                     const std::vector<SquadFeature>& features,
                                     const std::vector<std::vector<float>>& start_logits,
                                     const std::vector<std::vector<float>>& end_logits,
                                     const SquadPredictOptions& options);

/// compute_predictions, then writes `output_dir`/predictions.json, nbest_predictions.json and, for v2,
/// null_odds.json (each written to a temporary name and renamed). Creates output_dir if needed. Same
/// throws, plus bertrain::Error when a file cannot be written.
SquadPredictions write_predictions(const std::vector<SquadExample>& examples,
                                   const std::vector<SquadFeature>& features,
                                   const std::vector<std::vector<float>>& start_logits,
                                   const std::vector<std::vector<float>>& end_logits,
                                   const SquadPredictOptions& options, const std::string& output_dir);

/// The reference's get_final_text (CASES.md C26): projects the de-tokenized prediction `pred_text` back
/// onto `orig_text` (the original words of the span joined by spaces) by BasicTokenizer(do_lower_case) on
/// orig_text, a character-to-character alignment after removing spaces, and the characters of orig_text
/// that the prediction covers. Returns orig_text unchanged when pred_text is not found in the tokenized
/// text, when the two space-free texts differ in length (in code points), or when an end cannot be mapped.
/// Throws bertrain::Error if either text is not well-formed UTF-8.
std::string get_final_text(std::string_view pred_text, std::string_view orig_text, bool do_lower_case);

/// get_final_text and where its result lies in orig_text: code points [begin, end) (0 and orig_text's length
/// when it returns orig_text unchanged). Same throws.
struct FinalText {
  std::string text;
  int64_t begin = 0, end = 0;
};
FinalText get_final_text_span(std::string_view pred_text, std::string_view orig_text, bool do_lower_case);

/// The reference's _get_best_indexes: the indexes of the n_best_size largest logits, largest first, ties in
/// index order.
std::vector<int32_t> get_best_indexes(const std::vector<float>& logits, int n_best_size);

/// The reference's _compute_softmax (double precision, max subtracted); empty for empty input.
std::vector<double> compute_softmax(const std::vector<double>& scores);

}  // namespace bertrain::squad
