// cmd_run_squad.cpp: `bertrain run-squad`, google-research/bert run_squad.py's flags and behaviour on
// BertForQuestionAnswering (SQuAD v1.1 and v2.0), with evaluation by the official metric after each epoch.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "bertrain/core/error.h"
#include "bertrain/tasks/squad/squad.h"
#include "bertrain/tasks/squad/evaluate.h"
#include "bertrain/text/tokenizer.h"
#include "bertrain/models/bert.h"
#include "bertrain/train/communicator.h"
#include "commands.h"
#include "finetune_common.h"

namespace bertrain::cli {
namespace {

namespace fs = std::filesystem;
using namespace bertrain::squad;

struct SquadFlags {
  std::string train_file, predict_file;
  int doc_stride = 128, max_query_length = 64, n_best_size = 20, max_answer_length = 30;
  bool version_2_with_negative = false;
  double null_score_diff_threshold = 0.0;
  int64_t max_train_examples = 0, max_predict_examples = 0;
};

struct Predictor {
  std::vector<SquadExample> examples;
  std::vector<SquadFeature> features;
  std::unique_ptr<SquadGold> gold;
};

/// Runs the model over the predict features, writes predictions.json / nbest_predictions.json (/ null_odds.json)
/// into `dir` and returns the official metrics (v1.1: exact_match, f1; v2.0: exact, f1, ... and best thresholds).
std::map<std::string, double> predict(BertForQuestionAnswering& model, const Predictor& p, const FinetuneFlags& f,
                                      const SquadFlags& s, const std::string& dir) {
  NoGradGuard ng;
  std::vector<std::vector<float>> starts, ends;
  for (size_t b = 0; b < p.features.size(); b += static_cast<size_t>(f.predict_batch_size)) {
    const size_t e = std::min(p.features.size(), b + static_cast<size_t>(f.predict_batch_size));
    SquadBatch sb = make_squad_batch(p.features, b, e);
    auto o = model.forward(BertInputs{sb.input_ids, sb.segment_ids, sb.input_mask, 0, 0});
    const Tensor& sl = o.start_logits.value();
    const Tensor& el = o.end_logits.value();
    const int64_t t = sl.size(1);
    for (size_t i = 0; i < e - b; ++i) {
      starts.emplace_back(sl.data<float>() + i * t, sl.data<float>() + (i + 1) * t);
      ends.emplace_back(el.data<float>() + i * t, el.data<float>() + (i + 1) * t);
    }
  }
  SquadPredictOptions po;
  po.n_best_size = s.n_best_size;
  po.max_answer_length = s.max_answer_length;
  po.do_lower_case = f.lower();
  po.version_2_with_negative = s.version_2_with_negative;
  po.null_score_diff_threshold = s.null_score_diff_threshold;
  SquadPredictions preds = write_predictions(p.examples, p.features, starts, ends, po, dir);
  std::map<std::string, double> m;
  if (!p.gold) return m;
  std::unordered_map<std::string, std::string> pm;
  for (size_t i = 0; i < preds.qas_ids.size(); ++i) pm[preds.qas_ids[i]] = preds.predictions[i];
  if (s.version_2_with_negative) {
    std::vector<std::pair<std::string, double>> na;
    for (size_t i = 0; i < preds.qas_ids.size(); ++i) na.emplace_back(preds.qas_ids[i], preds.null_odds[i]);
    SquadEvalV2 ev = evaluate_v2(*p.gold, pm, &na);
    nlohmann::json j = nlohmann::json::parse(ev.to_json());
    for (auto& [k, v] : j.items())
      if (v.is_number()) m[k] = v.get<double>();
    SquadBestThresh bt = find_best_null_threshold(*p.gold, preds);
    spdlog::info("best null threshold on the predict file: exact {:.2f} at {:.4f}, f1 {:.2f} at {:.4f}", bt.best_exact,
                 bt.best_exact_thresh, bt.best_f1, bt.best_f1_thresh);
  } else {
    SquadEvalV1 ev = evaluate_v1(*p.gold, pm);
    m["exact_match"] = ev.exact_match;
    m["f1"] = ev.f1;
  }
  return m;
}

int run(const FinetuneFlags& f, const SquadFlags& s) {
  f.apply_precision();
  BERTRAIN_CHECK(f.do_train || f.do_predict, "at least one of --do_train, --do_predict is required");
  BERTRAIN_CHECK(!f.do_train || !s.train_file.empty(), "--do_train needs --train_file");
  BERTRAIN_CHECK(!f.do_predict || !s.predict_file.empty(), "--do_predict needs --predict_file");
  text::FullTokenizer tok = text::FullTokenizer::from_vocab_file(f.vocab_file, f.lower());
  BertConfig cfg = finetune_config(f);
  BERTRAIN_CHECK(f.max_seq_length <= cfg.max_position_embeddings, "--max_seq_length ", f.max_seq_length,
                 " exceeds max_position_embeddings ", cfg.max_position_embeddings);
  SquadFeatureOptions fo;
  fo.max_seq_length = f.max_seq_length;
  fo.doc_stride = s.doc_stride;
  fo.max_query_length = s.max_query_length;

  // The data files are read and checked before the model is built and loaded: a bad file fails in seconds.
  Predictor pred;
  if (f.do_predict) {
    SquadReadResult r = read_squad_examples(s.predict_file, false, s.version_2_with_negative);
    BERTRAIN_CHECK(!r.examples.empty(), s.predict_file, ": the predict file has no questions");
    pred.examples = std::move(r.examples);
    if (s.max_predict_examples > 0 && static_cast<int64_t>(pred.examples.size()) > s.max_predict_examples)
      pred.examples.resize(static_cast<size_t>(s.max_predict_examples));
    {  // the reference keys predictions by id, so a repeated id keeps one prediction: say so
      std::unordered_map<std::string, int> seen;
      std::string first;
      int64_t repeats = 0;
      for (auto& e : pred.examples)
        if (seen[e.qas_id]++ == 1) {
          if (first.empty()) first = e.qas_id;
          ++repeats;
        }
      if (repeats > 0)
        spdlog::warn("predict file {}: {} question id(s) occur more than once (first: '{}'); predictions.json keeps "
                     "one answer per id, as run_squad.py", s.predict_file, repeats, first);
    }
    fo.is_training = false;
    pred.features = convert_examples_to_features(pred.examples, tok, fo);
    pred.gold = std::make_unique<SquadGold>(read_squad_gold(s.predict_file));
    if (s.max_predict_examples > 0) {  // score only the questions predicted
      std::unordered_map<std::string, bool> keep;
      for (auto& e : pred.examples) keep[e.qas_id] = true;
      std::vector<SquadGoldQuestion> kept;
      for (auto& q : pred.gold->questions)
        if (keep.count(q.id)) kept.push_back(q);
      pred.gold->questions = std::move(kept);
    }
    if (!s.version_2_with_negative) {  // v1.1 scoring needs a gold answer for every question
      int64_t unanswered = 0;
      std::string first;
      for (auto& q : pred.gold->questions)
        if (q.answers.empty() && unanswered++ == 0) first = q.id;
      if (unanswered > 0) {
        spdlog::warn("predict file {}: {} of {} questions have no answers (first: '{}'): predictions are written but "
                     "not scored (for SQuAD 2.0 files give --version_2_with_negative)",
                     s.predict_file, unanswered, pred.gold->questions.size(), first);
        pred.gold.reset();
      }
    }
    spdlog::info("predict file {}: {} questions, {} windows", s.predict_file, pred.examples.size(), pred.features.size());
  }
  SquadReadResult train;
  std::vector<SquadFeature> feats;
  if (f.do_train) {
    train = read_squad_examples(s.train_file, true, s.version_2_with_negative);
    if (s.max_train_examples > 0 && static_cast<int64_t>(train.examples.size()) > s.max_train_examples)
      train.examples.resize(static_cast<size_t>(s.max_train_examples));
    if (!train.skipped_ids.empty()) {
      std::string ids;
      for (size_t i = 0; i < std::min<size_t>(train.skipped_ids.size(), 10); ++i)
        ids += (i ? ", '" : "'") + train.skipped_ids[i] + "'";
      spdlog::warn("train file {}: {} question(s) skipped, the answer text is not in the words of its span "
                   "(run_squad.py's \"Could not find answer\"): {}{}", s.train_file, train.num_skipped, ids,
                   train.skipped_ids.size() > 10 ? ", ..." : "");
    }
    fo.is_training = true;
    feats = convert_examples_to_features(train.examples, tok, fo);
    spdlog::info("train file {}: {} questions ({} skipped), {} windows", s.train_file, train.examples.size(),
                 train.num_skipped, feats.size());
  }

  Rng init(f.opt.seed, 0x1417);
  BertForQuestionAnswering model(cfg, init);
  load_init_checkpoint(f, model);
  fs::create_directories(f.output_dir);
  auto evaluate = [&](int64_t step) {
    std::map<std::string, double> m = predict(model, pred, f, s, f.output_dir);
    if (!pred.gold) {
      spdlog::info("step {}: predictions written to {} (not scored)", step, f.output_dir);
      return m;
    }
    nlohmann::json j = m;
    for (auto& [k, v] : m)  // counts (total, HasAns_total, NoAns_total) as integers, as the official scripts
      if (k.size() >= 5 && k.compare(k.size() - 5, 5, "total") == 0) j[k] = static_cast<int64_t>(v);
    j["global_step"] = step;
    std::ofstream(fs::path(f.output_dir) / "eval_results.json") << j.dump(2) << "\n";
    std::string line;
    for (auto& [k, v] : m) line += fmt::format(" {} {:.3f}", k, v);
    spdlog::info("eval at step {}:{}", step, line);
    return m;
  };
  if (f.do_train) {
    FinetuneTask t;
    t.num_train_examples = static_cast<int64_t>(feats.size());
    t.example_noun = "windows";
    t.loss = [&](const std::vector<int64_t>& rows, int64_t first) {
      std::vector<size_t> idx(rows.begin(), rows.end());
      SquadBatch sb = make_squad_batch(feats, idx);
      auto o = model.forward(BertInputs{sb.input_ids, sb.segment_ids, sb.input_mask, first, f.opt.seed});
      return model.loss(o, sb.start_positions, sb.end_positions);
    };
    if (f.do_predict) {
      t.evaluate = evaluate;
      if (pred.gold) t.primary_metric = "f1";  // without gold answers the last checkpoint is kept
    }
    t.write_extra_files = [&](const std::string& dir) { write_tokenizer_files(f, dir); };
    FinetuneOptions o = f.opt;
    o.output_dir = f.output_dir;
    FinetuneResult res = run_finetuning(model, cfg, o, t);
    if (res.exit_code != 0) return res.exit_code;
    spdlog::info("done: {} steps", res.global_step);
  } else if (world()->rank() == 0) {  // under mpirun rank 0 alone predicts and writes files
    evaluate(0);
  }
  return 0;
}

Registrar reg{{"run-squad", "finetune BertForQuestionAnswering on SQuAD v1.1 / v2.0 and predict (run_squad.py)",
               [](CLI::App& sub) {
                 auto f = std::make_shared<FinetuneFlags>();
                 auto s = std::make_shared<SquadFlags>();
                 f->add_to(sub, 5e-5, 384, /*with_do_eval=*/false);
                 sub.add_option("--train_file", s->train_file, "SQuAD JSON for training");
                 sub.add_option("--predict_file", s->predict_file, "SQuAD JSON to predict (and score, when it has answers)");
                 sub.add_option("--doc_stride", s->doc_stride)->capture_default_str();
                 sub.add_option("--max_query_length", s->max_query_length)->capture_default_str();
                 sub.add_option("--n_best_size", s->n_best_size)->capture_default_str();
                 sub.add_option("--max_answer_length", s->max_answer_length)->capture_default_str();
                 sub.add_flag("--version_2_with_negative", s->version_2_with_negative, "SQuAD 2.0: questions may have no answer");
                 sub.add_option("--null_score_diff_threshold", s->null_score_diff_threshold)->capture_default_str();
                 const CLI::Validator at_least_one(
                     [](std::string& v) {  // non-numbers are left to CLI11's integer conversion, which names them
                       char* end = nullptr;
                       const long long n = std::strtoll(v.c_str(), &end, 10);
                       return (end != v.c_str() && *end == '\0' && n < 1) ? "must be at least 1, got " + v : std::string();
                     },
                     "N >= 1");
                 sub.add_option("--max_train_examples", s->max_train_examples, "use only the first N training questions")
                     ->check(at_least_one);
                 sub.add_option("--max_predict_examples", s->max_predict_examples, "predict only the first N questions")
                     ->check(at_least_one);
                 return std::function<int()>([f, s] { return run(*f, *s); });
               }}};

}  // namespace
}  // namespace bertrain::cli
