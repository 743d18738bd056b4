// glue.h: GLUE task readers (CoLA, SST-2, MRPC, QQP, STS-B, MNLI, QNLI, RTE, WNLI and a generic CSV/TSV/JSONL
// task) and run_classifier-style featurization: InputExample -> ClassifierFeatures -> (B, T) i32 batches.
//
// File layouts, header rules, columns and label lists follow google-research/bert run_classifier.py (CoLA, MNLI,
// MRPC) and Hugging Face transformers data/processors/glue.py (the other tasks). TSV files are read as the
// reference `_read_tsv(quotechar=None)`: lines split at '\n' (a trailing '\r' is dropped), fields split at '\t',
// quotes are ordinary characters, so a row never spans two lines (CASES.md C29).
// bertrain is stricter than the reference in one way: where the reference would crash with an IndexError or
// KeyError, or silently decode bad bytes, bertrain throws bertrain::Error naming the file and the 1-based line.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bertrain/core/tensor.h"
#include "bertrain/tasks/batching.h"

namespace bertrain::text {
class FullTokenizer;
}  // namespace bertrain::text

namespace bertrain::glue {

/// One example of a sequence (pair) classification or regression task (run_classifier's InputExample).
struct InputExample {
  std::string guid;                   // "<set>-<n>" as the reference builds it, e.g. "dev_matched-9847"
  std::string text_a;                 // untokenized first sequence
  std::optional<std::string> text_b;  // second sequence of pair tasks; nullopt for single-sentence tasks
  std::optional<std::string> label;   // label string ("entailment", "1", "3.800" for STS-B); nullopt on test sets
  std::string index;                  // the row's id for the GLUE submission file: the file's index/id column
                                      // where the layout has one, else the 0-based data row number
  std::string source;                 // file it was read from
  int64_t line = 0;                   // 1-based line of the row in `source` (CSV: the line the record starts on)
};

/// A named set of examples: "train", "dev", "dev_matched", "dev_mismatched", "test", "test_matched", ...
struct ExampleSet {
  std::string name;             // set name, also the guid prefix
  std::string path;             // file it was read from
  std::string submission_file;  // GLUE submission file for test sets ("MNLI-m.tsv"); empty for train/dev sets
  std::vector<InputExample> examples;
};

/// Options of make_glue_processor. Only the generic task reads them (the GLUE tasks have fixed layouts); the
/// names are the flags of `bertrain run-classifier`. Validated by make_glue_processor.
struct GlueOptions {
  /// "csv" (RFC 4180 quoting), "tsv" (no quote processing, as `_read_tsv`) or "jsonl" (one JSON object per line).
  /// Empty: taken from whichever of train/dev/test.{tsv,csv,jsonl} exists in the data_dir.
  std::string format;
  std::string text_a_column = "sentence";  // header name (CSV/TSV) or key (JSONL)
  std::string text_b_column;               // empty: single-sentence task
  std::string label_column = "label";
  /// Optional column holding the row id written to the submission file; empty: the 0-based data row number.
  std::string index_column;
  /// The label set in label-id order (--labels a,b,c). Required for classification; must be empty for regression.
  std::vector<std::string> labels;
  /// Regression (one output, float labels, MSE loss), as STS-B.
  bool regression = false;
};

/// A task's reader: which files, which columns, which labels. Thread-safe (const methods only).
class GlueProcessor {
 public:
  virtual ~GlueProcessor() = default;

  /// Canonical task name: "CoLA", "SST-2", "MRPC", "QQP", "STS-B", "MNLI", "QNLI", "RTE", "WNLI" or "generic".
  virtual const std::string& task_name() const = 0;

  /// The label list in label-id order (run_classifier `get_labels`); for regression an empty list.
  virtual const std::vector<std::string>& labels() const = 0;
  /// Classifier outputs: labels().size(), or 1 for regression.
  int num_labels() const { return is_regression() ? 1 : static_cast<int>(labels().size()); }
  virtual bool is_regression() const = 0;
  /// True when every example has text_b.
  virtual bool is_pair_task() const = 0;

  /// The training set (data_dir/train.tsv for GLUE tasks). Throws bertrain::Error naming the file and the
  /// line for a missing or unreadable file, a file with no data rows, a line that is not well-formed UTF-8, a
  /// row whose column count differs from the header's (CoLA train/dev, which have no header: 4 columns), an
  /// unknown label, or (STS-B, regression) a label that is not a finite number.
  std::vector<InputExample> get_train_examples(const std::string& data_dir) const;
  /// The first dev set (MNLI: dev_matched.tsv, as the reference; the mismatched file is not read). Same throws.
  std::vector<InputExample> get_dev_examples(const std::string& data_dir) const;
  /// The first test set (MNLI: test_matched.tsv). Labels are nullopt. Same throws (no label checks).
  std::vector<InputExample> get_test_examples(const std::string& data_dir) const;

  /// Every dev set, named: MNLI gives "dev_matched" (dev_matched.tsv) and "dev_mismatched"
  /// (dev_mismatched.tsv); the other tasks one set "dev". Same throws.
  std::vector<ExampleSet> get_dev_sets(const std::string& data_dir) const;
  /// Every test set, named, each with its submission file: MNLI "test_matched" -> "MNLI-m.tsv" and
  /// "test_mismatched" -> "MNLI-mm.tsv"; the others "test" -> "<TASK>.tsv". Same throws.
  std::vector<ExampleSet> get_test_sets(const std::string& data_dir) const;
  /// The train set as an ExampleSet. Same throws.
  virtual ExampleSet get_train_set(const std::string& data_dir) const = 0;
  /// Dev set `i` (0 <= i < dev_set_names().size()) alone. Same throws.
  virtual ExampleSet get_dev_set(const std::string& data_dir, std::size_t i) const = 0;
  /// Test set `i` (0 <= i < submission_file_names().size()) alone. Same throws.
  virtual ExampleSet get_test_set(const std::string& data_dir, std::size_t i) const = 0;

  /// Names of the dev sets, in get_dev_sets order, without reading anything.
  virtual std::vector<std::string> dev_set_names() const = 0;
  /// GLUE submission file names in get_test_sets order: {"CoLA.tsv"}, {"MNLI-m.tsv", "MNLI-mm.tsv"}, ...
  /// (the names the GLUE benchmark server expects). The generic task gives {"generic.tsv"}.
  virtual std::vector<std::string> submission_file_names() const = 0;
};

/// The processor of `task_name` (case-insensitive; "sst2" and "stsb" are accepted for "SST-2" and "STS-B",
/// "generic" is the user's own CSV/TSV/JSONL files described by `options`). Throws bertrain::Error for an
/// unknown task (listing the known ones) or invalid generic options (no label list for classification, a
/// label list for regression, a duplicate label, an empty text_a column, an unknown format).
std::unique_ptr<GlueProcessor> make_glue_processor(const std::string& task_name, const GlueOptions& options = {});

/// The task names make_glue_processor knows, canonical spelling.
std::vector<std::string> glue_task_names();

/// Reads a tab-separated file exactly as run_classifier `_read_tsv(quotechar=None)`: one row per '\n'-ended
/// line (a trailing '\r' is removed; a final line without '\n' counts; an empty line is an empty row, as
/// Python's csv gives []), fields split at every '\t', quotes kept literally.
/// Throws bertrain::Error naming the file for a missing or unreadable file, and the file and line for a line
/// that is not well-formed UTF-8.
std::vector<std::vector<std::string>> read_tsv(const std::string& path);

/// Splits one line as read_tsv does (no '\n' inside): "\"Second\tsecond" -> {"\"Second", "second"}.
std::vector<std::string> split_tsv_line(std::string_view line);

/// A CSV record with the 1-based line it starts on.
struct CsvRecord {
  std::vector<std::string> fields;
  int64_t line = 0;
};
/// Reads an RFC 4180 CSV file: fields separated by ',', records by "\n" or "\r\n"; a field that starts with
/// '"' is quoted, may hold ',', newlines and '""' (one literal quote); a quote inside an unquoted field is
/// literal (as Python's csv). Blank lines are skipped. Throws bertrain::Error naming the file and line for a
/// missing file, bytes that are not well-formed UTF-8, a quoted field that never closes, or characters
/// between a closing quote and the next separator (Python's csv silently glues them on; bertrain refuses).
std::vector<CsvRecord> read_csv(const std::string& path);

/// The features of one example, each list of length max_seq_length (T). Ready for BertForSequenceClassification.
struct ClassifierFeatures {
  std::vector<int32_t> input_ids;    // (T) [CLS] a [SEP] (b [SEP]) then zeros
  std::vector<int32_t> input_mask;   // (T) 1 on real tokens, 0 on padding
  std::vector<int32_t> segment_ids;  // (T) 0 for [CLS] a [SEP], 1 for b [SEP], 0 on padding
  int32_t label_id = 0;              // classification: index of the label in labels(); 0 when unlabeled
  float label_value = 0.f;           // regression: the float label; 0 when unlabeled
  bool has_label = false;            // false for test examples
  int32_t num_tokens = 0;            // real tokens including [CLS]/[SEP] (= sum of input_mask)
  bool truncated = false;            // true when tokens were dropped to fit max_seq_length
};

/// run_classifier `convert_single_example`: tokens = [CLS] a [SEP] (b [SEP]), segment ids 0 then 1, mask 1 on
/// real tokens, zero padding to max_seq_length. Pairs are cut to max_seq_length - 3 by truncate_seq_pair_back
/// (pretraining.h; run_classifier `_truncate_seq_pair`, CASES.md C13), single sentences keep their first max_seq_length - 2 tokens. As the reference, an empty
/// text_b, or one that tokenizes to nothing, makes a single-sentence input. Classification: label_id = position
/// of the label in `labels`; regression (`is_regression`): label_value = the label parsed as a float.
/// Throws bertrain::Error (naming the example's file, line and guid) when max_seq_length < 3 (2 would leave no
/// room for a pair; bertrain requires 3 for single sentences too), the label is not in `labels`, a
/// regression label is not a finite number, the text is not well-formed UTF-8, or the vocab lacks [CLS]/[SEP].
ClassifierFeatures convert_single_example(const InputExample& example, const std::vector<std::string>& labels,
                                          bool is_regression, int max_seq_length, const text::FullTokenizer& tokenizer);

/// convert_single_example for every example, with the processor's labels and mode. Same throws.
std::vector<ClassifierFeatures> convert_examples_to_features(std::span<const InputExample> examples,
                                                             const GlueProcessor& processor, int max_seq_length,
                                                             const text::FullTokenizer& tokenizer);

/// A batch of ClassifierFeatures as tensors.
struct ClassifierBatch {
  Tensor input_ids;    // i32 (B, T)
  Tensor input_mask;   // i32 (B, T)
  Tensor segment_ids;  // i32 (B, T)
  Tensor labels;       // classification: i32 (B) label ids; regression: f32 (B) values
};

/// Padding to max_seq_length, as run_classifier.py (the default of the batch makers, for callers that predate
/// dynamic padding).
inline constexpr tasks::PaddingOptions kPadToMaxLength{true, 1};

/// Stacks features[indices[0]], features[indices[1]], ... into (B, T) i32 tensors, B = indices.size(), T from
/// tasks::batch_seq_length (the longest num_tokens of the batch, rounded up; or the features' max_seq_length).
/// Labels are i32 ids, or f32 values when `is_regression`. Throws bertrain::Error when indices is empty, an
/// index is out of range, or the features have different lengths.
ClassifierBatch make_classifier_batch(std::span<const ClassifierFeatures> features, std::span<const int64_t> indices,
                                      bool is_regression, const tasks::PaddingOptions& padding = kPadToMaxLength);
/// The batch of features[begin, end). Same throws (begin >= end is an error).
ClassifierBatch make_classifier_batch(std::span<const ClassifierFeatures> features, int64_t begin, int64_t end,
                                      bool is_regression, const tasks::PaddingOptions& padding = kPadToMaxLength);

}  // namespace bertrain::glue
