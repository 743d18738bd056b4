// tf_checkpoint_state.cpp: the `checkpoint` file of a TF training directory (read_tf_checkpoint_state in
// bertrain/io/tf_checkpoint.h). The file is a CheckpointState message in protobuf's text format; protobuf's runtime
// cannot be linked into the io layer (src/io/layer.cmake), so this reads that grammar for CheckpointState's four
// scalar fields, as protobuf's TextFormat parser does (tests/io/tf_checkpoint_state_test.cpp compares them):
// `name: value` in any order, each optionally followed by one ',' or ';'; whitespace, line breaks and '#' comments
// between any two tokens; the repeated fields also as `name: [v, v]`; strings in single or double quotes with C,
// \u and \U escapes, adjacent strings concatenated; decimal numbers (and inf, nan).
// Deliberately stricter than protobuf: a NUL byte in the path, and octal escapes above \377 (which it wraps).
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "bertrain/core/error.h"
#include "bertrain/io/tf_checkpoint.h"
#include "io/file_util.h"

namespace bertrain {

namespace fs = std::filesystem;

namespace {

constexpr uintmax_t kMaxFileBytes = 1 << 20;  // TF's files are a few hundred bytes (max_to_keep paths)
constexpr size_t kMaxPathBytes = 4096;         // PATH_MAX

class CheckpointStateReader {
 public:
  CheckpointStateReader(std::string text, std::string file) : s_(std::move(text)), file_(std::move(file)) {}

  // The whole message; sets latest and latest_line from the last model_checkpoint_path (protobuf's Merge).
  void read() {
    for (skip(); i_ < s_.size(); skip()) {
      const int line = line_;
      const std::string name = identifier();
      skip();
      check(i_ < s_.size() && s_[i_] == ':', "field '" + name + "' has no ':' (CheckpointState's fields are scalars)");
      ++i_;
      skip();
      if (name == "model_checkpoint_path") {
        latest = string_value(name);
        latest_line = line;
      } else if (name == "all_model_checkpoint_paths") {
        repeated([&] { string_value(name); });
      } else if (name == "all_model_checkpoint_timestamps") {
        repeated([&] { number_value(name); });
      } else if (name == "last_preserved_timestamp") {
        number_value(name);
      } else {
        check(false, "unknown field '" + name + "' (CheckpointState has model_checkpoint_path, "
                     "all_model_checkpoint_paths, all_model_checkpoint_timestamps and last_preserved_timestamp)");
      }
      skip();
      if (i_ < s_.size() && (s_[i_] == ',' || s_[i_] == ';')) ++i_;
    }
  }

  std::optional<std::string> latest;
  int latest_line = 0;

 private:
  void check(bool ok, const std::string& what) const { BERTRAIN_CHECK(ok, file_, ": line ", line_, ": ", what); }
  bool at(char c) const { return i_ < s_.size() && s_[i_] == c; }

  // Whitespace (counting lines) and '#' comments: allowed between any two tokens.
  void skip() {
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else if (std::isspace(static_cast<unsigned char>(c))) {
        if (c == '\n') ++line_;
        ++i_;
      } else {
        return;
      }
    }
  }

  // The character at the read position for a message: 'c' when printable, else its byte value, or "the end".
  std::string here() const {
    if (i_ >= s_.size()) return "the end of the file";
    const unsigned char c = static_cast<unsigned char>(s_[i_]);
    if (std::isprint(c)) return std::string("'") + s_[i_] + "'";
    char buf[16];
    std::snprintf(buf, sizeof buf, "byte 0x%02x", c);
    return buf;
  }

  std::string identifier() {
    const size_t start = i_;
    if (i_ < s_.size() && (std::isalpha(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_'))
      while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_')) ++i_;
    check(i_ > start, "expected a field name, got " + here());
    return s_.substr(start, i_ - start);
  }

  // `v` or `[v, v, ...]` (a repeated field).
  template <class F>
  void repeated(F&& one) {
    if (!at('[')) return one();
    ++i_;
    skip();
    if (at(']')) {
      ++i_;
      return;
    }
    for (;;) {
      one();
      skip();
      if (at(']')) break;
      check(at(','), "expected ',' or ']' in a list, got " + here());
      ++i_;
      skip();
    }
    ++i_;
  }

  // One or more adjacent string literals ("a" 'b' is "ab"), as protobuf's tokenizer joins them.
  std::string string_value(const std::string& name) {
    check(at('"') || at('\''), name + " must be a quoted string, got " + here());
    std::string out;
    while (at('"') || at('\'')) {
      string_literal(out);
      skip();
    }
    return out;
  }

  // A number of a double field: [-] then a decimal integer or a float (1.7e+09, 1.5f), or inf/nan.
  void number_value(const std::string& name) {
    if (at('-')) {
      ++i_;
      skip();
    }
    const size_t start = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '.' || s_[i_] == '_' ||
                              ((s_[i_] == '+' || s_[i_] == '-') && i_ > start && (s_[i_ - 1] == 'e' || s_[i_ - 1] == 'E'))))
      ++i_;
    std::string tok = s_.substr(start, i_ - start);
    check(!tok.empty(), name + " must be a number, got " + here());
    std::string lower;
    for (char c : tok) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == "inf" || lower == "infinity" || lower == "nan") return;
    if (lower.back() == 'f') tok.pop_back();  // protobuf's float suffix
    // A double field takes decimal numbers only, without a leading 0 (which protobuf's tokenizer reads as octal
    // or hex, then refuses: "Expect a decimal number" for 0x10 and 017).
    const bool integer = tok.find_first_of(".eE") == std::string::npos;
    char* end = nullptr;
    const bool starts = !tok.empty() && (std::isdigit(static_cast<unsigned char>(tok[0])) || tok[0] == '.') &&
                        !(tok.size() > 1 && tok[0] == '0' &&
                          (std::isdigit(static_cast<unsigned char>(tok[1])) || tok[1] == 'x' || tok[1] == 'X'));
    if (starts) {
      if (integer) {
        std::strtoull(tok.c_str(), &end, 10);
      } else {
        std::strtod(tok.c_str(), &end);
      }
    }
    check(starts && end == tok.c_str() + tok.size(),
          name + " must be a number, got '" + printable(s_.substr(start, i_ - start), 60) + "'");
  }

  static int digit(char c, int base) {
    if (c >= '0' && c <= '9' && c - '0' < base) return c - '0';
    if (base == 16 && c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (base == 16 && c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  // n hex digits (exactly), as \u and \U take them.
  uint32_t hex_digits(int n, const char* what) {
    uint32_t v = 0;
    for (int k = 0; k < n; ++k, ++i_) {
      const int d = i_ < s_.size() ? digit(s_[i_], 16) : -1;
      check(d >= 0, std::string(what) + " needs " + std::to_string(n) + " hex digits");
      v = 16 * v + static_cast<uint32_t>(d);
    }
    return v;
  }
  // bertrain::utf8_append is in the text layer, which links libsentencepiece; the io layer stays without it
  // (its tests link protobuf, which would clash with sentencepiece's bundled copy: src/io/layer.cmake).
  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  void string_literal(std::string& out) {
    const char quote = s_[i_++];
    for (;;) {
      check(i_ < s_.size() && s_[i_] != '\n', "unterminated string");
      check(s_[i_] != '\0', "a NUL byte in a string");
      const char c = s_[i_++];
      if (c == quote) return;
      if (c != '\\') {
        out += c;
        continue;
      }
      check(i_ < s_.size(), "unterminated string");
      const char e = s_[i_];
      switch (e) {
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case '\\': case '\'': case '"': case '?': out += e; break;
        case 'x': {  // \xH or \xHH
          ++i_;
          int v = 0, n = 0;
          for (int d; n < 2 && i_ < s_.size() && (d = digit(s_[i_], 16)) >= 0; ++n, ++i_) v = 16 * v + d;
          check(n > 0, "\\x without a hex digit");
          out += static_cast<char>(v);
          continue;
        }
        case 'u': case 'U': {  // a code point as UTF-8; a \u surrogate pair is one code point
          ++i_;
          uint32_t cp = hex_digits(e == 'u' ? 4 : 8, e == 'u' ? "\\u" : "\\U");
          if (cp >= 0xD800 && cp < 0xDC00 && i_ + 1 < s_.size() && s_[i_] == '\\' && s_[i_ + 1] == 'u') {
            i_ += 2;
            const uint32_t low = hex_digits(4, "\\u");
            check(low >= 0xDC00 && low < 0xE000, "a \\u high surrogate without its low surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          check(cp <= 0x10FFFF && (cp < 0xD800 || cp >= 0xE000), "\\u or \\U escape names no code point");
          append_utf8(out, cp);
          continue;
        }
        default: {  // \O, \OO or \OOO: one byte (TF's text_format writes non-ASCII path bytes so)
          int d = digit(e, 8);
          check(d >= 0, "unknown escape '\\" + printable(std::string(1, e), 8) + "'");
          ++i_;
          int v = d;
          for (int n = 1; n < 3 && i_ < s_.size() && (d = digit(s_[i_], 8)) >= 0; ++n, ++i_) v = 8 * v + d;
          check(v < 256, "octal escape above \\377");
          out += static_cast<char>(v);
          continue;
        }
      }
      ++i_;
    }
  }

  std::string s_;
  std::string file_;
  size_t i_ = 0;
  int line_ = 1;
};

}  // namespace

std::optional<std::string> read_tf_checkpoint_state(const std::string& dir) {
  const fs::path file = fs::path(dir) / "checkpoint";
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return std::nullopt;
  const uintmax_t size = fs::file_size(file, ec);
  BERTRAIN_CHECK(!ec && size <= kMaxFileBytes, file.string(), ": ", ec ? ec.message() : std::to_string(size) + " bytes",
                 "; a CheckpointState (TF's `checkpoint` file) is a few hundred bytes, at most ", kMaxFileBytes);
  CheckpointStateReader r(read_text_file(file.string()), file.string());
  r.read();
  BERTRAIN_CHECK(r.latest.has_value(), file.string(), ": no model_checkpoint_path (a tf.train.CheckpointState "
                 "names the latest checkpoint there)");
  const std::string& path = *r.latest;
  BERTRAIN_CHECK(!path.empty(), file.string(), ": line ", r.latest_line, ": model_checkpoint_path is empty");
  BERTRAIN_CHECK(path.find('\0') == std::string::npos, file.string(), ": line ", r.latest_line,
                 ": model_checkpoint_path holds a NUL byte");
  BERTRAIN_CHECK(path.size() <= kMaxPathBytes, file.string(), ": line ", r.latest_line, ": model_checkpoint_path is ",
                 path.size(), " bytes, longer than a path can be (", kMaxPathBytes, ")");
  const fs::path p(path);
  return (p.is_absolute() ? p : fs::path(dir) / p).string();
}

}  // namespace bertrain
