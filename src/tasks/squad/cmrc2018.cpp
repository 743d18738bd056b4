// cmrc2018.cpp: the CMRC 2018 evaluation script (v6) and the part of NLTK's word tokenizer it relies on.
#include "bertrain/tasks/squad/cmrc2018.h"

// GCC 12 at -O1 (the sanitizer build) reports -Wmaybe-uninitialized inside libstdc++'s std::regex compiler (a
// std::function in a moved-from _State, GCC bug 105562): code of the standard library, not of this file.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ == 12
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <algorithm>
#include <cstdio>
#include <regex>

#include "bertrain/core/error.h"
#include "bertrain/text/unicode.h"
#include "bertrain/text/utf8.h"

namespace bertrain::squad {

namespace {

// The script's sp_char, as code points ("……" is one two-character entry: `char in sp_char` never matches it).
bool is_sp_char(char32_t c) {
  static constexpr char32_t kMarks[] = {U'-', U':', U'_', U'*', U'^', U'/', U'\\', U'~', U'`', U'+', U'=',
                                        U'，', U'。', U'：', U'？', U'！', U'“', U'”', U'；', U'’', U'《', U'》',
                                        U'·', U'、', U'「', U'」', U'（', U'）', U'－', U'～', U'『', U'』'};
  return std::find(std::begin(kMarks), std::end(kMarks), c) != std::end(kMarks);
}

// Python str.lower().strip() as code points.
std::vector<char32_t> lower_strip(std::string_view s) {
  std::vector<char32_t> cps, low;
  text::utf8_decode_append(s, cps);
  text::unicode::python_lower_append(cps.data(), cps.size(), low);
  size_t b = 0, e = low.size();
  while (b < e && text::unicode::is_python_space(low[b])) ++b;
  while (e > b && text::unicode::is_python_space(low[e - 1])) --e;
  return std::vector<char32_t>(low.begin() + static_cast<std::ptrdiff_t>(b), low.begin() + static_cast<std::ptrdiff_t>(e));
}

std::string encode(const std::vector<char32_t>& cps) {
  std::string out;
  for (char32_t c : cps) text::utf8_append(out, c);
  return out;
}

// One NLTK substitution: Python's re.sub(pattern, replacement) on the (UTF-8) text. The patterns below only
// ever match ASCII characters, so running them on bytes is the same as on code points.
struct Rule {
  std::regex re;
  std::string fmt;
};
Rule rule(const char* pattern, const char* fmt, bool icase = false) {
  return {std::regex(pattern, icase ? std::regex::ECMAScript | std::regex::icase : std::regex::ECMAScript), fmt};
}

}  // namespace

std::vector<std::string> nltk_word_tokenize(std::string_view s) {
  // NLTKWordTokenizer.tokenize (nltk/tokenize/destructive.py), in its order; $1 etc. are the groups.
  static const std::vector<Rule> starting_quotes = {
      rule("(\xC2\xAB|\xE2\x80\x9C|\xE2\x80\x98|\xE2\x80\x9E|`+)", " $1 "),  // « “ ‘ „ and backticks
      rule("^\"", "``"),
      rule("(``)", " $1 "),
      rule("([ \\(\\[{<])(\"|'{2})", "$1 `` "),
      rule("(')(?!re|ve|ll|m|t|s|d|n)(\\w)\\b", "$1 $2", true),
  };
  static const std::vector<Rule> punctuation = {
      rule("([^\\.])(\\.)([\\]\\)}>\"']*)\\s*$", "$1 $2 $3 "),
      rule("([:,])([^\\d])", " $1 $2"),
      rule("([:,])$", " $1 "),
      rule("\\.{2,}", " $& "),
      rule("[;@#$%&]", " $& "),
      rule("([^\\.])(\\.)([\\]\\)}>\"']*)\\s*$", "$1 $2$3 "),
      rule("[?!]", " $& "),
      rule("([^'])' ", "$1 ' "),
      rule("[*]", " $& "),
      rule("[\\]\\[\\(\\)\\{\\}<>]", " $& "),
      rule("--", " -- "),
  };
  static const std::vector<Rule> ending_quotes = {
      rule("(\xC2\xBB|\xE2\x80\x9D|\xE2\x80\x99)", " $1 "),  // » ” ’
      rule("''", " '' "),
      rule("\"", " '' "),
      rule("([^' ])('[sS]|'[mM]|'[dD]|') ", "$1 $2 "),
      rule("([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) ", "$1 $2 "),
      rule("\\b(can)(not)\\b", " $1 $2 ", true),
      rule("\\b(d)('ye)\\b", " $1 $2 ", true),
      rule("\\b(gim)(me)\\b", " $1 $2 ", true),
      rule("\\b(gon)(na)\\b", " $1 $2 ", true),
      rule("\\b(got)(ta)\\b", " $1 $2 ", true),
      rule("\\b(lem)(me)\\b", " $1 $2 ", true),
      rule("\\b(more)('n)\\b", " $1 $2 ", true),
      rule("\\b(wan)(na)(?=\\s)", " $1 $2 ", true),
      rule("('t)(is)\\b", " $1 $2 ", true),
      rule("('t)(was)\\b", " $1 $2 ", true),
  };
  std::string t(s);
  for (const Rule& r : starting_quotes) t = std::regex_replace(t, r.re, r.fmt);
  for (const Rule& r : punctuation) t = std::regex_replace(t, r.re, r.fmt);
  t = " " + t + " ";
  for (const Rule& r : ending_quotes) t = std::regex_replace(t, r.re, r.fmt);
  // str.split(): runs of (Python) whitespace.
  std::vector<char32_t> cps;
  text::utf8_decode_append(t, cps);
  std::vector<std::string> out;
  std::string cur;
  for (char32_t c : cps) {
    if (text::unicode::is_python_space(c)) {
      if (!cur.empty()) out.push_back(std::move(cur));
      cur.clear();
    } else {
      text::utf8_append(cur, c);
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

std::vector<std::string> cmrc_mixed_segmentation(std::string_view s, bool rm_punc) {
  const std::vector<char32_t> in = lower_strip(s);
  std::vector<std::string> segs;
  std::vector<char32_t> temp;
  auto flush = [&] {
    if (temp.empty()) return;
    for (auto& w : nltk_word_tokenize(encode(temp))) segs.push_back(std::move(w));
    temp.clear();
  };
  for (char32_t c : in) {
    const bool sp = is_sp_char(c);
    if (rm_punc && sp) continue;
    if ((c >= 0x4E00 && c <= 0x9FA5) || sp) {
      flush();
      segs.push_back(encode({c}));
    } else {
      temp.push_back(c);
    }
  }
  flush();
  return segs;
}

std::string cmrc_remove_punctuation(std::string_view s) {
  std::vector<char32_t> kept;
  for (char32_t c : lower_strip(s))
    if (!is_sp_char(c)) kept.push_back(c);
  return encode(kept);
}

double cmrc_f1_score(const std::vector<std::string>& answers, std::string_view prediction) {
  BERTRAIN_CHECK(!answers.empty(), "CMRC 2018 F1: a question without gold answers cannot be scored");
  const std::vector<std::string> pred = cmrc_mixed_segmentation(prediction, true);
  double best = 0;
  for (const std::string& ans : answers) {
    const std::vector<std::string> gold = cmrc_mixed_segmentation(ans, true);
    // find_lcs: the longest common contiguous run, by dynamic programming over (answer, prediction) prefixes.
    size_t lcs = 0;
    std::vector<size_t> prev(pred.size() + 1, 0), cur(pred.size() + 1, 0);
    for (size_t i = 0; i < gold.size(); ++i) {
      for (size_t j = 0; j < pred.size(); ++j) {
        cur[j + 1] = gold[i] == pred[j] ? prev[j] + 1 : 0;
        lcs = std::max(lcs, cur[j + 1]);
      }
      std::swap(prev, cur);
    }
    if (lcs == 0) continue;
    const double p = static_cast<double>(lcs) / static_cast<double>(pred.size());
    const double r = static_cast<double>(lcs) / static_cast<double>(gold.size());
    best = std::max(best, 2 * p * r / (p + r));
  }
  return best;
}

int cmrc_em_score(const std::vector<std::string>& answers, std::string_view prediction) {
  const std::string p = cmrc_remove_punctuation(prediction);
  for (const std::string& a : answers)
    if (cmrc_remove_punctuation(a) == p) return 1;
  return 0;
}

std::string CmrcEval::to_json(const std::string& prediction_file) const {
  char buf[256];
  std::snprintf(buf, sizeof buf, "{\"AVERAGE\": \"%.3f\", \"F1\": \"%.3f\", \"EM\": \"%.3f\", \"TOTAL\": %lld, \"SKIP\": %lld, ",
                (em + f1) * 0.5, f1, em, static_cast<long long>(total), static_cast<long long>(skip));
  // json.dumps of the file name (ASCII-escaped, as ensure_ascii=True).
  std::string file = "\"";
  std::vector<char32_t> cps;
  text::utf8_decode_append(prediction_file, cps);
  for (char32_t c : cps) {
    char e[16];
    if (c == '"' || c == '\\') {
      file += '\\';
      file += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7F) {
      file += static_cast<char>(c);
    } else if (c < 0x10000) {
      std::snprintf(e, sizeof e, "\\u%04x", static_cast<unsigned>(c));
      file += e;
    } else {
      const unsigned v = static_cast<unsigned>(c) - 0x10000;
      std::snprintf(e, sizeof e, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
      file += e;
    }
  }
  return std::string(buf) + "\"FILE\": " + file + "\"}";
}

CmrcEval evaluate_cmrc2018(const SquadGold& gold, const std::unordered_map<std::string, std::string>& predictions) {
  BERTRAIN_CHECK(!gold.questions.empty(), "CMRC 2018 evaluation: the data file has no questions");
  CmrcEval r;
  double f1 = 0, em = 0;
  for (const SquadGoldQuestion& q : gold.questions) {
    ++r.total;
    auto it = predictions.find(q.id);
    if (it == predictions.end()) {
      ++r.skip;
      r.unanswered.push_back(q.id);
      continue;
    }
    BERTRAIN_CHECK(!q.answers.empty(), "CMRC 2018 evaluation: question '", q.id, "' has no gold answer");
    f1 += cmrc_f1_score(q.answers, it->second);
    em += cmrc_em_score(q.answers, it->second);
  }
  r.f1 = 100.0 * f1 / static_cast<double>(r.total);
  r.em = 100.0 * em / static_cast<double>(r.total);
  return r;
}

}  // namespace bertrain::squad
