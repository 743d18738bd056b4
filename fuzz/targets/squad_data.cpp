// squad_data.cpp (fuzz target): a SQuAD v1.1 / v2.0 data file as `bertrain run-squad` reads it
// (parse_squad_examples, the body of read_squad_examples: code-point answer offsets, paragraph split, answer
// recovery) and as `bertrain squad-evaluate` reads it (parse_squad_gold), then run_squad's windows and features
// with bert-base's uncased vocabulary. Input: one flags byte (bit 0 training, bit 1 version_2_with_negative),
// then the JSON.
#include "bertrain/tasks/squad/evaluate.h"
#include "bertrain/tasks/squad/squad.h"
#include "fuzz_util.h"

using namespace bertrain;

namespace {

const text::FullTokenizer& tokenizer() {
  static const text::FullTokenizer tok = text::FullTokenizer::from_vocab_file(
      BERTRAIN_SOURCE_DIR "/data/vocab/bert-base-uncased-vocab.txt", true);
  return tok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto in = fuzz::split_flags(data, size);
  const bool training = in.flags & 1, v2 = in.flags & 2;
  const std::string source = "fuzz/train-v2.0.json";
  fuzz::expect_refusal_or_success(source, [&] {
    const squad::SquadReadResult r = squad::parse_squad_examples(in.bytes, training, v2, source);
    squad::SquadFeatureOptions o;
    o.max_seq_length = 24;
    o.doc_stride = 5;
    o.max_query_length = 6;
    o.is_training = training;
    int64_t n = 0;
    squad::convert_examples_to_features(r.examples, tokenizer(), o, [&](squad::SquadFeature&& f) {
      ++n;
      if (training && (f.start_position < 0 || f.end_position < f.start_position || f.end_position >= 24)) {
        std::fprintf(stderr, "FINDING: feature positions [%d, %d] outside the window\n", f.start_position,
                     f.end_position);
        std::abort();
      }
    });
  });
  fuzz::expect_refusal_or_success(source, [&] {
    const squad::SquadGold gold = squad::parse_squad_gold(in.bytes, source);
    // Each question answered with its own first answer: evaluation of arbitrary strings against themselves.
    std::unordered_map<std::string, std::string> predictions;
    for (const auto& q : gold.questions) predictions[q.id] = q.answers.empty() ? "" : q.answers.front();
    fuzz::expect_refusal_or_success("", [&] { (void)squad::squad_evaluate_json(gold, predictions); });
  });
  return 0;
}
