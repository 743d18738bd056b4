// vocab.cpp (fuzz target): a BERT vocab.txt (Vocab::parse, the body of Vocab::load), then a FullTokenizer over
// it on a fixed sentence and on the file's own lines (WordPiece over pieces it has never seen: "##", "", CJK).
// Input: one flags byte (bit 0 lowercase), then the file.
#include <memory>

#include "bertrain/text/tokenizer.h"
#include "bertrain/text/vocab.h"
#include "fuzz_util.h"

using namespace bertrain;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto in = fuzz::split_flags(data, size);
  const std::string source = "fuzz/vocab.txt";
  fuzz::expect_refusal_or_success(source, [&] {
    auto vocab = std::make_shared<const text::Vocab>(text::Vocab::parse(in.bytes, source));
    for (size_t i = 0; i < vocab->size(); ++i)
      if (vocab->id(vocab->token(static_cast<int32_t>(i))) != static_cast<int32_t>(i)) {
        std::fprintf(stderr, "FINDING: token %zu does not map back to its id\n", i);
        std::abort();
      }
    const text::FullTokenizer tok(vocab, in.flags & 1);
    std::vector<std::string> texts = {"Hello, world! Naïve café 東京 [UNK] ##ing unaffable"};
    for (size_t i = 0; i < vocab->size() && i < 64; ++i) texts.push_back(vocab->token(static_cast<int32_t>(i)));
    for (const auto& t : texts) {
      // A vocab without [UNK] cannot encode unknown words: refused, naming the vocab.
      fuzz::expect_refusal_or_success(source, [&] { (void)tok.convert_ids_to_tokens(tok.encode(t)); });
    }
  });
  return 0;
}
