// train_nonfinite_test.cpp: TrainStep's non-finite step skipping (train_step.h) seen from outside. NaN, +Inf, -Inf
// and a finite value that only bf16 rounding turns into Inf are injected into a matmul's input, a weight and a
// gradient, in f32 and with bf16 matmuls, under LAMB and AdamW: the step must be skipped and counted in TrainState,
// the weights and the optimizer's moments and step counter must not change by a single bit, and a clean step right
// after must update them again (so these tests can fail).
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "bertrain/core/rng.h"
#include "bertrain/models/bert.h"
#include "bertrain/nn/layers.h"
#include "bertrain/ops/ops.h"
#include "bertrain/optim/adamw.h"
#include "bertrain/optim/lamb.h"
#include "bertrain/train/train_state.h"
#include "bertrain/train/train_step.h"
#include "test_util.h"

using namespace bertrain;

namespace {

enum class Where { input, weight, gradient };
enum class Value { nan, pos_inf, neg_inf, bf16_overflow };

// 3.4e38 is a finite float above the largest bf16 (0x7f7f7fff rounds up): only bf16 rounding makes it Inf, inside
// the matmul's operand conversion.
constexpr float kBf16Overflow = 3.4e38f;

float value_of(Value v) {
  switch (v) {
    case Value::nan: return std::numeric_limits<float>::quiet_NaN();
    case Value::pos_inf: return std::numeric_limits<float>::infinity();
    case Value::neg_inf: return -std::numeric_limits<float>::infinity();
    case Value::bf16_overflow: return kBf16Overflow;
  }
  return 0;
}

std::string bytes_of(const Tensor& t) {
  if (!t.defined()) return {};
  return std::string(static_cast<const char*>(t.raw_data()), t.nbytes());
}

// Every bit of the weights and of the optimizer's state (moments and step counter).
struct Snapshot {
  std::vector<std::string> weights, moments;
  int64_t optimizer_step = 0;
  static Snapshot of(const NamedParameters& params, const Optimizer& opt) {
    Snapshot s;
    for (const auto& [name, v] : params) s.weights.push_back(bytes_of(v.value()));
    for (const auto& [name, t] : opt.state_tensors()) s.moments.push_back(bytes_of(t));
    s.optimizer_step = opt.counters().step;
    return s;
  }
};

std::unique_ptr<Optimizer> make_optimizer(const std::string& name, const NamedParameters& params) {
  if (name == "lamb") return std::make_unique<Lamb>(params);
  return std::make_unique<AdamW>(params);
}

// A two-layer classifier on float inputs: x (B, D) -> linear -> GELU -> linear -> cross-entropy. Both products are
// bf16 matmuls under MatmulPrecision::bf16.
struct Mlp {
  Rng rng{7};
  Linear l1{8, 16, true, 0.5, rng}, l2{16, 4, true, 0.5, rng};
  Tensor x = Tensor::uniform({6, 8}, -1, 1, rng);
  Tensor labels = Tensor::from_vector({0, 1, 2, 3, 1, 2}, {6}, DType::i32);
  NamedParameters params() const {
    return {{"l1.weight", l1.weight()}, {"l1.bias", l1.bias()}, {"l2.weight", l2.weight()}, {"l2.bias", l2.bias()}};
  }
  double loss_backward(const Tensor& input) const {
    Variable h = gelu(l1.forward(Variable(input)));
    Variable loss = cross_entropy(l2.forward(h), labels, Tensor(), 6.0);
    loss.backward();
    return loss.item();
  }
};

// Runs: a clean step; then `inject` and a step that must be skipped, counted and change nothing; then `clean` and a
// step that must update again. `micro` is the micro-batch function (it reads whatever `inject` changed).
void expect_skip_then_recover(const NamedParameters& params, Optimizer& opt, const TrainStep::MicroBatchFn& micro,
                              const std::function<void()>& inject, const std::function<void()>& clean) {
  TrainStepOptions o;
  o.clip_grad_norm = 1.0;
  TrainStep step(params, opt, o, nullptr);
  TrainState state;
  // A clean first step: the moments are non-zero before the injection.
  ASSERT_FALSE(step.run(1, micro, 1e-2, state, false).skipped);

  inject();
  const Snapshot before = Snapshot::of(params, opt);  // with the injected value, where it is a weight
  const StepStats st = step.run(1, micro, 1e-2, state, false);
  EXPECT_TRUE(st.skipped) << "loss " << (st.losses.empty() ? 0.0 : st.losses[0]) << ", grad norm " << st.grad_norm;
  EXPECT_EQ(state.skipped_steps, 1);
  EXPECT_EQ(state.consecutive_skipped_steps, 1);
  EXPECT_EQ(state.global_step, 2);  // the step counter still advances (data and schedule stay aligned)
  const Snapshot after = Snapshot::of(params, opt);
  EXPECT_EQ(after.optimizer_step, before.optimizer_step);
  for (size_t i = 0; i < params.size(); ++i) EXPECT_EQ(after.weights[i], before.weights[i]) << params[i].first;
  ASSERT_EQ(after.moments.size(), before.moments.size());
  for (size_t i = 0; i < after.moments.size(); ++i)
    EXPECT_EQ(after.moments[i], before.moments[i]) << opt.state_tensors()[i].first;
  for (const auto& [name, v] : params) {
    if (!v.grad().defined()) continue;
    for (int64_t i = 0; i < v.numel(); ++i) {
      ASSERT_EQ(v.grad().get(i), 0.0) << name << ": gradient not cleared";
    }
  }

  // Clean again: the next step updates weights and moments and ends the run of skipped steps.
  clean();
  const Snapshot clean_state = Snapshot::of(params, opt);
  ASSERT_FALSE(step.run(1, micro, 1e-2, state, false).skipped);
  EXPECT_EQ(state.consecutive_skipped_steps, 0);
  EXPECT_EQ(state.skipped_steps, 1);
  const Snapshot updated = Snapshot::of(params, opt);
  EXPECT_NE(updated.weights, clean_state.weights);
  EXPECT_NE(updated.moments, clean_state.moments);
  EXPECT_EQ(updated.optimizer_step, clean_state.optimizer_step + 1);
}

struct Case {
  Where where;
  Value value;
  bool bf16;
  std::string optimizer;
};

std::string name_of(const testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  const char* w[] = {"Input", "Weight", "Gradient"};
  const char* v[] = {"NaN", "PosInf", "NegInf", "Bf16Overflow"};
  return std::string(w[static_cast<int>(c.where)]) + v[static_cast<int>(c.value)] + (c.bf16 ? "Bf16" : "F32") +
         (c.optimizer == "lamb" ? "Lamb" : "AdamW");
}

std::vector<Case> all_cases() {
  std::vector<Case> out;
  for (Where w : {Where::input, Where::weight, Where::gradient})
    for (Value v : {Value::nan, Value::pos_inf, Value::neg_inf, Value::bf16_overflow})
      for (bool bf16 : {false, true})
        for (const char* opt : {"lamb", "adamw"}) {
          // The overflow value is finite in f32 (see Bf16OverflowIsAnOrdinaryStepInF32) and gradients stay f32.
          if (v == Value::bf16_overflow && (!bf16 || w == Where::gradient)) continue;
          out.push_back({w, v, bf16, opt});
        }
  return out;
}

class NonFiniteStep : public testing::TestWithParam<Case> {};

// Weight and input injections go into element 5 of the first layer (row 0, column 5 of W1; row 0, feature 5 of
// x); a gradient injection overwrites element 3 of W1's gradient after backward.
TEST_P(NonFiniteStep, IsSkippedCountedAndChangesNothing) {
  const Case c = GetParam();
  MatmulPrecisionGuard precision(c.bf16 ? MatmulPrecision::bf16 : MatmulPrecision::f32);
  Mlp m;
  const NamedParameters params = m.params();
  auto opt = make_optimizer(c.optimizer, params);
  Tensor input = m.x.clone();
  bool poison_gradient = false;
  auto micro = [&](int64_t) -> std::vector<double> {
    const double loss = m.loss_backward(input);
    if (poison_gradient) Variable(m.l1.weight()).mutable_grad().set(3, value_of(c.value));
    return {loss};
  };
  Tensor w1 = m.l1.weight().value();  // shares the parameter's storage
  const double w1_5 = w1.get(5);
  expect_skip_then_recover(
      params, *opt, micro,
      [&] {
        if (c.where == Where::input) input.set(5, value_of(c.value));
        if (c.where == Where::weight) w1.set(5, value_of(c.value));
        poison_gradient = c.where == Where::gradient;
      },
      [&] {
        input = m.x.clone();
        w1.set(5, w1_5);
        poison_gradient = false;
      });
}

INSTANTIATE_TEST_SUITE_P(TrainStep, NonFiniteStep, testing::ValuesIn(all_cases()), name_of);

// The control for the overflow cases: in f32 the same finite input is an ordinary step, so what skips the bf16 step
// is the Inf that bf16 rounding made inside the matmul.
TEST(NonFiniteStepControl, Bf16OverflowIsAnOrdinaryStepInF32) {
  Mlp m;
  const NamedParameters params = m.params();
  Lamb opt(params);
  TrainStep step(params, opt, TrainStepOptions{}, nullptr);
  TrainState state;
  Tensor input = m.x.clone();
  input.set(5, kBf16Overflow);
  auto micro = [&](int64_t) -> std::vector<double> { return {m.loss_backward(input)}; };
  const StepStats st = step.run(1, micro, 1e-2, state, false);
  EXPECT_FALSE(st.skipped) << "loss " << st.losses[0] << ", grad norm " << st.grad_norm;
  {
    MatmulPrecisionGuard bf16(MatmulPrecision::bf16);
    EXPECT_TRUE(step.run(1, micro, 1e-2, state, false).skipped);
  }
}

// The same through the model pretraining runs: a tiny BertForPreTraining (dropout 0) under LAMB and AdamW, NaN or
// Inf in a query weight (the operand of a bf16 matmul) or in the word embeddings' gradient.
struct BertCase {
  bool bf16;
  bool gradient;
  Value value;
  std::string optimizer;
};

class NonFiniteBertStep : public testing::TestWithParam<BertCase> {};

TEST_P(NonFiniteBertStep, IsSkippedCountedAndChangesNothing) {
  const BertCase c = GetParam();
  MatmulPrecisionGuard precision(c.bf16 ? MatmulPrecision::bf16 : MatmulPrecision::f32);
  BertConfig cfg = test::tiny_bert_config(40, 16, 2, 2, 32, 16);
  cfg.hidden_dropout_prob = cfg.attention_probs_dropout_prob = 0;
  Rng rng(3);
  BertForPreTraining model(cfg, rng);
  const NamedParameters params = model.named_parameters();
  auto opt = make_optimizer(c.optimizer, params);
  const int64_t B = 2, T = 8, P = 2;
  BertInputs in;
  in.input_ids = Tensor::empty({B, T}, DType::i32);
  for (int64_t i = 0; i < B * T; ++i) in.input_ids.set(i, 5 + (7 * i) % 30);
  PretrainingTargets tg;
  tg.masked_lm_positions = Tensor::from_vector({1, 4, 2, 6}, {B, P}, DType::i32);
  tg.masked_lm_ids = Tensor::from_vector({7, 9, 11, 13}, {B, P}, DType::i32);
  tg.masked_lm_weights = Tensor::full({B, P}, 1.0);
  tg.next_sentence_labels = Tensor::from_vector({0, 1}, {B}, DType::i32);
  Variable query, embeddings;
  for (const auto& [name, v] : params) {
    if (name == "bert.encoder.layer.0.attention.self.query.weight") query = v;
    if (name == "bert.embeddings.word_embeddings.weight") embeddings = v;
  }
  ASSERT_TRUE(query.value().defined() && embeddings.value().defined());
  bool poison_gradient = false;
  auto micro = [&](int64_t) -> std::vector<double> {
    PretrainingOutput o = model.forward(in, tg);
    o.loss.backward();
    if (poison_gradient) embeddings.mutable_grad().set(100, value_of(c.value));
    return {o.loss.item()};
  };
  Tensor q = query.value();
  const double q7 = q.get(7);
  expect_skip_then_recover(
      params, *opt, micro,
      [&] {
        if (c.gradient) poison_gradient = true;
        else q.set(7, value_of(c.value));
      },
      [&] {
        poison_gradient = false;
        q.set(7, q7);
      });
}

std::vector<BertCase> bert_cases() {
  std::vector<BertCase> out;
  for (bool bf16 : {false, true})
    for (bool gradient : {false, true})
      for (Value v : {Value::nan, Value::pos_inf, Value::bf16_overflow})
        for (const char* opt : {"lamb", "adamw"})
          if (v != Value::bf16_overflow || (bf16 && !gradient)) out.push_back({bf16, gradient, v, opt});
  return out;
}

std::string bert_name_of(const testing::TestParamInfo<BertCase>& info) {
  const BertCase& c = info.param;
  const char* v[] = {"NaN", "PosInf", "NegInf", "Bf16Overflow"};
  return std::string(c.gradient ? "Gradient" : "QueryWeight") + v[static_cast<int>(c.value)] + (c.bf16 ? "Bf16" : "F32") +
         (c.optimizer == "lamb" ? "Lamb" : "AdamW");
}

INSTANTIATE_TEST_SUITE_P(TrainStep, NonFiniteBertStep, testing::ValuesIn(bert_cases()), bert_name_of);

}  // namespace
