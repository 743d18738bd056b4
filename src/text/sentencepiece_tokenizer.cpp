// sentencepiece_tokenizer.cpp: ALBERT-style sentencepiece tokenization and build-vocab training, wrapping
// the sentencepiece processor and trainer libraries.
#include "bertrain/text/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "bertrain/core/error.h"
#include "bertrain/text/tokenizer.h"
#include "bertrain/text/utf8.h"
#include "bertrain/text/unicode.h"

namespace bertrain::text {
namespace {

constexpr std::string_view kSpieceUnderline = "\xE2\x96\x81";  // U+2581 '▁'

std::string encode_utf8(const std::vector<char32_t>& cps) {
  std::string s;
  s.reserve(cps.size());
  for (char32_t c : cps) utf8_append(s, c);
  return s;
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  std::size_t pos = 0;
  while (true) {
    const std::size_t f = s.find(from, pos);
    if (f == std::string::npos) break;
    out.append(s, pos, f - pos);
    out.append(to);
    pos = f + from.size();
  }
  out.append(s, pos, std::string::npos);
  s.swap(out);
}

// ---- a guard for sentencepiece's normalization tables ----
// A ModelProto's normalizer_spec (field 3) and denormalizer_spec (field 5) may hold a precompiled_charsmap (field
// 2): <uint32 trie size><darts-clone double array: trie size / 4 units of 32 bits><NUL-terminated replacements>.
// sentencepiece 0.1.97 walks that array with every input byte, and takes replacement strings at offsets read from
// it, without a bounds check (its Normalizer::NormalizePrefix; README "Reliability", dependency finding S1): a
// corrupt table is a read anywhere in memory. valid_charsmap visits every array index and string offset the walk
// can reach for any input, so such a model is refused before sentencepiece sees it. A table sentencepiece itself
// rejects (too short, size past the end) passes through to its own error.

bool read_varint(std::string_view& s, uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 64 && !s.empty(); shift += 7) {
    const auto b = static_cast<uint8_t>(s.front());
    s.remove_prefix(1);
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

// Calls fn(field, bytes) for every length-delimited field of the protobuf message `s`. False when the wire format
// is malformed or uses groups, which no sentencepiece model has.
template <class Fn>
bool each_length_delimited(std::string_view s, Fn&& fn) {
  while (!s.empty()) {
    uint64_t key = 0, v = 0;
    if (!read_varint(s, key)) return false;
    switch (key & 7) {
      case 0:
        if (!read_varint(s, v)) return false;
        break;
      case 1:
        if (s.size() < 8) return false;
        s.remove_prefix(8);
        break;
      case 5:
        if (s.size() < 4) return false;
        s.remove_prefix(4);
        break;
      case 2:
        if (!read_varint(s, v) || v > s.size()) return false;
        if (!fn(key >> 3, s.substr(0, v))) return false;
        s.remove_prefix(v);
        break;
      default:
        return false;
    }
  }
  return true;
}

// The reads of darts-clone's commonPrefixSearch (darts.h, DoubleArrayImpl): unit i is 32 bits; offset, label,
// has_leaf and value as its DoubleArrayUnit defines them; the id after byte c is (id ^ c), then ^= offset.
bool valid_charsmap(std::string_view blob, std::string& why) {
  uint32_t trie_bytes = 0;
  if (blob.size() <= 4) return true;  // sentencepiece: "Blob for normalization rule is broken."
  std::memcpy(&trie_bytes, blob.data(), 4);
  if (trie_bytes >= blob.size()) return true;  // sentencepiece: "Trie data size exceeds the input blob size."
  const uint32_t n = trie_bytes / 4;
  const char* units = blob.data() + 4;
  const uint64_t strings = blob.size() - 4 - trie_bytes;  // a NUL ends the proto's std::string right after them
  auto unit = [&](uint32_t i) {
    uint32_t u;
    std::memcpy(&u, units + 4 * static_cast<size_t>(i), 4);
    return u;
  };
  auto offset = [](uint32_t u) -> uint32_t { return (u >> 10) << ((u & (1u << 9)) >> 6); };
  if (n == 0) {
    why = "an empty double array";
    return false;
  }
  std::vector<uint8_t> seen(n, 0);
  std::vector<uint32_t> todo = {offset(unit(0))};
  while (!todo.empty()) {
    const uint32_t base = todo.back();
    todo.pop_back();
    if ((base | 0xffu) >= n) {  // the next input byte c reads unit base ^ c, whatever c is
      why = "a double-array transition to unit " + std::to_string(base | 0xffu) + " of " + std::to_string(n);
      return false;
    }
    if (seen[base]) continue;
    seen[base] = 1;
    for (uint32_t c = 0; c < 256; ++c) {
      const uint32_t u = unit(base ^ c);
      if ((u & ((1u << 31) | 0xffu)) != c) continue;  // label mismatch: the walk stops
      const uint32_t next = (base ^ c) ^ offset(u);
      if ((u >> 8) & 1u) {  // has_leaf: the value unit is read, and the replacement string at that offset
        if (next >= n) {
          why = "a leaf at unit " + std::to_string(next) + " of " + std::to_string(n);
          return false;
        }
        const uint32_t value = unit(next) & ((1u << 31) - 1);
        if (value > strings) {
          why = "a replacement at byte " + std::to_string(value) + " of " + std::to_string(strings);
          return false;
        }
      }
      todo.push_back(next);
    }
  }
  return true;
}

// Throws naming `source` when a precompiled_charsmap of the model would be read out of bounds.
void check_normalization_tables(std::string_view model_proto, const std::string& source) {
  std::string why;
  bool valid = true;
  const bool parsed = each_length_delimited(model_proto, [&](uint64_t field, std::string_view spec) {
    if (field != 3 && field != 5) return true;  // normalizer_spec, denormalizer_spec
    return each_length_delimited(spec, [&](uint64_t f, std::string_view charsmap) {
      if (f == 2 && valid) valid = valid_charsmap(charsmap, why);  // precompiled_charsmap
      return true;
    });
  });
  BERTRAIN_CHECK(parsed, "sentencepiece model '", source, "': cannot load: not a serialized ModelProto");
  BERTRAIN_CHECK(valid, "sentencepiece model '", source, "': corrupt precompiled_charsmap (", why,
                 "): sentencepiece would read outside it");
}

}  // namespace

std::string albert_preprocess_text(std::string_view text, bool lower, bool remove_space, bool replace_quotes) {
  std::vector<char32_t> cps;
  utf8_decode_append(text, cps);
  if (remove_space) {  // " ".join(text.strip().split())
    std::vector<char32_t> joined;
    bool in_word = false;
    for (char32_t c : cps) {
      if (unicode::is_python_space(c)) {
        in_word = false;
        continue;
      }
      if (!in_word && !joined.empty()) joined.push_back(U' ');
      in_word = true;
      joined.push_back(c);
    }
    cps.swap(joined);
  }
  if (replace_quotes) {
    std::string s = encode_utf8(cps);
    replace_all(s, "``", "\"");
    replace_all(s, "''", "\"");
    cps.clear();
    utf8_decode_append(s, cps);
  }
  std::vector<char32_t> stripped;
  unicode::nfkd_drop_combining_append(cps.data(), cps.size(), stripped);
  if (!lower) return encode_utf8(stripped);
  std::vector<char32_t> lowered;
  unicode::python_lower_append(stripped.data(), stripped.size(), lowered);
  return encode_utf8(lowered);
}

// ---------------------------------------------------------------------------------------------------------

struct SentencePieceTokenizer::Impl {
  sentencepiece::SentencePieceProcessor sp;
};

SentencePieceTokenizer::SentencePieceTokenizer(std::unique_ptr<Impl> impl, std::string model_file, bool do_lower_case)
    : impl_(std::move(impl)), model_file_(std::move(model_file)), do_lower_case_(do_lower_case) {}
SentencePieceTokenizer::~SentencePieceTokenizer() = default;
SentencePieceTokenizer::SentencePieceTokenizer(SentencePieceTokenizer&&) noexcept = default;
SentencePieceTokenizer& SentencePieceTokenizer::operator=(SentencePieceTokenizer&&) noexcept = default;

SentencePieceTokenizer SentencePieceTokenizer::load(const std::string& model_file, bool do_lower_case) {
  BERTRAIN_CHECK(std::filesystem::is_regular_file(model_file), "sentencepiece model '", model_file,
                 "': no such file");
  std::ifstream in(model_file, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  BERTRAIN_CHECK(in.good() || in.eof(), "sentencepiece model '", model_file, "': read error");
  return from_serialized(bytes.str(), model_file, do_lower_case);
}

SentencePieceTokenizer SentencePieceTokenizer::from_serialized(std::string_view model_proto, const std::string& source,
                                                               bool do_lower_case) {
  check_normalization_tables(model_proto, source);
  auto impl = std::make_unique<Impl>();
  // sentencepiece reports errors as a Status, but the darts-clone trie builder underneath throws (an empty piece:
  // "failed to insert key: zero-length key"; dependency finding S2): both become one bertrain::Error.
  sentencepiece::util::Status st;
  try {
    st = impl->sp.LoadFromSerializedProto(absl::string_view(model_proto.data(), model_proto.size()));
  } catch (const std::exception& e) {
    throw Error("sentencepiece model '" + source + "': cannot load: " + printable(e.what()));
  }
  BERTRAIN_CHECK(st.ok(), "sentencepiece model '", source, "': cannot load: ", st.ToString());
  return SentencePieceTokenizer(std::move(impl), source, do_lower_case);
}

std::vector<std::string> SentencePieceTokenizer::split_digit_comma_piece(std::string_view piece) const {
  std::string body(piece.substr(0, piece.size() - 1));  // piece[:-1]
  replace_all(body, kSpieceUnderline, "");
  std::vector<std::string> cur;
  const auto st = impl_->sp.Encode(body, &cur);
  BERTRAIN_CHECK(st.ok(), "sentencepiece model '", model_file_, "': encode failed: ", st.ToString());
  const bool piece_has_underline = piece.substr(0, kSpieceUnderline.size()) == kSpieceUnderline;
  if (!piece_has_underline && !cur.empty() && cur[0].compare(0, kSpieceUnderline.size(), kSpieceUnderline) == 0) {
    if (cur[0].size() == kSpieceUnderline.size()) cur.erase(cur.begin());
    else cur[0].erase(0, kSpieceUnderline.size());
  }
  cur.emplace_back(",");
  return cur;
}

std::vector<std::string> SentencePieceTokenizer::encode_pieces(std::string_view text) const {
  std::vector<std::string> pieces;
  const auto st = impl_->sp.Encode(text, &pieces);
  BERTRAIN_CHECK(st.ok(), "sentencepiece model '", model_file_, "': encode failed: ", st.ToString());
  std::vector<std::string> out;
  out.reserve(pieces.size());
  std::vector<char32_t> cps;
  for (auto& p : pieces) {
    cps.clear();
    utf8_decode_append(p, cps);
    if (cps.size() > 1 && cps.back() == U',' && unicode::is_python_digit(cps[cps.size() - 2])) {
      for (auto& q : split_digit_comma_piece(p)) out.push_back(std::move(q));
    } else {
      out.push_back(std::move(p));
    }
  }
  return out;
}

std::vector<std::string> SentencePieceTokenizer::tokenize(std::string_view text) const {
  return encode_pieces(albert_preprocess_text(text, do_lower_case_));
}

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  for (const auto& p : tokenize(text)) ids.push_back(impl_->sp.PieceToId(p));
  return ids;
}

int32_t SentencePieceTokenizer::piece_to_id(std::string_view piece) const { return impl_->sp.PieceToId(piece); }

const std::string& SentencePieceTokenizer::id_to_piece(int32_t id) const {
  BERTRAIN_CHECK(id >= 0 && static_cast<std::size_t>(id) < size(), "sentencepiece model '", model_file_,
                 "': id ", id, " out of range [0, ", size(), ")");
  return impl_->sp.IdToPiece(id);
}

std::size_t SentencePieceTokenizer::size() const { return static_cast<std::size_t>(impl_->sp.GetPieceSize()); }

// ---------------------------------------------------------------------------------------------------------

Vocab bert_vocab_from_sentencepiece(const SentencePieceTokenizer& spm) {
  std::vector<std::string> tokens = {std::string(Vocab::kPad), std::string(Vocab::kUnk), std::string(Vocab::kCls),
                                     std::string(Vocab::kSep), std::string(Vocab::kMask)};
  std::unordered_set<std::string> seen(tokens.begin(), tokens.end());
  std::set<std::string> initial_chars, continuation_chars;  // ordered: deterministic completion order
  auto add = [&](std::string t) {
    if (seen.insert(t).second) tokens.push_back(std::move(t));
  };
  for (std::size_t id = 0; id < spm.size(); ++id) {
    const auto i = static_cast<int32_t>(id);
    const std::string& piece = spm.id_to_piece(i);
    if (piece.size() > 1 && piece.front() == '<' && piece.back() == '>' &&
        (piece == "<unk>" || piece == "<s>" || piece == "</s>" || piece == "<pad>"))
      continue;
    if (piece == kSpieceUnderline || piece.empty()) continue;
    if (piece.compare(0, kSpieceUnderline.size(), kSpieceUnderline) == 0) {
      std::string word = piece.substr(kSpieceUnderline.size());
      if (utf8_length(word) == 1) initial_chars.insert(word);
      add(std::move(word));
    } else {
      if (utf8_length(piece) == 1) continuation_chars.insert(piece);
      add(std::string("##").append(piece));
    }
  }
  for (const auto& c : continuation_chars) add(c);
  for (const auto& c : initial_chars) add(std::string("##").append(c));
  return Vocab::from_tokens(std::move(tokens), spm.model_file() + " (as BERT vocab)");
}

namespace {

// Feeds the trainer the BasicTokenizer-split (or ALBERT-preprocessed) lines of the input files, skipping
// blank and non-UTF-8 lines.
class BasicSplitIterator : public sentencepiece::SentenceIterator {
 public:
  BasicSplitIterator(const std::vector<std::string>& files, bool do_lower_case, bool pre_split)
      : files_(files), basic_(do_lower_case), lower_(do_lower_case), pre_split_(pre_split) {
    next_file();
    Next();
  }
  bool done() const override { return done_; }
  const std::string& value() const override { return value_; }
  sentencepiece::util::Status status() const override { return {}; }
  void Next() override {
    std::string line;
    while (true) {
      if (!in_.is_open() || !std::getline(in_, line)) {
        if (!next_file()) {
          done_ = true;
          return;
        }
        continue;
      }
      ++line_no_;
      const std::size_t bad = utf8_invalid_offset(line);
      if (bad != std::string_view::npos) {
        if (invalid_lines++ == 0) first_invalid = files_[file_index_ - 1] + ":" + std::to_string(line_no_);
        continue;
      }
      value_.clear();
      if (pre_split_) {
        basic_.tokenize(line, [&](std::string_view t) {
          if (!value_.empty()) value_ += ' ';
          value_.append(t);
        });
      } else {
        value_ = albert_preprocess_text(line, lower_);
      }
      if (value_.empty()) continue;
      ++sentences;
      return;
    }
  }
  std::size_t sentences = 0, invalid_lines = 0;
  std::string first_invalid;

 private:
  bool next_file() {
    if (in_.is_open()) in_.close();
    if (file_index_ >= files_.size()) return false;
    const std::string& f = files_[file_index_++];
    in_.open(f, std::ios::binary);
    BERTRAIN_CHECK(in_.is_open(), "input file '", f, "': cannot open (missing or unreadable)");
    line_no_ = 0;
    return true;
  }
  const std::vector<std::string>& files_;
  BasicTokenizer basic_;
  bool lower_, pre_split_;
  std::ifstream in_;
  std::size_t file_index_ = 0, line_no_ = 0;
  std::string value_;
  bool done_ = false;
};

}  // namespace

SentencePieceTrainResult train_sentencepiece(const SentencePieceTrainOptions& o) {
  BERTRAIN_CHECK(!o.input_files.empty(), "build-vocab: no input files given");
  BERTRAIN_CHECK(!o.output_dir.empty(), "build-vocab: no output directory given");
  BERTRAIN_CHECK(o.vocab_size >= 8, "build-vocab: vocab_size must be at least 8, got ", o.vocab_size);
  BERTRAIN_CHECK(o.model_type == "unigram" || o.model_type == "bpe",
                 "build-vocab: model_type must be 'unigram' or 'bpe', got '", o.model_type, "'");
  BERTRAIN_CHECK(o.character_coverage > 0 && o.character_coverage <= 1,
                 "build-vocab: character_coverage must be in (0, 1], got ", o.character_coverage);
  for (const auto& f : o.input_files)
    BERTRAIN_CHECK(std::filesystem::is_regular_file(f), "input file '", f, "': no such file");
  std::filesystem::create_directories(o.output_dir);
  const std::string prefix = (std::filesystem::path(o.output_dir) / "spm").string();

  // Opening the files happens inside the iterator; its errors are thrown from here, before training.
  BasicSplitIterator it(o.input_files, o.do_lower_case, o.bert_pre_split);
  BERTRAIN_CHECK(!it.done(), "build-vocab: the input files contain no text");
  sentencepiece::SetRandomGeneratorSeed(o.seed);
  const std::unordered_map<std::string, std::string> args = {
      {"model_prefix", prefix},
      {"vocab_size", std::to_string(o.vocab_size)},
      {"model_type", o.model_type},
      {"character_coverage", std::to_string(o.character_coverage)},
      {"input_sentence_size", std::to_string(o.input_sentence_size)},
      {"shuffle_input_sentence", "true"},
      {"num_threads", std::to_string(std::max(1, o.num_threads))},
      {"byte_fallback", "false"},
      {"hard_vocab_limit", "false"},
      {"minloglevel", "1"},
  };
  const auto st = sentencepiece::SentencePieceTrainer::Train(args, &it);
  BERTRAIN_CHECK(st.ok(), "build-vocab: sentencepiece training failed: ", st.ToString());

  SentencePieceTrainResult r;
  r.model_file = prefix + ".model";
  r.spm_vocab_file = prefix + ".vocab";
  r.vocab_file = (std::filesystem::path(o.output_dir) / "vocab.txt").string();
  r.sentences = it.sentences;
  r.invalid_utf8_lines = it.invalid_lines;
  r.first_invalid_utf8_line = it.first_invalid;
  const Vocab v = bert_vocab_from_sentencepiece(SentencePieceTokenizer::load(r.model_file, o.do_lower_case));
  v.save(r.vocab_file);
  r.bert_vocab_size = v.size();
  return r;
}

}  // namespace bertrain::text
