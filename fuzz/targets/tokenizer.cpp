// tokenizer.cpp (fuzz target): BERT's basic + WordPiece tokenizer (FullTokenizer::tokenize, encode) on arbitrary
// bytes, invalid UTF-8 included, over bert-base's vocabularies, with each lowercasing / accent option.
// Input: one flags byte (bit 0 lowercase, bits 1-2 strip_accents unset / false / true), then the text.
#include <memory>

#include "bertrain/text/tokenizer.h"
#include "bertrain/text/utf8.h"
#include "fuzz_util.h"

using namespace bertrain;

namespace {

std::shared_ptr<const text::Vocab> vocab(bool lower) {
  static const auto uncased = std::make_shared<const text::Vocab>(
      text::Vocab::load(BERTRAIN_SOURCE_DIR "/data/vocab/bert-base-uncased-vocab.txt"));
  static const auto cased = std::make_shared<const text::Vocab>(
      text::Vocab::load(BERTRAIN_SOURCE_DIR "/data/vocab/bert-base-cased-vocab.txt"));
  return lower ? uncased : cased;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto in = fuzz::split_flags(data, size);
  const bool lower = in.flags & 1;
  const int accents = (in.flags >> 1) & 3;
  const std::optional<bool> strip = accents % 3 == 0 ? std::nullopt : std::optional<bool>(accents % 3 == 2);
  // Built once per option set: a FullTokenizer indexes its vocab when constructed.
  static std::unique_ptr<const text::FullTokenizer> cache[2][3];
  auto& slot = cache[lower][accents % 3];
  if (!slot) slot = std::make_unique<const text::FullTokenizer>(vocab(lower), lower, strip);
  const text::FullTokenizer& tok = *slot;
  const bool valid = text::utf8_is_valid(in.bytes);
  bool refused = false;
  try {
    const std::vector<std::string> pieces = tok.tokenize(in.bytes);
    const std::vector<int32_t> ids = tok.encode(in.bytes);
    // encode() is convert_tokens_to_ids(tokenize()) without the strings: they must agree.
    if (ids != tok.convert_tokens_to_ids(pieces)) {
      std::fprintf(stderr, "FINDING: encode() differs from convert_tokens_to_ids(tokenize())\n");
      std::abort();
    }
    for (const auto& p : pieces)
      if (p.empty() || !text::utf8_is_valid(p)) {
        std::fprintf(stderr, "FINDING: empty or ill-formed piece\n");
        std::abort();
      }
  } catch (const Error& e) {
    fuzz::check_message(e.what(), "");
    refused = true;
  }
  // Documented: ill-formed UTF-8 is refused, well-formed text never is (the vocab has [UNK]).
  if (refused == valid) {
    std::fprintf(stderr, "FINDING: %s UTF-8 was %s\n", valid ? "well-formed" : "ill-formed",
                 refused ? "refused" : "accepted");
    std::abort();
  }
  return 0;
}
