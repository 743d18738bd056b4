// checkpoint_files.cpp: a checkpoint's own description (see checkpoint_files.h).
#include "bertrain/io/checkpoint_files.h"

#include <algorithm>
#include <array>
#include <sstream>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "bertrain/core/error.h"
#include "bertrain/core/json_limits.h"
#include "bertrain/io/checkpoint.h"
#include "bertrain/io/config.h"
#include "io/file_util.h"

namespace bertrain {

namespace fs = std::filesystem;

std::string CheckpointFiles::architecture() const {
  return config.architecture.empty() ? std::string(kArchPreTraining) : config.architecture;
}

namespace {

// google-research/bert tokenization.validate_case_matches_checkpoint's two lists.
std::optional<bool> google_model_lower_case(const std::string& model_name) {
  static const std::array<const char*, 4> lower = {"uncased_L-24_H-1024_A-16", "uncased_L-12_H-768_A-12",
                                                   "multilingual_L-12_H-768_A-12", "chinese_L-12_H-768_A-12"};
  static const std::array<const char*, 3> cased = {"cased_L-12_H-768_A-12", "cased_L-24_H-1024_A-16",
                                                   "multi_cased_L-12_H-768_A-12"};
  for (const char* m : lower)
    if (model_name == m) return true;
  for (const char* m : cased)
    if (model_name == m) return false;
  return std::nullopt;
}

/// Casing read off a vocabulary: no token with an upper-case letter (special tokens in brackets aside) means an
/// uncased model (true); upper-case letters in at least 1% of the tokens, a cased one (false; bert-base-cased: 28%);
/// anything between (bert-base-chinese: 2 of 21,128) says nothing.
std::optional<bool> vocab_lower_case(const std::string& vocab_file) {
  std::istringstream in(read_text_file(vocab_file));
  int64_t tokens = 0, upper = 0;
  for (std::string t; std::getline(in, t);) {
    if (!t.empty() && t.back() == '\r') t.pop_back();
    if (t.empty() || (t.front() == '[' && t.back() == ']')) continue;
    ++tokens;
    upper += std::any_of(t.begin(), t.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
  }
  if (tokens == 0) return std::nullopt;
  if (upper == 0) return true;
  if (upper * 100 >= tokens) return false;
  return std::nullopt;
}

void read_tokenizer_config(const fs::path& path, CheckpointFiles& f) {
  const std::string source = "tokenizer config '" + path.string() + "'";
  const std::string text = read_text_file(path.string());
  check_json_depth(text, source);
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  BERTRAIN_CHECK(!j.is_discarded() && j.is_object(), source, ": expected a JSON object");
  auto boolean = [&](const char* key, std::optional<bool>& out) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return;
    BERTRAIN_CHECK(it->is_boolean(), source, ": \"", key, "\" must be true or false, got ", it->dump());
    out = it->get<bool>();
  };
  boolean("do_lower_case", f.do_lower_case);
  if (f.do_lower_case) f.do_lower_case_source = path.string();
  boolean("tokenize_chinese_chars", f.tokenize_chinese_chars);
  if (auto it = j.find("model_max_length"); it != j.end() && !it->is_null()) {
    // transformers writes int(1e30) (VERY_LARGE_INTEGER) for "no limit": a float in JSON terms when it overflows.
    BERTRAIN_CHECK(it->is_number(), source, ": \"model_max_length\" must be a number, got ", it->dump());
    const double v = it->get<double>();
    if (v >= 1 && v <= static_cast<double>(f.config.max_position_embeddings)) f.model_max_length = static_cast<int64_t>(v);
  }
}

}  // namespace

CheckpointFiles read_checkpoint_files(const std::string& checkpoint, const std::string& config_file) {
  std::error_code ec;
  CheckpointFiles f;
  f.checkpoint = checkpoint;
  BERTRAIN_CHECK(!checkpoint.empty(), "no checkpoint given");
  const bool is_dir = fs::is_directory(checkpoint, ec);
  const bool is_tf_prefix = !is_dir && fs::exists(checkpoint + ".index", ec);
  BERTRAIN_CHECK(is_dir || is_tf_prefix || fs::exists(checkpoint, ec), "checkpoint '", checkpoint,
                 "' does not exist (expected a checkpoint directory, a .safetensors file or a TF checkpoint prefix)");
  fs::path dir = is_dir ? fs::path(checkpoint) : fs::path(checkpoint).parent_path();
  if (dir.empty()) dir = ".";
  f.dir = dir.string();
  f.config_file = config_file.empty() ? default_config_file(checkpoint) : config_file;
  f.config = load_bert_config(f.config_file);
  if (fs::is_regular_file(dir / "vocab.txt", ec)) f.vocab_file = (dir / "vocab.txt").string();
  f.written_by_bertrain = is_dir && fs::is_regular_file(dir / "trainer_state.json", ec);
  if (fs::is_regular_file(dir / "tokenizer_config.json", ec)) read_tokenizer_config(dir / "tokenizer_config.json", f);
  if (!f.do_lower_case) {
    // google-research/bert's convention: the model's name is the directory holding bert_model.ckpt.
    fs::path d = fs::absolute(dir, ec).lexically_normal();
    if (d.filename().empty()) d = d.parent_path();
    const std::string name = d.filename().string();
    if (auto lower = google_model_lower_case(name)) {
      f.do_lower_case = lower;
      f.do_lower_case_source = "the model name " + name + " (google-research/bert's convention)";
    }
  }
  if (!f.do_lower_case && !f.vocab_file.empty()) {
    if (auto lower = vocab_lower_case(f.vocab_file)) {
      f.do_lower_case = lower;
      f.do_lower_case_source = "its vocabulary " + f.vocab_file + (*lower ? " (no upper-case tokens: uncased)"
                                                                         : " (upper-case tokens: cased)");
    }
  }
  return f;
}

bool same_file_contents(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (fs::equivalent(a, b, ec)) return true;
  return read_text_file(a) == read_text_file(b);
}

}  // namespace bertrain
