// cmd_squad_evaluate.cpp: `bertrain squad-evaluate`: the official SQuAD evaluation (evaluate-v1.1.py or
// evaluate-v2.0.py, chosen by the data file's "version"), or with --metric cmrc2018 the CMRC 2018 script (v6),
// printing exactly what the official script prints.
#include <spdlog/spdlog.h>

#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "bertrain/core/error.h"
#include "bertrain/tasks/squad/cmrc2018.h"
#include "bertrain/tasks/squad/evaluate.h"
#include "commands.h"

namespace bertrain::cli {
namespace {

struct SquadEvaluateFlags {
  std::string data_file, prediction_file, na_prob_file, metric = "squad";
  double na_prob_thresh = 1.0;
};

int run_squad_evaluate(const SquadEvaluateFlags& f) {
  const squad::SquadGold gold = squad::read_squad_gold(f.data_file);
  const auto preds = squad::read_squad_predictions(f.prediction_file);
  if (f.metric == "cmrc2018") {
    BERTRAIN_CHECK(f.na_prob_file.empty(), "squad-evaluate: --na_prob_file does not apply to --metric cmrc2018");
    const squad::CmrcEval r = squad::evaluate_cmrc2018(gold, preds);
    for (const auto& id : r.unanswered) std::cerr << "Unanswered question: " << id << "\n";
    std::cout << r.to_json(f.prediction_file) << "\n";
    return 0;
  }
  const int version = gold.major_version();
  std::optional<std::vector<std::pair<std::string, double>>> na_probs;
  if (!f.na_prob_file.empty()) {
    BERTRAIN_CHECK(version == 2, "squad-evaluate: --na_prob_file applies to SQuAD v2.0 data; ", f.data_file,
                   " is version ", gold.version);
    na_probs = squad::read_squad_na_probs(f.na_prob_file);
  }
  if (version == 1) {
    const squad::SquadEvalV1 r = squad::evaluate_v1(gold, preds);
    // As the official script: one stderr line per unanswered question, scored 0.
    for (const auto& id : r.unanswered) std::cerr << "Unanswered question " << id << " will receive score 0.\n";
    std::cout << r.to_json() << "\n";
  } else {
    const squad::SquadEvalV2 r = squad::evaluate_v2(gold, preds, na_probs ? &*na_probs : nullptr, f.na_prob_thresh);
    std::cout << r.to_json() << "\n";
  }
  return 0;
}

Registrar reg{{"squad-evaluate", "official SQuAD v1.1 / v2.0 (or CMRC 2018) evaluation of a predictions.json", [](CLI::App& sub) {
                 auto f = std::make_shared<SquadEvaluateFlags>();
                 sub.add_option("--data_file", f->data_file, "SQuAD data file with gold answers (its \"version\" "
                                                             "picks v1.1 or v2.0 scoring)")
                     ->required();
                 sub.add_option("--prediction_file", f->prediction_file, "predictions.json: question id -> answer")
                     ->required();
                 sub.add_option("--na_prob_file", f->na_prob_file,
                                "v2.0: null_odds.json (question id -> no-answer score); adds best_exact/best_f1 and "
                                "their thresholds");
                 sub.add_option("--metric", f->metric,
                                "squad (default: evaluate-v1.1.py / v2.0 by the file's version) or cmrc2018 (the CMRC "
                                "2018 script, v6: mixed CJK/English segmentation, LCS F1)")
                     ->check(CLI::IsMember({"squad", "cmrc2018"}));
                 sub.add_option("--na_prob_thresh", f->na_prob_thresh,
                                "v2.0: predict \"\" where the no-answer score exceeds this (default 1.0)");
                 return std::function<int()>([f] { return run_squad_evaluate(*f); });
               }}};

}  // namespace
}  // namespace bertrain::cli
