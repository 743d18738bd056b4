// run_classifier.cpp: GLUE evaluation, prediction, checkpoint labels and the run-classifier command
// (see run_classifier.h).
#include "bertrain/tasks/glue/run_classifier.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>

#include "bertrain/core/error.h"
#include "bertrain/tasks/glue/metrics.h"
#include "bertrain/tasks/glue/writers.h"
#include "bertrain/text/tokenizer.h"
#include "bertrain/train/communicator.h"

namespace bertrain::glue {

namespace fs = std::filesystem;

namespace {

// Eval mode (no dropout) for the duration of an evaluation; the finetuning loop's mode comes back after it.
class EvalMode {
 public:
  explicit EvalMode(Module& m) : m_(m), was_training_(m.is_training()), packed_((m.eval(), m)) {}
  ~EvalMode() { m_.train(was_training_); }

 private:
  Module& m_;
  bool was_training_;
  PackedForPrediction packed_;  // the weights packed for the evaluation's products, dropped after it
};

// Real tokens of each feature (by its mask, so hand-made features without num_tokens sort right).
std::vector<int32_t> feature_lengths(std::span<const ClassifierFeatures> feats) {
  std::vector<int32_t> len(feats.size());
  for (size_t i = 0; i < feats.size(); ++i) len[i] = tasks::real_length(feats[i].input_mask);
  return len;
}

// Batches of similar length (tasks::length_sorted_order), each padded to its longest; every output is written
// at its example's place, so the results are in input order.
Evaluation run_model(BertForSequenceClassification& model, const GlueProcessor& proc,
                     std::span<const ClassifierFeatures> feats, int64_t batch, bool with_metrics,
                     const tasks::PaddingOptions& padding) {
  BERTRAIN_CHECK(!feats.empty(), proc.task_name(), ": no examples to ", with_metrics ? "evaluate" : "predict");
  BERTRAIN_CHECK(batch >= 1, proc.task_name(), ": batch size must be >= 1, got ", batch);
  if (with_metrics)
    for (size_t i = 0; i < feats.size(); ++i)
      BERTRAIN_CHECK(feats[i].has_label, proc.task_name(), ": example ", i, " has no label to evaluate against");
  NoGradGuard ng;
  EvalMode eval_mode(model);
  Evaluation out;
  const bool reg = proc.is_regression();
  const int c = proc.num_labels();
  const int64_t n = static_cast<int64_t>(feats.size());
  const std::vector<int64_t> order = tasks::length_sorted_order(feature_lengths(feats));
  const int64_t cols = reg ? 1 : c;
  out.probabilities.assign(static_cast<size_t>(n * cols), 0.f);
  if (!reg) out.predicted_ids.assign(static_cast<size_t>(n), 0);
  std::vector<double> loss_of(static_cast<size_t>(n), 0.0), pred_vals(reg ? static_cast<size_t>(n) : 0);
  for (int64_t b = 0; b < n; b += batch) {
    const int64_t e = std::min<int64_t>(b + batch, n);
    const std::span<const int64_t> rows(order.data() + b, static_cast<size_t>(e - b));
    ClassifierBatch cb = make_classifier_batch(feats, rows, reg, padding);
    Variable logits = model.forward(BertInputs{cb.input_ids, cb.segment_ids, cb.input_mask, 0, 0});
    const Tensor& lv = logits.value();
    for (int64_t i = 0; i < e - b; ++i) {
      const size_t at = static_cast<size_t>(rows[static_cast<size_t>(i)]);
      if (reg) {
        out.probabilities[at] = static_cast<float>(lv.get(i));
        pred_vals[at] = lv.get(i);
        if (with_metrics) {
          const double d = lv.get(i) - cb.labels.get(i);
          loss_of[at] = d * d;
        }
        continue;
      }
      double mx = -INFINITY;
      int32_t best = 0;
      for (int j = 0; j < c; ++j)
        if (lv.get(i * c + j) > mx) {
          mx = lv.get(i * c + j);
          best = j;
        }
      double s = 0;
      for (int j = 0; j < c; ++j) s += std::exp(lv.get(i * c + j) - mx);
      for (int j = 0; j < c; ++j)
        out.probabilities[at * c + j] = static_cast<float>(std::exp(lv.get(i * c + j) - mx) / s);
      out.predicted_ids[at] = best;
      // Cross-entropy of the example, in f64 from the logits (the mean over the set is then independent of how
      // the examples were batched).
      if (with_metrics) loss_of[at] = mx + std::log(s) - lv.get(i * c + static_cast<int64_t>(cb.labels.get(i)));
    }
  }
  if (with_metrics) {
    double loss_sum = 0;
    for (double l : loss_of) loss_sum += l;
    out.loss = loss_sum / static_cast<double>(n);
    if (reg) {
      std::vector<double> label_vals;
      for (const ClassifierFeatures& f : feats) label_vals.push_back(f.label_value);
      out.metrics = compute_glue_regression_metrics(proc.task_name(), pred_vals, label_vals);
    } else {
      std::vector<int32_t> label_ids;
      for (const ClassifierFeatures& f : feats) label_ids.push_back(f.label_id);
      out.metrics = compute_glue_metrics(proc.task_name(), out.predicted_ids, label_ids, c);
    }
  }
  return out;
}

std::string lower_ascii(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s + "]";
}

std::string metrics_text(const std::map<std::string, double>& m) {
  std::string s;
  for (const auto& [k, v] : m) s += fmt::format(" {} {:.4f}", k, v);
  return s;
}

}  // namespace

Evaluation evaluate(BertForSequenceClassification& model, const GlueProcessor& processor,
                    std::span<const ClassifierFeatures> features, int64_t batch_size,
                    const tasks::PaddingOptions& padding) {
  return run_model(model, processor, features, batch_size, true, padding);
}

Evaluation predict(BertForSequenceClassification& model, const GlueProcessor& processor,
                   std::span<const ClassifierFeatures> features, int64_t batch_size,
                   const tasks::PaddingOptions& padding) {
  return run_model(model, processor, features, batch_size, false, padding);
}

void write_test_predictions(const std::string& output_dir, const GlueProcessor& proc, const ExampleSet& set,
                            const Evaluation& e, const std::string& results_file) {
  const int64_t cols = proc.num_labels();
  write_test_results((fs::path(output_dir) / results_file).string(), e.probabilities, cols,
                     proc.is_regression() ? std::vector<std::string>{"prediction"} : proc.labels());
  const std::string submission = (fs::path(output_dir) / set.submission_file).string();
  if (proc.is_regression()) write_glue_submission_regression(submission, set.examples, e.probabilities);
  else write_glue_submission(submission, set.examples, e.predicted_ids, proc.labels());
}

std::vector<int64_t> match_labels_by_name(const std::vector<std::string>& task_labels,
                                          const std::vector<std::string>& checkpoint_labels,
                                          const std::string& task_name, const std::string& source) {
  std::vector<int64_t> rows;
  for (const std::string& want : task_labels) {
    int64_t found = -1;
    for (size_t j = 0; j < checkpoint_labels.size(); ++j)
      if (lower_ascii(checkpoint_labels[j]) == lower_ascii(want)) found = static_cast<int64_t>(j);
    if (found < 0 || checkpoint_labels.size() != task_labels.size()) {
      throw Error(source + ": the checkpoint's labels " + joined(checkpoint_labels) + " do not match " + task_name +
                  "'s labels " + joined(task_labels) +
                  " (compared by name, ignoring case); start from a checkpoint of this task or one without labels");
    }
    rows.push_back(found);
  }
  return rows;
}

void reorder_classifier_outputs(BertForSequenceClassification& model, const std::vector<int64_t>& rows) {
  for (const char* name : {"classifier.weight", "classifier.bias"}) {
    Tensor p = model.parameter(name).value();
    const int64_t c = p.size(0);
    std::vector<int64_t> sorted = rows;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t k = 0; k < c; ++k)
      BERTRAIN_CHECK(static_cast<int64_t>(sorted.size()) == c && sorted[k] == k, "reorder_classifier_outputs: rows ",
                     "must be a permutation of 0..", c - 1, " (the classifier has ", c, " outputs)");
    const Tensor old = p.clone();
    for (int64_t k = 0; k < c; ++k) p.select(k).copy_from(old.select(rows[k]));
  }
}

namespace {

// The dev sets' evaluation of run_classifier: metrics of the first set, the second (MNLI mismatched) under
// "_mm" keys as run_glue.py, logged and written to OUTPUT_DIR/eval_results.json.
struct DevSets {
  std::vector<ExampleSet> sets;
  std::vector<std::vector<ClassifierFeatures>> features;

  std::map<std::string, double> evaluate(BertForSequenceClassification& model, const GlueProcessor& proc,
                                         const RunClassifierOptions& o, int64_t step) const {
    std::map<std::string, double> all;
    double loss0 = 0;
    for (size_t i = 0; i < sets.size(); ++i) {
      const Evaluation e = glue::evaluate(model, proc, features[i], o.eval_batch_size, o.padding);
      const std::string suffix = i == 0 ? "" : "_mm";
      for (const auto& [k, v] : e.metrics) all[k + suffix] = v;
      if (i == 0) loss0 = e.loss;
      else all["loss_mm"] = e.loss;
      spdlog::info("eval {} ({} examples) at step {}: loss {:.4f}{}", sets[i].name, features[i].size(), step, e.loss,
                   metrics_text(e.metrics));
    }
    write_eval_results((fs::path(o.finetune.output_dir) / "eval_results.json").string(), all, loss0, step);
    all["loss"] = loss0;
    return all;
  }
};

}  // namespace

RunClassifierResult run_classifier(const RunClassifierOptions& options) {
  BERTRAIN_CHECK(options.do_train || options.do_eval || options.do_predict,
                 "at least one of --do_train, --do_eval, --do_predict is required");
  RunClassifierOptions o = options;
  const std::optional<CheckpointFiles> ck = tasks::apply_checkpoint_defaults(o, kArchSequenceClassification, 128);
  // The generic task's labels: a finetuned checkpoint names them (its id2label) when --labels is not given.
  if (lower_ascii(o.task_name) == "generic" && o.generic.labels.empty() && !o.generic.regression && ck &&
      ck->config.has_label_names()) {
    o.generic.labels = ck->config.id2label;
    spdlog::info("labels: {} (the checkpoint's id2label)", joined(o.generic.labels));
  }
  tasks::set_bf16(o.bf16);
  const auto proc = make_glue_processor(o.task_name, o.generic);
  const text::FullTokenizer tok = text::FullTokenizer::from_vocab_file(o.vocab_file, o.lower_case());
  BertConfig cfg = tasks::finetune_model_config(o);
  // C43: a checkpoint that names its outputs is matched to the task's labels by name before anything is loaded.
  std::vector<int64_t> rows;
  if (cfg.has_label_names() && !proc->is_regression()) {
    const std::string source = o.init_checkpoint.empty() ? o.bert_config_file : o.init_checkpoint;
    rows = match_labels_by_name(proc->labels(), cfg.id2label, proc->task_name(), source);
    if (std::is_sorted(rows.begin(), rows.end()))
      spdlog::info("{}: its labels {} are {}'s, in the task's order", source, joined(cfg.id2label), proc->task_name());
    else
      spdlog::info("{}: its labels {} matched {}'s {} by name: the checkpoint's order is used (its classifier outputs "
                   "are reordered into the task's order, in which test_results.tsv and new checkpoints are written)",
                   source, joined(cfg.id2label), proc->task_name(), joined(proc->labels()));
  }
  cfg.num_labels = proc->num_labels();
  cfg.id2label = proc->is_regression() ? std::vector<std::string>{} : proc->labels();
  cfg.architecture = kArchSequenceClassification;
  cfg.finetuning_task = proc->task_name();
  tasks::check_finetune_inputs(o, cfg, tok);
  Rng init(o.finetune.seed, 0x1417);
  BertForSequenceClassification model(cfg, init);
  model.bert().set_unpad(o.unpad);
  tasks::load_init_checkpoint(o.init_checkpoint, model);
  if (!std::is_sorted(rows.begin(), rows.end())) reorder_classifier_outputs(model, rows);
  fs::create_directories(o.finetune.output_dir);

  DevSets dev;
  if (o.do_eval || o.do_train)
    for (ExampleSet& s : proc->get_dev_sets(o.data_dir)) {
      dev.features.push_back(convert_examples_to_features(s.examples, *proc, o.max_seq_length, tok));
      dev.sets.push_back(std::move(s));
    }
  // The test sets are read before training, so that a missing or malformed test file stops the run at once
  // rather than after the finetuning (run-squad reads its predict file up front too).
  std::vector<ExampleSet> test_sets;
  std::vector<std::vector<ClassifierFeatures>> test_features;
  if (o.do_predict && world()->rank() == 0)
    for (size_t i = 0; i < proc->submission_file_names().size(); ++i) {
      test_sets.push_back(proc->get_test_set(o.data_dir, i));
      test_features.push_back(convert_examples_to_features(test_sets.back().examples, *proc, o.max_seq_length, tok));
    }
  RunClassifierResult result;
  if (o.do_train) {
    const ExampleSet train = proc->get_train_set(o.data_dir);
    const std::vector<ClassifierFeatures> feats =
        convert_examples_to_features(train.examples, *proc, o.max_seq_length, tok);
    spdlog::info("{}: {} training examples, {} dev examples", proc->task_name(), feats.size(),
                 dev.features.empty() ? 0 : dev.features[0].size());
    FinetuneTask t;
    t.num_train_examples = static_cast<int64_t>(feats.size());
    t.lengths = feature_lengths(feats);
    t.loss = [&](const std::vector<int64_t>& rows_, int64_t first) {
      ClassifierBatch cb = make_classifier_batch(feats, rows_, proc->is_regression(), o.padding);
      Variable logits = model.forward(BertInputs{cb.input_ids, cb.segment_ids, cb.input_mask, first, o.finetune.seed});
      return model.loss(logits, cb.labels);
    };
    t.evaluate = [&](int64_t step) { return dev.evaluate(model, *proc, o, step); };
    t.primary_metric = glue_primary_metric(proc->task_name(), proc->is_regression());
    t.write_extra_files = tasks::tokenizer_files_writer(o);
    result.training = run_finetuning(model, cfg, o.finetune, t);
    result.eval_metrics = result.training.last_metrics;
    if (result.training.exit_code != 0) {
      result.exit_code = result.training.exit_code;
      return result;
    }
    spdlog::info("done: {} steps; best {} = {:.4f} at step {}", result.training.global_step, t.primary_metric,
                 result.training.best_metric, result.training.best_step);
  } else if (o.do_eval && world()->rank() == 0) {
    result.eval_metrics = dev.evaluate(model, *proc, o, 0);
  }
  if (world()->rank() != 0 || !o.do_predict) return result;  // under mpirun rank 0 alone writes predictions
  for (size_t i = 0; i < test_sets.size(); ++i) {
    const ExampleSet& s = test_sets[i];
    const std::string results = i == 0 ? "test_results.tsv" : "test_results_" + s.name + ".tsv";
    write_test_predictions(o.finetune.output_dir, *proc, s,
                           predict(model, *proc, test_features[i], o.predict_batch_size, o.padding), results);
    spdlog::info("predictions for {} ({} examples) -> {}, {}", s.name, s.examples.size(), results, s.submission_file);
  }
  return result;
}

}  // namespace bertrain::glue
