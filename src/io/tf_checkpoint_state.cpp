// tf_checkpoint_state.cpp: the `checkpoint` file of a TF training directory (read_tf_checkpoint_state in
// bertrain/io/tf_checkpoint.h). The file is a CheckpointState message in protobuf's text format; protobuf's runtime
// cannot be linked into the io layer (src/io/layer.cmake), so this reads the text format's grammar for scalar
// fields: `name: value` pairs separated by whitespace, optional ',' or ';', '#' comments, and string values
// in single or double quotes with C escapes, adjacent strings concatenated (protobuf's text_format/CUnescape).
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <string>

#include "bertrain/core/error.h"
#include "bertrain/io/tf_checkpoint.h"
#include "io/file_util.h"

namespace bertrain {

namespace fs = std::filesystem;

namespace {

class TextFormatReader {
 public:
  TextFormatReader(std::string text, std::string file) : s_(std::move(text)), file_(std::move(file)) {}

  // Skips whitespace, comments and field separators; false at the end.
  bool more() {
    for (;;) {
      while (i_ < s_.size() && (std::isspace(static_cast<unsigned char>(s_[i_])) || s_[i_] == ',' || s_[i_] == ';'))
        if (s_[i_++] == '\n') ++line_;
      if (i_ < s_.size() && s_[i_] == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
        continue;
      }
      return i_ < s_.size();
    }
  }

  // One `name: value` pair. `quoted` tells whether the value was a string (unescaped) or a bare token.
  void field(std::string& name, std::string& value, bool& quoted) {
    const size_t start = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_')) ++i_;
    name = s_.substr(start, i_ - start);
    check(!name.empty(), "expected a field name, got " + describe(start));
    skip_blanks();
    check(i_ < s_.size() && s_[i_] == ':', "field '" + name + "' has no ':' (a CheckpointState has no message fields)");
    ++i_;
    skip_blanks();
    check(i_ < s_.size() && s_[i_] != '\n', "field '" + name + "' has no value");
    value.clear();
    quoted = s_[i_] == '"' || s_[i_] == '\'';
    if (!quoted) {
      const size_t v = i_;
      while (i_ < s_.size() && !std::isspace(static_cast<unsigned char>(s_[i_])) && s_[i_] != ',' && s_[i_] != ';' &&
             s_[i_] != '#')
        ++i_;
      value = s_.substr(v, i_ - v);
      return;
    }
    // Adjacent string literals are one value ("a" 'b' is "ab"), as in protobuf's tokenizer.
    while (i_ < s_.size() && (s_[i_] == '"' || s_[i_] == '\'')) {
      string_literal(value);
      skip_blanks();
    }
  }

  int line() const { return line_; }

 private:
  void skip_blanks() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  void check(bool ok, const std::string& what) const {
    BERTRAIN_CHECK(ok, file_, ": line ", line_, ": ", what);
  }
  // The character at `at` for a message: 'c' when printable, else its byte value.
  std::string describe(size_t at) const {
    const unsigned char c = static_cast<unsigned char>(s_[at]);
    if (std::isprint(c)) return std::string("'") + s_[at] + "'";
    char buf[16];
    std::snprintf(buf, sizeof buf, "byte 0x%02x", c);
    return buf;
  }
  static int digit(char c, int base) {
    if (c >= '0' && c <= '9' && c - '0' < base) return c - '0';
    if (base == 16 && c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (base == 16 && c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  void string_literal(std::string& out) {
    const char quote = s_[i_++];
    for (;;) {
      check(i_ < s_.size() && s_[i_] != '\n', "unterminated string");
      const char c = s_[i_++];
      if (c == quote) return;
      if (c != '\\') {
        out += c;
        continue;
      }
      check(i_ < s_.size(), "unterminated string");
      const char e = s_[i_++];
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
          int v = 0, n = 0;
          for (int d; n < 2 && i_ < s_.size() && (d = digit(s_[i_], 16)) >= 0; ++n, ++i_) v = 16 * v + d;
          check(n > 0, "\\x without a hex digit");
          out += static_cast<char>(v);
          break;
        }
        default: {  // \O, \OO or \OOO: one byte (TF's text_format writes non-ASCII path bytes so)
          int d = digit(e, 8);
          check(d >= 0, std::string("unknown escape '\\") + e + "'");
          int v = d;
          for (int n = 1; n < 3 && i_ < s_.size() && (d = digit(s_[i_], 8)) >= 0; ++n, ++i_) v = 8 * v + d;
          check(v < 256, "octal escape above \\377");
          out += static_cast<char>(v);
        }
      }
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
  TextFormatReader r(read_text_file(file.string()), file.string());
  std::string name, value, path;
  bool quoted = false, found = false;
  int found_line = 0;
  while (r.more()) {
    const int line = r.line();
    r.field(name, value, quoted);
    if (name != "model_checkpoint_path") continue;
    BERTRAIN_CHECK(quoted, file.string(), ": line ", line, ": model_checkpoint_path must be a quoted string, got ", value);
    path = value;  // a repeated singular field: the last one counts (protobuf's text_format.Merge)
    found = true;
    found_line = line;
  }
  BERTRAIN_CHECK(found, file.string(), ": no model_checkpoint_path (a tf.train.CheckpointState names the latest "
                 "checkpoint there)");
  BERTRAIN_CHECK(!path.empty(), file.string(), ": line ", found_line, ": model_checkpoint_path is empty");
  const fs::path p(path);
  return (p.is_absolute() ? p : fs::path(dir) / p).string();
}

}  // namespace bertrain
