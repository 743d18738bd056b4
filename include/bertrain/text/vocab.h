// vocab.h: a BERT WordPiece vocabulary (vocab.txt: one token per line, id = 0-based line number).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace bertrain::text {

/// Token <-> id mapping of a BERT vocab.txt. Immutable once built; safe to share between threads.
class Vocab {
 public:
  static constexpr std::string_view kPad = "[PAD]";
  static constexpr std::string_view kUnk = "[UNK]";
  static constexpr std::string_view kCls = "[CLS]";
  static constexpr std::string_view kSep = "[SEP]";
  static constexpr std::string_view kMask = "[MASK]";

  /// Loads vocab.txt the way google-research/bert `load_vocab` does: lines split at '\n', each line
  /// stripped of leading and trailing whitespace as Python's `str.strip()` (so "\r\n" endings work), the
  /// token's id is its 0-based line number; a blank line is an (unreachable) empty token, keeping later ids.
  /// Stricter than the reference, which silently keeps the last id of a repeated token and drops bad bytes:
  /// throws bertrain::Error naming the file (and the 1-based line) when the file is missing or unreadable,
  /// is empty, has a line that is not well-formed UTF-8, or repeats a token.
  static Vocab load(const std::string& path);

  /// load() on the bytes of a vocab.txt already in memory; `source` names it in errors as load() names its
  /// path. Same throws (except the ones about opening the file).
  static Vocab parse(std::string_view bytes, const std::string& source);

  /// Builds a vocab from tokens in id order. `source` names it in error messages.
  /// Throws bertrain::Error if `tokens` is empty or holds a duplicate.
  static Vocab from_tokens(std::vector<std::string> tokens, std::string source = "<in-memory vocab>");

  /// The id of `token`, or -1 when it is not in the vocab.
  int32_t id(std::string_view token) const;
  bool contains(std::string_view token) const { return id(token) >= 0; }

  /// The token with id `id`. Throws bertrain::Error when id is outside [0, size()).
  const std::string& token(int32_t id) const;

  std::size_t size() const { return tokens_.size(); }
  const std::vector<std::string>& tokens() const { return tokens_; }

  /// The id of "[UNK]", or -1 if the vocab has none.
  int32_t unk_id() const { return unk_id_; }

  /// Throws bertrain::Error naming the vocab file, `what` needs them (e.g. "pretraining data") and the first
  /// missing token, unless every token in `tokens` is present.
  void require_special_tokens(std::initializer_list<std::string_view> tokens, const std::string& what) const;

  /// SHA-256 (hex) of the vocab file's bytes as loaded; for from_tokens(), of the bytes save() writes
  /// (each token followed by '\n'). Identifies the vocab in dataset metadata.
  const std::string& sha256() const { return sha256_; }

  /// The path it was loaded from (or the `source` given to from_tokens).
  const std::string& source() const { return source_; }

  /// Writes the vocab as vocab.txt: each token followed by '\n'. Throws bertrain::Error if it cannot write.
  void save(const std::string& path) const;

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  Vocab() = default;
  void index(const std::vector<std::size_t>& line_numbers);

  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> ids_;
  std::string sha256_;
  std::string source_;
  int32_t unk_id_ = -1;
};

}  // namespace bertrain::text
