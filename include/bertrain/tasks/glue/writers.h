// glue_writers.h: the files `bertrain run-classifier` writes after evaluation and prediction: eval_results.json,
// test_results.tsv (run_classifier.py's layout) and the GLUE benchmark submission file <TASK>.tsv.
// Each writer has a format_* twin returning the exact text, and writes atomically (bertrain/io/atomic_file.h).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "bertrain/tasks/glue/glue.h"

namespace bertrain::glue {

/// eval_results.json: one JSON object, keys sorted, indented by 2, ending in '\n':
/// {"eval_<metric>": value for each metric, "eval_loss": eval_loss, "global_step": global_step}.
/// run_classifier.py writes the same keys to eval_results.txt as "key = value" lines; bertrain writes JSON so
/// scripts can read it. Non-finite values (a NaN Pearson of constant predictions) become null. Tasks with two
/// dev sets (MNLI) pass the second set's values under suffixed keys, as Hugging Face's run_glue.py does for
/// mnli-mm: {"accuracy": .., "accuracy_mm": .., "loss_mm": ..} -> eval_accuracy, eval_accuracy_mm, eval_loss_mm.
std::string format_eval_results(const std::map<std::string, double>& metrics, double eval_loss, int64_t global_step);
/// Writes format_eval_results to `path`. Throws bertrain::Error naming the path when it cannot write.
void write_eval_results(const std::string& path, const std::map<std::string, double>& metrics, double eval_loss,
                        int64_t global_step);

/// test_results.tsv as run_classifier.py's predict: one line per example, the class probabilities joined by
/// '\t' in label-id order (for regression the single predicted value), each the shortest text that reads back as
/// the same float32 (as numpy's str of a float32: 0.25 -> "0.25"). `values` is (N, num_columns) row-major.
/// When `header` is not empty (num_columns names: the label names, or "prediction" for regression) it is the
/// first line, the names joined by '\t'; run_classifier.py writes no header, so a reader of its files skips
/// one line.
/// Throws bertrain::Error when values.size() is not a multiple of num_columns or num_columns < 1, or a header of
/// another size or with a tab or newline in a name.
std::string format_test_results(std::span<const float> values, int64_t num_columns,
                                const std::vector<std::string>& header = {});
void write_test_results(const std::string& path, std::span<const float> values, int64_t num_columns,
                        const std::vector<std::string>& header = {});

/// The GLUE submission file (<TASK>.tsv, e.g. "MNLI-m.tsv"): header "index\tprediction", then for each example
/// its `index` and the predicted label as a string (labels[predicted_ids[i]], e.g. "not_entailment", "1").
/// Throws bertrain::Error when the sizes differ or a predicted id is outside labels.
std::string format_glue_submission(std::span<const InputExample> examples, std::span<const int32_t> predicted_ids,
                                   const std::vector<std::string>& labels);
void write_glue_submission(const std::string& path, std::span<const InputExample> examples,
                           std::span<const int32_t> predicted_ids, const std::vector<std::string>& labels);

/// The same for a regression task (STS-B): the prediction is the float, written as format_test_results does.
std::string format_glue_submission_regression(std::span<const InputExample> examples,
                                              std::span<const float> predictions);
void write_glue_submission_regression(const std::string& path, std::span<const InputExample> examples,
                                      std::span<const float> predictions);

}  // namespace bertrain::glue
