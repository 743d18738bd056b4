// squad_evaluate.h: the official SQuAD metrics, as evaluate-v1.1.py and evaluate-v2.0.py compute and print
// them: answer normalisation, exact match, token F1, the maximum over gold answers, the v2 HasAns/NoAns
// breakdown and the best no-answer threshold.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace bertrain::squad {

struct SquadPredictions;

/// normalize_answer of both official scripts: Python str.lower() (full Unicode mapping), remove every
/// character of string.punctuation (ASCII !"#$%&'()*+,-./:;<=>?@[\]^_`{|}~ only), replace the articles
/// matched by re.sub(r'\b(a|an|the)\b', ' ') (whole words: Python 3 \b is Unicode-aware, word characters
/// being letters, numbers and '_'), then ' '.join(text.split()) (Python whitespace).
/// Throws bertrain::Error if `s` is not well-formed UTF-8.
std::string normalize_answer(std::string_view s);

/// 1 when the normalized texts are equal (exact_match_score / compute_exact).
int exact_match_score(std::string_view prediction, std::string_view ground_truth);

/// evaluate-v1.1.py f1_score: token F1 of the normalized texts with a multiset (Counter) intersection;
/// 0 when no token is shared (so also when both are empty).
double f1_score_v1(std::string_view prediction, std::string_view ground_truth);

/// evaluate-v2.0.py compute_f1: as v1, except that when either side has no tokens the score is 1 if both
/// have none and 0 otherwise.
double compute_f1_v2(std::string_view gold, std::string_view prediction);

/// One question of a data file, for evaluation.
struct SquadGoldQuestion {
  std::string id;
  std::vector<std::string> answers;  ///< answer texts in file order
};

/// The questions of a SQuAD data file, in file order.
struct SquadGold {
  std::string version;  ///< the "version" field ("1.1", "v2.0", ...), "" when absent
  std::vector<SquadGoldQuestion> questions;
  /// 1 for "1.1" (and other 1.x), 2 for "v2.0" / "2.0"; throws bertrain::Error for anything else.
  int major_version() const;
};

/// Reads a SQuAD data file (data / paragraphs / qas / id, answers / text). Throws bertrain::Error when the
/// file cannot be read, is not valid JSON (naming the byte offset) or lacks one of those fields.
SquadGold read_squad_gold(const std::string& data_file);
SquadGold parse_squad_gold(std::string_view json_text, const std::string& source = "<squad json>");

/// A predictions.json: question id -> answer text. Throws bertrain::Error on unreadable or invalid JSON, or
/// a value that is not a string.
std::unordered_map<std::string, std::string> read_squad_predictions(const std::string& prediction_file);
std::unordered_map<std::string, std::string> parse_squad_predictions(std::string_view json_text,
                                                                     const std::string& source = "<predictions>");

/// A na_prob / null_odds file: (question id, value) in file order (the order find_best_thresh breaks ties
/// in). Throws bertrain::Error on unreadable or invalid JSON, or a value that is not a number.
std::vector<std::pair<std::string, double>> read_squad_na_probs(const std::string& na_prob_file);
std::vector<std::pair<std::string, double>> parse_squad_na_probs(std::string_view json_text,
                                                                 const std::string& source = "<na_probs>");

/// evaluate-v1.1.py's result: percentages over all questions of the file; a question without a prediction
/// counts as 0 (the script prints "Unanswered question ... will receive score 0." to stderr).
struct SquadEvalV1 {
  double exact_match = 0.0;
  double f1 = 0.0;
  int64_t total = 0;
  std::vector<std::string> unanswered;  ///< ids without a prediction, in file order
  /// Exactly what the script prints: json.dumps({"exact_match": ..., "f1": ...}) (no newline).
  std::string to_json() const;
};

/// evaluate-v1.1.py evaluate(dataset, predictions). Throws bertrain::Error when there are no questions.
SquadEvalV1 evaluate_v1(const SquadGold& gold, const std::unordered_map<std::string, std::string>& predictions);

/// The official find_best_thresh result.
struct SquadBestThresh {
  double best_exact = 0.0;
  double best_exact_thresh = 0.0;
  double best_f1 = 0.0;
  double best_f1_thresh = 0.0;
};

/// evaluate-v2.0.py's result. Has*/NoAns* are set only when such questions exist; best_* only with na_probs.
struct SquadEvalV2 {
  double exact = 0.0, f1 = 0.0;
  int64_t total = 0;
  std::optional<double> has_ans_exact, has_ans_f1;
  int64_t has_ans_total = 0;
  std::optional<double> no_ans_exact, no_ans_f1;
  int64_t no_ans_total = 0;
  std::optional<SquadBestThresh> best;
  /// Exactly what the script prints: json.dumps(OrderedDict, indent=2) with keys exact, f1, total, HasAns_exact,
  /// HasAns_f1, HasAns_total, NoAns_exact, NoAns_f1, NoAns_total, best_exact, best_exact_thresh, best_f1,
  /// best_f1_thresh (those that are set; no newline).
  std::string to_json() const;
};

/// evaluate-v2.0.py main(): gold answers are the answers whose normalized text is non-empty, [""] when none;
/// EM / F1 (compute_f1_v2) maxed over them; a question whose na_prob > na_prob_thresh scores 1 if it has no
/// answer and 0 otherwise (without na_probs every na_prob is 0.0); overall, HasAns (questions with a non-empty
/// answers list) and NoAns breakdowns; with na_probs, find_best_thresh for EM and F1.
/// Stricter than the script, which crashes with a KeyError there: throws bertrain::Error naming the first
/// question without a prediction, or (with na_probs) without a na_prob value.
SquadEvalV2 evaluate_v2(const SquadGold& gold, const std::unordered_map<std::string, std::string>& predictions,
                        const std::vector<std::pair<std::string, double>>* na_probs = nullptr,
                        double na_prob_thresh = 1.0);

/// evaluate-v2.0.py find_best_thresh for one metric: start from "predict no answer everywhere" (score = number
/// of unanswerable questions), walk the questions by ascending na_prob (stable: ties in na_probs order), adding
/// the question's score if it has an answer, -1 if it has none and the prediction is non-empty, else 0, and
/// keep the best running score and the na_prob where it was reached (0.0 if never improved). Returns
/// (100 * best / number of scored questions, threshold). `scores` holds the raw per-question scores of the
/// questions that have a prediction; questions of na_probs without a score are skipped.
std::pair<double, double> find_best_thresh(const std::unordered_map<std::string, std::string>& predictions,
                                           const std::unordered_map<std::string, double>& scores,
                                           const std::vector<std::pair<std::string, double>>& na_probs,
                                           const std::unordered_map<std::string, bool>& qid_to_has_ans);

/// For run-squad --version_2_with_negative: the best null_score_diff_threshold on a predict file with gold
/// answers. Scores the v2 predictions of `predictions` (made with any threshold) against `gold` and runs
/// find_best_thresh with their null odds as na_probs, as evaluate-v2.0.py does with --na-prob-file
/// null_odds.json; best_*_thresh is then the threshold to use. Throws bertrain::Error unless `predictions`
/// is a v2 result, or when a gold question has no prediction.
SquadBestThresh find_best_null_threshold(const SquadGold& gold, const SquadPredictions& predictions);

/// The `bertrain squad-evaluate` output for a data file of either version (taken from its "version"
/// field): SquadEvalV1::to_json or SquadEvalV2::to_json. na_probs are for v2 only (throws for v1).
std::string squad_evaluate_json(const SquadGold& gold, const std::unordered_map<std::string, std::string>& predictions,
                                const std::vector<std::pair<std::string, double>>* na_probs = nullptr,
                                double na_prob_thresh = 1.0);

}  // namespace bertrain::squad
