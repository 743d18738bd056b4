// glue_writers.cpp: eval_results.json, test_results.tsv and GLUE submission files.
#include "bertrain/tasks/glue/writers.h"

#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

#include "bertrain/core/error.h"
#include "bertrain/io/atomic_file.h"

namespace bertrain::glue {
namespace {

// Shortest decimal text that parses back to the same float32 (std::to_chars' round-trip guarantee).
void append_float(std::string& out, float v) {
  char buf[64];
  const auto [ptr, ec] = std::to_chars(buf, buf + sizeof buf, v);
  BERTRAIN_ASSERT(ec == std::errc());
  out.append(buf, ptr);
}

}  // namespace

std::string format_eval_results(const std::map<std::string, double>& metrics, double eval_loss, int64_t global_step) {
  nlohmann::json j = nlohmann::json::object();
  const auto number = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  for (const auto& [name, value] : metrics) j["eval_" + name] = number(value);
  j["eval_loss"] = number(eval_loss);
  j["global_step"] = global_step;
  return j.dump(2) + "\n";
}

void write_eval_results(const std::string& path, const std::map<std::string, double>& metrics, double eval_loss,
                        int64_t global_step) {
  write_text_atomic(path, format_eval_results(metrics, eval_loss, global_step));
}

std::string format_test_results(std::span<const float> values, int64_t num_columns,
                                const std::vector<std::string>& header) {
  BERTRAIN_CHECK(num_columns >= 1, "test_results: num_columns must be >= 1, got ", num_columns);
  BERTRAIN_CHECK(values.size() % static_cast<std::size_t>(num_columns) == 0, "test_results: ", values.size(),
                 " values are not a whole number of rows of ", num_columns);
  BERTRAIN_CHECK(header.empty() || static_cast<int64_t>(header.size()) == num_columns, "test_results: ",
                 header.size(), " column names for ", num_columns, " columns");
  std::string out;
  for (std::size_t i = 0; i < header.size(); ++i) {
    BERTRAIN_CHECK(header[i].find_first_of("\t\r\n") == std::string::npos, "test_results: the column name '",
                   header[i], "' holds a tab or a line break");
    out += header[i];
    out += i + 1 == header.size() ? '\n' : '\t';
  }
  for (std::size_t i = 0; i < values.size(); ++i) {
    append_float(out, values[i]);
    out += (i + 1) % static_cast<std::size_t>(num_columns) == 0 ? '\n' : '\t';
  }
  return out;
}

void write_test_results(const std::string& path, std::span<const float> values, int64_t num_columns,
                        const std::vector<std::string>& header) {
  write_text_atomic(path, format_test_results(values, num_columns, header));
}

std::string format_glue_submission(std::span<const InputExample> examples, std::span<const int32_t> predicted_ids,
                                   const std::vector<std::string>& labels) {
  BERTRAIN_CHECK(examples.size() == predicted_ids.size(), "GLUE submission: ", examples.size(), " examples but ",
                 predicted_ids.size(), " predictions");
  std::string out = "index\tprediction\n";
  for (std::size_t i = 0; i < examples.size(); ++i) {
    const int32_t id = predicted_ids[i];
    BERTRAIN_CHECK(id >= 0 && static_cast<std::size_t>(id) < labels.size(), "GLUE submission: predicted id ", id,
                   " of example ", i, " is outside the ", labels.size(), " labels");
    out += examples[i].index;
    out += '\t';
    out += labels[static_cast<std::size_t>(id)];
    out += '\n';
  }
  return out;
}

void write_glue_submission(const std::string& path, std::span<const InputExample> examples,
                           std::span<const int32_t> predicted_ids, const std::vector<std::string>& labels) {
  write_text_atomic(path, format_glue_submission(examples, predicted_ids, labels));
}

std::string format_glue_submission_regression(std::span<const InputExample> examples,
                                              std::span<const float> predictions) {
  BERTRAIN_CHECK(examples.size() == predictions.size(), "GLUE submission: ", examples.size(), " examples but ",
                 predictions.size(), " predictions");
  std::string out = "index\tprediction\n";
  for (std::size_t i = 0; i < examples.size(); ++i) {
    out += examples[i].index;
    out += '\t';
    append_float(out, predictions[i]);
    out += '\n';
  }
  return out;
}

void write_glue_submission_regression(const std::string& path, std::span<const InputExample> examples,
                                      std::span<const float> predictions) {
  write_text_atomic(path, format_glue_submission_regression(examples, predictions));
}

}  // namespace bertrain::glue
