// glue_run_test.cpp: GLUE evaluation, prediction and run_classifier as library functions, and CASES.md C43 (a
// checkpoint whose config carries its own label order) end to end with C43's exact numbers, through the library
// and through `bertrain run-classifier`.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "bertrain/core/error.h"
#include "bertrain/io/checkpoint.h"
#include "bertrain/models/bert.h"
#include "bertrain/tasks/glue/metrics.h"
#include "bertrain/tasks/glue/run_classifier.h"
#include "bertrain/text/tokenizer.h"
#include "test_util.h"

using namespace bertrain;
using namespace bertrain::glue;
using bertrain::test::read_file;
using bertrain::test::temp_dir;
using bertrain::test::write_file;
namespace fs = std::filesystem;
using Strings = std::vector<std::string>;

namespace {

const std::string kUncasedVocab = std::string(BERTRAIN_SOURCE_DIR) + "/data/vocab/bert-base-uncased-vocab.txt";
const std::string kBinary = std::string(BERTRAIN_BINARY_DIR) + "/bertrain";

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string run(const std::string& cmd, int* status) {
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = ::pclose(p);
  *status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  return out;
}

// C43's MNLI dev rows: gold labels [entailment, neutral, contradiction, entailment]. Matched and mismatched
// files hold the same rows; train.tsv too (for the finetuning case).
const Strings kGold = {"entailment", "neutral", "contradiction", "entailment"};
const Strings kPairs = {"A man is sleeping.\tA person rests.", "The sky is grey.\tIt will rain later.",
                        "The door is open.\tThe door is shut.", "Two dogs run.\tAnimals are moving."};

void write_mnli(const fs::path& dir) {
  fs::create_directories(dir);
  const std::string head = "index\tpromptID\tpairID\tgenre\ts1bp\ts2bp\ts1p\ts2p\tsentence1\tsentence2\t";
  std::string dev = head + "label1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label\n";
  std::string train = head + "label1\tgold_label\n";
  for (size_t i = 0; i < kPairs.size(); ++i) {
    const std::string row = std::to_string(i) + "\t1\t1e\tfiction\t( bp )\t( bp )\t(ROOT)\t(ROOT)\t" + kPairs[i] + "\t";
    dev += row + kGold[i] + "\t" + kGold[i] + "\t" + kGold[i] + "\t" + kGold[i] + "\t" + kGold[i] + "\t" + kGold[i] + "\n";
    train += row + kGold[i] + "\t" + kGold[i] + "\n";
  }
  write_file(dir / "dev_matched.tsv", dev);
  write_file(dir / "dev_mismatched.tsv", dev);
  write_file(dir / "train.tsv", train);
}

BertConfig tiny_config() {
  BertConfig c;  // the uncased vocab's 30522 tokens
  c.hidden_size = 32;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 2;
  c.intermediate_size = 64;
  c.max_position_embeddings = 64;
  c.num_labels = 3;
  return c;
}

// A classifier whose argmax over the four dev rows is C43's [2, 1, 0, 2]: the minimum-norm W with W p_i = y_i
// (y_i = +5 at the wanted output, -5 elsewhere) for the rows' pooled outputs p_i, bias 0.
void set_argmax(BertForSequenceClassification& model, const std::vector<ClassifierFeatures>& feats,
                const std::vector<int>& want) {
  NoGradGuard ng;
  model.eval();
  ClassifierBatch cb = make_classifier_batch(feats, 0, static_cast<int64_t>(feats.size()), false);
  const Tensor pooled = model.bert().forward(BertInputs{cb.input_ids, cb.segment_ids, cb.input_mask, 0, 0}).pooled_output.value();
  const int n = static_cast<int>(feats.size()), h = static_cast<int>(pooled.size(1)), c = 3;
  std::vector<std::vector<double>> g(n, std::vector<double>(n + c, 0.0));  // [P P^T | Y]
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j)
      for (int k = 0; k < h; ++k) g[i][j] += pooled.get(i * h + k) * pooled.get(j * h + k);
    for (int k = 0; k < c; ++k) g[i][n + k] = k == want[i] ? 5.0 : -5.0;
  }
  for (int col = 0; col < n; ++col) {  // Gauss-Jordan with partial pivoting: g becomes [I | A]
    int piv = col;
    for (int r = col + 1; r < n; ++r)
      if (std::fabs(g[r][col]) > std::fabs(g[piv][col])) piv = r;
    std::swap(g[col], g[piv]);
    for (int r = 0; r < n; ++r) {
      if (r == col) continue;
      const double f = g[r][col] / g[col][col];
      for (int k = col; k < n + c; ++k) g[r][k] -= f * g[col][k];
    }
  }
  Tensor w = model.parameter("classifier.weight").value();  // (C, H): W = A^T P
  Tensor b = model.parameter("classifier.bias").value();
  for (int k = 0; k < c; ++k) {
    b.data<float>()[k] = 0.f;
    for (int j = 0; j < h; ++j) {
      double v = 0;
      for (int i = 0; i < n; ++i) v += g[i][n + k] / g[i][i] * pooled.get(i * h + j);
      w.data<float>()[k * h + j] = static_cast<float>(v);
    }
  }
}

// The C43 fixture: MNLI files and a checkpoint whose outputs are CONTRADICTION, NEUTRAL, ENTAILMENT (as
// roberta-large-mnli's config) and whose argmax over the dev rows is [2, 1, 0, 2].
struct C43 {
  fs::path dir = temp_dir("glue_run_c43");
  BertConfig cfg = tiny_config();
  std::unique_ptr<BertForSequenceClassification> model;
  RunClassifierOptions opts;

  C43() {
    write_mnli(dir / "MNLI");
    auto proc = make_glue_processor("MNLI");
    const auto tok = text::FullTokenizer::from_vocab_file(kUncasedVocab, true);
    const auto feats = convert_examples_to_features(proc->get_dev_examples((dir / "MNLI").string()), *proc, 32, tok);
    Rng rng(7);
    model = std::make_unique<BertForSequenceClassification>(cfg, rng);
    set_argmax(*model, feats, {2, 1, 0, 2});
    EXPECT_EQ(predict(*model, *proc, feats, 8).predicted_ids, (std::vector<int32_t>{2, 1, 0, 2}));
    save({"CONTRADICTION", "NEUTRAL", "ENTAILMENT"});
    opts.task_name = "MNLI";
    opts.data_dir = (dir / "MNLI").string();
    opts.vocab_file = kUncasedVocab;
    opts.max_seq_length = 32;
    opts.init_checkpoint = (dir / "ck").string();
    opts.finetune.output_dir = (dir / "out").string();
    opts.do_eval = true;
  }
  ~C43() { fs::remove_all(dir); }
  // The checkpoint: these weights, with these names in config.json (empty: LABEL_0..2).
  void save(const Strings& id2label) {
    BertConfig c = cfg;
    c.id2label = id2label;
    save_model((dir / "ck").string(), *model, c);
  }
};

}  // namespace

TEST(GlueLabels, MatchedByNameIgnoringCase) {
  const Strings task = {"contradiction", "entailment", "neutral"};
  EXPECT_EQ(match_labels_by_name(task, {"CONTRADICTION", "NEUTRAL", "ENTAILMENT"}, "MNLI", "ck"),
            (std::vector<int64_t>{0, 2, 1}));
  EXPECT_EQ(match_labels_by_name(task, task, "MNLI", "ck"), (std::vector<int64_t>{0, 1, 2}));
  const std::string e = error_of([&] { match_labels_by_name(task, {"LABEL_A", "LABEL_B", "LABEL_C"}, "MNLI", "ck"); });
  EXPECT_EQ(e, "ck: the checkpoint's labels [LABEL_A, LABEL_B, LABEL_C] do not match MNLI's labels [contradiction, "
               "entailment, neutral] (compared by name, ignoring case); start from a checkpoint of this task or one "
               "without labels");
  EXPECT_NE(error_of([&] { match_labels_by_name(task, {"contradiction", "entailment"}, "MNLI", "ck"); }).find("do not match"),
            std::string::npos);
  // The arithmetic of C43: the argmax [2, 1, 0, 2] read by name is [entailment, neutral, contradiction,
  // entailment] = the gold labels; read as indexes into the task's order it scores 0.25.
  const std::vector<int32_t> gold = {1, 2, 0, 1}, argmax = {2, 1, 0, 2};
  const std::vector<int64_t> rows = match_labels_by_name(task, {"CONTRADICTION", "NEUTRAL", "ENTAILMENT"}, "MNLI", "ck");
  std::vector<int32_t> by_name;
  for (int32_t a : argmax) by_name.push_back(static_cast<int32_t>(std::find(rows.begin(), rows.end(), a) - rows.begin()));
  EXPECT_EQ(accuracy(by_name, gold), 1.0);
  EXPECT_EQ(accuracy(argmax, gold), 0.25);
}

TEST(GlueLabels, ReorderClassifierOutputsMovesRows) {
  BertConfig c = tiny_config();
  Rng rng(3);
  BertForSequenceClassification model(c, rng);
  const Tensor w0 = model.parameter("classifier.weight").value().clone();
  Tensor b = model.parameter("classifier.bias").value();
  for (int k = 0; k < 3; ++k) b.data<float>()[k] = static_cast<float>(k);
  reorder_classifier_outputs(model, {0, 2, 1});
  const Tensor& w = model.parameter("classifier.weight").value();
  for (int64_t j = 0; j < c.hidden_size; ++j) {
    EXPECT_EQ(w.get(1 * c.hidden_size + j), w0.get(2 * c.hidden_size + j));
    EXPECT_EQ(w.get(2 * c.hidden_size + j), w0.get(1 * c.hidden_size + j));
  }
  EXPECT_EQ(model.parameter("classifier.bias").value().to_vector(), (std::vector<double>{0, 2, 1}));
  EXPECT_NE(error_of([&] { reorder_classifier_outputs(model, {0, 0, 1}); }).find("permutation"), std::string::npos);
}

// C43 end to end: the checkpoint's order is used (accuracy 1.0 on both dev sets); the same weights without label
// names are read in the task's order (0.25); labels that do not match are one error naming both sets.
TEST(GlueLabels, C43CheckpointLabelsByNameThroughRunClassifier) {
  C43 t;
  RunClassifierResult r = run_classifier(t.opts);
  EXPECT_EQ(r.eval_metrics.at("accuracy"), 1.0);
  EXPECT_EQ(r.eval_metrics.at("accuracy_mm"), 1.0);
  const auto results = nlohmann::json::parse(read_file((t.dir / "out" / "eval_results.json").string()));
  EXPECT_EQ(results["eval_accuracy"], 1.0);

  t.save({});  // LABEL_0..2: no names, so the outputs are taken in MNLI's order
  EXPECT_EQ(run_classifier(t.opts).eval_metrics.at("accuracy"), 0.25);

  t.save({"yes", "no", "maybe"});
  const std::string e = error_of([&] { run_classifier(t.opts); });
  EXPECT_NE(e.find("the checkpoint's labels [yes, no, maybe] do not match MNLI's labels [contradiction, entailment, "
                   "neutral]"),
            std::string::npos)
      << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

// Every checkpoint run-classifier writes names its outputs in the task's order, also when it started from a
// checkpoint in another order (whose classifier rows were reordered), and carries the tokenizer files.
TEST(GlueLabels, FinetunedCheckpointsCarryTheTasksLabels) {
  C43 t;
  t.opts.do_train = true;
  t.opts.finetune.train_batch_size = 2;
  t.opts.finetune.num_train_epochs = 1;
  t.opts.finetune.save_checkpoints_steps = 0;
  t.opts.finetune.progress = false;
  RunClassifierResult r = run_classifier(t.opts);
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.training.global_step, 2);
  for (const char* ck : {"checkpoint-2", "best"}) {
    const fs::path d = t.dir / "out" / ck;
    const auto j = nlohmann::json::parse(read_file((d / "config.json").string()));
    EXPECT_EQ(j["id2label"], nlohmann::json({{"0", "contradiction"}, {"1", "entailment"}, {"2", "neutral"}})) << ck;
    EXPECT_EQ(j["label2id"], nlohmann::json({{"contradiction", 0}, {"entailment", 1}, {"neutral", 2}})) << ck;
    EXPECT_EQ(read_file((d / "vocab.txt").string()), read_file(kUncasedVocab)) << ck;
    EXPECT_TRUE(fs::exists(d / "tokenizer_config.json")) << ck;
  }
}

// --do_predict reads the test file before training: a missing one stops the run before any step or checkpoint.
TEST(GlueRun, MissingTestFileStopsBeforeTraining) {
  C43 t;
  t.opts.do_train = true;
  t.opts.do_predict = true;
  t.opts.finetune.train_batch_size = 2;
  t.opts.finetune.num_train_epochs = 1;
  t.opts.finetune.progress = false;
  ASSERT_FALSE(fs::exists(t.dir / "MNLI" / "test_matched.tsv"));
  const std::string e = error_of([&] { run_classifier(t.opts); });
  EXPECT_NE(e.find("test_matched.tsv"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(t.dir / "out" / "checkpoint-2"));
  EXPECT_FALSE(fs::exists(t.dir / "out" / "metrics.jsonl"));
}

// evaluate() and predict() switch dropout off for their duration and give back the caller's mode; predictions
// of the same model are the same whatever the batch size.
TEST(GlueEvaluate, EvalModeProbabilitiesAndErrors) {
  const fs::path dir = temp_dir("glue_run_eval");
  write_mnli(dir);
  auto proc = make_glue_processor("MNLI");
  const auto tok = text::FullTokenizer::from_vocab_file(kUncasedVocab, true);
  const auto feats = convert_examples_to_features(proc->get_dev_examples(dir.string()), *proc, 32, tok);
  Rng rng(5);
  BertForSequenceClassification model(tiny_config(), rng);
  model.train();
  const Evaluation a = evaluate(model, *proc, feats, 4), b = evaluate(model, *proc, feats, 3);
  EXPECT_TRUE(model.is_training());
  ASSERT_EQ(a.probabilities.size(), 12u);
  for (size_t i = 0; i < a.probabilities.size(); ++i) EXPECT_NEAR(a.probabilities[i], b.probabilities[i], 1e-6);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_NEAR(a.probabilities[3 * i] + a.probabilities[3 * i + 1] + a.probabilities[3 * i + 2], 1.0, 1e-6);
  EXPECT_EQ(a.predicted_ids, b.predicted_ids);
  EXPECT_TRUE(a.metrics.count("accuracy"));
  EXPECT_GT(a.loss, 0.0);
  EXPECT_TRUE(predict(model, *proc, feats, 8).metrics.empty());
  EXPECT_NE(error_of([&] { evaluate(model, *proc, feats, 0); }).find("batch size must be >= 1"), std::string::npos);
  EXPECT_NE(error_of([&] { evaluate(model, *proc, {}, 8); }).find("no examples"), std::string::npos);
  fs::remove_all(dir);
}

// Through the command: the log line says the checkpoint's order is used; names that do not match are one error
// line on stderr and nothing on stdout.
TEST(GlueLabels, RunClassifierCliLogsTheOrderAndFailsOnOneLine) {
  C43 t;
  const std::string base = kBinary + " run-classifier --task_name MNLI --data_dir " + t.opts.data_dir +
                           " --vocab_file " + kUncasedVocab + " --max_seq_length 32 --do_eval --init_checkpoint " +
                           t.opts.init_checkpoint + " --output_dir " + t.opts.finetune.output_dir;
  int status = -1;
  std::string out = run(base + " 2>&1", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("its labels [CONTRADICTION, NEUTRAL, ENTAILMENT] matched MNLI's [contradiction, entailment, "
                     "neutral] by name: the checkpoint's order is used"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("accuracy 1.0000"), std::string::npos) << out;
  t.save({"yes", "no", "maybe"});
  out = run(base + " 2>/dev/null", &status);  // stdout: data only, so nothing
  EXPECT_EQ(status, 1);
  EXPECT_EQ(out, "");
  out = run(base + " 2>&1 >/dev/null", &status);  // stderr: the one error line
  EXPECT_EQ(status, 1);
  EXPECT_NE(out.find("[error] " + t.opts.init_checkpoint + ": the checkpoint's labels [yes, no, maybe] do not match"),
            std::string::npos)
      << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
}
