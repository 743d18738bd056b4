// run_squad.cpp: SQuAD prediction, scoring and the run-squad command (see run_squad.h).
#include "bertrain/tasks/squad/run_squad.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "bertrain/core/error.h"
#include "bertrain/io/atomic_file.h"
#include "bertrain/text/tokenizer.h"
#include "bertrain/train/communicator.h"

namespace bertrain::squad {

namespace fs = std::filesystem;

RawResults compute_logits(BertForQuestionAnswering& model, const std::vector<SquadFeature>& features,
                          int64_t batch_size, const tasks::PaddingOptions& padding) {
  BERTRAIN_CHECK(batch_size >= 1, "SQuAD prediction: batch size must be >= 1, got ", batch_size);
  NoGradGuard ng;
  const bool was_training = model.is_training();
  model.eval();  // no dropout; the finetuning loop's mode comes back below
  const PackedForPrediction packed(model);  // the weights packed for this prediction's products
  RawResults r;
  r.start_logits.resize(features.size());
  r.end_logits.resize(features.size());
  std::vector<int32_t> lengths(features.size());
  for (size_t i = 0; i < features.size(); ++i) lengths[i] = tasks::real_length(features[i].input_mask);
  const std::vector<int64_t> order = tasks::length_sorted_order(lengths);
  const size_t batch = static_cast<size_t>(batch_size);
  for (size_t b = 0; b < features.size(); b += batch) {
    const size_t e = std::min(features.size(), b + batch);
    SquadBatch sb = make_squad_batch(features, std::vector<size_t>(order.begin() + b, order.begin() + e), padding);
    auto o = model.forward(BertInputs{sb.input_ids, sb.segment_ids, sb.input_mask, 0, 0});
    const Tensor& sl = o.start_logits.value();
    const Tensor& el = o.end_logits.value();
    const int64_t t = sl.size(1);
    for (size_t i = 0; i < e - b; ++i) {
      const size_t at = sb.feature_indices[i];
      const int64_t n = lengths[at];  // the real tokens only: padding is never a candidate
      r.start_logits[at].assign(sl.data<float>() + i * t, sl.data<float>() + i * t + n);
      r.end_logits[at].assign(el.data<float>() + i * t, el.data<float>() + i * t + n);
    }
  }
  model.train(was_training);
  return r;
}

SquadPredictions predict(BertForQuestionAnswering& model, const std::vector<SquadExample>& examples,
                         const std::vector<SquadFeature>& features, int64_t batch_size,
                         const SquadPredictOptions& options, const std::string& output_dir,
                         const tasks::PaddingOptions& padding) {
  const RawResults r = compute_logits(model, features, batch_size, padding);
  return write_predictions(examples, features, r.start_logits, r.end_logits, options, output_dir);
}

std::map<std::string, double> score_predictions(const SquadGold& gold, const SquadPredictions& preds, bool v2) {
  std::map<std::string, double> m;
  std::unordered_map<std::string, std::string> pm;
  for (size_t i = 0; i < preds.qas_ids.size(); ++i) pm[preds.qas_ids[i]] = preds.predictions[i];
  if (!v2) {
    const SquadEvalV1 ev = evaluate_v1(gold, pm);
    m["exact_match"] = ev.exact_match;
    m["f1"] = ev.f1;
    return m;
  }
  std::vector<std::pair<std::string, double>> na;
  for (size_t i = 0; i < preds.qas_ids.size(); ++i) na.emplace_back(preds.qas_ids[i], preds.null_odds[i]);
  const SquadEvalV2 ev = evaluate_v2(gold, pm, &na);
  const nlohmann::json j = nlohmann::json::parse(ev.to_json());  // the official script's keys
  for (const auto& [k, v] : j.items())
    if (v.is_number()) m[k] = v.get<double>();
  const SquadBestThresh bt = find_best_null_threshold(gold, preds);
  spdlog::info("best null threshold on the predict file: exact {:.2f} at {:.4f}, f1 {:.2f} at {:.4f}", bt.best_exact,
               bt.best_exact_thresh, bt.best_f1, bt.best_f1_thresh);
  return m;
}

PredictSet read_predict_set(const RunSquadOptions& o, const text::FullTokenizer& tok) {
  PredictSet p;
  SquadReadResult r = read_squad_examples(o.predict_file, false, o.version_2_with_negative);
  BERTRAIN_CHECK(!r.examples.empty(), o.predict_file, ": the predict file has no questions");
  p.examples = std::move(r.examples);
  if (o.max_predict_examples > 0 && static_cast<int64_t>(p.examples.size()) > o.max_predict_examples)
    p.examples.resize(static_cast<size_t>(o.max_predict_examples));
  {  // the reference keys predictions by id, so a repeated id keeps one prediction: say so
    std::unordered_map<std::string, int> seen;
    std::string first;
    int64_t repeats = 0;
    for (const auto& e : p.examples)
      if (seen[e.qas_id]++ == 1) {
        if (first.empty()) first = e.qas_id;
        ++repeats;
      }
    if (repeats > 0)
      spdlog::warn("predict file {}: {} question id(s) occur more than once (first: '{}'); predictions.json keeps "
                   "one answer per id, as run_squad.py", o.predict_file, repeats, first);
  }
  SquadFeatureOptions fo;
  fo.max_seq_length = o.max_seq_length;
  fo.doc_stride = o.doc_stride;
  fo.max_query_length = o.max_query_length;
  fo.is_training = false;
  p.features = convert_examples_to_features(p.examples, tok, fo);
  p.gold = read_squad_gold(o.predict_file);
  if (o.max_predict_examples > 0) {  // score only the questions predicted
    std::unordered_map<std::string, bool> keep;
    for (const auto& e : p.examples) keep[e.qas_id] = true;
    std::vector<SquadGoldQuestion> kept;
    for (const auto& q : p.gold->questions)
      if (keep.count(q.id)) kept.push_back(q);
    p.gold->questions = std::move(kept);
  }
  if (!o.version_2_with_negative) {  // v1.1 scoring needs a gold answer for every question
    int64_t unanswered = 0;
    std::string first;
    for (const auto& q : p.gold->questions)
      if (q.answers.empty() && unanswered++ == 0) first = q.id;
    if (unanswered > 0) {
      spdlog::warn("predict file {}: {} of {} questions have no answers (first: '{}'): predictions are written but "
                   "not scored (for SQuAD 2.0 files give --version_2_with_negative)",
                   o.predict_file, unanswered, p.gold->questions.size(), first);
      p.gold.reset();
    }
  }
  spdlog::info("predict file {}: {} questions, {} windows", o.predict_file, p.examples.size(), p.features.size());
  return p;
}

namespace {

// The training windows, with the skipped questions named (run_squad.py's "Could not find answer").
std::vector<SquadFeature> read_train_features(const RunSquadOptions& o, const text::FullTokenizer& tok) {
  SquadReadResult train = read_squad_examples(o.train_file, true, o.version_2_with_negative);
  if (o.max_train_examples > 0 && static_cast<int64_t>(train.examples.size()) > o.max_train_examples)
    train.examples.resize(static_cast<size_t>(o.max_train_examples));
  if (!train.skipped_ids.empty()) {
    std::string ids;
    for (size_t i = 0; i < std::min<size_t>(train.skipped_ids.size(), 10); ++i)
      ids += (i ? ", '" : "'") + train.skipped_ids[i] + "'";
    spdlog::warn("train file {}: {} question(s) skipped, the answer text is not in the words of its span "
                 "(run_squad.py's \"Could not find answer\"): {}{}", o.train_file, train.num_skipped, ids,
                 train.skipped_ids.size() > 10 ? ", ..." : "");
  }
  SquadFeatureOptions fo;
  fo.max_seq_length = o.max_seq_length;
  fo.doc_stride = o.doc_stride;
  fo.max_query_length = o.max_query_length;
  fo.is_training = true;
  std::vector<SquadFeature> feats = convert_examples_to_features(train.examples, tok, fo);
  spdlog::info("train file {}: {} questions ({} skipped), {} windows", o.train_file, train.examples.size(),
               train.num_skipped, feats.size());
  return feats;
}

}  // namespace

RunSquadResult run_squad(const RunSquadOptions& options) {
  RunSquadOptions o = options;
  tasks::apply_checkpoint_defaults(o, kArchQuestionAnswering, 384);
  tasks::set_bf16(o.bf16);
  BERTRAIN_CHECK(o.do_train || o.do_predict, "at least one of --do_train, --do_predict is required");
  BERTRAIN_CHECK(!o.do_train || !o.train_file.empty(), "--do_train needs --train_file");
  BERTRAIN_CHECK(!o.do_predict || !o.predict_file.empty(), "--do_predict needs --predict_file");
  const text::FullTokenizer tok = text::FullTokenizer::from_vocab_file(o.vocab_file, o.lower_case());
  BertConfig cfg = tasks::finetune_model_config(o);
  // What a checkpoint of this run says about itself (config.json): its task, and the prediction settings that
  // `bertrain predict` and the question-answering pipeline then use by default, under Hugging Face's
  // task_specific_params["question-answering"] (google-research/bert's flag names).
  cfg.architecture = kArchQuestionAnswering;
  cfg.finetuning_task = o.version_2_with_negative ? "squad_v2" : "squad";
  cfg.extra["task_specific_params"] =
      nlohmann::json{{"question-answering",
                      {{"doc_stride", o.doc_stride},
                       {"max_query_length", o.max_query_length},
                       {"n_best_size", o.n_best_size},
                       {"max_answer_length", o.max_answer_length},
                       {"version_2_with_negative", o.version_2_with_negative},
                       {"null_score_diff_threshold", o.null_score_diff_threshold}}}}
          .dump();
  tasks::check_finetune_inputs(o, cfg, tok);
  // The data files are read and checked before the model is built and loaded: a bad file fails in seconds.
  PredictSet pred;
  if (o.do_predict) pred = read_predict_set(o, tok);
  const std::vector<SquadFeature> feats = o.do_train ? read_train_features(o, tok) : std::vector<SquadFeature>{};

  Rng init(o.finetune.seed, 0x1417);
  BertForQuestionAnswering model(cfg, init);
  model.bert().set_unpad(o.unpad);
  tasks::load_init_checkpoint(o.init_checkpoint, model);
  const std::string& out = o.finetune.output_dir;
  fs::create_directories(out);
  RunSquadResult result;
  auto evaluate = [&](int64_t step) {
    SquadPredictOptions po;
    po.n_best_size = o.n_best_size;
    po.max_answer_length = o.max_answer_length;
    po.do_lower_case = o.lower_case();
    po.version_2_with_negative = o.version_2_with_negative;
    po.null_score_diff_threshold = o.null_score_diff_threshold;
    const SquadPredictions preds = predict(model, pred.examples, pred.features, o.predict_batch_size, po, out, o.padding);
    if (!pred.gold) {
      spdlog::info("step {}: predictions written to {} (not scored)", step, out);
      return std::map<std::string, double>{};
    }
    result.metrics = score_predictions(*pred.gold, preds, o.version_2_with_negative);
    nlohmann::json j = result.metrics;
    for (const auto& [k, v] : result.metrics)  // counts (total, HasAns_total, NoAns_total) as integers, as the scripts
      if (k.size() >= 5 && k.compare(k.size() - 5, 5, "total") == 0) j[k] = static_cast<int64_t>(v);
    j["global_step"] = step;
    write_text_atomic((fs::path(out) / "eval_results.json").string(), j.dump(2) + "\n");
    std::string line;
    for (const auto& [k, v] : result.metrics) line += fmt::format(" {} {:.3f}", k, v);
    spdlog::info("eval at step {}:{}", step, line);
    return result.metrics;
  };
  if (o.do_train) {
    FinetuneTask t;
    t.num_train_examples = static_cast<int64_t>(feats.size());
    t.example_noun = "windows";
    for (const SquadFeature& f : feats) t.lengths.push_back(tasks::real_length(f.input_mask));
    t.loss = [&](const std::vector<int64_t>& rows, int64_t first) {
      SquadBatch sb = make_squad_batch(feats, std::vector<size_t>(rows.begin(), rows.end()), o.padding);
      auto y = model.forward(BertInputs{sb.input_ids, sb.segment_ids, sb.input_mask, first, o.finetune.seed});
      return model.loss(y, sb.start_positions, sb.end_positions);
    };
    if (o.do_predict) {
      t.evaluate = evaluate;
      if (pred.gold) t.primary_metric = "f1";  // without gold answers the last checkpoint is kept
    }
    t.write_extra_files = tasks::tokenizer_files_writer(o);
    result.training = run_finetuning(model, cfg, o.finetune, t);
    result.exit_code = result.training.exit_code;
    if (result.exit_code == 0) spdlog::info("done: {} steps", result.training.global_step);
  } else if (world()->rank() == 0) {  // under mpirun rank 0 alone predicts and writes files
    evaluate(0);
  }
  return result;
}

}  // namespace bertrain::squad
