// cmd_run_classifier.cpp: `bertrain run-classifier`, google-research/bert run_classifier.py's flags and
// behaviour on BertForSequenceClassification (GLUE tasks and a generic CSV/TSV/JSONL task).
#include <spdlog/spdlog.h>

#include <cmath>
#include <filesystem>
#include <numeric>

#include "bertrain/core/error.h"
#include "bertrain/tasks/glue/glue.h"
#include "bertrain/tasks/glue/writers.h"
#include "bertrain/tasks/glue/metrics.h"
#include "bertrain/text/tokenizer.h"
#include "bertrain/models/bert.h"
#include "bertrain/train/communicator.h"
#include "commands.h"
#include "finetune_common.h"

namespace bertrain::cli {
namespace {

namespace fs = std::filesystem;
using glue::ClassifierFeatures;
using glue::ExampleSet;

struct EvalOut {
  std::map<std::string, double> metrics;
  double loss = 0;
  std::vector<float> probs;  // (N, C) softmax, or (N) values for regression
};

/// Logits over `features` in batches; metrics when the examples carry labels.
EvalOut run_eval(BertForSequenceClassification& model, const glue::GlueProcessor& proc,
                 const std::vector<ClassifierFeatures>& feats, int64_t batch, bool with_metrics) {
  NoGradGuard ng;
  EvalOut out;
  const bool reg = proc.is_regression();
  const int c = proc.num_labels();
  std::vector<int32_t> pred_ids, label_ids;
  std::vector<double> pred_vals, label_vals;
  double loss_sum = 0;
  for (int64_t b = 0; b < static_cast<int64_t>(feats.size()); b += batch) {
    const int64_t e = std::min<int64_t>(b + batch, feats.size());
    glue::ClassifierBatch cb = glue::make_classifier_batch(feats, b, e, reg);
    BertInputs in{cb.input_ids, cb.segment_ids, cb.input_mask, 0, 0};
    Variable logits = model.forward(in);
    const Tensor& lv = logits.value();
    if (with_metrics) loss_sum += model.loss(logits, cb.labels, 1.0).item();
    for (int64_t i = 0; i < e - b; ++i) {
      if (reg) {
        out.probs.push_back(static_cast<float>(lv.get(i)));
        pred_vals.push_back(lv.get(i));
        if (with_metrics) label_vals.push_back(cb.labels.get(i));
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
      for (int j = 0; j < c; ++j) out.probs.push_back(static_cast<float>(std::exp(lv.get(i * c + j) - mx) / s));
      pred_ids.push_back(best);
      if (with_metrics) label_ids.push_back(static_cast<int32_t>(cb.labels.get(i)));
    }
  }
  if (with_metrics) {
    out.loss = loss_sum / static_cast<double>(feats.size());
    out.metrics = reg ? glue::compute_glue_regression_metrics(proc.task_name(), pred_vals, label_vals)
                      : glue::compute_glue_metrics(proc.task_name(), pred_ids, label_ids, c);
  }
  return out;
}

int run(const FinetuneFlags& f, const std::string& task_name, const std::string& data_dir, const glue::GlueOptions& go) {
  BERTRAIN_CHECK(f.do_train || f.do_eval || f.do_predict, "at least one of --do_train, --do_eval, --do_predict is required");
  f.apply_precision();
  auto proc = glue::make_glue_processor(task_name, go);
  text::FullTokenizer tok = text::FullTokenizer::from_vocab_file(f.vocab_file, f.lower());
  BertConfig cfg = finetune_config(f);
  cfg.num_labels = proc->num_labels();
  BERTRAIN_CHECK(static_cast<int64_t>(tok.vocab().size()) <= cfg.vocab_size, "vocab file ", f.vocab_file, " has ",
                 tok.vocab().size(), " entries but the model's vocab_size is ", cfg.vocab_size);
  BERTRAIN_CHECK(f.max_seq_length <= cfg.max_position_embeddings, "--max_seq_length ", f.max_seq_length,
                 " exceeds max_position_embeddings ", cfg.max_position_embeddings);
  Rng init(f.opt.seed, 0x1417);
  BertForSequenceClassification model(cfg, init);
  load_init_checkpoint(f, model);
  fs::create_directories(f.output_dir);

  std::vector<ExampleSet> dev_sets;
  std::vector<std::vector<ClassifierFeatures>> dev_feats;
  if (f.do_eval || f.do_train)
    for (ExampleSet& s : proc->get_dev_sets(data_dir)) {
      dev_feats.push_back(glue::convert_examples_to_features(s.examples, *proc, f.max_seq_length, tok));
      dev_sets.push_back(std::move(s));
    }
  auto evaluate = [&](int64_t step) {
    std::map<std::string, double> all;
    double loss0 = 0;
    for (size_t i = 0; i < dev_sets.size(); ++i) {
      EvalOut e = run_eval(model, *proc, dev_feats[i], f.eval_batch_size, true);
      const std::string suffix = i == 0 ? "" : "_mm";
      for (auto& [k, v] : e.metrics) all[k + suffix] = v;
      if (i == 0) loss0 = e.loss;
      else all["loss_mm"] = e.loss;
      spdlog::info("eval {} ({} examples) at step {}: loss {:.4f}{}", dev_sets[i].name, dev_feats[i].size(), step, e.loss,
                   [&] {
                     std::string s;
                     for (auto& [k, v] : e.metrics) s += fmt::format(" {} {:.4f}", k, v);
                     return s;
                   }());
    }
    glue::write_eval_results((fs::path(f.output_dir) / "eval_results.json").string(), all, loss0, step);
    all["loss"] = loss0;
    return all;
  };

  if (f.do_train) {
    ExampleSet train = proc->get_train_set(data_dir);
    std::vector<ClassifierFeatures> feats = glue::convert_examples_to_features(train.examples, *proc, f.max_seq_length, tok);
    spdlog::info("{}: {} training examples, {} dev examples", proc->task_name(), feats.size(),
                 dev_feats.empty() ? 0 : dev_feats[0].size());
    FinetuneTask t;
    t.num_train_examples = static_cast<int64_t>(feats.size());
    t.loss = [&](const std::vector<int64_t>& rows, int64_t first) {
      glue::ClassifierBatch cb = glue::make_classifier_batch(feats, rows, proc->is_regression());
      Variable logits = model.forward(BertInputs{cb.input_ids, cb.segment_ids, cb.input_mask, first, f.opt.seed});
      return model.loss(logits, cb.labels);
    };
    t.evaluate = evaluate;
    t.primary_metric = glue::glue_primary_metric(proc->task_name(), proc->is_regression());
    t.write_extra_files = [&](const std::string& dir) { write_tokenizer_files(f, dir); };
    FinetuneOptions o = f.opt;
    o.output_dir = f.output_dir;
    FinetuneResult r = run_finetuning(model, cfg, o, t);
    if (r.exit_code != 0) return r.exit_code;
    spdlog::info("done: {} steps; best {} = {:.4f} at step {}", r.global_step, t.primary_metric, r.best_metric, r.best_step);
  } else if (f.do_eval && world()->rank() == 0) {
    evaluate(0);
  }
  if (world()->rank() != 0) return 0;  // under mpirun rank 0 alone predicts and writes files
  if (f.do_predict) {
    for (ExampleSet& s : proc->get_test_sets(data_dir)) {
      auto feats = glue::convert_examples_to_features(s.examples, *proc, f.max_seq_length, tok);
      EvalOut e = run_eval(model, *proc, feats, f.predict_batch_size, false);
      const int64_t cols = proc->is_regression() ? 1 : proc->num_labels();
      const std::string results = s.name == proc->get_test_sets(data_dir).front().name ? "test_results.tsv"
                                                                                         : "test_results_" + s.name + ".tsv";
      glue::write_test_results((fs::path(f.output_dir) / results).string(), e.probs, cols);
      if (proc->is_regression()) {
        glue::write_glue_submission_regression((fs::path(f.output_dir) / s.submission_file).string(), s.examples, e.probs);
      } else {
        std::vector<int32_t> ids;
        for (size_t i = 0; i < s.examples.size(); ++i)
          ids.push_back(static_cast<int32_t>(std::max_element(e.probs.begin() + i * cols, e.probs.begin() + (i + 1) * cols) -
                                             (e.probs.begin() + i * cols)));
        glue::write_glue_submission((fs::path(f.output_dir) / s.submission_file).string(), s.examples, ids, proc->labels());
      }
      spdlog::info("predictions for {} ({} examples) -> {}, {}", s.name, s.examples.size(), results, s.submission_file);
    }
  }
  return 0;
}

Registrar reg{{"run-classifier",
               "finetune BertForSequenceClassification on a GLUE task or your own CSV/TSV/JSONL (run_classifier.py)",
               [](CLI::App& sub) {
                 auto f = std::make_shared<FinetuneFlags>();
                 auto task = std::make_shared<std::string>();
                 auto dir = std::make_shared<std::string>();
                 auto go = std::make_shared<glue::GlueOptions>();
                 auto labels = std::make_shared<std::string>();
                 f->add_to(sub, 5e-5, 128);
                 sub.add_option("--task_name", *task, "CoLA, SST-2, MRPC, QQP, STS-B, MNLI, QNLI, RTE, WNLI or generic")->required();
                 sub.add_option("--data_dir", *dir, "directory with the task's train/dev/test files")->required();
                 sub.add_option("--format", go->format, "generic task: csv, tsv or jsonl (default: from the file names)");
                 sub.add_option("--text_a_column", go->text_a_column, "generic task: first text column or key");
                 sub.add_option("--text_b_column", go->text_b_column, "generic task: second text column (pairs)");
                 sub.add_option("--label_column", go->label_column, "generic task: label column");
                 sub.add_option("--index_column", go->index_column, "generic task: row id column for the submission file");
                 sub.add_option("--labels", *labels, "generic task: comma-separated label list");
                 sub.add_flag("--regression", go->regression, "generic task: a float label (num_labels = 1)");
                 return std::function<int()>([f, task, dir, go, labels] {
                   if (!labels->empty()) {
                     std::string cur;
                     for (char ch : *labels + ",") {
                       if (ch == ',') {
                         if (!cur.empty()) go->labels.push_back(cur);
                         cur.clear();
                       } else {
                         cur += ch;
                       }
                     }
                   }
                   return run(*f, *task, *dir, *go);
                 });
               }}};

}  // namespace
}  // namespace bertrain::cli
