// unicode.cpp: UTF-8 coding and the utf8proc-backed character predicates and transforms (see unicode.h).
#include "bertrain/text/unicode.h"

#include <utf8proc.h>

#include <array>
#include <memory>

#include "bertrain/core/error.h"
#include "bertrain/text/utf8.h"

namespace bertrain::text {

// Well-formed UTF-8 byte sequences, The Unicode Standard 15.0, section 3.9, Table 3-7.
static inline std::size_t utf8_seq_len(const unsigned char* p, std::size_t avail) noexcept {
  const unsigned char b0 = p[0];
  if (b0 < 0x80) return 1;
  auto cont = [](unsigned char b) { return (b & 0xC0) == 0x80; };
  if (b0 >= 0xC2 && b0 <= 0xDF) return (avail >= 2 && cont(p[1])) ? 2 : 0;
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    if (avail < 3) return 0;
    const unsigned char lo = b0 == 0xE0 ? 0xA0 : 0x80, hi = b0 == 0xED ? 0x9F : 0xBF;
    return (p[1] >= lo && p[1] <= hi && cont(p[2])) ? 3 : 0;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    if (avail < 4) return 0;
    const unsigned char lo = b0 == 0xF0 ? 0x90 : 0x80, hi = b0 == 0xF4 ? 0x8F : 0xBF;
    return (p[1] >= lo && p[1] <= hi && cont(p[2]) && cont(p[3])) ? 4 : 0;
  }
  return 0;
}

std::size_t utf8_invalid_offset(std::string_view s) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  std::size_t i = 0;
  while (i < n) {
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    const std::size_t len = utf8_seq_len(p + i, n - i);
    if (len == 0) return i;
    i += len;
  }
  return std::string_view::npos;
}

void utf8_decode_append(std::string_view s, std::vector<char32_t>& out) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned char b0 = p[i];
    if (b0 < 0x80) {
      out.push_back(b0);
      ++i;
      continue;
    }
    const std::size_t len = utf8_seq_len(p + i, n - i);
    BERTRAIN_CHECK(len != 0, "invalid UTF-8 at byte ", i, " (byte value 0x", std::hex, int(b0), ")");
    char32_t cp;
    if (len == 2) cp = (char32_t(b0 & 0x1F) << 6) | (p[i + 1] & 0x3F);
    else if (len == 3) cp = (char32_t(b0 & 0x0F) << 12) | (char32_t(p[i + 1] & 0x3F) << 6) | (p[i + 2] & 0x3F);
    else
      cp = (char32_t(b0 & 0x07) << 18) | (char32_t(p[i + 1] & 0x3F) << 12) | (char32_t(p[i + 2] & 0x3F) << 6) |
           (p[i + 3] & 0x3F);
    out.push_back(cp);
    i += len;
  }
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xC0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(char(0xE0 | (cp >> 12)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (cp >> 18)));
    out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  }
}

std::size_t utf8_length(std::string_view s) noexcept {
  std::size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

namespace unicode {
namespace {

inline const utf8proc_property_t* prop(char32_t c) { return utf8proc_get_property(static_cast<utf8proc_int32_t>(c)); }
inline int category(char32_t c) { return prop(c)->category; }

// Full (recursive) decomposition of one code point; canonical only unless `compat`. Returns the length.
// utf8proc_decompose_char handles Hangul syllables algorithmically (Unicode 3.12).
inline int decompose(char32_t c, utf8proc_int32_t* buf, int cap, bool compat) {
  const auto opts = static_cast<utf8proc_option_t>(UTF8PROC_DECOMPOSE | (compat ? UTF8PROC_COMPAT : 0));
  int last = 0;
  const utf8proc_ssize_t n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(c), buf, cap, opts, &last);
  BERTRAIN_ASSERT(n > 0 && n <= cap, "utf8proc_decompose_char(", uint32_t(c), ") returned ", n);
  return static_cast<int>(n);
}

// _is_chinese_char of google-research/bert: the CJK Unified Ideographs blocks it lists (these are block
// boundaries the reference hard-codes, not properties).
inline bool chinese(char32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

// NFD + drop Mn of a single code point leaves exactly that code point.
inline bool nfd_trivial(char32_t c) {
  const utf8proc_property_t* p = prop(c);
  if (p->category == UTF8PROC_CATEGORY_MN || p->combining_class != 0) return false;
  utf8proc_int32_t buf[32];
  return decompose(c, buf, 32, false) == 1 && char32_t(buf[0]) == c;
}

uint8_t compute_flags(char32_t c) {
  uint8_t f = 0;
  const int cat = category(c);
  const bool ws_basic = c == ' ' || c == '\t' || c == '\n' || c == '\r';
  const bool control = !ws_basic && (cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF);
  if (c == 0 || c == 0xFFFD || control) f |= kRemove;
  else if (ws_basic || cat == UTF8PROC_CATEGORY_ZS || is_python_space(c)) f |= kSpace;
  if (chinese(c)) f |= kChinese;
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126) ||
      (cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO))
    f |= kPunct;
  if (nfd_trivial(c)) f |= kNfdSimple;
  if (c != 0x130 && c != 0x3A3) {
    const char32_t l = static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
    if (l < 0x10000 && nfd_trivial(l)) f |= kLowerSimple;
  }
  return f;
}

}  // namespace

const BmpTables& bmp_tables() {
  static const std::unique_ptr<BmpTables> cache = [] {
    auto t = std::make_unique<BmpTables>();
    for (char32_t c = 0; c < 0x10000; ++c) {
      t->flags[c] = compute_flags(c);
      t->lower[c] =
          static_cast<char16_t>((t->flags[c] & kLowerSimple) ? utf8proc_tolower(static_cast<utf8proc_int32_t>(c)) : c);
    }
    return t;
  }();
  return *cache;
}

namespace {

// Canonical Ordering Algorithm (Unicode 3.11): stable sort of each run of non-starters by combining class.
void canonical_order(char32_t* s, std::size_t n) {
  for (std::size_t i = 1; i < n; ++i) {
    const int cc = prop(s[i])->combining_class;
    if (cc == 0) continue;
    std::size_t j = i;
    while (j > 0) {
      const int pc = prop(s[j - 1])->combining_class;
      if (pc == 0 || pc <= cc) break;
      std::swap(s[j - 1], s[j]);
      --j;
    }
  }
}

}  // namespace

uint8_t flags(char32_t c) noexcept {
  if (c < 0x10000) return bmp_tables().flags[c];
  return compute_flags(c);
}

char32_t lower_simple(char32_t c) noexcept {
  if (c < 0x10000) return bmp_tables().lower[c];
  return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
}

bool is_python_space(char32_t c) noexcept {
  const utf8proc_property_t* p = prop(c);
  return p->category == UTF8PROC_CATEGORY_ZS || p->bidi_class == UTF8PROC_BIDI_CLASS_WS ||
         p->bidi_class == UTF8PROC_BIDI_CLASS_B || p->bidi_class == UTF8PROC_BIDI_CLASS_S;
}

bool is_python_digit(char32_t c) noexcept {
  const int cat = category(c);
  if (cat == UTF8PROC_CATEGORY_ND) return true;
  if (cat != UTF8PROC_CATEGORY_NO) return false;
  utf8proc_int32_t buf[32];
  const int n = decompose(c, buf, 32, true);
  int digits = 0, alnum = 0;
  for (int i = 0; i < n; ++i) {
    const int k = category(char32_t(buf[i]));
    digits += k == UTF8PROC_CATEGORY_ND;
    alnum += (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) || (k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO);
  }
  return digits == 1 && alnum == 1;
}

bool is_cased(char32_t c) noexcept {
  // Cased = Lowercase or Uppercase or Lt. utf8proc has no Other_Lowercase/Other_Uppercase; the characters
  // with those properties are either case-mapped (Roman numerals, circled letters) or modifier letters
  // (Lm, also Case_Ignorable, so never the character the Final_Sigma scan stops at), except the ones
  // spelled out here from PropList.txt: the Lo ordinal indicators U+00AA, U+00BA (Other_Lowercase) and the
  // squared / negative circled / negative squared Latin capitals U+1F130..1F149, 1F150..1F169,
  // 1F170..1F189 (Other_Uppercase). The test MatchesPythonUnicodeDatabaseOnAllCodePoints checks this
  // against Python's unicodedata over every assigned code point.
  const int cat = category(c);
  if (cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT) return true;
  if (c == 0xAA || c == 0xBA || (c >= 0x1F130 && c <= 0x1F149) || (c >= 0x1F150 && c <= 0x1F169) ||
      (c >= 0x1F170 && c <= 0x1F189))
    return true;
  const auto i = static_cast<utf8proc_int32_t>(c);
  return utf8proc_tolower(i) != i || utf8proc_toupper(i) != i || utf8proc_totitle(i) != i;
}

bool is_case_ignorable(char32_t c) noexcept {
  // Case_Ignorable = Mn | Me | Cf | Lm | Sk | Word_Break in {MidLetter, MidNumLet, Single_Quote}
  // (Unicode 3.13, D136). utf8proc has no Word_Break property; its 17 members are listed from
  // WordBreakProperty.txt (unchanged since Unicode 6.3).
  const int cat = category(c);
  if (cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_ME || cat == UTF8PROC_CATEGORY_CF ||
      cat == UTF8PROC_CATEGORY_LM || cat == UTF8PROC_CATEGORY_SK)
    return true;
  switch (c) {
    case 0x27: case 0x2E: case 0x3A: case 0xB7: case 0x387: case 0x55F: case 0x5F4: case 0x2018: case 0x2019:
    case 0x2024: case 0x2027: case 0xFE13: case 0xFE52: case 0xFE55: case 0xFF07: case 0xFF0E: case 0xFF1A:
      return true;
    default:
      return false;
  }
}

void python_lower_append(const char32_t* s, std::size_t n, std::vector<char32_t>& out) {
  for (std::size_t i = 0; i < n; ++i) {
    const char32_t c = s[i];
    if (c < 0x80) {
      out.push_back((c >= 'A' && c <= 'Z') ? c + 32 : c);
    } else if (c == 0x130) {  // SpecialCasing.txt: the one unconditional multi-character lowercase mapping
      out.push_back(0x69);
      out.push_back(0x307);
    } else if (c == 0x3A3) {  // Final_Sigma: \p{cased}\p{case-ignorable}* Σ !(\p{case-ignorable}*\p{cased})
      std::size_t j = i;
      bool final_sigma = false;
      while (j > 0 && is_case_ignorable(s[j - 1])) --j;
      if (j > 0 && is_cased(s[j - 1])) {
        std::size_t k = i + 1;
        while (k < n && is_case_ignorable(s[k])) ++k;
        final_sigma = k == n || !is_cased(s[k]);
      }
      out.push_back(final_sigma ? 0x3C2 : 0x3C3);
    } else {
      out.push_back(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
    }
  }
}

void nfd_strip_mn_append(const char32_t* s, std::size_t n, std::vector<char32_t>& out) {
  const std::size_t base = out.size();
  bool any_mark = false;
  utf8proc_int32_t buf[32];
  for (std::size_t i = 0; i < n; ++i) {
    const char32_t c = s[i];
    if (flags(c) & kNfdSimple) {
      out.push_back(c);
      continue;
    }
    const int m = decompose(c, buf, 32, false);
    for (int k = 0; k < m; ++k) out.push_back(char32_t(buf[k]));
    any_mark = true;
  }
  if (!any_mark) return;
  canonical_order(out.data() + base, out.size() - base);
  std::size_t w = base;
  for (std::size_t r = base; r < out.size(); ++r)
    if (category(out[r]) != UTF8PROC_CATEGORY_MN) out[w++] = out[r];
  out.resize(w);
}

void nfkd_drop_combining_append(const char32_t* s, std::size_t n, std::vector<char32_t>& out) {
  // Canonical ordering only permutes characters of non-zero combining class, all of which are dropped
  // here, so it cannot change the result and is skipped.
  utf8proc_int32_t buf[32];
  for (std::size_t i = 0; i < n; ++i) {
    const int m = s[i] < 0x80 ? (buf[0] = utf8proc_int32_t(s[i]), 1) : decompose(s[i], buf, 32, true);
    for (int k = 0; k < m; ++k)
      if (prop(char32_t(buf[k]))->combining_class == 0) out.push_back(char32_t(buf[k]));
  }
}

}  // namespace unicode
}  // namespace bertrain::text
