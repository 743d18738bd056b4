// error.cpp: out-of-line throwers, so the macros stay small at every call site.
#include "bertrain/core/error.h"

namespace bertrain::detail {

void throw_check(const std::string& msg) { throw Error(msg); }

void throw_assert(const char* cond, const char* file, int line, const std::string& msg) {
  std::ostringstream os;
  os << "internal error (please report): " << cond << " failed at " << file << ":" << line;
  if (!msg.empty()) os << ": " << msg;
  throw Error(os.str());
}

}  // namespace bertrain::detail
