// squad_predictions.cpp (fuzz target): a predictions.json as `bertrain squad-evaluate --prediction_file` reads it
// (parse_squad_predictions), scored by both official metrics against gold answers made of the other predictions
// (arbitrary strings through normalize_answer, EM and F1).
#include "bertrain/tasks/squad/evaluate.h"
#include "fuzz_util.h"

using namespace bertrain;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::string source = "fuzz/predictions.json";
  fuzz::expect_refusal_or_success(source, [&] {
    const auto predictions = squad::parse_squad_predictions(text, source);
    squad::SquadGold v1, v2;
    v1.version = "1.1";
    v2.version = "v2.0";
    std::string previous = "the cat";
    for (const auto& [id, answer] : predictions) {
      v1.questions.push_back({id, {previous, answer}});
      v2.questions.push_back({id, previous.size() % 2 ? std::vector<std::string>{} : std::vector<std::string>{previous}});
      previous = answer;
    }
    if (predictions.empty()) return;
    fuzz::expect_refusal_or_success("", [&] {
      const squad::SquadEvalV1 e = squad::evaluate_v1(v1, predictions);
      if (!(e.exact_match >= 0 && e.exact_match <= 100 && e.f1 >= 0 && e.f1 <= 100)) {
        std::fprintf(stderr, "FINDING: v1 scores out of [0, 100]: %s\n", e.to_json().c_str());
        std::abort();
      }
    });
    fuzz::expect_refusal_or_success("", [&] { (void)squad::squad_evaluate_json(v2, predictions); });
  });
  return 0;
}
