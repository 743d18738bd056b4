// predict.cpp: `bertrain predict` over a file (see predict.h).
#include "bertrain/tasks/predict.h"

#include <spdlog/spdlog.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "bertrain/core/error.h"
#include "bertrain/io/atomic_file.h"
#include "bertrain/text/utf8.h"

namespace bertrain::tasks {

namespace {

using nlohmann::ordered_json;

struct Line {
  std::string text;
  std::optional<std::string> text_pair, question, context;
  std::optional<ordered_json> id;
};

std::string field(const nlohmann::json& j, const char* key, const std::string& where) {
  const auto it = j.find(key);
  BERTRAIN_CHECK(it != j.end(), where, ": no \"", key, "\" field");
  BERTRAIN_CHECK(it->is_string(), where, ": \"", key, "\" must be a string, got ", it->dump());
  return it->get<std::string>();
}

std::vector<Line> read_lines(std::istream& in, const std::string& source, const std::string& task) {
  std::vector<Line> out;
  std::string s;
  for (int64_t n = 1; std::getline(in, s); ++n) {
    if (!s.empty() && s.back() == '\r') s.pop_back();
    const std::string where = source + ":" + std::to_string(n);
    const size_t bad = text::utf8_invalid_offset(s);
    BERTRAIN_CHECK(bad == std::string::npos, where, ": not valid UTF-8 (byte ", bad, ")");
    Line l;
    const size_t first = s.find_first_not_of(" \t");
    if (first != std::string::npos && s[first] == '{') {
      const nlohmann::json j = nlohmann::json::parse(s, nullptr, /*allow_exceptions=*/false);
      BERTRAIN_CHECK(!j.is_discarded() && j.is_object(), where, ": a line starting with '{' must be a JSON object");
      if (j.contains("id")) l.id = ordered_json::parse(j["id"].dump());
      if (task == "question-answering") {
        l.question = field(j, "question", where);
        l.context = field(j, "context", where);
      } else {
        l.text = field(j, "text", where);
        if (j.contains("text_pair") && !j["text_pair"].is_null()) l.text_pair = field(j, "text_pair", where);
      }
    } else {
      BERTRAIN_CHECK(task != "question-answering", where,
                     ": question answering reads JSON lines {\"question\": ..., \"context\": ...}");
      const size_t sep = s.rfind(" ||| ");
      if (sep != std::string::npos && task != "token-classification") {
        l.text = s.substr(0, sep);
        l.text_pair = s.substr(sep + 5);
      } else {
        l.text = s;
      }
    }
    out.push_back(std::move(l));
  }
  return out;
}

ordered_json with_id(const Line& l) {
  ordered_json j = ordered_json::object();
  if (l.id) j["id"] = *l.id;
  return j;
}

std::vector<ordered_json> run(const PredictOptions& o, const std::string& task, const std::vector<Line>& lines) {
  std::vector<ordered_json> out;
  if (task == "text-classification") {
    const auto p = TextClassificationPipeline::load(o.checkpoint, o.pipeline);
    std::vector<TextClassificationPipeline::Input> in;
    for (const Line& l : lines) in.push_back({l.text, l.text_pair});
    const auto res = p(in);
    for (size_t i = 0; i < res.size(); ++i) {
      ordered_json j = with_id(lines[i]);
      if (p.is_regression()) {
        j["score"] = res[i].score;
      } else {
        j["label"] = res[i].label;
        j["score"] = res[i].score;
        ordered_json scores = ordered_json::object();
        for (size_t k = 0; k < p.labels().size(); ++k) scores[p.labels()[k]] = res[i].scores[k];
        j["scores"] = std::move(scores);
      }
      out.push_back(std::move(j));
    }
  } else if (task == "token-classification") {
    const auto p = TokenClassificationPipeline::load(o.checkpoint, o.pipeline);
    std::vector<std::string> in;
    for (const Line& l : lines) in.push_back(l.text);
    for (size_t i = 0; const auto& r : p(in)) {
      ordered_json j = with_id(lines[i++]), ents = ordered_json::array(), words = ordered_json::array();
      for (const auto& e : r.entities)
        ents.push_back({{"entity_group", e.entity_group}, {"score", e.score}, {"word", e.word}, {"start", e.start},
                        {"end", e.end}});
      for (const auto& w : r.words)
        words.push_back({{"word", w.word}, {"label", w.label}, {"score", w.score}, {"start", w.start}, {"end", w.end}});
      j["entities"] = std::move(ents);
      j["words"] = std::move(words);
      out.push_back(std::move(j));
    }
  } else if (task == "question-answering") {
    const auto p = QuestionAnsweringPipeline::load(o.checkpoint, o.pipeline);
    std::vector<QuestionAnsweringPipeline::Input> in;
    for (const Line& l : lines) in.push_back({*l.question, *l.context});
    for (size_t i = 0; const auto& r : p(in)) {
      ordered_json j = with_id(lines[i++]);
      j["answer"] = r.answer;
      j["score"] = r.score;
      j["start"] = r.start;
      j["end"] = r.end;
      out.push_back(std::move(j));
    }
  } else if (task == "feature-extraction") {
    const auto p = FeatureExtractionPipeline::load(o.checkpoint, o.pipeline, o.pooling, o.layers);
    std::vector<FeatureExtractionPipeline::Input> in;
    for (const Line& l : lines) in.push_back({l.text, l.text_pair});
    for (size_t i = 0; const auto& v : p(in)) {
      ordered_json j = with_id(lines[i++]);
      j["values"] = v;
      out.push_back(std::move(j));
    }
  } else {
    throw Error("predict: unknown task '" + task +
                "' (expected text-classification, token-classification, question-answering or feature-extraction)");
  }
  return out;
}

}  // namespace

PredictSummary predict_file(const PredictOptions& o) {
  BERTRAIN_CHECK(!o.checkpoint.empty(), "predict: --checkpoint is required");
  BERTRAIN_CHECK(!o.input_file.empty(), "predict: --input is required");
  PredictSummary sum;
  sum.task = o.task.empty() ? pipeline_task(o.checkpoint) : o.task;
  std::vector<Line> lines;
  if (o.input_file == "-") {
    lines = read_lines(std::cin, "<stdin>", sum.task);
  } else {
    std::ifstream in(o.input_file, std::ios::binary);
    BERTRAIN_CHECK(in.good(), "predict: cannot open input file '", o.input_file, "'");
    lines = read_lines(in, o.input_file, sum.task);
  }
  const std::vector<ordered_json> results = run(o, sum.task, lines);
  std::string text;
  for (const auto& j : results) text += j.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict) + "\n";
  sum.lines = static_cast<int64_t>(results.size());
  if (o.output_file.empty() || o.output_file == "-") {
    std::cout << text << std::flush;
    sum.output = "<stdout>";
  } else {
    write_text_atomic(o.output_file, text);
    sum.output = o.output_file;
  }
  return sum;
}

}  // namespace bertrain::tasks
