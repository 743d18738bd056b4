// error.cpp: out-of-line throwers, so the macros stay small at every call site.
#include "bertrain/core/error.h"

#include <algorithm>

namespace bertrain {

std::string printable(std::string_view text, size_t max_bytes) {
  std::string out;
  size_t n = std::min(text.size(), max_bytes);
  while (n > 0 && n < text.size() && (static_cast<unsigned char>(text[n]) & 0xc0) == 0x80) --n;  // whole characters
  out.reserve(n + 8);
  static const char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) out += {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
    else out += static_cast<char>(c);
  }
  if (n < text.size()) out += "...";
  return out;
}

namespace {

// The message with every control character but the tab escaped as printable() does (a no-op for the usual message).
std::string one_line(const std::string& msg) {
  const auto is_control = [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return (c < 0x20 && c != '\t') || c == 0x7f;
  };
  if (std::none_of(msg.begin(), msg.end(), is_control)) return msg;
  std::string out;
  size_t start = 0;
  for (size_t i = 0; i <= msg.size(); ++i) {
    if (i < msg.size() && !is_control(msg[i])) continue;
    out += msg.substr(start, i - start);
    if (i < msg.size()) out += printable(std::string_view(&msg[i], 1));
    start = i + 1;
  }
  return out;
}

}  // namespace

Error::Error(const std::string& msg) : std::runtime_error(one_line(msg)) {}

}  // namespace bertrain

namespace bertrain::detail {

void throw_check(const std::string& msg) { throw Error(msg); }

void throw_assert(const char* cond, const char* file, int line, const std::string& msg) {
  std::ostringstream os;
  os << "internal error (please report): " << cond << " failed at " << file << ":" << line;
  if (!msg.empty()) os << ": " << msg;
  throw Error(os.str());
}

}  // namespace bertrain::detail
