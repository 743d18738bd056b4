// utf8.h: UTF-8 validation and code point helpers shared by the tokenizers, the data readers and the CLI.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace bertrain::text {

/// Returns the byte offset of the first ill-formed UTF-8 sequence in `s`, or std::string_view::npos when
/// all of `s` is well-formed. Well-formed means the Unicode standard's Table 3-7 (no overlong forms, no
/// surrogates U+D800..U+DFFF, nothing above U+10FFFF): exactly what Python's strict "utf-8" codec accepts.
std::size_t utf8_invalid_offset(std::string_view s) noexcept;

/// True when `s` is well-formed UTF-8 (see utf8_invalid_offset).
inline bool utf8_is_valid(std::string_view s) noexcept { return utf8_invalid_offset(s) == std::string_view::npos; }

/// Decodes well-formed UTF-8 into code points, appending to `out`.
/// Throws bertrain::Error naming the byte offset when `s` is not well-formed UTF-8.
void utf8_decode_append(std::string_view s, std::vector<char32_t>& out);

/// Appends the UTF-8 encoding of code point `cp` (must be a Unicode scalar value) to `out`.
void utf8_append(std::string& out, char32_t cp);

/// Number of code points in well-formed UTF-8 `s` (counts bytes that are not continuation bytes).
std::size_t utf8_length(std::string_view s) noexcept;

}  // namespace bertrain::text
