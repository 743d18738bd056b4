// metrics.h: GLUE evaluation metrics as pure functions in double precision: accuracy, F1 of the positive class,
// Matthews correlation (as scikit-learn), Pearson and Spearman correlation (as scipy.stats), and the per-task
// metric sets of the GLUE benchmark under the names of Hugging Face's `glue` metric.
//
// Argument order is (predictions, labels), as transformers' glue_compute_metrics; every metric here is symmetric
// in its two arguments anyway. Every function throws bertrain::Error when the two inputs differ in length or are
// empty.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace bertrain::glue {

/// Fraction of positions where predictions[i] == labels[i] (sklearn accuracy_score).
double accuracy(std::span<const int32_t> predictions, std::span<const int32_t> labels);

/// F1 of class `positive_label`: 2 tp / (2 tp + fp + fn), as sklearn f1_score(average="binary", pos_label=1);
/// 0 when tp + fp + fn = 0 (sklearn's zero_division default, which also warns). GLUE uses it for MRPC and QQP,
/// positive label "1" (label id 1).
double f1_score(std::span<const int32_t> predictions, std::span<const int32_t> labels, int32_t positive_label = 1);

/// Matthews correlation coefficient for any number of classes, sklearn matthews_corrcoef: with the confusion
/// matrix's true-class counts t_k, predicted-class counts p_k, c correct and s samples,
/// (c s - sum t_k p_k) / sqrt((s^2 - sum p_k^2) (s^2 - sum t_k^2)), and 0 (not NaN) when the denominator is 0,
/// e.g. when one class is never predicted in a binary task (CASES.md C29). Class ids may be any int32 values.
double matthews_corrcoef(std::span<const int32_t> predictions, std::span<const int32_t> labels);

/// Pearson's r, scipy.stats.pearsonr(x, y)[0]: centred cross-products over the root of the centred squares,
/// clipped to [-1, 1]. NaN when either input is constant (scipy returns nan there too). Throws when n < 2.
double pearson_corrcoef(std::span<const double> x, std::span<const double> y);

/// 1-based ranks with ties given the average of the ranks they span, scipy.stats.rankdata(method="average"):
/// {10, 20, 20, 30} -> {1, 2.5, 2.5, 4}. Throws on NaN.
std::vector<double> rank_average(std::span<const double> x);

/// Spearman's rho, scipy.stats.spearmanr(x, y)[0]: Pearson's r of rank_average(x) and rank_average(y).
/// NaN when either input is constant. Throws when n < 2 or on NaN.
double spearman_corrcoef(std::span<const double> x, std::span<const double> y);

/// The GLUE metric set of a classification task, keys as Hugging Face's `glue` metric (and run_glue.py's
/// "combined_score", the mean of the metrics when a task has two):
///   CoLA: matthews_correlation; SST-2, MNLI (each dev set), QNLI, RTE, WNLI: accuracy;
///   MRPC, QQP: accuracy, f1 (positive label id 1 = "1"), combined_score;
///   generic: accuracy, and for a two-label task also f1 (label id 1 positive) and matthews_correlation.
/// `task_name` is matched as make_glue_processor does (case-insensitive, "sst2" = "SST-2"). Throws for an
/// unknown task, for STS-B (use compute_glue_regression_metrics), and on length mismatch or empty input.
std::map<std::string, double> compute_glue_metrics(const std::string& task_name, std::span<const int32_t> predictions,
                                                   std::span<const int32_t> labels, int num_labels = 2);

/// The metric set of a regression task (STS-B, or the generic task with regression): pearson, spearmanr and
/// combined_score = (pearson + spearmanr) / 2. Throws for a task that is not a regression task, and as
/// pearson_corrcoef.
std::map<std::string, double> compute_glue_regression_metrics(const std::string& task_name,
                                                              std::span<const double> predictions,
                                                              std::span<const double> labels);

/// The key of the metric that ranks checkpoints of a task ("best checkpoint kept"): the GLUE task score, which
/// is the task's single metric, or the mean of its two (the GLUE leaderboard averages F1 and accuracy for MRPC
/// and QQP, Pearson and Spearman for STS-B): CoLA "matthews_correlation"; MRPC, QQP, STS-B "combined_score";
/// SST-2, MNLI, QNLI, RTE, WNLI "accuracy"; generic "accuracy", or "combined_score" when `is_regression`.
/// Throws bertrain::Error for an unknown task.
std::string glue_primary_metric(const std::string& task_name, bool is_regression = false);

}  // namespace bertrain::glue
