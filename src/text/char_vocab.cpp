// char_vocab.cpp: character counts over BasicTokenizer tokens, written as a bert-base-chinese-style vocab.txt.
#include "bertrain/text/char_vocab.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "bertrain/core/error.h"
#include "bertrain/text/tokenizer.h"
#include "bertrain/text/utf8.h"

namespace bertrain::text {

CharVocabResult build_char_vocab(const CharVocabOptions& o) {
  BERTRAIN_CHECK(o.vocab_size >= 6, "build-vocab: vocab_size must be at least 6 (5 special tokens + 1), got ",
                 o.vocab_size);
  BERTRAIN_CHECK(!o.input_files.empty(), "build-vocab: no input files");
  const BasicTokenizer basic(o.do_lower_case);
  std::unordered_map<char32_t, int64_t> initial, continuation;
  CharVocabResult r;
  int64_t total_chars = 0;
  std::vector<char32_t> cps;
  for (const std::string& path : o.input_files) {
    std::ifstream in(path, std::ios::binary);
    BERTRAIN_CHECK(in.good(), "build-vocab: cannot open '", path, "'");
    std::string line;
    while (std::getline(in, line)) {
      ++r.lines;
      if (!utf8_is_valid(line)) {
        ++r.invalid_utf8_lines;
        continue;
      }
      basic.tokenize(line, [&](std::string_view tok) {
        cps.clear();
        utf8_decode_append(tok, cps);
        for (size_t i = 0; i < cps.size(); ++i) ++(i == 0 ? initial : continuation)[cps[i]];
        total_chars += static_cast<int64_t>(cps.size());
      });
    }
  }
  BERTRAIN_CHECK(total_chars > 0, "build-vocab: no text in the input files");
  auto sorted = [&](const std::unordered_map<char32_t, int64_t>& m) {
    std::vector<std::pair<char32_t, int64_t>> v;
    for (const auto& kv : m)
      if (kv.second >= o.min_count) v.push_back(kv);
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
    return v;
  };
  std::vector<std::string> tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  int64_t covered = 0;
  std::unordered_map<char32_t, bool> have_initial;
  for (const auto& [c, n] : sorted(initial)) {
    if (static_cast<int64_t>(tokens.size()) >= o.vocab_size) break;
    std::string s;
    utf8_append(s, c);
    tokens.push_back(s);
    have_initial[c] = true;
    covered += n;
    ++r.characters;
  }
  for (const auto& [c, n] : sorted(continuation)) {
    if (static_cast<int64_t>(tokens.size()) >= o.vocab_size) break;
    std::string s = "##";
    utf8_append(s, c);
    tokens.push_back(s);
    covered += n;
    ++r.continuations;
  }
  std::ostringstream out;
  for (const auto& t : tokens) out << t << '\n';
  std::ofstream f(o.output_file, std::ios::binary);
  BERTRAIN_CHECK(f.good(), "build-vocab: cannot write '", o.output_file, "'");
  f << out.str();
  f.close();
  BERTRAIN_CHECK(f.good(), "build-vocab: error writing '", o.output_file, "'");
  r.vocab_size = static_cast<int64_t>(tokens.size());
  r.coverage = static_cast<double>(covered) / static_cast<double>(total_chars);
  return r;
}

}  // namespace bertrain::text
