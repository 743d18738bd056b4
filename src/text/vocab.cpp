// vocab.cpp: loading, validating and saving BERT vocab.txt files.
#include "bertrain/text/vocab.h"

#include <fstream>
#include <sstream>

#include "bertrain/core/error.h"
#include "bertrain/core/sha256.h"
#include "bertrain/text/utf8.h"
#include "bertrain/text/unicode.h"

namespace bertrain::text {
namespace {

// Python's str.strip() with no argument: removes leading and trailing characters for which
// str.isspace() is true. `s` must be well-formed UTF-8.
std::string_view python_strip(std::string_view s) {
  std::vector<char32_t> cps;
  utf8_decode_append(s, cps);
  std::vector<std::size_t> offsets;  // byte offset of each code point, plus the end
  for (std::size_t i = 0; i < s.size(); ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) offsets.push_back(i);
  offsets.push_back(s.size());
  std::size_t b = 0, e = cps.size();
  while (b < e && unicode::is_python_space(cps[b])) ++b;
  while (e > b && unicode::is_python_space(cps[e - 1])) --e;
  return s.substr(offsets[b], offsets[e] - offsets[b]);
}

}  // namespace

Vocab Vocab::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  BERTRAIN_CHECK(in.good(), "vocab file '", path, "': cannot open (missing or unreadable)");
  std::ostringstream buf;
  buf << in.rdbuf();
  BERTRAIN_CHECK(!in.bad(), "vocab file '", path, "': read error");
  return parse(buf.str(), path);
}

Vocab Vocab::parse(std::string_view bytes, const std::string& source) {
  BERTRAIN_CHECK(!bytes.empty(), "vocab file '", source, "' is empty: expected one token per line");
  Vocab v;
  v.source_ = source;
  v.sha256_ = sha256_hex(bytes);
  std::vector<std::size_t> lines;
  std::size_t pos = 0, line_no = 0;
  while (pos < bytes.size()) {
    ++line_no;
    std::size_t nl = bytes.find('\n', pos);
    if (nl == std::string::npos) nl = bytes.size();
    const std::string_view line(bytes.data() + pos, nl - pos);
    const std::size_t bad = utf8_invalid_offset(line);
    BERTRAIN_CHECK(bad == std::string_view::npos, "vocab file '", source, "' line ", line_no,
                   ": not valid UTF-8 (bad byte at column ", bad + 1, ")");
    v.tokens_.emplace_back(python_strip(line));
    lines.push_back(line_no);
    pos = nl + 1;
  }
  v.index(lines);
  return v;
}

Vocab Vocab::from_tokens(std::vector<std::string> tokens, std::string source) {
  Vocab v;
  v.source_ = std::move(source);
  BERTRAIN_CHECK(!tokens.empty(), "vocab '", v.source_, "' is empty: expected at least one token");
  v.tokens_ = std::move(tokens);
  std::string bytes;
  std::vector<std::size_t> lines;
  for (std::size_t i = 0; i < v.tokens_.size(); ++i) {
    BERTRAIN_CHECK(utf8_is_valid(v.tokens_[i]), "vocab '", v.source_, "' token ", i, ": not valid UTF-8");
    bytes += v.tokens_[i];
    bytes += '\n';
    lines.push_back(i + 1);
  }
  v.sha256_ = sha256_hex(bytes);
  v.index(lines);
  return v;
}

void Vocab::index(const std::vector<std::size_t>& line_numbers) {
  ids_.reserve(tokens_.size() * 2);
  for (std::size_t i = 0; i < tokens_.size(); ++i) {
    auto [it, inserted] = ids_.emplace(tokens_[i], static_cast<int32_t>(i));
    BERTRAIN_CHECK(inserted, "vocab file '", source_, "' line ", line_numbers[i], ": duplicate entry '", tokens_[i],
                   "' (first at line ", line_numbers[static_cast<std::size_t>(it->second)], ")");
  }
  BERTRAIN_CHECK(tokens_.size() < static_cast<std::size_t>(INT32_MAX), "vocab '", source_, "' is too large");
  unk_id_ = id(kUnk);
}

int32_t Vocab::id(std::string_view token) const {
  auto it = ids_.find(token);
  return it == ids_.end() ? -1 : it->second;
}

const std::string& Vocab::token(int32_t id) const {
  BERTRAIN_CHECK(id >= 0 && static_cast<std::size_t>(id) < tokens_.size(), "vocab '", source_, "': token id ", id,
                 " out of range [0, ", tokens_.size(), ")");
  return tokens_[static_cast<std::size_t>(id)];
}

void Vocab::require_special_tokens(std::initializer_list<std::string_view> tokens, const std::string& what) const {
  for (std::string_view t : tokens)
    BERTRAIN_CHECK(contains(t), "vocab '", source_, "' has no ", t, " token, which ", what, " requires");
}

void Vocab::save(const std::string& path) const {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  BERTRAIN_CHECK(out.good(), "cannot write vocab file '", path, "'");
  for (const auto& t : tokens_) out << t << '\n';
  out.flush();
  BERTRAIN_CHECK(out.good(), "error while writing vocab file '", path, "'");
}

}  // namespace bertrain::text
