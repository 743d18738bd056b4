// run_squad.h: SQuAD v1.1 / v2.0 question answering as library functions: the model's logits over features,
// prediction (google-research/bert run_squad.py's RawResult loop and write_predictions), scoring by the official
// metrics, and run_squad, the whole `bertrain run-squad` command.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bertrain/models/bert.h"
#include "bertrain/tasks/finetune_command.h"
#include "bertrain/tasks/squad/evaluate.h"
#include "bertrain/tasks/squad/squad.h"

namespace bertrain::text {
class FullTokenizer;
}  // namespace bertrain::text

namespace bertrain::squad {

/// run_squad.py's RawResult for every feature: start_logits[i] and end_logits[i] hold one value per real token
/// of features[i] (its input_mask's length; padding positions are never answer candidates).
struct RawResults {
  std::vector<std::vector<float>> start_logits, end_logits;
};

/// Runs `model` over `features` in batches of `batch_size`, without gradients and in eval mode (no dropout; the
/// model's mode is restored afterwards): batches of similar length (tasks::length_sorted_order), padded as
/// `padding` says, results in the features' order. Throws bertrain::Error when batch_size < 1.
RawResults compute_logits(BertForQuestionAnswering& model, const std::vector<SquadFeature>& features,
                          int64_t batch_size, const tasks::PaddingOptions& padding = {});

/// compute_logits, then write_predictions: OUTPUT_DIR/predictions.json, nbest_predictions.json and (v2.0)
/// null_odds.json. Throws bertrain::Error as both.
SquadPredictions predict(BertForQuestionAnswering& model, const std::vector<SquadExample>& examples,
                         const std::vector<SquadFeature>& features, int64_t batch_size,
                         const SquadPredictOptions& options, const std::string& output_dir,
                         const tasks::PaddingOptions& padding = {});

/// The official metrics of `predictions` against `gold`: v1.1 (evaluate-v1.1.py) exact_match and f1; v2.0
/// (evaluate-v2.0.py with the null odds as na_probs) exact, f1, total, HasAns_* / NoAns_*, best_exact,
/// best_exact_thresh, best_f1, best_f1_thresh. For v2.0 it also logs the best null-score threshold.
std::map<std::string, double> score_predictions(const SquadGold& gold, const SquadPredictions& predictions,
                                                bool version_2_with_negative);

/// The flags of `bertrain run-squad` (run_squad.py's names; the shared ones in the base; max_seq_length 0 means
/// the init checkpoint's when it was finetuned for question answering, else 384).
struct RunSquadOptions : tasks::FinetuneCommandOptions {
  std::string train_file;    ///< SQuAD JSON for do_train
  std::string predict_file;  ///< SQuAD JSON for do_predict (scored when it has answers)
  int doc_stride = 128, max_query_length = 64, n_best_size = 20, max_answer_length = 30;
  bool version_2_with_negative = false;
  double null_score_diff_threshold = 0.0;
  int64_t max_train_examples = 0;    ///< >= 1: only the first N training questions; 0: all
  int64_t max_predict_examples = 0;  ///< >= 1: only the first N predict questions (and only they are scored); 0: all
};

/// The predict file, read, featurised and checked.
struct PredictSet {
  std::vector<SquadExample> examples;
  std::vector<SquadFeature> features;
  /// The answers to score against; nullopt when the file cannot be scored (v1.1 with answerless questions).
  std::optional<SquadGold> gold;
};

/// Reads options.predict_file (the first max_predict_examples questions), makes its windows and reads its
/// answers. Warns, naming the first id, about question ids that occur more than once (one prediction per id, as
/// run_squad.py) and, for v1.1, about questions without answers (then predictions are written but not scored).
/// Throws bertrain::Error when the file cannot be read, is malformed (read_squad_examples) or has no questions.
PredictSet read_predict_set(const RunSquadOptions& options, const text::FullTokenizer& tokenizer);

struct RunSquadResult {
  int exit_code = 0;  ///< 0, or 128 + signal number when training was interrupted (a checkpoint was saved)
  FinetuneResult training;                  ///< when do_train
  std::map<std::string, double> metrics;    ///< the last score of the predict file (empty when not scored)
};

/// run_squad.py: both data files are read and checked before the model is built and init_checkpoint loaded;
/// do_train runs the shared finetuning loop on the training windows (questions whose answer is not in the words
/// of its span are skipped by name, as the reference); do_predict writes the predictions into output_dir and,
/// when the file has answers, scores them into eval_results.json (after each epoch when training, best
/// checkpoint by f1). There is no do_eval, as in run_squad.py. Under mpirun rank 0 alone predicts.
/// Throws bertrain::Error when neither do_train nor do_predict is set, a needed file flag is missing, and on bad
/// files, flags or checkpoints (one line each).
RunSquadResult run_squad(const RunSquadOptions& options);

}  // namespace bertrain::squad
