// json_limits.cpp: see json_limits.h.
#include "bertrain/core/json_limits.h"

#include "bertrain/core/error.h"

namespace bertrain {

void check_json_depth(std::string_view text, const std::string& source) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      BERTRAIN_CHECK(++depth <= kMaxJsonDepth, source, ": JSON nested deeper than ", kMaxJsonDepth,
                     " levels (at byte ", i, ")");
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

}  // namespace bertrain
