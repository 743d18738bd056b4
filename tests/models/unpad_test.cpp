// unpad_test.cpp: the unpadded encoder against the padded computation: outputs at real positions,
// losses (1e-5 relative in f32) and every parameter gradient (1e-5 of its largest element) for the pretraining,
// classification and question-answering models, with dropout on (both paths draw the same keyed masks), with
// activation checkpointing, in f64 to rounding and in bf16; and the automatic choice of the path.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "bertrain/core/error.h"
#include "bertrain/core/rng.h"
#include "bertrain/models/bert.h"
#include "bertrain/ops/ops.h"
#include "test_util.h"

using namespace bertrain;

namespace {

BertConfig config() {
  BertConfig c = test::tiny_bert_config(100, 32, 2, 4, 64, 64);
  c.num_labels = 3;
  return c;
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::fabs(t.get(i)));
  return m;
}
double max_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::fabs(a.get(i) - b.get(i)));
  return m;
}

// B sequences of lengths `lens` (left-aligned masks) padded to T, random ids and segments.
BertInputs batch(const std::vector<int>& lens, int64_t t, uint64_t seed) {
  const int64_t b = static_cast<int64_t>(lens.size());
  Rng rng(seed);
  BertInputs in;
  in.input_ids = Tensor::zeros({b, t}, DType::i32);
  in.token_type_ids = Tensor::zeros({b, t}, DType::i32);
  in.attention_mask = Tensor::zeros({b, t}, DType::i32);
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < lens[static_cast<size_t>(i)]; ++j) {
      in.input_ids.data<int32_t>()[i * t + j] = 1 + static_cast<int32_t>(rng.randint(99));
      in.token_type_ids.data<int32_t>()[i * t + j] = j > lens[static_cast<size_t>(i)] / 2 ? 1 : 0;
      in.attention_mask.data<int32_t>()[i * t + j] = 1;
    }
  in.first_sample = 17;
  in.dropout_seed = 4242;
  return in;
}

// The two paths' results of one model: [outputs..., gradients...], each run from the same weights.
struct Run {
  std::vector<Tensor> outputs;
  std::vector<std::pair<std::string, Tensor>> grads;
};

// Compares outputs to 1e-5 relative (of the largest element) and gradients to 1e-5 of their largest element;
// gradients that are 0 in exact arithmetic (test::gradient_zero_in_exact_arithmetic: key biases, and two more under
// the QA loss) are rounding noise, held to 1e-5 of the model's largest gradient element instead. `tol` is the 1e-5
// (f64: 1e-11, bf16: 1e-3).
void expect_same(const Run& padded, const Run& unpadded, double tol, const std::string& what, bool qa_loss = false) {
  ASSERT_EQ(padded.outputs.size(), unpadded.outputs.size());
  for (size_t i = 0; i < padded.outputs.size(); ++i)
    EXPECT_LE(max_diff(unpadded.outputs[i], padded.outputs[i]), tol * std::max(1e-30, max_abs(padded.outputs[i])))
        << what << " output " << i;
  ASSERT_EQ(padded.grads.size(), unpadded.grads.size());
  double scale = 0;  // the model's largest gradient element
  for (const auto& [name, g] : padded.grads)
    if (g.defined()) scale = std::max(scale, max_abs(g));
  int checked = 0;
  for (size_t i = 0; i < padded.grads.size(); ++i) {
    const std::string& name = padded.grads[i].first;
    const Tensor& want = padded.grads[i].second;
    const Tensor& got = unpadded.grads[i].second;
    ASSERT_EQ(want.defined(), got.defined()) << what << " " << name;
    if (!want.defined()) continue;
    const bool zero = test::gradient_zero_in_exact_arithmetic(name, config().num_hidden_layers, qa_loss);
    EXPECT_LE(max_diff(got, want), tol * (zero ? scale : max_abs(want))) << what << " grad " << name;
    ++checked;
  }
  EXPECT_GT(checked, 30) << what;
}

template <class M>
std::vector<std::pair<std::string, Tensor>> grads_of(M& model) {
  std::vector<std::pair<std::string, Tensor>> g;
  for (auto& [name, p] : model.named_parameters()) g.emplace_back(name, p.grad().defined() ? p.grad().clone() : Tensor());
  return g;
}

const std::vector<int> kLens = {24, 5, 17, 1, 9, 23};

Run run_classifier(Unpad u, DType dt, bool training, bool checkpointing = false,
                   FusedQkv fused = FusedQkv::bf16_only) {
  Rng init(1);
  BertForSequenceClassification model(config(), init, dt);
  model.bert().set_unpad(u);
  model.bert().set_fused_qkv(fused);
  model.bert().set_activation_checkpointing(checkpointing);
  model.train(training);
  BertInputs in = batch(kLens, 24, 3);
  Variable logits = model.forward(in);
  Tensor labels = Tensor::from_vector({0, 2, 1, 1, 0, 2}, {6}, DType::i32);
  Variable loss = model.loss(logits, labels);
  loss.backward();
  return {{logits.value().clone(), loss.value().clone()}, grads_of(model)};
}

Run run_qa(Unpad u, DType dt) {
  Rng init(2);
  BertForQuestionAnswering model(config(), init, dt);
  model.bert().set_unpad(u);
  model.train();
  BertInputs in = batch(kLens, 24, 4);
  auto o = model.forward(in);
  Tensor sp = Tensor::from_vector({3, 1, 10, 0, 2, 20}, {6}, DType::i32);
  Tensor ep = Tensor::from_vector({5, 4, 12, 0, 8, 22}, {6}, DType::i32);
  Variable loss = model.loss(o, sp, ep);
  loss.backward();
  // Real positions only: the padded path's logits there are real numbers - 10000, the unpadded path's are -10000.
  Tensor s = o.start_logits.value().clone(), e = o.end_logits.value().clone();
  for (int64_t i = 0; i < s.numel(); ++i)
    if (in.attention_mask.data<int32_t>()[i] == 0) s.set(i, 0.0), e.set(i, 0.0);
  return {{s, e, loss.value().clone()}, grads_of(model)};
}

// Targets for kLens: row b's real slots (weight 1) at real positions; the empty slots (weight 0) point at
// position 0, except row 1's last, which points at a padding position (7 >= 5): the unpadded path reads a zero
// row there, the padded path the padding position's output; weight 0 either way.
PretrainingTargets pretraining_targets(DType dt) {
  PretrainingTargets tg;
  tg.masked_lm_positions = Tensor::from_vector({1, 5, 20, 0, 0,  2, 3, 0, 0, 7,  16, 9, 1, 0, 0,  0, 0, 0, 0, 0,
                                                 4, 7, 8, 0, 0,  22, 3, 11, 12, 0},
                                                {6, 5}, DType::i32);
  tg.masked_lm_ids = Tensor::from_vector({7, 8, 9, 0, 0,  10, 11, 0, 0, 0,  12, 13, 14, 0, 0,  0, 0, 0, 0, 0,
                                           15, 16, 17, 0, 0,  18, 19, 20, 21, 0},
                                          {6, 5}, DType::i32);
  tg.masked_lm_weights = Tensor::from_vector({1, 1, 1, 0, 0,  1, 1, 0, 0, 0,  1, 1, 1, 0, 0,  0, 0, 0, 0, 0,
                                               1, 1, 1, 0, 0,  1, 1, 1, 1, 0},
                                              {6, 5}, dt);
  tg.next_sentence_labels = Tensor::from_vector({0, 1, 1, 0, 1, 0}, {6}, DType::i32);
  return tg;
}

Run run_pretraining(Unpad u, DType dt) {
  Rng init(3);
  BertForPreTraining model(config(), init, dt);
  model.bert().set_unpad(u);
  model.train();
  BertInputs in = batch(kLens, 24, 5);
  PretrainingTargets tg = pretraining_targets(dt);
  PretrainingOutput o = model.forward(in, tg);
  o.loss.backward();
  // Logits of the weighted slots only (the one slot at a padding position differs by design, see above).
  Tensor mlm = o.mlm_logits.clone();
  const int64_t v = mlm.size(1);
  for (int64_t i = 0; i < mlm.size(0); ++i)
    if (tg.masked_lm_weights.get(i) == 0.0)
      for (int64_t k = 0; k < v; ++k) mlm.set(i * v + k, 0.0);
  return {{mlm, o.nsp_logits.clone(), o.mlm_loss.value().clone(), o.nsp_loss.value().clone()}, grads_of(model)};
}

}  // namespace

TEST(Unpad, ClassifierEqualsPaddedWithDropoutF32) {
  expect_same(run_classifier(Unpad::never, DType::f32, true), run_classifier(Unpad::always, DType::f32, true), 1e-5,
              "training");
  expect_same(run_classifier(Unpad::never, DType::f32, false), run_classifier(Unpad::always, DType::f32, false), 1e-5,
              "eval");
}

TEST(Unpad, ClassifierEqualsPaddedInF64ToRounding) {
  expect_same(run_classifier(Unpad::never, DType::f64, true), run_classifier(Unpad::always, DType::f64, true), 1e-11,
              "f64");
}

TEST(Unpad, ActivationCheckpointingOnTheUnpaddedPath) {
  expect_same(run_classifier(Unpad::never, DType::f32, true),
              run_classifier(Unpad::always, DType::f32, true, /*checkpointing=*/true), 1e-5, "checkpointing");
}

TEST(Unpad, QuestionAnsweringEqualsPadded) {
  expect_same(run_qa(Unpad::never, DType::f32), run_qa(Unpad::always, DType::f32), 1e-5, "qa", /*qa_loss=*/true);
  expect_same(run_qa(Unpad::never, DType::f64), run_qa(Unpad::always, DType::f64), 1e-11, "qa f64", true);
}

TEST(Unpad, PretrainingEqualsPadded) {
  expect_same(run_pretraining(Unpad::never, DType::f32), run_pretraining(Unpad::always, DType::f32), 1e-5, "mlm+nsp");
  expect_same(run_pretraining(Unpad::never, DType::f64), run_pretraining(Unpad::always, DType::f64), 1e-11,
              "mlm+nsp f64");
}

TEST(Unpad, PretrainingRefusesAWeightedSlotAtPadding) {
  Rng init(3);
  BertForPreTraining model(config(), init);
  model.bert().set_unpad(Unpad::always);
  PretrainingTargets tg = pretraining_targets(DType::f32);
  tg.masked_lm_weights.set(9, 1.0);  // row 1's slot at position 7 of a 5-token sequence now counts
  try {
    model.forward(batch(kLens, 24, 5), tg);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("masked_lm_positions[1, 4] = 7 is a padding position"), std::string::npos)
        << e.what();
  }
  model.bert().set_unpad(Unpad::never);  // the padded path computes it
  EXPECT_NO_THROW(model.forward(batch(kLens, 24, 5), tg));
}

TEST(Unpad, Bf16MatchesPaddedBf16) {
  if (!matmul_bf16_supported()) GTEST_SKIP() << "no bf16 matmul on this CPU";
  MatmulPrecisionGuard g(MatmulPrecision::bf16);
  // The same bf16 operands on both paths; only the f32 accumulation order of the products differs.
  expect_same(run_classifier(Unpad::never, DType::f32, true), run_classifier(Unpad::always, DType::f32, true), 1e-3,
              "bf16");
}

TEST(Unpad, AutomaticChoiceAndErrors) {
  Rng init(1);
  BertModel model(config(), init);
  EXPECT_TRUE(model.takes_unpadded_path(batch({24, 5, 17}, 24, 1)));     // 38% padding
  EXPECT_FALSE(model.takes_unpadded_path(batch({24, 23, 24}, 24, 1)));   // 1.4% padding
  BertInputs full = batch({24, 24}, 24, 1);
  full.attention_mask = Tensor();
  EXPECT_FALSE(model.takes_unpadded_path(full));  // no mask: nothing to remove
  BertInputs holes = batch({10, 5, 4}, 24, 1);
  holes.attention_mask.data<int32_t>()[20] = 1;  // a 1 after the 0s: not left-aligned
  EXPECT_FALSE(model.takes_unpadded_path(holes));
  EXPECT_EQ(pack_tokens(holes), nullptr);
  model.set_unpad(Unpad::never);
  EXPECT_FALSE(model.takes_unpadded_path(batch({24, 5, 17}, 24, 1)));
  model.set_unpad(Unpad::always);
  EXPECT_TRUE(model.takes_unpadded_path(full));
  EXPECT_THROW(model.forward(holes), Error);
  auto p = pack_tokens(batch({3, 0, 2}, 4, 1));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->cu_seqlens, (std::vector<int64_t>{0, 3, 3, 5}));
  EXPECT_EQ(p->sample, (std::vector<int32_t>{0, 0, 0, 2, 2}));
  EXPECT_EQ(p->position, (std::vector<int32_t>{0, 1, 2, 0, 1}));
}

// attention_varlen against attention() on the padded layout with a padding mask: real rows, gradients, with
// dropout (the same keyed masks), for a sequence of length 0 and one of length 1 too.
TEST(Unpad, VarlenAttentionEqualsMaskedAttention) {
  const std::vector<int64_t> lens = {7, 0, 1, 12};
  const int64_t b = 4, t = 12, nh = 3, hs = 4, h = nh * hs;
  std::vector<int64_t> cu = {0};
  for (int64_t l : lens) cu.push_back(cu.back() + l);
  const int64_t n = cu.back();
  for (DType dt : {DType::f64, DType::f32}) {
    Rng rng(8);
    Tensor q = Tensor::uniform({b, t, h}, -1, 1, rng, dt), k = Tensor::uniform({b, t, h}, -1, 1, rng, dt),
           v = Tensor::uniform({b, t, h}, -1, 1, rng, dt), r = Tensor::uniform({b, t, h}, -1, 1, rng, dt);
    Tensor mask = Tensor::zeros({b, t}, dt), idx = Tensor::empty({n}, DType::i32);
    for (int64_t s = 0; s < b; ++s)
      for (int64_t j = 0; j < t; ++j) {
        if (j >= lens[static_cast<size_t>(s)]) mask.set(s * t + j, -10000.0);
        else idx.data<int32_t>()[cu[static_cast<size_t>(s)] + j] = static_cast<int32_t>(s * t + j);
      }
    const DropoutKey key{5, 6, 7, nullptr};
    Variable qp(q, true), kp(k, true), vp(v, true);
    Variable yp = attention(qp, kp, vp, nh, mask, 0.5, 0.2, true, key);
    // Loss on real rows only (padding rows are not outputs of the unpadded path).
    sum(mul(gather_rows(reshape(yp, {b * t, h}), idx), Variable(gather_rows(Variable(r.reshape({b * t, h})), idx).value())))
        .backward();
    Variable qu(gather_rows(Variable(q.reshape({b * t, h})), idx).value(), true),
        ku(gather_rows(Variable(k.reshape({b * t, h})), idx).value(), true),
        vu(gather_rows(Variable(v.reshape({b * t, h})), idx).value(), true);
    Variable yu = attention_varlen(qu, ku, vu, nh, cu, 0.5, 0.2, true, key);
    sum(mul(yu, Variable(gather_rows(Variable(r.reshape({b * t, h})), idx).value()))).backward();
    const double tol = dt == DType::f64 ? 1e-12 : 1e-5;
    auto real_rows = [&](const Tensor& x) { return gather_rows(Variable(x.reshape({b * t, h})), idx).value(); };
    EXPECT_LE(max_diff(yu.value(), real_rows(yp.value())), tol);
    EXPECT_LE(max_diff(qu.grad(), real_rows(qp.grad())), tol);
    EXPECT_LE(max_diff(ku.grad(), real_rows(kp.grad())), tol);
    EXPECT_LE(max_diff(vu.grad(), real_rows(vp.grad())), tol);
  }
}

// The fused Q, K, V projection (FusedQkv) on both encoder paths, with dropout: the same losses, logits and every
// parameter gradient (query, key and value weights and biases included, under their own names) as the three
// linears, in f32 to 1e-5, in f64 to 1e-11 and in bf16 (the default takes the fused path there) to 1e-3.
TEST(FusedQkvModel, EqualsThreeProjectionsOnBothPaths) {
  for (Unpad u : {Unpad::never, Unpad::always}) {
    const std::string path = u == Unpad::never ? "padded" : "unpadded";
    expect_same(run_classifier(u, DType::f32, true, false, FusedQkv::never),
                run_classifier(u, DType::f32, true, false, FusedQkv::always), 1e-5, "f32 " + path);
    expect_same(run_classifier(u, DType::f64, true, false, FusedQkv::never),
                run_classifier(u, DType::f64, true, false, FusedQkv::always), 1e-11, "f64 " + path);
    expect_same(run_classifier(u, DType::f32, true, true, FusedQkv::never),
                run_classifier(u, DType::f32, true, true, FusedQkv::always), 1e-5, "f32 checkpointing " + path);
    if (!matmul_bf16_supported()) continue;
    MatmulPrecisionGuard g(MatmulPrecision::bf16);
    expect_same(run_classifier(u, DType::f32, true, false, FusedQkv::never),
                run_classifier(u, DType::f32, true, false, FusedQkv::bf16_only), 1e-3, "bf16 " + path);
  }
}
