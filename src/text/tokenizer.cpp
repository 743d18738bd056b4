// tokenizer.cpp: BasicTokenizer, WordpieceTokenizer and FullTokenizer (google-research/bert
// tokenization.py semantics), working on code point arrays with reused per-thread buffers.
#include "bertrain/text/tokenizer.h"

#include <algorithm>
#include <cstring>

#include "bertrain/core/error.h"
#include "bertrain/text/utf8.h"
#include "bertrain/text/unicode.h"

namespace bertrain::text {
namespace {

// Per-thread scratch buffers so that tokenizing allocates nothing per character or token in steady state.
struct BasicScratch {
  std::vector<char32_t> cps, word, lowered, stripped;
  std::string token;
};
BasicScratch& basic_scratch() {
  thread_local BasicScratch s;
  return s;
}

inline bool is_continuation_byte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// BasicTokenizer

BasicTokenizer::BasicTokenizer(bool do_lower_case, std::optional<bool> strip_accents, bool tokenize_chinese_chars)
    : do_lower_case_(do_lower_case),
      strip_accents_(strip_accents.value_or(do_lower_case)),
      tokenize_chinese_chars_(tokenize_chinese_chars) {}

template <class Sink>
void BasicTokenizer::run(std::string_view text, Sink&& sink) const {
  BasicScratch& s = basic_scratch();
  const unicode::BmpTables& tab = unicode::bmp_tables();
  s.cps.clear();
  utf8_decode_append(text, s.cps);

  // One whitespace token after cleaning: lowercase / strip accents, then split on punctuation.
  auto process_word = [&](const char32_t* w, std::size_t n) {
    if (n == 0) return;
    if (do_lower_case_) {
      bool simple = true;
      for (std::size_t i = 0; i < n && simple; ++i) simple = unicode::flags(tab, w[i]) & unicode::kLowerSimple;
      s.lowered.resize(n);
      if (simple) {
        // Each character lowercases to one character that NFD leaves alone: str.lower() and
        // _run_strip_accents reduce to a per-character map.
        for (std::size_t i = 0; i < n; ++i) s.lowered[i] = unicode::lower_simple(tab, w[i]);
      } else {
        s.lowered.clear();
        unicode::python_lower_append(w, n, s.lowered);
        if (strip_accents_) {
          s.stripped.clear();
          unicode::nfd_strip_mn_append(s.lowered.data(), s.lowered.size(), s.stripped);
          s.lowered.swap(s.stripped);
        }
      }
      w = s.lowered.data();
      n = s.lowered.size();
    } else if (strip_accents_) {
      bool simple = true;
      for (std::size_t i = 0; i < n && simple; ++i) simple = unicode::flags(tab, w[i]) & unicode::kNfdSimple;
      if (!simple) {
        s.stripped.clear();
        unicode::nfd_strip_mn_append(w, n, s.stripped);
        w = s.stripped.data();
        n = s.stripped.size();
      }
    }
    s.token.clear();
    for (std::size_t i = 0; i < n; ++i) {
      const char32_t c = w[i];
      if (unicode::flags(tab, c) & unicode::kPunct) {
        if (!s.token.empty()) {
          sink(std::string_view(s.token));
          s.token.clear();
        }
        unicode::append_utf8(s.token, c);
        sink(std::string_view(s.token));
        s.token.clear();
      } else {
        unicode::append_utf8(s.token, c);
      }
    }
    if (!s.token.empty()) sink(std::string_view(s.token));
  };

  s.word.clear();
  const uint8_t chinese = tokenize_chinese_chars_ ? unicode::kChinese : 0;
  for (const char32_t c : s.cps) {
    const uint8_t f = unicode::flags(tab, c) & static_cast<uint8_t>(~unicode::kChinese | chinese);
    if (f & (unicode::kRemove | unicode::kSpace | unicode::kChinese)) {
      if (f & unicode::kRemove) continue;  // removed characters join their neighbours, as in _clean_text
      process_word(s.word.data(), s.word.size());
      s.word.clear();
      if (f & unicode::kChinese) process_word(&c, 1);
      continue;
    }
    s.word.push_back(c);
  }
  process_word(s.word.data(), s.word.size());
}

std::vector<std::string> BasicTokenizer::tokenize(std::string_view text) const {
  std::vector<std::string> out;
  run(text, [&](std::string_view t) { out.emplace_back(t); });
  return out;
}

void BasicTokenizer::tokenize(std::string_view text, const TokenSink& sink) const { run(text, sink); }

// ---------------------------------------------------------------------------------------------------------
// WordpieceTokenizer

// Open-addressing hash tables over views into the vocab's tokens: `initial` holds every token as written
// (a word's first piece is looked up literally), `continuation` holds "##x" tokens keyed by "x", so
// "##"+substring lookups need no string building.
struct WordpieceTokenizer::Tables {
  struct Map {
    struct Slot {
      std::string_view key;
      uint32_t hash = 0;  // high bits of the key's hash: most mismatches are rejected without a memcmp
      int32_t id = -1;
    };
    std::vector<Slot> slots;
    std::size_t mask = 0;
    std::size_t max_len = 0;  // longest key in bytes: longer substrings cannot match

    void build(const std::vector<std::pair<std::string_view, int32_t>>& entries) {
      std::size_t cap = 16;
      while (cap < entries.size() * 2) cap *= 2;
      slots.assign(cap, Slot{});
      mask = cap - 1;
      for (const auto& [k, id] : entries) {
        const std::size_t full = std::hash<std::string_view>{}(k);
        std::size_t h = full & mask;
        while (slots[h].id >= 0) h = (h + 1) & mask;  // keys are distinct: Vocab rejects duplicates
        slots[h] = Slot{k, static_cast<uint32_t>(full >> 32), id};
        max_len = std::max(max_len, k.size());
      }
    }
    int32_t find(std::string_view k) const {
      const std::size_t full = std::hash<std::string_view>{}(k);
      const auto tag = static_cast<uint32_t>(full >> 32);
      std::size_t h = full & mask;
      while (slots[h].id >= 0) {
        const Slot& s = slots[h];
        if (s.hash == tag && s.key.size() == k.size() && std::memcmp(s.key.data(), k.data(), k.size()) == 0)
          return s.id;
        h = (h + 1) & mask;
      }
      return -1;
    }
  };
  Map initial, continuation;
};

WordpieceTokenizer::WordpieceTokenizer(std::shared_ptr<const Vocab> vocab, std::string unk_token,
                                       int max_input_chars_per_word)
    : vocab_(std::move(vocab)), unk_token_(std::move(unk_token)), max_chars_(max_input_chars_per_word) {
  BERTRAIN_CHECK(vocab_ != nullptr, "WordpieceTokenizer: vocab is null");
  BERTRAIN_CHECK(max_chars_ > 0, "WordpieceTokenizer: max_input_chars_per_word must be positive, got ", max_chars_);
  auto t = std::make_shared<Tables>();
  std::vector<std::pair<std::string_view, int32_t>> all, cont;
  const auto& toks = vocab_->tokens();
  all.reserve(toks.size());
  for (std::size_t i = 0; i < toks.size(); ++i) {
    const std::string_view tok = toks[i];
    all.emplace_back(tok, static_cast<int32_t>(i));
    if (tok.size() > 2 && tok.substr(0, 2) == "##") cont.emplace_back(tok.substr(2), static_cast<int32_t>(i));
  }
  t->initial.build(all);
  t->continuation.build(cont);
  tables_ = std::move(t);
  unk_id_ = vocab_->id(unk_token_);
}

template <class Emit>
bool WordpieceTokenizer::split(std::string_view word, Emit&& emit) const {
  // Pieces are emitted as found; when the word turns out to be unknown the caller discards them.
  if (utf8_length(word) > static_cast<std::size_t>(max_chars_)) return false;
  const std::size_t len = word.size();
  std::size_t start = 0;
  while (start < len) {
    const Tables::Map& map = start == 0 ? tables_->initial : tables_->continuation;
    std::size_t end = std::min(len, start + map.max_len);
    while (end < len && is_continuation_byte(word[end])) --end;  // back to a code point boundary
    int32_t id = -1;
    while (end > start) {
      id = map.find(word.substr(start, end - start));
      if (id >= 0) break;
      --end;
      while (end > start && is_continuation_byte(word[end])) --end;
    }
    if (id < 0) return false;
    emit(id);
    start = end;
  }
  return true;
}

void WordpieceTokenizer::tokenize_word(std::string_view word, std::vector<std::string>& out) const {
  const std::size_t mark = out.size();
  const bool ok = split(word, [&](int32_t id) { out.push_back(vocab_->tokens()[static_cast<std::size_t>(id)]); });
  if (!ok) {
    out.resize(mark);
    out.push_back(unk_token_);
  }
}

void WordpieceTokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  const std::size_t mark = out.size();
  const bool ok = split(word, [&](int32_t id) { out.push_back(id); });
  if (!ok) {
    out.resize(mark);
    BERTRAIN_CHECK(unk_id_ >= 0, "vocab '", vocab_->source(), "' has no ", unk_token_, " token, needed for the word '",
                   word, "' that WordPiece cannot cover");
    out.push_back(unk_id_);
  }
}

std::vector<std::string> WordpieceTokenizer::tokenize(std::string_view text) const {
  std::vector<char32_t> cps;
  utf8_decode_append(text, cps);
  std::vector<std::string> out;
  std::string word;
  for (const char32_t c : cps) {
    if (unicode::is_python_space(c)) {
      if (!word.empty()) tokenize_word(word, out);
      word.clear();
    } else {
      utf8_append(word, c);
    }
  }
  if (!word.empty()) tokenize_word(word, out);
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// FullTokenizer

FullTokenizer::FullTokenizer(std::shared_ptr<const Vocab> vocab, bool do_lower_case, std::optional<bool> strip_accents,
                             bool tokenize_chinese_chars)
    : vocab_(std::move(vocab)), basic_(do_lower_case, strip_accents, tokenize_chinese_chars), wordpiece_(vocab_) {}

FullTokenizer FullTokenizer::from_vocab_file(const std::string& vocab_file, bool do_lower_case) {
  return FullTokenizer(std::make_shared<const Vocab>(Vocab::load(vocab_file)), do_lower_case);
}

std::vector<std::string> FullTokenizer::tokenize(std::string_view text) const {
  std::vector<std::string> out;
  basic_.run(text, [&](std::string_view t) { wordpiece_.tokenize_word(t, out); });
  return out;
}

void FullTokenizer::encode_append(std::string_view text, std::vector<int32_t>& ids) const {
  basic_.run(text, [&](std::string_view t) { wordpiece_.encode_word(t, ids); });
}

std::vector<int32_t> FullTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  encode_append(text, ids);
  return ids;
}

std::vector<int32_t> FullTokenizer::convert_tokens_to_ids(const std::vector<std::string>& tokens) const {
  std::vector<int32_t> ids;
  ids.reserve(tokens.size());
  for (const auto& t : tokens) {
    const int32_t id = vocab_->id(t);
    BERTRAIN_CHECK(id >= 0, "token '", t, "' is not in vocab '", vocab_->source(), "'");
    ids.push_back(id);
  }
  return ids;
}

std::vector<std::string> FullTokenizer::convert_ids_to_tokens(const std::vector<int32_t>& ids) const {
  std::vector<std::string> out;
  out.reserve(ids.size());
  for (const int32_t id : ids) out.push_back(vocab_->token(id));
  return out;
}

}  // namespace bertrain::text
