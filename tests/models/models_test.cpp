// models_test.cpp: BERT structure and names, overfitting one batch, activation checkpointing equivalence,
// and micro-batch invariance of the losses and gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "bertrain/core/allocator.h"
#include "bertrain/models/bert.h"
#include "bertrain/models/flops.h"
#include "test_util.h"

using namespace bertrain;

namespace {

BertConfig tiny_config() { return test::tiny_bert_config(60, 16, 2, 4, 24, 32); }

struct Batch {
  BertInputs in;
  PretrainingTargets tg;
};

Batch make_batch(int64_t b, int64_t t, int64_t p, uint64_t seed) {
  Rng r(seed);
  Batch x;
  x.in.input_ids = Tensor::empty({b, t}, DType::i32);
  x.in.token_type_ids = Tensor::zeros({b, t}, DType::i32);
  x.in.attention_mask = Tensor::zeros({b, t}, DType::i32);
  x.tg.masked_lm_positions = Tensor::zeros({b, p}, DType::i32);
  x.tg.masked_lm_ids = Tensor::zeros({b, p}, DType::i32);
  x.tg.masked_lm_weights = Tensor::zeros({b, p}, DType::f32);
  x.tg.next_sentence_labels = Tensor::empty({b}, DType::i32);
  for (int64_t i = 0; i < b; ++i) {
    const int64_t len = t - static_cast<int64_t>(i % 3);  // some rows padded
    for (int64_t j = 0; j < t; ++j) {
      x.in.input_ids.set(i * t + j, j < len ? 5 + static_cast<double>(r.randint(50)) : 0);
      x.in.attention_mask.set(i * t + j, j < len);
      x.in.token_type_ids.set(i * t + j, j >= len / 2 && j < len);
    }
    const int64_t real = p - static_cast<int64_t>(i % 2);
    for (int64_t k = 0; k < real; ++k) {
      x.tg.masked_lm_positions.set(i * p + k, 1 + 2 * k);
      x.tg.masked_lm_ids.set(i * p + k, 5 + static_cast<double>(r.randint(50)));
      x.tg.masked_lm_weights.set(i * p + k, 1.0);
    }
    x.tg.next_sentence_labels.set(i, static_cast<double>(r.randint(2)));
  }
  return x;
}

Batch rows(const Batch& x, int64_t from, int64_t to) {
  Batch y;
  y.in.input_ids = x.in.input_ids.slice(from, to);
  y.in.token_type_ids = x.in.token_type_ids.slice(from, to);
  y.in.attention_mask = x.in.attention_mask.slice(from, to);
  y.in.first_sample = x.in.first_sample + from;
  y.in.dropout_seed = x.in.dropout_seed;
  y.tg.masked_lm_positions = x.tg.masked_lm_positions.slice(from, to);
  y.tg.masked_lm_ids = x.tg.masked_lm_ids.slice(from, to);
  y.tg.masked_lm_weights = x.tg.masked_lm_weights.slice(from, to);
  y.tg.next_sentence_labels = x.tg.next_sentence_labels.slice(from, to);
  return y;
}

}  // namespace

TEST(Bert, ParameterNamesAreHuggingFaces) {
  Rng rng(1);
  BertForPreTraining m(tiny_config(), rng);
  std::vector<std::string> names;
  for (auto& [n, v] : m.named_parameters()) names.push_back(n);
  auto has = [&](const std::string& n) { return std::find(names.begin(), names.end(), n) != names.end(); };
  for (const char* n :
       {"bert.embeddings.word_embeddings.weight", "bert.embeddings.position_embeddings.weight",
        "bert.embeddings.token_type_embeddings.weight", "bert.embeddings.LayerNorm.weight",
        "bert.embeddings.LayerNorm.bias", "bert.encoder.layer.0.attention.self.query.weight",
        "bert.encoder.layer.1.attention.self.key.bias", "bert.encoder.layer.1.attention.self.value.weight",
        "bert.encoder.layer.0.attention.output.dense.weight", "bert.encoder.layer.0.attention.output.LayerNorm.bias",
        "bert.encoder.layer.1.intermediate.dense.weight", "bert.encoder.layer.1.output.dense.bias",
        "bert.encoder.layer.1.output.LayerNorm.weight", "bert.pooler.dense.weight", "cls.predictions.bias",
        "cls.predictions.transform.dense.weight", "cls.predictions.transform.LayerNorm.weight",
        "cls.seq_relationship.weight", "cls.seq_relationship.bias"})
    EXPECT_TRUE(has(n)) << n;
  EXPECT_FALSE(has("cls.predictions.decoder.weight"));  // tied to the word embeddings, not a parameter of its own
  EXPECT_EQ(m.parameter("bert.encoder.layer.0.intermediate.dense.weight").shape(), Shape({24, 16}));  // (out, in)
  // Initialisation as google-research/bert: truncated normal(0, 0.02), LayerNorm 1/0, biases 0.
  Tensor w = m.parameter("bert.encoder.layer.0.attention.self.query.weight").value();
  double s2 = 0;
  for (int64_t i = 0; i < w.numel(); ++i) {
    EXPECT_LE(std::fabs(w.get(i)), 0.04);
    s2 += w.get(i) * w.get(i);
  }
  EXPECT_NEAR(std::sqrt(s2 / w.numel()), 0.02 * 0.88, 0.004);  // std of N(0,1) truncated at 2 is 0.88
  EXPECT_EQ(m.parameter("bert.embeddings.LayerNorm.weight").value().get(3), 1.0);
  EXPECT_EQ(m.parameter("cls.predictions.bias").value().get(3), 0.0);
  BertForSequenceClassification sc(tiny_config(), rng);
  EXPECT_EQ(sc.parameter("classifier.weight").shape(), Shape({2, 16}));
  BertForQuestionAnswering qa(tiny_config(), rng);
  EXPECT_EQ(qa.parameter("qa_outputs.weight").shape(), Shape({2, 16}));
  EXPECT_THROW(qa.parameter("bert.pooler.dense.weight"), Error);  // Hugging Face QA model has no pooler
}

TEST(Bert, ConfigValidationNamesTheField) {
  BertConfig c = tiny_config();
  c.num_attention_heads = 5;
  try {
    c.validate();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("hidden_size (16) must be divisible by num_attention_heads (5)"),
              std::string::npos);
  }
  c = tiny_config();
  c.hidden_act = "swish";
  EXPECT_THROW(c.validate(), Error);
}

TEST(Bert, OverfitsOneBatch) {
  Rng rng(3);
  BertConfig c = tiny_config();
  c.hidden_dropout_prob = 0;
  c.attention_probs_dropout_prob = 0;
  BertForPreTraining m(c, rng);
  Batch x = make_batch(4, 12, 3, 9);
  // Adam written out here (the optimizer layer has the real ones): enough to overfit a fixed batch.
  auto params = m.parameters();
  std::vector<Tensor> mo, ve;
  for (auto& p : params) {
    mo.push_back(Tensor::zeros(p.shape()));
    ve.push_back(Tensor::zeros(p.shape()));
  }
  double loss = 0;
  for (int step = 1; step <= 300; ++step) {
    m.zero_grad();
    PretrainingOutput o = m.forward(x.in, x.tg);
    o.loss.backward();
    loss = o.loss.item();
    for (size_t k = 0; k < params.size(); ++k) {
      float* w = params[k].value().data<float>();
      const float* g = params[k].grad().data<float>();
      float* mm = mo[k].data<float>();
      float* vv = ve[k].data<float>();
      for (int64_t i = 0; i < params[k].numel(); ++i) {
        mm[i] = 0.9f * mm[i] + 0.1f * g[i];
        vv[i] = 0.999f * vv[i] + 0.001f * g[i] * g[i];
        const double mh = mm[i] / (1 - std::pow(0.9, step)), vh = vv[i] / (1 - std::pow(0.999, step));
        w[i] -= static_cast<float>(3e-3 * mh / (std::sqrt(vh) + 1e-8));
      }
    }
  }
  EXPECT_LT(loss, 0.05);
  PretrainingOutput o = m.forward(x.in, x.tg);
  EXPECT_EQ(o.mlm_correct, o.mlm_weight);
  EXPECT_EQ(o.nsp_correct, o.nsp_count);
}

TEST(Bert, ActivationCheckpointingGivesTheSameGradients) {
  BertConfig c = tiny_config();  // dropout 0.1 on: the masks must replay exactly in the recomputation
  Batch x = make_batch(3, 10, 2, 4);
  x.in.dropout_seed = 77;
  auto grads = [&](bool ckpt) {
    Rng rng(5);
    BertForPreTraining m(c, rng);
    m.bert().set_activation_checkpointing(ckpt);
    PretrainingOutput o = m.forward(x.in, x.tg);
    o.loss.backward();
    std::vector<Tensor> g;
    for (auto& [n, v] : m.named_parameters()) g.push_back(v.grad().clone());
    g.push_back(o.loss.value());
    return g;
  };
  auto a = grads(false), b = grads(true);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(std::memcmp(a[i].raw_data(), b[i].raw_data(), a[i].nbytes()), 0) << "tensor " << i;
}

TEST(Bert, MicroBatchesWithGlobalNormalizersEqualOneBatch) {
  BertConfig c = tiny_config();
  Batch x = make_batch(4, 10, 3, 6);
  x.in.dropout_seed = 11;
  x.in.first_sample = 40;
  double wsum = 0;
  for (int64_t i = 0; i < x.tg.masked_lm_weights.numel(); ++i) wsum += x.tg.masked_lm_weights.get(i);
  auto run = [&](int parts) {
    Rng rng(8);
    BertForPreTraining m(c, rng);
    double loss = 0;
    for (int k = 0; k < parts; ++k) {
      Batch part = rows(x, k * 4 / parts, (k + 1) * 4 / parts);
      part.tg.mlm_normalizer = wsum + 1e-5;
      part.tg.nsp_normalizer = 4;
      PretrainingOutput o = m.forward(part.in, part.tg);
      o.loss.backward();
      loss += o.loss.item();
    }
    std::vector<double> g;
    for (auto& [n, v] : m.named_parameters())
      for (int64_t i = 0; i < v.numel(); i += 7) g.push_back(v.grad().get(i));
    g.push_back(loss);
    return g;
  };
  auto one = run(1), four = run(4);
  ASSERT_EQ(one.size(), four.size());
  for (size_t i = 0; i < one.size(); ++i) EXPECT_NEAR(one[i], four[i], 1e-6 + 1e-4 * std::fabs(one[i])) << i;
}

TEST(Bert, InputErrorsNameTheField) {
  Rng rng(1);
  BertForPreTraining m(tiny_config(), rng);
  Batch x = make_batch(2, 40, 2, 1);  // longer than max_position_embeddings 32
  try {
    m.forward(x.in, x.tg);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_position_embeddings"), std::string::npos);
  }
  Batch y = make_batch(2, 8, 2, 1);
  y.tg.masked_lm_positions.set(1, 9);
  EXPECT_THROW(m.forward(y.in, y.tg), Error);
}

// The caching allocator serves a steady-state training step entirely from its cache: after warm-up steps no
// allocation reaches the system allocator.
TEST(Bert, SteadyStateTrainingStepDoesNotCallMalloc) {
  Rng rng(2);
  BertForPreTraining m(tiny_config(), rng);
  Batch x = make_batch(4, 12, 3, 5);
  auto step = [&] {
    m.zero_grad();
    PretrainingOutput o = m.forward(x.in, x.tg);
    o.loss.backward();
    sgd_step(m.parameters(), 1e-3);
  };
  step();
  step();
  auto& a = CachingAllocator::instance();
  const AllocatorStats before = a.stats();
  for (int i = 0; i < 3; ++i) step();
  const AllocatorStats after = a.stats();
  EXPECT_EQ(after.system_allocs, before.system_allocs);
  EXPECT_GT(after.cache_hits, before.cache_hits + 100);
  EXPECT_GT(after.peak_bytes_in_use, 0);
}

// The masked-LM accuracy counts a slot when the first index of its logits' maximum is the label (the vectorised
// argmax must answer as a scalar scan): labels are set to the scalar scan's answer in every other slot and to
// another class in the rest.
TEST(Bert, MaskedLmAccuracyUsesTheFirstMaximum) {
  BertConfig c = tiny_config();
  Rng rng(4);
  BertForPreTraining m(c, rng);
  m.eval();
  Batch x = make_batch(3, 12, 4, 9);
  Tensor logits;
  {
    NoGradGuard ng;
    logits = m.forward(x.in, x.tg).mlm_logits;
  }
  const int64_t v = logits.size(1);
  double want = 0;
  for (int64_t i = 0; i < logits.size(0); ++i) {
    int64_t best = 0;
    for (int64_t j = 1; j < v; ++j)
      if (logits.get(i * v + j) > logits.get(i * v + best)) best = j;
    const bool hit = i % 2 == 0;
    x.tg.masked_lm_ids.set(i, static_cast<double>(hit ? best : (best + 1) % v));
    if (hit) want += x.tg.masked_lm_weights.get(i);
  }
  NoGradGuard ng;
  PretrainingOutput o = m.forward(x.in, x.tg);
  EXPECT_GT(want, 0);
  EXPECT_EQ(o.mlm_correct, want);
}

// The model-FLOP count of `bench train` (and tools/bench/scripts/bench_torch.py): bert-tiny at B 32, T 128, P 20, term by term.
TEST(Flops, PretrainingStepByFormula) {
  BertConfig c;
  c.hidden_size = 128;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.intermediate_size = 512;
  const BertStepFlops f = bert_pretraining_flops(c, 32, 128, 20);
  EXPECT_EQ(f.dense, 6.0 * 32 * 128 * 2 * (4.0 * 128 * 128 + 2.0 * 128 * 512));
  EXPECT_EQ(f.attention, 12.0 * 32 * 2 * 128 * 128 * 64 * 2);
  EXPECT_EQ(f.mlm_head, 6.0 * 32 * 20 * (128.0 * 128 + 128.0 * 30522));
  EXPECT_EQ(f.pooler_nsp, 6.0 * 32 * (128.0 * 128 + 2 * 128));
  EXPECT_EQ(f.total(), 26342572032.0);
}

// bench finetune's count on real tokens: each sequence at its own length; all lengths T equal the padded step.
TEST(Flops, ClassifierStepOnRealTokens) {
  BertConfig c;
  c.hidden_size = 128;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.intermediate_size = 512;
  const std::vector<int32_t> lengths = {5, 17, 3};
  const BertStepFlops f = bert_classifier_flops(c, lengths, 2);
  EXPECT_EQ(f.dense, 6.0 * 25 * 2 * (4.0 * 128 * 128 + 2.0 * 128 * 512));
  EXPECT_EQ(f.attention, 12.0 * (25 + 289 + 9) * 2 * 64 * 2);
  EXPECT_EQ(f.mlm_head, 0.0);
  EXPECT_EQ(f.pooler_nsp, 6.0 * 3 * (128.0 * 128 + 128.0 * 2));
  EXPECT_EQ(f.total(), 60274176.0);
  // Padded to T = 32: the padded step's count is bert_pretraining_flops' encoder terms at B 3, T 32.
  const std::vector<int32_t> padded = {32, 32, 32};
  const BertStepFlops p = bert_classifier_flops(c, padded, 2);
  const BertStepFlops q = bert_pretraining_flops(c, 3, 32, 0);
  EXPECT_EQ(p.dense, q.dense);
  EXPECT_EQ(p.attention, q.attention);
}

// Prediction with packed weights (pack_linears_for_prediction, as the prediction commands run) gives the plain model's
// values bit for bit, on the padded and the unpadded path, and keeps doing so after the weights change in place (an
// optimizer step: the packed copies are no longer used) and after drop_packed_linears.
TEST(Bert, PackedPredictionEqualsThePlainModel) {
  BertConfig c = tiny_config();
  c.hidden_dropout_prob = c.attention_probs_dropout_prob = 0.0;
  Rng r1(7), r2(7);
  BertModel plain(c, r1), packed(c, r2);
  plain.eval();
  packed.eval();
  pack_linears_for_prediction(packed);
  const int64_t b = 3, t = 9;
  Tensor ids = Tensor::empty({b, t}, DType::i32), types = Tensor::zeros({b, t}, DType::i32),
         mask = Tensor::empty({b, t}, DType::i32);
  for (int64_t i = 0; i < b * t; ++i) {
    ids.data<int32_t>()[i] = static_cast<int32_t>(5 + (i * 7) % 50);
    mask.data<int32_t>()[i] = (i % t) < t - 2 * (i / t) ? 1 : 0;  // lengths 9, 7, 5
  }
  const BertInputs in{ids, types, mask, 0, 0};
  NoGradGuard ng;
  auto same = [](const BertModel::Output& a, const BertModel::Output& x) {
    for (auto [u, v] : {std::pair{&a.sequence_output, &x.sequence_output}, {&a.pooled_output, &x.pooled_output}})
      if (u->value().shape() != v->value().shape() ||
          std::memcmp(u->value().raw_data(), v->value().raw_data(), u->value().nbytes()) != 0)
        return false;
    return true;
  };
  for (Unpad u : {Unpad::never, Unpad::always}) {
    plain.set_unpad(u);
    packed.set_unpad(u);
    EXPECT_TRUE(same(plain.forward(in), packed.forward(in))) << "unpad " << static_cast<int>(u);
  }
  for (Module* m : {static_cast<Module*>(&plain), static_cast<Module*>(&packed)})
    for (auto& [name, v] : m->named_parameters()) {
      float* p = v.value().data<float>();
      for (int64_t i = 0; i < v.numel(); ++i) p[i] = p[i] * 0.75f + 0.01f;
    }
  EXPECT_TRUE(same(plain.forward(in), packed.forward(in)));
  drop_packed_linears(packed);
  EXPECT_TRUE(same(plain.forward(in), packed.forward(in)));
}
