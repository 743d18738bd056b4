// squad_na_prob.cpp (fuzz target): a na_prob / null_odds JSON as `bertrain squad-evaluate --na_prob_file` reads
// it (parse_squad_na_probs), then evaluate-v2.0's scoring with it (thresholding, find_best_thresh) over gold
// questions and predictions made from its ids.
#include "bertrain/tasks/squad/evaluate.h"
#include "fuzz_util.h"

using namespace bertrain;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::string source = "fuzz/null_odds.json";
  fuzz::expect_refusal_or_success(source, [&] {
    const auto na_probs = squad::parse_squad_na_probs(text, source);
    if (na_probs.empty()) return;
    squad::SquadGold gold;
    gold.version = "v2.0";
    std::unordered_map<std::string, std::string> predictions;
    size_t i = 0;
    for (const auto& [id, p] : na_probs) {
      if (predictions.count(id)) continue;
      gold.questions.push_back({id, i % 3 == 0 ? std::vector<std::string>{} : std::vector<std::string>{"a cat"}});
      predictions[id] = i % 2 ? "the cat" : "";
      ++i;
    }
    fuzz::expect_refusal_or_success("", [&] {
      const squad::SquadEvalV2 e = squad::evaluate_v2(gold, predictions, &na_probs, 0.5);
      if (!e.best || !(e.best->best_f1 >= 0 && e.best->best_f1 <= 100)) {
        std::fprintf(stderr, "FINDING: best thresholds missing or out of [0, 100]: %s\n", e.to_json().c_str());
        std::abort();
      }
      (void)squad::squad_evaluate_json(gold, predictions, &na_probs, 0.5);
    });
  });
  return 0;
}
