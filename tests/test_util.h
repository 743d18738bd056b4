// test_util.h: helpers and fixtures shared by the test suites (files, temporary directories, a tiny BERT config).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "bertrain/models/bert_config.h"

namespace bertrain::test {

/// A small BertConfig for tests (the other keys keep BertConfig's defaults: gelu, dropout 0.1, 2 token types).
inline BertConfig tiny_bert_config(int64_t vocab_size, int64_t hidden_size, int64_t num_hidden_layers,
                                   int64_t num_attention_heads, int64_t intermediate_size,
                                   int64_t max_position_embeddings) {
  BertConfig c;
  c.vocab_size = vocab_size;
  c.hidden_size = hidden_size;
  c.num_hidden_layers = num_hidden_layers;
  c.num_attention_heads = num_attention_heads;
  c.intermediate_size = intermediate_size;
  c.max_position_embeddings = max_position_embeddings;
  return c;
}

/// Whether the gradient of parameter `name` of a BERT model with `num_layers` layers is 0 in exact arithmetic, so
/// that its computed value is rounding noise (of the order of eps times the terms summed) which any change of
/// summation order changes: the key biases' (softmax does not change when a constant is added to all scores) and,
/// under question answering's softmax over positions (whose gradient sums to 0 over each sequence), the
/// qa_outputs bias and the last layer's output LayerNorm bias (sums over positions of that gradient). Tests that
/// compare two computations hold these to 1e-5 of the model's largest gradient element instead of their own.
inline bool gradient_zero_in_exact_arithmetic(const std::string& name, int64_t num_layers, bool qa_loss) {
  const std::string key_bias = "attention.self.key.bias";
  if (name.size() >= key_bias.size() && name.compare(name.size() - key_bias.size(), key_bias.size(), key_bias) == 0)
    return true;
  return qa_loss && (name == "qa_outputs.bias" ||
                     name == "bert.encoder.layer." + std::to_string(num_layers - 1) + ".output.LayerNorm.bias");
}

/// The bytes of `path` (a failed open is a test failure).
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Lines split at '\n' (no trailing empty line).
inline std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    lines.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return lines;
}

namespace detail {
/// The directories temp_dir made in this process; removed when the process exits normally (static destruction),
/// unless BERTRAIN_KEEP_TEST_DIRS=1 (to look at a failing test's files). Only the process that made a directory
/// removes it: a forked child (a death test that calls exit) carries a copy of the list and must not.
struct TempDirRegistry {
  std::vector<std::filesystem::path> dirs;
  pid_t owner = ::getpid();
  ~TempDirRegistry() {
    const char* keep = std::getenv("BERTRAIN_KEEP_TEST_DIRS");
    if ((keep != nullptr && std::string(keep) == "1") || ::getpid() != owner) return;
    for (const auto& d : dirs) {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
    }
  }
};
inline TempDirRegistry& temp_dir_registry() {
  static TempDirRegistry registry;
  return registry;
}
}  // namespace detail

/// A per-process temporary directory named after the suite: <tmp>/bertrain_<suite>_<pid>, created if missing and
/// removed with its contents when the process exits (kept with BERTRAIN_KEEP_TEST_DIRS=1).
inline std::filesystem::path temp_dir(const std::string& suite) {
  std::filesystem::path d =
      std::filesystem::temp_directory_path() / ("bertrain_" + suite + "_" + std::to_string(::getpid()));
  auto& registry = detail::temp_dir_registry();
  if (std::find(registry.dirs.begin(), registry.dirs.end(), d) == registry.dirs.end()) registry.dirs.push_back(d);
  std::filesystem::create_directories(d);
  return d;
}

inline void write_file(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary);
  out << bytes;
}

}  // namespace bertrain::test
