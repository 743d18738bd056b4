// batching_test.cpp: dynamic padding, length-sorted evaluation and --group_by_length: the padding
// rule, Hugging Face's length-grouped order, results of dynamically padded batches equal to those padded to
// max_seq_length (losses, logits, every gradient, dropout on), outputs in input order, and a run with
// group_by_length resumed from a checkpoint ending bit for bit where the uninterrupted run ends.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "bertrain/core/error.h"
#include "bertrain/core/rng.h"
#include "bertrain/models/bert.h"
#include "bertrain/tasks/batching.h"
#include "bertrain/tasks/glue/run_classifier.h"
#include "bertrain/tasks/squad/run_squad.h"
#include "bertrain/train/finetune.h"
#include "test_util.h"

using namespace bertrain;
namespace fs = std::filesystem;
using bertrain::test::read_file;
using bertrain::test::temp_dir;
using bertrain::test::write_file;

namespace {

const std::string kUncasedVocab = std::string(BERTRAIN_SOURCE_DIR) + "/data/vocab/bert-base-uncased-vocab.txt";

double max_abs(const Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::fabs(t.get(i)));
  return m;
}

// 1e-5 of the gradient's largest element; the key biases' gradients are 0 in exact arithmetic (softmax does not
// change when a constant is added to every score), so their rounding noise (~1e-14) is held to 1e-12.
double grad_tolerance(const Tensor& ref) { return 1e-5 * max_abs(ref) + 1e-12; }

BertConfig tiny(int num_labels = 2) {
  BertConfig c = test::tiny_bert_config(100, 32, 2, 4, 64, 64);
  c.num_labels = num_labels;
  return c;
}

// n examples with lengths in [2, max_len] (some exactly max_len), ids in [5, 100), two segments.
std::vector<glue::ClassifierFeatures> random_features(int n, int max_len, uint64_t seed) {
  Rng rng(seed);
  std::vector<glue::ClassifierFeatures> fs(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    glue::ClassifierFeatures& f = fs[static_cast<size_t>(i)];
    const int len = i % 5 == 0 ? max_len : 2 + static_cast<int>(rng.randint(static_cast<uint64_t>(max_len - 1)));
    f.input_ids.assign(static_cast<size_t>(max_len), 0);
    f.input_mask.assign(static_cast<size_t>(max_len), 0);
    f.segment_ids.assign(static_cast<size_t>(max_len), 0);
    for (int t = 0; t < len; ++t) {
      f.input_ids[static_cast<size_t>(t)] = 5 + static_cast<int32_t>(rng.randint(95));
      f.input_mask[static_cast<size_t>(t)] = 1;
      f.segment_ids[static_cast<size_t>(t)] = t >= len / 2 ? 1 : 0;
    }
    f.num_tokens = len;
    f.label_id = static_cast<int32_t>(rng.randint(2));
    f.has_label = true;
  }
  return fs;
}

}  // namespace

TEST(Padding, BatchSeqLengthRule) {
  const tasks::PaddingOptions dyn8{false, 8}, dyn1{false, 1}, full{true, 8};
  EXPECT_EQ(tasks::batch_seq_length(1, 128, dyn8), 8);
  EXPECT_EQ(tasks::batch_seq_length(8, 128, dyn8), 8);
  EXPECT_EQ(tasks::batch_seq_length(9, 128, dyn8), 16);
  EXPECT_EQ(tasks::batch_seq_length(125, 128, dyn8), 128);
  EXPECT_EQ(tasks::batch_seq_length(97, 100, dyn8), 100);  // capped at max_seq_length
  EXPECT_EQ(tasks::batch_seq_length(37, 128, dyn1), 37);
  EXPECT_EQ(tasks::batch_seq_length(5, 128, full), 128);
  EXPECT_THROW(tasks::batch_seq_length(0, 128, dyn8), Error);
  EXPECT_THROW(tasks::batch_seq_length(129, 128, dyn8), Error);
  EXPECT_THROW(tasks::batch_seq_length(5, 128, tasks::PaddingOptions{false, 0}), Error);
  const std::vector<int32_t> mask = {1, 1, 1, 0, 0};
  EXPECT_EQ(tasks::real_length(mask), 3);
  EXPECT_EQ(tasks::real_length(std::vector<int32_t>{0, 0}), 0);
}

TEST(Padding, LengthSortedOrderIsStableLongestFirst) {
  const std::vector<int32_t> len = {3, 9, 3, 1, 9, 4};
  EXPECT_EQ(tasks::length_sorted_order(len), (std::vector<int64_t>{1, 4, 5, 0, 2, 3}));
}

TEST(Padding, ClassifierBatchIsPaddedToItsLongestRoundedUp) {
  auto feats = random_features(10, 48, 3);
  feats[2].input_mask.assign(48, 0);  // lengths 5 and 11
  std::fill(feats[2].input_mask.begin(), feats[2].input_mask.begin() + 5, 1);
  feats[7].input_mask.assign(48, 0);
  std::fill(feats[7].input_mask.begin(), feats[7].input_mask.begin() + 11, 1);
  const std::vector<int64_t> rows = {7, 2};
  auto b = glue::make_classifier_batch(feats, rows, false, tasks::PaddingOptions{false, 8});
  EXPECT_EQ(b.input_ids.shape(), Shape({2, 16}));
  for (int64_t t = 0; t < 16; ++t) {
    EXPECT_EQ(b.input_ids.get(t), feats[7].input_ids[static_cast<size_t>(t)]);
    EXPECT_EQ(b.input_mask.get(16 + t), t < 5 ? 1 : 0);
  }
  EXPECT_EQ(glue::make_classifier_batch(feats, rows, false).input_ids.shape(), Shape({2, 48}));  // old default
}

// transformers' get_length_grouped_indices applied to bertrain's Fisher-Yates order: mega-batches of
// min(n / (4 B), 50) batches, sorted longest first (stable), the longest row of all moved to position 0.
TEST(GroupByLength, HuggingFaceSemanticsOnTheSeededShuffle) {
  const int64_t n = 1000, batch = 4;
  std::vector<int32_t> len(n);
  Rng rng(9);
  for (auto& l : len) l = 1 + static_cast<int32_t>(rng.randint(120));
  for (int64_t epoch : {0, 3}) {
    const auto plain = finetune_epoch_order(77, epoch, n, false, {}, batch);
    const auto grouped = finetune_epoch_order(77, epoch, n, true, len, batch);
    EXPECT_EQ(grouped, finetune_epoch_order(77, epoch, n, true, len, batch));  // a function of (seed, epoch)
    // The expected order, written out: mega-batches of 50 batches of 4 (n / 16 = 62 > 50).
    std::vector<int64_t> want = plain;
    const int64_t mega = 50 * batch;
    int64_t best = 0;
    for (int64_t s = 0; s < n; s += mega) {
      std::stable_sort(want.begin() + s, want.begin() + std::min(n, s + mega),
                       [&](int64_t a, int64_t b) { return len[a] > len[b]; });
      if (len[want[s]] > len[want[best]]) best = s;
    }
    std::swap(want[0], want[best]);
    EXPECT_EQ(grouped, want);
    EXPECT_EQ(len[grouped[0]], *std::max_element(len.begin(), len.end()));
    std::vector<int64_t> sorted = grouped;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(sorted[i], i);  // a permutation
    // Grouping pays: the padded tokens of batches of 4 (to their longest) fall far below the plain order's.
    auto padded = [&](const std::vector<int64_t>& o) {
      int64_t tokens = 0;
      for (int64_t b = 0; b < n; b += batch) {
        int32_t mx = 0;
        for (int64_t i = b; i < b + batch; ++i) mx = std::max(mx, len[o[i]]);
        tokens += mx * batch;
      }
      return tokens;
    };
    EXPECT_LT(padded(grouped), padded(plain) * 0.7);
  }
  EXPECT_NE(finetune_epoch_order(77, 0, n, true, len, batch), finetune_epoch_order(77, 1, n, true, len, batch));
  // Small sets: at least one batch per mega-batch (n / (4 B) = 0).
  const std::vector<int32_t> few = {1, 5, 2, 9, 3};
  const auto o = finetune_epoch_order(1, 0, 5, true, few, 2);
  const auto p = finetune_epoch_order(1, 0, 5, false, {}, 2);
  std::vector<int64_t> w = p;
  for (int64_t s = 0; s < 5; s += 2)
    std::stable_sort(w.begin() + s, w.begin() + std::min<int64_t>(5, s + 2),
                     [&](int64_t a, int64_t b) { return few[a] > few[b]; });
  int64_t best = 0;
  for (int64_t s = 0; s < 5; s += 2)
    if (few[w[s]] > few[w[best]]) best = s;
  std::swap(w[0], w[best]);
  EXPECT_EQ(o, w);
  EXPECT_THROW(finetune_epoch_order(1, 0, 5, true, std::vector<int32_t>{1, 2}, 2), Error);
}

// Evaluation and prediction in length-sorted, dynamically padded batches give the probabilities and loss of
// batches padded to max_seq_length in input order (1e-5 relative), in input order; on the padded encoder and on
// the unpadded one, against the padded encoder on batches padded to max_seq_length.
TEST(DynamicPadding, GlueEvaluationEqualsThePaddedOneInInputOrder) {
  const BertConfig cfg = tiny(2);
  Rng init(1);
  BertForSequenceClassification model(cfg, init);
  const auto feats = random_features(37, 48, 5);
  auto proc = glue::make_glue_processor("QNLI");
  model.bert().set_unpad(Unpad::never);
  const glue::Evaluation ref = glue::evaluate(model, *proc, feats, 8, tasks::PaddingOptions{true, 1});
  for (int64_t multiple : {1, 8, 16}) {
    for (Unpad unpad : {Unpad::never, Unpad::always}) {
      SCOPED_TRACE("multiple " + std::to_string(multiple) + (unpad == Unpad::always ? ", unpadded" : ", padded"));
      model.bert().set_unpad(unpad);
      const glue::Evaluation e = glue::evaluate(model, *proc, feats, 8, tasks::PaddingOptions{false, multiple});
      ASSERT_EQ(e.probabilities.size(), ref.probabilities.size());
      for (size_t i = 0; i < e.probabilities.size(); ++i)
        EXPECT_NEAR(e.probabilities[i], ref.probabilities[i], 1e-5 * std::max(1.0f, std::fabs(ref.probabilities[i])))
            << i;
      EXPECT_EQ(e.predicted_ids, ref.predicted_ids);
      EXPECT_NEAR(e.loss, ref.loss, 1e-5 * std::fabs(ref.loss));
      EXPECT_EQ(e.metrics, ref.metrics);
    }
  }
  // Input order: example i alone gives row i.
  model.bert().set_unpad(Unpad::never);
  for (size_t i : {size_t{0}, size_t{13}, size_t{36}}) {
    const glue::Evaluation one = glue::predict(model, *proc, std::span(feats).subspan(i, 1), 1);
    for (int j = 0; j < 2; ++j) EXPECT_NEAR(one.probabilities[j], ref.probabilities[2 * i + j], 1e-5) << i;
  }
}

// Training: the loss and every parameter gradient of a dynamically padded batch equal those of the batch padded to
// max_seq_length, with dropout on (masks are keyed by sample and token position, not by the padded length), on the
// padded encoder and on the unpadded one.
TEST(DynamicPadding, ClassifierTrainingLossAndGradientsEqualThePaddedOnes) {
  const BertConfig cfg = tiny(2);
  const auto feats = random_features(12, 48, 8);
  std::vector<int64_t> rows;  // examples shorter than 40: the dynamic batch is shorter than 48
  for (int64_t i = 0; i < 12; ++i)
    if (feats[static_cast<size_t>(i)].num_tokens < 40) rows.push_back(i);
  ASSERT_GE(rows.size(), 5u);
  auto run = [&](const tasks::PaddingOptions& pad, Unpad unpad) {
    Rng init(2);
    BertForSequenceClassification model(cfg, init);
    model.bert().set_unpad(unpad);
    model.train();
    auto b = glue::make_classifier_batch(feats, rows, false, pad);
    Variable loss = model.loss(model.forward(BertInputs{b.input_ids, b.segment_ids, b.input_mask, 40, 99}), b.labels);
    loss.backward();
    std::vector<Tensor> out{loss.value().clone()};
    for (auto& [name, p] : model.named_parameters()) out.push_back(p.grad().defined() ? p.grad().clone() : Tensor());
    return std::make_pair(out, b.input_ids.size(1));
  };
  const auto [ref, t_ref] = run({true, 1}, Unpad::never);
  EXPECT_EQ(t_ref, 48);
  for (int64_t multiple : {1, 8}) {
    for (Unpad unpad : {Unpad::never, Unpad::always}) {
      SCOPED_TRACE(unpad == Unpad::always ? "unpadded" : "padded");
      const auto [got, t] = run({false, multiple}, unpad);
      EXPECT_LT(t, 48);
      EXPECT_NEAR(got[0].get(0), ref[0].get(0), 1e-5 * std::fabs(ref[0].get(0)));
      for (size_t i = 1; i < ref.size(); ++i) {
        ASSERT_EQ(got[i].defined(), ref[i].defined()) << i;
        if (!ref[i].defined()) continue;
        double diff = 0;
        for (int64_t j = 0; j < ref[i].numel(); ++j) diff = std::max(diff, std::fabs(got[i].get(j) - ref[i].get(j)));
        EXPECT_LE(diff, grad_tolerance(ref[i])) << "gradient " << i << " multiple " << multiple;
      }
    }
  }
}

// SQuAD: the same for BertForQuestionAnswering (padding positions are masked out of the loss), and prediction
// logits of the real tokens equal to the padded computation's.
TEST(DynamicPadding, QuestionAnsweringLossGradientsAndLogits) {
  const BertConfig cfg = tiny();
  const auto cf = random_features(9, 48, 11);
  std::vector<squad::SquadFeature> feats(cf.size());
  for (size_t i = 0; i < cf.size(); ++i) {
    feats[i].input_ids = cf[i].input_ids;
    feats[i].input_mask = cf[i].input_mask;
    feats[i].segment_ids = cf[i].segment_ids;
    feats[i].start_position = static_cast<int32_t>(i % 3);
    feats[i].end_position = static_cast<int32_t>(i % 3 + 1);
  }
  const std::vector<size_t> rows = {1, 2, 3, 4, 6, 7, 8};  // 0 and 5 have length 48
  std::vector<std::string> names;
  auto run = [&](const tasks::PaddingOptions& pad, Unpad unpad) {
    Rng init(4);
    BertForQuestionAnswering model(cfg, init);
    model.bert().set_unpad(unpad);
    model.train();
    auto b = squad::make_squad_batch(feats, rows, pad);
    auto o = model.forward(BertInputs{b.input_ids, b.segment_ids, b.input_mask, 7, 3});
    Variable loss = model.loss(o, b.start_positions, b.end_positions);
    loss.backward();
    std::vector<Tensor> out{loss.value().clone()};
    names.clear();
    for (auto& [name, p] : model.named_parameters()) {
      out.push_back(p.grad().clone());
      names.push_back(name);
    }
    model.eval();
    const squad::RawResults r = squad::compute_logits(model, feats, 4, pad);
    return std::make_pair(out, r);
  };
  const auto [ref, rref] = run({true, 1}, Unpad::never);
  for (Unpad unpad : {Unpad::never, Unpad::always}) {
    SCOPED_TRACE(unpad == Unpad::always ? "unpadded" : "padded");
    const auto [got, rgot] = run({false, 8}, unpad);
    EXPECT_NEAR(got[0].get(0), ref[0].get(0), 1e-5 * std::fabs(ref[0].get(0)));
    double scale = 0;  // the model's largest gradient element
    for (size_t i = 1; i < ref.size(); ++i) scale = std::max(scale, max_abs(ref[i]));
    for (size_t i = 1; i < ref.size(); ++i) {
      double diff = 0;
      for (int64_t j = 0; j < ref[i].numel(); ++j) diff = std::max(diff, std::fabs(got[i].get(j) - ref[i].get(j)));
      // Gradients that are 0 in exact arithmetic (test_util.h) to 1e-5 of the largest gradient element.
      const bool zero = test::gradient_zero_in_exact_arithmetic(names[i - 1], cfg.num_hidden_layers, true);
      EXPECT_LE(diff, zero ? 1e-5 * scale : grad_tolerance(ref[i]))
          << "gradient of " << names[i - 1] << ", largest " << max_abs(ref[i]);
    }
    for (size_t f = 0; f < feats.size(); ++f) {
      ASSERT_EQ(rgot.start_logits[f].size(), static_cast<size_t>(tasks::real_length(feats[f].input_mask)));
      ASSERT_EQ(rref.start_logits[f].size(), rgot.start_logits[f].size());
      for (size_t t = 0; t < rref.start_logits[f].size(); ++t) {
        EXPECT_NEAR(rgot.start_logits[f][t], rref.start_logits[f][t], 1e-5 * std::max(1.f, std::fabs(rref.start_logits[f][t])));
        EXPECT_NEAR(rgot.end_logits[f][t], rref.end_logits[f][t], 1e-5 * std::max(1.f, std::fabs(rref.end_logits[f][t])));
      }
    }
  }
}

// --group_by_length with dynamic padding: a run resumed from its step-4 checkpoint ends with the same weights,
// bit for bit, as the run that went straight through (the order is a function of seed, epoch and lengths).
TEST(GroupByLength, ResumeIsBitExact) {
  const fs::path dir = temp_dir("batching_resume");
  fs::create_directories(dir / "data");
  const std::vector<std::string> words = {"the", "cat", "sat", "on", "a", "mat", "while", "dogs", "ran", "far"};
  std::string train = "sentence\tlabel\n";
  Rng rng(12);
  for (int i = 0; i < 40; ++i) {
    const int n = 1 + static_cast<int>(rng.randint(i % 4 == 0 ? 28 : 8));
    std::string s;
    for (int w = 0; w < n; ++w) s += (w ? " " : "") + words[rng.randint(words.size())];
    train += s + "\t" + std::to_string(i % 2) + "\n";
  }
  write_file(dir / "data" / "train.tsv", train);
  write_file(dir / "data" / "dev.tsv", "sentence\tlabel\nthe cat\t1\na dog ran far\t0\n");
  BertConfig cfg = tiny(2);
  cfg.vocab_size = 30522;
  const std::string cfg_path = (dir / "config.json").string();
  {
    std::ostringstream j;
    j << "{\"vocab_size\": 30522, \"hidden_size\": 32, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
         "\"intermediate_size\": 64, \"max_position_embeddings\": 64}";
    write_file(cfg_path, j.str());
  }
  auto opts = [&](const std::string& out) {
    glue::RunClassifierOptions o;
    o.task_name = "generic";
    o.generic.format = "tsv";
    o.generic.labels = {"0", "1"};
    o.data_dir = (dir / "data").string();
    o.vocab_file = kUncasedVocab;
    o.bert_config_file = cfg_path;
    o.max_seq_length = 32;
    o.do_train = true;
    o.finetune.output_dir = (dir / out).string();
    o.finetune.train_batch_size = 4;
    o.finetune.num_train_epochs = 0.8;  // 8 steps, 10 per epoch
    o.finetune.save_checkpoints_steps = 4;
    o.finetune.save_total_limit = 0;
    o.finetune.group_by_length = true;
    o.finetune.progress = false;
    return o;
  };
  ASSERT_EQ(glue::run_classifier(opts("a")).training.global_step, 8);
  fs::create_directories(dir / "b");
  fs::copy(dir / "a" / "checkpoint-4", dir / "b" / "checkpoint-4", fs::copy_options::recursive);
  auto ob = opts("b");
  ob.finetune.resume = true;
  ASSERT_EQ(glue::run_classifier(ob).training.global_step, 8);
  EXPECT_EQ(read_file((dir / "a" / "checkpoint-8" / "model.safetensors").string()),
            read_file((dir / "b" / "checkpoint-8" / "model.safetensors").string()));
  EXPECT_EQ(read_file((dir / "a" / "checkpoint-8" / "optimizer.safetensors").string()),
            read_file((dir / "b" / "checkpoint-8" / "optimizer.safetensors").string()));
  fs::remove_all(dir);
}
