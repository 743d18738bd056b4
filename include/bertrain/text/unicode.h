// unicode.h (private): the Unicode character predicates and string transforms the tokenizers need, all
// computed from utf8proc's Unicode database (no hand-written property tables), mirroring what Python's
// `unicodedata` and `str` methods do in google-research/bert and google-research/albert tokenization.py.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace bertrain::text::unicode {

/// Flags of one code point for BERT's BasicTokenizer (tokenization.py at google-research/bert eedf571).
enum CharFlag : uint8_t {
  kRemove = 1,         // _clean_text drops it: cp 0, U+FFFD, or _is_control (Cc/Cf except \t \n \r)
  kSpace = 2,          // a token boundary: _is_whitespace (space \t \n \r Zs) or Python str.isspace()
  kChinese = 4,        // _is_chinese_char: isolated as its own token
  kPunct = 8,          // _is_punctuation: ASCII 33-47 58-64 91-96 123-126, or category P*
  kLowerSimple = 16,   // str.lower() + NFD + drop Mn maps it to the single code point lower_simple(c)
  kNfdSimple = 32,     // NFD + drop Mn leaves it unchanged (no decomposition, not Mn, combining class 0)
};

/// The CharFlag bits of `c` (cached for the BMP).
uint8_t flags(char32_t c) noexcept;

/// For a code point with kLowerSimple: its (single code point) lowercase.
char32_t lower_simple(char32_t c) noexcept;

/// The BMP cache behind flags() and lower_simple(), computed from utf8proc on first use. Hot loops fetch it
/// once and use the inline lookups below, which fall back to the functions above outside the BMP.
struct BmpTables {
  uint8_t flags[0x10000];
  char16_t lower[0x10000];
};
const BmpTables& bmp_tables();
inline uint8_t flags(const BmpTables& t, char32_t c) noexcept { return c < 0x10000 ? t.flags[c] : flags(c); }
inline char32_t lower_simple(const BmpTables& t, char32_t c) noexcept {
  return c < 0x10000 ? char32_t(t.lower[c]) : lower_simple(c);
}

/// Appends the UTF-8 encoding of `cp` (inline twin of bertrain::utf8_append for hot loops).
inline void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    const char b[2] = {char(0xC0 | (cp >> 6)), char(0x80 | (cp & 0x3F))};
    out.append(b, 2);
  } else if (cp < 0x10000) {
    const char b[3] = {char(0xE0 | (cp >> 12)), char(0x80 | ((cp >> 6) & 0x3F)), char(0x80 | (cp & 0x3F))};
    out.append(b, 3);
  } else {
    const char b[4] = {char(0xF0 | (cp >> 18)), char(0x80 | ((cp >> 12) & 0x3F)), char(0x80 | ((cp >> 6) & 0x3F)),
                       char(0x80 | (cp & 0x3F))};
    out.append(b, 4);
  }
}

/// Appends Python's `str.lower()` of `s[0..n)` to `out`: the full Unicode lowercase mapping
/// (U+0130 -> U+0069 U+0307) with the Final_Sigma rule for U+03A3 (Unicode 3.13, as CPython's
/// handle_capital_sigma), never locale-dependent.
void python_lower_append(const char32_t* s, std::size_t n, std::vector<char32_t>& out);

/// Appends BERT's `_run_strip_accents` of `s[0..n)`: unicodedata.normalize("NFD") (canonical decomposition
/// plus canonical ordering), then every character of category Mn dropped.
void nfd_strip_mn_append(const char32_t* s, std::size_t n, std::vector<char32_t>& out);

/// Appends ALBERT's accent removal of `s[0..n)`: unicodedata.normalize("NFKD"), then every character with
/// unicodedata.combining(c) != 0 (canonical combining class) dropped.
void nfkd_drop_combining_append(const char32_t* s, std::size_t n, std::vector<char32_t>& out);

/// Python's str.isspace() for one character: category Zs, or bidirectional class WS, B or S.
bool is_python_space(char32_t c) noexcept;

/// Python's str.isdigit() for one character: Numeric_Type Digit or Decimal. utf8proc does not expose
/// Numeric_Type; approximated as category Nd, or category No with a compatibility decomposition to a
/// single Nd (superscripts, circled digits): the characters Python reports as digits.
bool is_python_digit(char32_t c) noexcept;

/// Unicode's Cased and Case_Ignorable derived properties (Unicode 3.13, used by the Final_Sigma rule).
bool is_cased(char32_t c) noexcept;
bool is_case_ignorable(char32_t c) noexcept;

}  // namespace bertrain::text::unicode
