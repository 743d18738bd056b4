// run_classifier.h: GLUE (and generic CSV/TSV/JSONL) classification as library functions: evaluation and
// prediction with BertForSequenceClassification, the labels of a checkpoint matched by name (CASES.md C43), and
// run_classifier, the whole `bertrain run-classifier` command (google-research/bert run_classifier.py).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "bertrain/models/bert.h"
#include "bertrain/tasks/finetune_command.h"
#include "bertrain/tasks/glue/glue.h"

namespace bertrain::glue {

/// What evaluate() and predict() return for N features with C = processor.num_labels() outputs.
struct Evaluation {
  /// compute_glue_metrics (or compute_glue_regression_metrics) of the predictions; empty from predict().
  std::map<std::string, double> metrics;
  /// Mean loss per example (cross-entropy, or squared error for regression); 0 from predict().
  double loss = 0;
  /// (N, C) row-major softmax probabilities in labels() order, or (N) predicted values for regression.
  std::vector<float> probabilities;
  /// (N) argmax label ids (indexes into labels()); empty for regression.
  std::vector<int32_t> predicted_ids;
};

/// Runs `model` over `features` in batches of `batch_size`, without gradients and in eval mode (no dropout; the
/// model's mode is restored afterwards): batches of similar length (tasks::length_sorted_order), each padded as
/// `padding` says, outputs in the features' order (the same values as padding everything to max_seq_length, to
/// rounding). The loss is computed per example in f64 from the logits. Scores the predictions against the features' labels with the
/// task's GLUE metrics. The model's outputs are taken in processor.labels() order (see match_labels_by_name).
/// Throws bertrain::Error when features is empty, batch_size < 1, a feature has no label, or as the metrics.
Evaluation evaluate(BertForSequenceClassification& model, const GlueProcessor& processor,
                    std::span<const ClassifierFeatures> features, int64_t batch_size,
                    const tasks::PaddingOptions& padding = {});

/// The same for unlabelled features (test sets): probabilities and predicted ids, no metrics, no loss.
/// Throws bertrain::Error when features is empty or batch_size < 1.
Evaluation predict(BertForSequenceClassification& model, const GlueProcessor& processor,
                   std::span<const ClassifierFeatures> features, int64_t batch_size,
                   const tasks::PaddingOptions& padding = {});

/// Writes a test set's predictions into output_dir: `results_file` (test_results.tsv, run_classifier.py's
/// layout: the class probabilities in labels() order, or the value for regression, under a header line naming
/// the columns: the label names, or "prediction") and the GLUE submission
/// file set.submission_file (label names, or values). Throws bertrain::Error as the writers (writers.h).
void write_test_predictions(const std::string& output_dir, const GlueProcessor& processor, const ExampleSet& set,
                            const Evaluation& predictions, const std::string& results_file = "test_results.tsv");

/// CASES.md C43: which output of a checkpoint's classifier means which of the task's labels. `checkpoint_labels`
/// is the checkpoint config's id2label (output j means checkpoint_labels[j]); returns `rows` with rows[k] = the
/// output whose name equals task_labels[k], ignoring ASCII case (MNLI's "entailment" is "ENTAILMENT" in
/// roberta-large-mnli's config). Throws bertrain::Error, one line naming both label sets and `source` (the
/// checkpoint), when the sets differ in size or names.
std::vector<int64_t> match_labels_by_name(const std::vector<std::string>& task_labels,
                                          const std::vector<std::string>& checkpoint_labels,
                                          const std::string& task_name, const std::string& source);

/// Reorders the classifier's outputs in place: output k becomes the old output rows[k] (rows of
/// classifier.weight (C, H) and entries of classifier.bias (C)), so that after
/// rows = match_labels_by_name(...) the model's outputs follow the task's label order.
/// Throws bertrain::Error when rows is not a permutation of 0..C-1.
void reorder_classifier_outputs(BertForSequenceClassification& model, const std::vector<int64_t>& rows);

/// The flags of `bertrain run-classifier` (run_classifier.py's names; the shared ones in the base).
struct RunClassifierOptions : tasks::FinetuneCommandOptions {
  std::string task_name;  ///< CoLA, SST-2, MRPC, QQP, STS-B, MNLI, QNLI, RTE, WNLI or generic
  std::string data_dir;   ///< the task's train/dev/test files
  /// The generic task's files: --format, --text_a_column, --text_b_column, --label_column, --index_column,
  /// --labels, --regression.
  GlueOptions generic;
  bool do_eval = false;  ///< evaluate on the dev set(s) (after training, or the init checkpoint as it is)
};

struct RunClassifierResult {
  int exit_code = 0;  ///< 0, or 128 + signal number when training was interrupted (a checkpoint was saved)
  FinetuneResult training;                   ///< when do_train
  std::map<std::string, double> eval_metrics;  ///< the last evaluation (MNLI: mismatched set under "_mm" keys)
};

/// run_classifier.py: reads the task's files, builds BertForSequenceClassification from the config (with the
/// task's labels as id2label, so every checkpoint's config.json names its outputs), loads init_checkpoint (when
/// its config carries label names they are matched to the task's by name, C43: the checkpoint's order is used
/// by reordering its classifier into the task's order, with a log line; names that do not match are an error),
/// then do_train (the shared finetuning loop, evaluating the dev sets after each epoch), do_eval
/// (OUTPUT_DIR/eval_results.json) and do_predict (test_results.tsv and the GLUE submission file of each test
/// set). Under mpirun rank 0 alone evaluates and writes prediction files. Throws bertrain::Error when none of
/// do_train / do_eval / do_predict is set, and on bad files, flags or checkpoints (one line each).
RunClassifierResult run_classifier(const RunClassifierOptions& options);

}  // namespace bertrain::glue
