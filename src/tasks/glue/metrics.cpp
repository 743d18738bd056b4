// metrics.cpp: accuracy, F1, Matthews correlation, Pearson, Spearman and the GLUE per-task metric sets.
#include "bertrain/tasks/glue/metrics.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "bertrain/core/error.h"

namespace bertrain::glue {
namespace {

template <class A, class B>
void check_sizes(const char* what, const A& a, const B& b) {
  BERTRAIN_CHECK(a.size() == b.size(), what, ": ", a.size(), " predictions but ", b.size(), " labels");
  BERTRAIN_CHECK(!a.empty(), what, ": no predictions");
}

std::string canonical_task(const std::string& task_name) {
  std::string t = task_name;
  for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (t == "sst2") t = "sst-2";
  if (t == "stsb") t = "sts-b";
  return t;
}

}  // namespace

double accuracy(std::span<const int32_t> predictions, std::span<const int32_t> labels) {
  check_sizes("accuracy", predictions, labels);
  std::size_t correct = 0;
  for (std::size_t i = 0; i < labels.size(); ++i) correct += predictions[i] == labels[i];
  return static_cast<double>(correct) / static_cast<double>(labels.size());
}

double f1_score(std::span<const int32_t> predictions, std::span<const int32_t> labels, int32_t positive_label) {
  check_sizes("f1_score", predictions, labels);
  double tp = 0, fp = 0, fn = 0;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const bool p = predictions[i] == positive_label, t = labels[i] == positive_label;
    tp += p && t;
    fp += p && !t;
    fn += !p && t;
  }
  const double denom = 2 * tp + fp + fn;
  return denom == 0 ? 0.0 : 2 * tp / denom;
}

double matthews_corrcoef(std::span<const int32_t> predictions, std::span<const int32_t> labels) {
  check_sizes("matthews_corrcoef", predictions, labels);
  std::unordered_map<int32_t, std::pair<double, double>> counts;  // class -> (t_k, p_k)
  double correct = 0;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    counts[labels[i]].first += 1;
    counts[predictions[i]].second += 1;
    correct += predictions[i] == labels[i];
  }
  const double s = static_cast<double>(labels.size());
  double tp_sum = 0, pp_sum = 0, tt_sum = 0;
  for (const auto& [k, tp] : counts) {
    tp_sum += tp.first * tp.second;
    pp_sum += tp.second * tp.second;
    tt_sum += tp.first * tp.first;
  }
  const double cov_ytyp = correct * s - tp_sum;
  const double cov_ypyp = s * s - pp_sum;
  const double cov_ytyt = s * s - tt_sum;
  if (cov_ypyp * cov_ytyt == 0) return 0.0;
  return cov_ytyp / std::sqrt(cov_ytyt * cov_ypyp);
}

double pearson_corrcoef(std::span<const double> x, std::span<const double> y) {
  check_sizes("pearson_corrcoef", x, y);
  BERTRAIN_CHECK(x.size() >= 2, "pearson_corrcoef: needs at least 2 values, got ", x.size());
  const double n = static_cast<double>(x.size());
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n;
  const double my = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double dx = x[i] - mx, dy = y[i] - my;
    sxy += dx * dy;
    sxx += dx * dx;
    syy += dy * dy;
  }
  if (sxx == 0 || syy == 0) return std::numeric_limits<double>::quiet_NaN();
  return std::clamp(sxy / std::sqrt(sxx * syy), -1.0, 1.0);
}

std::vector<double> rank_average(std::span<const double> x) {
  for (double v : x) BERTRAIN_CHECK(!std::isnan(v), "rank_average: NaN in the input");
  std::vector<std::size_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return x[a] < x[b]; });
  std::vector<double> ranks(x.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && x[order[j + 1]] == x[order[i]]) ++j;
    const double r = (static_cast<double>(i + 1) + static_cast<double>(j + 1)) / 2;  // mean of ranks i+1..j+1
    for (std::size_t k = i; k <= j; ++k) ranks[order[k]] = r;
    i = j + 1;
  }
  return ranks;
}

double spearman_corrcoef(std::span<const double> x, std::span<const double> y) {
  check_sizes("spearman_corrcoef", x, y);
  BERTRAIN_CHECK(x.size() >= 2, "spearman_corrcoef: needs at least 2 values, got ", x.size());
  const std::vector<double> rx = rank_average(x), ry = rank_average(y);
  return pearson_corrcoef(rx, ry);
}

std::map<std::string, double> compute_glue_metrics(const std::string& task_name, std::span<const int32_t> predictions,
                                                   std::span<const int32_t> labels, int num_labels) {
  const std::string t = canonical_task(task_name);
  check_sizes(task_name.c_str(), predictions, labels);
  std::map<std::string, double> m;
  if (t == "cola") {
    m["matthews_correlation"] = matthews_corrcoef(predictions, labels);
  } else if (t == "sst-2" || t == "mnli" || t == "qnli" || t == "rte" || t == "wnli") {
    m["accuracy"] = accuracy(predictions, labels);
  } else if (t == "mrpc" || t == "qqp") {
    m["accuracy"] = accuracy(predictions, labels);
    m["f1"] = f1_score(predictions, labels, 1);
    m["combined_score"] = (m["accuracy"] + m["f1"]) / 2;
  } else if (t == "generic") {
    m["accuracy"] = accuracy(predictions, labels);
    if (num_labels == 2) {
      m["f1"] = f1_score(predictions, labels, 1);
      m["matthews_correlation"] = matthews_corrcoef(predictions, labels);
    }
  } else if (t == "sts-b") {
    BERTRAIN_CHECK(false, "STS-B is a regression task: use compute_glue_regression_metrics");
  } else {
    BERTRAIN_CHECK(false, "compute_glue_metrics: unknown task '", task_name, "'");
  }
  return m;
}

std::map<std::string, double> compute_glue_regression_metrics(const std::string& task_name,
                                                              std::span<const double> predictions,
                                                              std::span<const double> labels) {
  const std::string t = canonical_task(task_name);
  BERTRAIN_CHECK(t == "sts-b" || t == "generic", "compute_glue_regression_metrics: '", task_name,
                 "' is not a regression task (STS-B or generic)");
  std::map<std::string, double> m;
  m["pearson"] = pearson_corrcoef(predictions, labels);
  m["spearmanr"] = spearman_corrcoef(predictions, labels);
  m["combined_score"] = (m["pearson"] + m["spearmanr"]) / 2;
  return m;
}

std::string glue_primary_metric(const std::string& task_name, bool is_regression) {
  const std::string t = canonical_task(task_name);
  if (t == "cola") return "matthews_correlation";
  if (t == "mrpc" || t == "qqp" || t == "sts-b") return "combined_score";
  if (t == "sst-2" || t == "mnli" || t == "qnli" || t == "rte" || t == "wnli") return "accuracy";
  if (t == "generic") return is_regression ? "combined_score" : "accuracy";
  BERTRAIN_CHECK(false, "glue_primary_metric: unknown task '", task_name, "'");
  return {};
}

}  // namespace bertrain::glue
