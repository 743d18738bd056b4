// error.h: bertrain::Error and the two checking macros used everywhere.
// BERTRAIN_CHECK is for bad user input, config or data; BERTRAIN_ASSERT for internal invariants
// (the split libtorch makes between TORCH_CHECK and TORCH_INTERNAL_ASSERT). Both throw, neither exits.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace bertrain {

/// The one exception type bertrain throws. what() is a complete, user-readable sentence on one line: control
/// characters in `msg` (from a file's names or fields quoted in it) are written as \n, \r, \xNN, as printable()
/// writes them (a tab stays a tab), so no input can split an error or rewrite the terminal line.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg);
};

/// `text` as it may appear inside an error message: every error is one line, so control characters from a file
/// (a CSV field's newline, a stray carriage return) are written as \n, \r, \t or \xNN, and at most `max_bytes`
/// bytes are kept ("..." marks a cut). UTF-8 above ASCII is kept as it is.
std::string printable(std::string_view text, size_t max_bytes = 200);

namespace detail {
template <class... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
[[noreturn]] void throw_check(const std::string& msg);
[[noreturn]] void throw_assert(const char* cond, const char* file, int line, const std::string& msg);
}  // namespace detail

}  // namespace bertrain

/// Throws bertrain::Error with the streamed message when `cond` is false. For user-facing checks:
/// the message must say what was expected and what came (shapes, file, line or record).
#define BERTRAIN_CHECK(cond, ...)                                               \
  do {                                                                          \
    if (!(cond)) ::bertrain::detail::throw_check(::bertrain::detail::str_cat(__VA_ARGS__)); \
  } while (0)

/// Throws bertrain::Error naming the source location: a bug in bertrain, not in the input.
#define BERTRAIN_ASSERT(cond, ...)                                                          \
  do {                                                                                      \
    if (!(cond))                                                                            \
      ::bertrain::detail::throw_assert(#cond, __FILE__, __LINE__,                           \
                                       ::bertrain::detail::str_cat("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)
