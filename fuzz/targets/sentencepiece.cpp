// sentencepiece.cpp (fuzz target): a sentencepiece .model (SentencePieceTokenizer::from_serialized, the body of
// load), then ALBERT-style tokenization of a fixed text, every id's piece, and the BERT vocab derived from it.
// Input: one flags byte (bit 0 lowercase), then the serialized ModelProto.
#include "bertrain/text/sentencepiece_tokenizer.h"
#include "fuzz_util.h"

using namespace bertrain;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto in = fuzz::split_flags(data, size);
  const std::string source = "fuzz/spm.model";
  fuzz::expect_refusal_or_success(source, [&] {
    const auto spm = text::SentencePieceTokenizer::from_serialized(in.bytes, source, in.flags & 1);
    for (const char* t : {"Hello, world! It's 7,000 ``quoted'' words.", "naïve café 東京 ½ ﬁ", "", " \t x"}) {
      fuzz::expect_refusal_or_success(source, [&] {
        (void)spm.tokenize(t);
        (void)spm.encode(t);
      });
    }
    for (size_t id = 0; id < spm.size(); ++id) (void)spm.piece_to_id(spm.id_to_piece(static_cast<int32_t>(id)));
    (void)text::bert_vocab_from_sentencepiece(spm);
  });
  return 0;
}
