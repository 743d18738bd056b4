// glue.cpp: GLUE task readers (table-driven TSV layouts plus the generic CSV/TSV/JSONL task), run_classifier
// featurization and batching. See glue.h for the reference behaviour each function matches.
#include "bertrain/tasks/glue/glue.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "bertrain/core/error.h"
#include "bertrain/core/json_limits.h"
#include "bertrain/data/pretraining.h"
#include "bertrain/text/tokenizer.h"
#include "bertrain/text/utf8.h"

namespace bertrain::glue {
namespace {

namespace fs = std::filesystem;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) s += sep;
    s += v[i];
  }
  return s;
}

std::string join_path(const std::string& dir, const std::string& file) { return (fs::path(dir) / file).string(); }

// Reads the whole file; throws naming it when it is missing or unreadable, and naming the line when some byte
// sequence is not well-formed UTF-8 (the reference decodes as UTF-8 too, and would fail or drop bytes).
std::string read_text_file(const std::string& path) {
  std::error_code ec;
  BERTRAIN_CHECK(fs::is_regular_file(path, ec), path, ": cannot read: no such file",
                 fs::exists(path, ec) ? " (it is not a regular file)" : "");
  std::ifstream in(path, std::ios::binary);
  BERTRAIN_CHECK(in.good(), path, ": cannot open: ", std::strerror(errno));
  std::ostringstream buf;
  buf << in.rdbuf();
  BERTRAIN_CHECK(!in.bad(), path, ": read error");
  std::string bytes = buf.str();
  const std::size_t bad = text::utf8_invalid_offset(bytes);
  if (bad != std::string::npos) {
    const int64_t line = 1 + std::count(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(bad), '\n');
    const std::size_t line_start = bytes.rfind('\n', bad == 0 ? 0 : bad - 1);
    const std::size_t column = line_start == std::string::npos || bad == 0 ? bad + 1 : bad - line_start;
    BERTRAIN_CHECK(false, path, ":", line, ": not well-formed UTF-8 (bad byte at column ", column, ")");
  }
  return bytes;
}

// Python's float() on a label: optional surrounding ASCII whitespace, then a decimal number. Only finite
// values are accepted (a similarity score or regression target of nan/inf makes the run meaningless).
bool parse_finite_float(std::string_view s, double& out) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  if (s.empty()) return false;
  if (s.front() == '+') s.remove_prefix(1);
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size() && std::isfinite(out);
}

// ---- the GLUE TSV tasks, described by tables ----

constexpr int kNone = -1;  // no such column
constexpr int kLast = -2;  // the last column (MNLI, STS-B, QNLI, RTE, WNLI labels: line[-1])

struct TsvSplit {
  std::string name;        // set name and guid prefix
  std::string file;        // file name inside data_dir
  std::string submission;  // GLUE submission file (test sets)
  bool header;             // line 1 is a header: skipped, and it fixes the column count
  int columns;             // column count of a file without header (CoLA train/dev: 4)
  int index_col;           // row id for the submission file; kNone: 0-based data row number
  int guid_col;            // kNone: guid = "<set>-<i>" with i the 0-based line number, as the reference
  int text_a_col;
  int text_b_col;
  int label_col;  // kNone on test sets
};

struct TsvTask {
  std::string name;
  std::vector<std::string> labels;
  bool regression;
  TsvSplit train;
  std::vector<TsvSplit> dev;
  std::vector<TsvSplit> test;
};

// A header-ful split whose id column is column 0, as most GLUE files.
TsvSplit indexed(std::string name, std::string file, int a, int b, int label, std::string submission = "") {
  return TsvSplit{std::move(name), std::move(file), std::move(submission), true, 0, 0, 0, a, b, label};
}

// The GLUE layouts. Column numbers are those of run_classifier.py (CoLA, MRPC, MNLI) and transformers'
// glue.py (the rest); the files are GLUE's download (glue_data/<TASK>/).
std::vector<TsvTask> glue_tasks() {
  std::vector<TsvTask> t;
  // CoLA: train/dev have no header, columns (source, label, original label, sentence); "Only the test set has
  // a header" (index, sentence). Reference guid: "<set>-<i>" with i the line's position in the file.
  t.push_back({"CoLA", {"0", "1"}, false,
               {"train", "train.tsv", "", false, 4, kNone, kNone, 3, kNone, 1},
               {{"dev", "dev.tsv", "", false, 4, kNone, kNone, 3, kNone, 1}},
               {{"test", "test.tsv", "CoLA.tsv", true, 0, 0, kNone, 1, kNone, kNone}}});
  // SST-2: header (sentence, label); test header (index, sentence).
  t.push_back({"SST-2", {"0", "1"}, false,
               {"train", "train.tsv", "", true, 0, kNone, kNone, 0, kNone, 1},
               {{"dev", "dev.tsv", "", true, 0, kNone, kNone, 0, kNone, 1}},
               {{"test", "test.tsv", "SST-2.tsv", true, 0, 0, kNone, 1, kNone, kNone}}});
  // MRPC: header (Quality, #1 ID, #2 ID, #1 String, #2 String); test header (index, #1 ID, ...).
  t.push_back({"MRPC", {"0", "1"}, false,
               {"train", "train.tsv", "", true, 0, kNone, kNone, 3, 4, 0},
               {{"dev", "dev.tsv", "", true, 0, kNone, kNone, 3, 4, 0}},
               {{"test", "test.tsv", "MRPC.tsv", true, 0, 0, kNone, 3, 4, kNone}}});
  // QQP: header (id, qid1, qid2, question1, question2, is_duplicate); test header (id, question1, question2).
  t.push_back({"QQP", {"0", "1"}, false, indexed("train", "train.tsv", 3, 4, 5),
               {indexed("dev", "dev.tsv", 3, 4, 5)}, {indexed("test", "test.tsv", 1, 2, kNone, "QQP.tsv")}});
  // STS-B: header (index, genre, filename, year, old_index, source1, source2, sentence1, sentence2, score).
  t.push_back({"STS-B", {}, true, indexed("train", "train.tsv", 7, 8, kLast),
               {indexed("dev", "dev.tsv", 7, 8, kLast)}, {indexed("test", "test.tsv", 7, 8, kNone, "STS-B.tsv")}});
  // MNLI: header (index, promptID, pairID, genre, 4 parses, sentence1, sentence2, [label1..5,] gold_label).
  t.push_back({"MNLI", {"contradiction", "entailment", "neutral"}, false, indexed("train", "train.tsv", 8, 9, kLast),
               {indexed("dev_matched", "dev_matched.tsv", 8, 9, kLast),
                indexed("dev_mismatched", "dev_mismatched.tsv", 8, 9, kLast)},
               {indexed("test_matched", "test_matched.tsv", 8, 9, kNone, "MNLI-m.tsv"),
                indexed("test_mismatched", "test_mismatched.tsv", 8, 9, kNone, "MNLI-mm.tsv")}});
  // QNLI: header (index, question, sentence, label).
  t.push_back({"QNLI", {"entailment", "not_entailment"}, false, indexed("train", "train.tsv", 1, 2, kLast),
               {indexed("dev", "dev.tsv", 1, 2, kLast)}, {indexed("test", "test.tsv", 1, 2, kNone, "QNLI.tsv")}});
  // RTE: header (index, sentence1, sentence2, label).
  t.push_back({"RTE", {"entailment", "not_entailment"}, false, indexed("train", "train.tsv", 1, 2, kLast),
               {indexed("dev", "dev.tsv", 1, 2, kLast)}, {indexed("test", "test.tsv", 1, 2, kNone, "RTE.tsv")}});
  // WNLI: header (index, sentence1, sentence2, label).
  t.push_back({"WNLI", {"0", "1"}, false, indexed("train", "train.tsv", 1, 2, kLast),
               {indexed("dev", "dev.tsv", 1, 2, kLast)}, {indexed("test", "test.tsv", 1, 2, kNone, "WNLI.tsv")}});
  return t;
}

// Checks a label against the task's label list (classification) or parses it (regression).
void check_label(const std::string& task, const std::vector<std::string>& labels, bool regression,
                 const std::string& label, const std::string& path, int64_t line) {
  if (regression) {
    double v;
    BERTRAIN_CHECK(parse_finite_float(label, v), path, ":", line, ": ", task, " label '", printable(label),
                   "' is not a finite number");
  } else {
    BERTRAIN_CHECK(std::find(labels.begin(), labels.end(), label) != labels.end(), path, ":", line, ": unknown ",
                   task, " label '", printable(label), "' (expected one of: ", join(labels, ", "), ")");
  }
}

int resolve(int col, int ncols) { return col == kLast ? ncols - 1 : col; }

class TsvTaskProcessor final : public GlueProcessor {
 public:
  explicit TsvTaskProcessor(TsvTask task) : task_(std::move(task)) {}

  const std::string& task_name() const override { return task_.name; }
  const std::vector<std::string>& labels() const override { return task_.labels; }
  bool is_regression() const override { return task_.regression; }
  bool is_pair_task() const override { return task_.train.text_b_col != kNone; }

  ExampleSet get_train_set(const std::string& data_dir) const override { return read(data_dir, task_.train); }
  ExampleSet get_dev_set(const std::string& data_dir, std::size_t i) const override {
    BERTRAIN_CHECK(i < task_.dev.size(), task_.name, " has ", task_.dev.size(), " dev set(s), asked for #", i);
    return read(data_dir, task_.dev[i]);
  }
  ExampleSet get_test_set(const std::string& data_dir, std::size_t i) const override {
    BERTRAIN_CHECK(i < task_.test.size(), task_.name, " has ", task_.test.size(), " test set(s), asked for #", i);
    return read(data_dir, task_.test[i]);
  }
  std::vector<std::string> dev_set_names() const override {
    std::vector<std::string> n;
    for (const TsvSplit& s : task_.dev) n.push_back(s.name);
    return n;
  }
  std::vector<std::string> submission_file_names() const override {
    std::vector<std::string> n;
    for (const TsvSplit& s : task_.test) n.push_back(s.submission);
    return n;
  }

 private:
  ExampleSet read(const std::string& data_dir, const TsvSplit& split) const {
    ExampleSet set{split.name, join_path(data_dir, split.file), split.submission, {}};
    const std::string& path = set.path;
    const auto rows = read_tsv(path);
    std::size_t ncols = static_cast<std::size_t>(split.columns);
    std::size_t first = 0;
    if (split.header) {
      BERTRAIN_CHECK(!rows.empty(), path, ": empty file: expected a header line (", task_.name, " ", split.name, ")");
      ncols = rows[0].size();
      first = 1;
    }
    // Columns the layout reads must exist; with a label in the last column it must follow the texts.
    int need = std::max({split.index_col, split.guid_col, split.text_a_col, split.text_b_col, split.label_col}) + 1;
    if (split.label_col == kLast) need = std::max(split.text_a_col, split.text_b_col) + 2;
    BERTRAIN_CHECK(static_cast<int>(ncols) >= need, path, ":1: ", task_.name, " ", split.name, " needs at least ",
                   need, " tab-separated columns, the header has ", ncols);
    BERTRAIN_CHECK(rows.size() > first, path, ": no examples (", task_.name, " ", split.name, ")");
    set.examples.reserve(rows.size() - first);
    for (std::size_t i = first; i < rows.size(); ++i) {
      const auto& row = rows[i];
      const int64_t line = static_cast<int64_t>(i) + 1;
      BERTRAIN_CHECK(row.size() == ncols, path, ":", line, ": expected ", ncols, " tab-separated columns",
                     split.header ? " (as the header)" : "", ", got ", row.size(), " (", task_.name, " ", split.name,
                     ")");
      InputExample ex;
      ex.guid = split.name + "-" + (split.guid_col == kNone ? std::to_string(i) : row[split.guid_col]);
      ex.text_a = row[split.text_a_col];
      if (split.text_b_col != kNone) ex.text_b = row[split.text_b_col];
      if (split.label_col != kNone) {
        std::string label = row[resolve(split.label_col, static_cast<int>(ncols))];
        check_label(task_.name, task_.labels, task_.regression, label, path, line);
        ex.label = std::move(label);
      }
      ex.index = split.index_col == kNone ? std::to_string(i - first) : row[split.index_col];
      ex.source = path;
      ex.line = line;
      set.examples.push_back(std::move(ex));
    }
    return set;
  }

  TsvTask task_;
};

// ---- the generic task: the user's own CSV, TSV or JSONL files ----

class GenericProcessor final : public GlueProcessor {
 public:
  explicit GenericProcessor(GlueOptions o) : o_(std::move(o)) {
    BERTRAIN_CHECK(o_.format.empty() || o_.format == "csv" || o_.format == "tsv" || o_.format == "jsonl",
                   "generic task: unknown format '", o_.format, "' (expected csv, tsv or jsonl)");
    BERTRAIN_CHECK(!o_.text_a_column.empty(), "generic task: --text_a_column is empty");
    BERTRAIN_CHECK(!o_.label_column.empty(), "generic task: --label_column is empty");
    if (o_.regression) {
      BERTRAIN_CHECK(o_.labels.empty(), "generic task: a regression task takes no --labels (got ",
                     join(o_.labels, ","), ")");
    } else {
      BERTRAIN_CHECK(o_.labels.size() >= 2, "generic task: --labels must list at least 2 labels, got ",
                     o_.labels.size());
      for (std::size_t i = 0; i < o_.labels.size(); ++i)
        for (std::size_t j = 0; j < i; ++j)
          BERTRAIN_CHECK(o_.labels[i] != o_.labels[j], "generic task: label '", o_.labels[i],
                         "' appears twice in --labels");
    }
  }

  const std::string& task_name() const override { return name_; }
  const std::vector<std::string>& labels() const override { return o_.labels; }
  bool is_regression() const override { return o_.regression; }
  bool is_pair_task() const override { return !o_.text_b_column.empty(); }

  ExampleSet get_train_set(const std::string& data_dir) const override { return read(data_dir, "train", true); }
  ExampleSet get_dev_set(const std::string& data_dir, std::size_t i) const override {
    BERTRAIN_CHECK(i == 0, "the generic task has 1 dev set, asked for #", i);
    return read(data_dir, "dev", true);
  }
  ExampleSet get_test_set(const std::string& data_dir, std::size_t i) const override {
    BERTRAIN_CHECK(i == 0, "the generic task has 1 test set, asked for #", i);
    return read(data_dir, "test", false);
  }
  std::vector<std::string> dev_set_names() const override { return {"dev"}; }
  std::vector<std::string> submission_file_names() const override { return {"generic.tsv"}; }

 private:
  std::string find_file(const std::string& data_dir, const std::string& set, std::string& format) const {
    if (!o_.format.empty()) {
      format = o_.format;
      return join_path(data_dir, set + "." + format);
    }
    std::vector<std::string> found;
    for (const char* ext : {"tsv", "csv", "jsonl"}) {
      std::error_code ec;
      if (fs::is_regular_file(join_path(data_dir, set + "." + ext), ec)) found.push_back(ext);
    }
    BERTRAIN_CHECK(!found.empty(), "generic task: none of ", join_path(data_dir, set), ".{tsv,csv,jsonl} exists");
    BERTRAIN_CHECK(found.size() == 1, "generic task: ", join_path(data_dir, set), " exists as ", join(found, " and "),
                   "; choose one with --format");
    format = found[0];
    return join_path(data_dir, set + "." + format);
  }

  ExampleSet read(const std::string& data_dir, const std::string& set, bool labeled) const {
    std::string format;
    ExampleSet out{set, find_file(data_dir, set, format), labeled ? "" : "generic.tsv", {}};
    if (format == "jsonl")
      read_jsonl(out, labeled);
    else
      read_table(out, format, labeled);
    BERTRAIN_CHECK(!out.examples.empty(), out.path, ": no examples");
    return out;
  }

  // Finishes one example: label check, guid, index.
  void add(ExampleSet& out, InputExample ex, std::optional<std::string> label, std::optional<std::string> index,
           int64_t line) const {
    const std::size_t n = out.examples.size();
    if (label) {
      check_label("generic", o_.labels, o_.regression, *label, out.path, line);
      ex.label = std::move(label);
    }
    ex.guid = out.name + "-" + std::to_string(n);
    ex.index = index ? *index : std::to_string(n);
    ex.source = out.path;
    ex.line = line;
    out.examples.push_back(std::move(ex));
  }

  void read_table(ExampleSet& out, const std::string& format, bool labeled) const {
    std::vector<CsvRecord> records;
    if (format == "csv") {
      records = read_csv(out.path);
    } else {
      auto rows = read_tsv(out.path);
      for (std::size_t i = 0; i < rows.size(); ++i) records.push_back({std::move(rows[i]), static_cast<int64_t>(i) + 1});
    }
    BERTRAIN_CHECK(!records.empty(), out.path, ": empty file: expected a header line naming the columns");
    std::vector<std::string> header = records[0].fields;
    if (!header.empty() && header[0].rfind("\xEF\xBB\xBF", 0) == 0) header[0].erase(0, 3);  // UTF-8 BOM
    const auto column = [&](const std::string& name, bool required) -> int {
      if (name.empty()) return kNone;
      const auto it = std::find(header.begin(), header.end(), name);
      BERTRAIN_CHECK(it != header.end() || !required, out.path, ":", records[0].line, ": no column '", name,
                     "' in the header (columns: ", printable(join(header, ", ")), ")");
      return it == header.end() ? kNone : static_cast<int>(it - header.begin());
    };
    const int a = column(o_.text_a_column, true);
    const int b = column(o_.text_b_column, true);
    const int label = labeled ? column(o_.label_column, true) : kNone;
    const int index = column(o_.index_column, true);
    for (std::size_t i = 1; i < records.size(); ++i) {
      const auto& f = records[i].fields;
      BERTRAIN_CHECK(f.size() == header.size(), out.path, ":", records[i].line, ": expected ", header.size(), " ",
                     format == "csv" ? "comma" : "tab", "-separated columns (as the header), got ", f.size());
      InputExample ex;
      ex.text_a = f[a];
      if (b != kNone) ex.text_b = f[b];
      add(out, std::move(ex), label == kNone ? std::nullopt : std::optional<std::string>(f[label]),
          index == kNone ? std::nullopt : std::optional<std::string>(f[index]), records[i].line);
    }
  }

  void read_jsonl(ExampleSet& out, bool labeled) const {
    const std::string text = read_text_file(out.path);
    std::size_t pos = 0;
    int64_t line = 0;
    while (pos < text.size()) {
      ++line;
      std::size_t nl = text.find('\n', pos);
      if (nl == std::string::npos) nl = text.size();
      const std::string_view s(text.data() + pos, nl - pos);
      pos = nl + 1;
      if (s.find_first_not_of(" \t\r") == std::string_view::npos) continue;  // blank line
      check_json_depth(s, out.path + ":" + std::to_string(line));
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(s);
      } catch (const nlohmann::json::exception& e) {
        BERTRAIN_CHECK(false, out.path, ":", line, ": not valid JSON: ", e.what());
      }
      BERTRAIN_CHECK(j.is_object(), out.path, ":", line, ": expected a JSON object, got ", j.type_name());
      // Text fields must be strings; labels and ids may also be numbers or booleans (1 -> "1", 3.5 -> "3.5").
      const auto get = [&](const std::string& key, bool text_field) -> std::string {
        const auto it = j.find(key);
        BERTRAIN_CHECK(it != j.end(), out.path, ":", line, ": no key '", key, "'");
        if (it->is_string()) return it->get<std::string>();
        BERTRAIN_CHECK(!text_field && (it->is_number() || it->is_boolean()), out.path, ":", line, ": key '", key,
                       "' must be a string", text_field ? "" : ", number or boolean", ", got ", it->type_name());
        return it->dump();
      };
      InputExample ex;
      ex.text_a = get(o_.text_a_column, true);
      if (!o_.text_b_column.empty()) ex.text_b = get(o_.text_b_column, true);
      std::optional<std::string> label, index;
      if (labeled) label = get(o_.label_column, false);
      if (!o_.index_column.empty()) index = get(o_.index_column, false);
      add(out, std::move(ex), std::move(label), std::move(index), line);
    }
  }

  GlueOptions o_;
  std::string name_ = "generic";
};

}  // namespace

std::vector<InputExample> GlueProcessor::get_train_examples(const std::string& data_dir) const {
  return get_train_set(data_dir).examples;
}
std::vector<InputExample> GlueProcessor::get_dev_examples(const std::string& data_dir) const {
  return get_dev_set(data_dir, 0).examples;
}
std::vector<InputExample> GlueProcessor::get_test_examples(const std::string& data_dir) const {
  return get_test_set(data_dir, 0).examples;
}
std::vector<ExampleSet> GlueProcessor::get_dev_sets(const std::string& data_dir) const {
  std::vector<ExampleSet> sets;
  for (std::size_t i = 0; i < dev_set_names().size(); ++i) sets.push_back(get_dev_set(data_dir, i));
  return sets;
}
std::vector<ExampleSet> GlueProcessor::get_test_sets(const std::string& data_dir) const {
  std::vector<ExampleSet> sets;
  for (std::size_t i = 0; i < submission_file_names().size(); ++i) sets.push_back(get_test_set(data_dir, i));
  return sets;
}

std::vector<std::string> glue_task_names() {
  std::vector<std::string> names;
  for (const TsvTask& t : glue_tasks()) names.push_back(t.name);
  names.push_back("generic");
  return names;
}

std::unique_ptr<GlueProcessor> make_glue_processor(const std::string& task_name, const GlueOptions& options) {
  std::string want = lower(task_name);
  if (want == "sst2") want = "sst-2";
  if (want == "stsb") want = "sts-b";
  if (want == "generic") return std::make_unique<GenericProcessor>(options);
  for (TsvTask& t : glue_tasks())
    if (lower(t.name) == want) return std::make_unique<TsvTaskProcessor>(std::move(t));
  BERTRAIN_CHECK(false, "unknown task_name '", task_name, "' (expected one of: ", join(glue_task_names(), ", "), ")");
  return nullptr;
}

std::vector<std::string> split_tsv_line(std::string_view line) {
  std::vector<std::string> fields;
  std::size_t pos = 0;
  while (true) {
    const std::size_t tab = line.find('\t', pos);
    if (tab == std::string_view::npos) {
      fields.emplace_back(line.substr(pos));
      return fields;
    }
    fields.emplace_back(line.substr(pos, tab - pos));
    pos = tab + 1;
  }
}

std::vector<std::vector<std::string>> read_tsv(const std::string& path) {
  const std::string text = read_text_file(path);
  std::vector<std::vector<std::string>> rows;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::string_view line(text.data() + pos, nl - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    // Python's csv yields [] for an empty line, so does bertrain (a layout then reports 0 columns).
    rows.push_back(line.empty() ? std::vector<std::string>{} : split_tsv_line(line));
    pos = nl + 1;
  }
  return rows;
}

std::vector<CsvRecord> read_csv(const std::string& path) {
  const std::string text = read_text_file(path);
  std::vector<CsvRecord> records;
  const std::size_t n = text.size();
  std::size_t i = 0;
  int64_t line = 1;
  while (i < n) {
    // Skip blank lines ("\n" or "\r\n" alone).
    if (text[i] == '\n') {
      ++i, ++line;
      continue;
    }
    if (text[i] == '\r' && i + 1 < n && text[i + 1] == '\n') {
      i += 2, ++line;
      continue;
    }
    CsvRecord rec;
    rec.line = line;
    std::string field;
    while (true) {
      if (i < n && text[i] == '"') {  // quoted field
        const int64_t open_line = line;
        ++i;
        while (true) {
          BERTRAIN_CHECK(i < n, path, ":", open_line, ": quoted field never closes (missing '\"')");
          if (text[i] == '"') {
            if (i + 1 < n && text[i + 1] == '"') {
              field += '"';
              i += 2;
              continue;
            }
            ++i;
            break;
          }
          if (text[i] == '\n') ++line;
          field += text[i++];
        }
        const bool at_end = i >= n || text[i] == ',' || text[i] == '\n' ||
                            (text[i] == '\r' && (i + 1 >= n || text[i + 1] == '\n'));
        BERTRAIN_CHECK(at_end, path, ":", line, ": unexpected character '", printable(std::string_view(&text[i], 1)),
                       "' after a closing quote (a quote inside a quoted field is written \"\")");
      } else {  // unquoted field: up to ',' or the end of the line; quotes are literal
        while (i < n && text[i] != ',' && text[i] != '\n' &&
               !(text[i] == '\r' && (i + 1 >= n || text[i + 1] == '\n')))
          field += text[i++];
      }
      rec.fields.push_back(std::move(field));
      field.clear();
      if (i < n && text[i] == ',') {
        ++i;
        continue;
      }
      // End of record: "\r\n", "\n" or end of file.
      if (i < n && text[i] == '\r') ++i;
      if (i < n && text[i] == '\n') ++i, ++line;
      break;
    }
    records.push_back(std::move(rec));
  }
  return records;
}

namespace {

std::string where(const InputExample& ex) {
  std::ostringstream os;
  if (!ex.source.empty()) os << ex.source << ":" << ex.line << ": ";
  os << "example '" << ex.guid << "'";
  return os.str();
}

ClassifierFeatures convert_impl(const InputExample& example, const std::vector<std::string>& labels,
                                const std::unordered_map<std::string, int32_t>* label_map, bool is_regression,
                                int max_seq_length, const text::FullTokenizer& tokenizer) {
  BERTRAIN_CHECK(max_seq_length >= 3, "max_seq_length must be at least 3 ([CLS] a [SEP] b [SEP] needs 3 slots), got ",
                 max_seq_length);
  const text::Vocab& vocab = tokenizer.vocab();
  const int32_t cls = vocab.id(text::Vocab::kCls), sep = vocab.id(text::Vocab::kSep);
  BERTRAIN_CHECK(cls >= 0 && sep >= 0, "vocab '", vocab.source(), "' has no ", cls < 0 ? "[CLS]" : "[SEP]",
                 " token: classification inputs need [CLS] and [SEP]");

  ClassifierFeatures f;
  if (example.label) {
    f.has_label = true;
    if (is_regression) {
      double v;
      BERTRAIN_CHECK(parse_finite_float(*example.label, v), where(example), ": regression label '", printable(*example.label),
                     "' is not a finite number");
      f.label_value = static_cast<float>(v);
    } else {
      int32_t id = -1;
      if (label_map) {
        const auto it = label_map->find(*example.label);
        if (it != label_map->end()) id = it->second;
      } else {
        const auto it = std::find(labels.begin(), labels.end(), *example.label);
        if (it != labels.end()) id = static_cast<int32_t>(it - labels.begin());
      }
      BERTRAIN_CHECK(id >= 0, where(example), ": unknown label '", printable(*example.label), "' (expected one of: ",
                     join(labels, ", "), ")");
      f.label_id = id;
    }
  }

  std::vector<std::string> tokens_a, tokens_b;
  try {
    tokens_a = tokenizer.tokenize(example.text_a);
    if (example.text_b && !example.text_b->empty()) tokens_b = tokenizer.tokenize(*example.text_b);
  } catch (const Error& e) {
    BERTRAIN_CHECK(false, where(example), ": ", e.what());
  }
  const std::size_t before = tokens_a.size() + tokens_b.size();
  const bool pair = !tokens_b.empty();
  if (pair) {
    // [CLS], [SEP], [SEP]
    data::truncate_seq_pair_back(tokens_a, tokens_b, static_cast<std::size_t>(max_seq_length - 3));
  } else if (tokens_a.size() > static_cast<std::size_t>(max_seq_length - 2)) {
    tokens_a.resize(static_cast<std::size_t>(max_seq_length - 2));  // [CLS], [SEP]
  }
  f.truncated = tokens_a.size() + tokens_b.size() < before;

  const auto T = static_cast<std::size_t>(max_seq_length);
  f.input_ids.reserve(T);
  f.segment_ids.reserve(T);
  f.input_ids.push_back(cls);
  f.segment_ids.push_back(0);
  for (int32_t id : tokenizer.convert_tokens_to_ids(tokens_a)) {
    f.input_ids.push_back(id);
    f.segment_ids.push_back(0);
  }
  f.input_ids.push_back(sep);
  f.segment_ids.push_back(0);
  if (pair) {
    for (int32_t id : tokenizer.convert_tokens_to_ids(tokens_b)) {
      f.input_ids.push_back(id);
      f.segment_ids.push_back(1);
    }
    f.input_ids.push_back(sep);
    f.segment_ids.push_back(1);
  }
  f.num_tokens = static_cast<int32_t>(f.input_ids.size());
  BERTRAIN_ASSERT(f.input_ids.size() <= T);
  f.input_mask.assign(f.input_ids.size(), 1);
  f.input_ids.resize(T, 0);
  f.input_mask.resize(T, 0);
  f.segment_ids.resize(T, 0);
  return f;
}

}  // namespace

ClassifierFeatures convert_single_example(const InputExample& example, const std::vector<std::string>& labels,
                                          bool is_regression, int max_seq_length, const text::FullTokenizer& tokenizer) {
  return convert_impl(example, labels, nullptr, is_regression, max_seq_length, tokenizer);
}

std::vector<ClassifierFeatures> convert_examples_to_features(std::span<const InputExample> examples,
                                                             const GlueProcessor& processor, int max_seq_length,
                                                             const text::FullTokenizer& tokenizer) {
  std::unordered_map<std::string, int32_t> label_map;
  for (std::size_t i = 0; i < processor.labels().size(); ++i)
    label_map.emplace(processor.labels()[i], static_cast<int32_t>(i));
  std::vector<ClassifierFeatures> out;
  out.reserve(examples.size());
  for (const InputExample& ex : examples)
    out.push_back(
        convert_impl(ex, processor.labels(), &label_map, processor.is_regression(), max_seq_length, tokenizer));
  return out;
}

ClassifierBatch make_classifier_batch(std::span<const ClassifierFeatures> features, std::span<const int64_t> indices,
                                      bool is_regression, const tasks::PaddingOptions& padding) {
  BERTRAIN_CHECK(!indices.empty(), "make_classifier_batch: empty batch");
  for (int64_t i : indices)
    BERTRAIN_CHECK(i >= 0 && i < static_cast<int64_t>(features.size()), "make_classifier_batch: index ", i,
                   " outside [0, ", features.size(), ")");
  const auto B = static_cast<int64_t>(indices.size());
  const auto max_len = static_cast<int64_t>(features[indices[0]].input_ids.size());
  BERTRAIN_CHECK(max_len > 0, "make_classifier_batch: features of length 0");
  // The longest example by its mask (the last real token), so hand-made features without num_tokens pad right.
  int64_t longest = 1;
  for (int64_t i : indices) longest = std::max<int64_t>(longest, tasks::real_length(features[i].input_mask));
  longest = std::min(longest, max_len);
  const int64_t T = tasks::batch_seq_length(longest, max_len, padding);
  ClassifierBatch b;
  b.input_ids = Tensor::empty({B, T}, DType::i32);
  b.input_mask = Tensor::empty({B, T}, DType::i32);
  b.segment_ids = Tensor::empty({B, T}, DType::i32);
  b.labels = Tensor::empty({B}, is_regression ? DType::f32 : DType::i32);
  int32_t* ids = b.input_ids.data<int32_t>();
  int32_t* mask = b.input_mask.data<int32_t>();
  int32_t* seg = b.segment_ids.data<int32_t>();
  for (int64_t r = 0; r < B; ++r) {
    const ClassifierFeatures& f = features[indices[r]];
    BERTRAIN_CHECK(static_cast<int64_t>(f.input_ids.size()) == max_len &&
                       static_cast<int64_t>(f.input_mask.size()) == max_len &&
                       static_cast<int64_t>(f.segment_ids.size()) == max_len,
                   "make_classifier_batch: feature ", indices[r], " has length ", f.input_ids.size(), ", expected ",
                   max_len, " (all features must share one max_seq_length)");
    std::copy(f.input_ids.begin(), f.input_ids.begin() + T, ids + r * T);
    std::copy(f.input_mask.begin(), f.input_mask.begin() + T, mask + r * T);
    std::copy(f.segment_ids.begin(), f.segment_ids.begin() + T, seg + r * T);
    if (is_regression)
      b.labels.data<float>()[r] = f.label_value;
    else
      b.labels.data<int32_t>()[r] = f.label_id;
  }
  return b;
}

ClassifierBatch make_classifier_batch(std::span<const ClassifierFeatures> features, int64_t begin, int64_t end,
                                      bool is_regression, const tasks::PaddingOptions& padding) {
  BERTRAIN_CHECK(begin >= 0 && begin < end && end <= static_cast<int64_t>(features.size()),
                 "make_classifier_batch: range [", begin, ", ", end, ") not inside [0, ", features.size(), ")");
  std::vector<int64_t> idx;
  for (int64_t i = begin; i < end; ++i) idx.push_back(i);
  return make_classifier_batch(features, idx, is_regression, padding);
}

}  // namespace bertrain::glue
