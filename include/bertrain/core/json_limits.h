// json_limits.h: the nesting limit every JSON reader of bertrain applies before parsing, so that a hostile file
// (`[[[[...` a million deep) is refused in one line instead of overflowing the stack later.
#pragma once

#include <string>
#include <string_view>

namespace bertrain {

/// Deepest nesting of arrays and objects accepted in any JSON file bertrain reads. Its own files nest 4 deep
/// (SQuAD: 6); nlohmann/json parses any depth without recursion, but copying, comparing and dump() recurse
/// once per level, so an unbounded depth is a stack overflow waiting for the first error message.
inline constexpr int kMaxJsonDepth = 512;

/// Throws bertrain::Error "<source>: JSON nested deeper than 512 levels (at byte N)" when `text` opens more
/// than kMaxJsonDepth arrays/objects without closing them. Brackets inside strings do not count. Does not
/// validate anything else (the parser does); O(size), allocates nothing.
void check_json_depth(std::string_view text, const std::string& source);

}  // namespace bertrain
