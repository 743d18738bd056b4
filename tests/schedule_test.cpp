// schedule_test.cpp: learning-rate schedules: CASES C22 exactly, the NVIDIA and Hugging Face conventions at step 0,
// warmup-1, warmup and the last step, multi-phase re-warm-up, and option validation.
#include <gtest/gtest.h>

#include <cmath>

#include "bertrain/core/error.h"
#include "bertrain/schedule/schedule.h"

using namespace bertrain;

namespace {
// 1e-6 relative (CASES.md default), exact for 0.
void expect_rel(double got, double want, const char* what, int64_t step) {
  if (want == 0.0) {
    EXPECT_EQ(got, 0.0) << what << " step " << step;
  } else {
    EXPECT_NEAR(got, want, 1e-6 * std::fabs(want)) << what << " step " << step;
  }
}
LrScheduleOptions c22(LrConvention conv, LrDecay decay) {
  LrScheduleOptions o;
  o.learning_rate = 1e-4;
  o.num_warmup_steps = 10;
  o.num_train_steps = 100;
  o.decay = decay;
  o.power = 1.0;
  o.convention = conv;
  return o;
}
}  // namespace

// CASES C22, google-research/bert optimization.py: poly decay over num_train_steps from the global step (not
// offset by warmup); warmup overrides while step < warmup; so step 10 gives 9e-5 and the peak is never reached.
TEST(Schedule, C22GoogleBert) {
  LrSchedule s(c22(LrConvention::google_bert, LrDecay::poly));
  const std::pair<int64_t, double> want[] = {{0, 0.0},     {1, 1e-5},   {9, 9e-5},  {10, 9e-5}, {11, 8.9e-5},
                                             {50, 5e-5},   {99, 1e-6},  {100, 0.0}, {150, 0.0}};
  for (auto [step, lr] : want) expect_rel(s.lr(step), lr, "google_bert", step);
  double peak = 0;
  for (int64_t i = 0; i <= 200; ++i) {
    EXPECT_GE(s.lr(i), 0.0);
    peak = std::max(peak, s.lr(i));
  }
  EXPECT_LT(peak, 1e-4);
  // `linear` in this convention is poly with power 1.
  LrSchedule lin(c22(LrConvention::google_bert, LrDecay::linear));
  for (auto [step, lr] : want) expect_rel(lin.lr(step), lr, "google_bert linear", step);
}

// CASES C22, Hugging Face get_linear_schedule_with_warmup.
TEST(Schedule, C22HuggingFaceLinear) {
  LrSchedule s(c22(LrConvention::hugging_face, LrDecay::linear));
  const std::pair<int64_t, double> want[] = {{0, 0.0},           {1, 1e-5},           {9, 9e-5},
                                             {10, 1e-4},         {11, 9.88889e-5},    {50, 5.55556e-5},
                                             {99, 1.11111e-6},   {100, 0.0},          {150, 0.0}};
  for (auto [step, lr] : want) {
    // The case gives 6 significant digits; compare to that precision, and exactly where exact.
    EXPECT_NEAR(s.lr(step), lr, 5e-6 * lr) << "step " << step;
  }
  EXPECT_DOUBLE_EQ(s.lr(11), 1e-4 * 89.0 / 90.0);
  EXPECT_DOUBLE_EQ(s.lr(50), 1e-4 * 50.0 / 90.0);
}

// NVIDIA PolyWarmUpScheduler: scheduler.step() precedes optimizer.step(), so update k uses progress (k+1)/total;
// warmup is a proportion; decay lr * (1 - p)^0.5.
TEST(Schedule, NvidiaPolyWarmup) {
  LrScheduleOptions o;
  o.learning_rate = 6e-3;
  o.num_train_steps = 100;
  o.warmup_proportion = 0.1;
  o.power = 0.5;
  o.convention = LrConvention::nvidia;
  LrSchedule s(o);
  EXPECT_EQ(s.warmup_steps(), 10);
  expect_rel(s.lr(0), 6e-3 * 0.01 / 0.1, "nvidia", 0);  // first update is not 0
  expect_rel(s.lr(8), 6e-3 * 0.09 / 0.1, "nvidia", 8);   // warmup - 2: p = 0.09
  expect_rel(s.lr(9), 6e-3 * std::sqrt(0.9), "nvidia", 9);  // p = 0.1 = w: decay branch
  expect_rel(s.lr(10), 6e-3 * std::sqrt(0.89), "nvidia", 10);
  expect_rel(s.lr(98), 6e-3 * std::sqrt(0.01), "nvidia", 98);
  expect_rel(s.lr(99), 0.0, "nvidia", 99);  // p = 1
  expect_rel(s.lr(150), 0.0, "nvidia", 150);  // NVIDIA would give NaN here; we clamp
  // Warmup given in steps means the same proportion.
  o.warmup_proportion = 0;
  o.num_warmup_steps = 10;
  LrSchedule s2(o);
  for (int64_t i = 0; i < 120; ++i) EXPECT_DOUBLE_EQ(s.lr(i), s2.lr(i)) << i;
  // LinearWarmUpScheduler: lr * max((p - 1) / (w - 1), 0).
  o.decay = LrDecay::linear;
  LrSchedule lin(o);
  expect_rel(lin.lr(9), 6e-3, "nvidia linear", 9);
  expect_rel(lin.lr(54), 6e-3 * (0.55 - 1.0) / (0.1 - 1.0), "nvidia linear", 54);
  expect_rel(lin.lr(99), 0.0, "nvidia linear", 99);
}

TEST(Schedule, HuggingFacePolyCosineConstant) {
  LrScheduleOptions o = c22(LrConvention::hugging_face, LrDecay::poly);
  o.power = 2.0;
  o.end_learning_rate = 1e-7;
  LrSchedule p(o);
  expect_rel(p.lr(9), 9e-5, "hf poly", 9);
  expect_rel(p.lr(10), 1e-4, "hf poly", 10);
  expect_rel(p.lr(55), (1e-4 - 1e-7) * 0.25 + 1e-7, "hf poly", 55);
  expect_rel(p.lr(100), 1e-7, "hf poly", 100);
  expect_rel(p.lr(101), 1e-7, "hf poly", 101);
  o.decay = LrDecay::cosine;
  o.end_learning_rate = 0;
  LrSchedule c(o);
  expect_rel(c.lr(10), 1e-4, "hf cosine", 10);
  expect_rel(c.lr(55), 5e-5, "hf cosine", 55);
  expect_rel(c.lr(100), 0.0, "hf cosine", 100);
  EXPECT_NEAR(c.lr(100), 0.0, 1e-20);
  o.decay = LrDecay::constant;
  LrSchedule k(o);
  expect_rel(k.lr(5), 5e-5, "hf constant", 5);
  expect_rel(k.lr(10), 1e-4, "hf constant", 10);
  expect_rel(k.lr(1000), 1e-4, "hf constant", 1000);
  // warmup_ratio rounds up as TrainingArguments.get_warmup_steps; google-research/bert truncates.
  o.num_warmup_steps = -1;
  o.warmup_proportion = 0.105;
  EXPECT_EQ(LrSchedule(o).warmup_steps(), 11);
  o.convention = LrConvention::google_bert;
  EXPECT_EQ(LrSchedule(o).warmup_steps(), 10);
}

TEST(Schedule, BuildingBlocks) {
  EXPECT_DOUBLE_EQ(lr_linear_warmup(1.0, 3, 4), 0.75);
  EXPECT_DOUBLE_EQ(lr_poly_decay(1.0, 50, 100, 0.5, 0.0), std::sqrt(0.5));
  EXPECT_DOUBLE_EQ(lr_poly_decay(1.0, 500, 100, 1.0, 0.1), 0.1);
  EXPECT_DOUBLE_EQ(lr_cosine_decay(2.0, 50, 100, 0.0), 1.0);
  EXPECT_THROW(lr_poly_decay(1.0, 1, 0, 1.0, 0.0), Error);
}

// Two phases as LAMB's BERT pretraining (phase 2 re-warms from zero with its own base lr and counter).
TEST(Schedule, MultiPhaseRewarmup) {
  LrScheduleOptions p1;
  p1.learning_rate = 6e-3;
  p1.num_train_steps = 100;
  p1.num_warmup_steps = 20;
  p1.power = 0.5;
  p1.convention = LrConvention::nvidia;
  LrScheduleOptions p2 = p1;
  p2.learning_rate = 4e-3;
  p2.num_train_steps = 50;
  p2.num_warmup_steps = 10;
  LrSchedulePhases ph({p1, p2});
  EXPECT_EQ(ph.num_phases(), 2);
  EXPECT_EQ(ph.phase_start(1), 100);
  LrSchedulePoint a = ph.at(99);
  EXPECT_EQ(a.phase, 0);
  EXPECT_EQ(a.phase_step, 99);
  EXPECT_EQ(a.lr, 0.0);
  LrSchedulePoint b = ph.at(100);
  EXPECT_EQ(b.phase, 1);
  EXPECT_EQ(b.phase_step, 0);
  expect_rel(b.lr, 4e-3 * (1.0 / 50) / 0.2, "phase 2 start", 100);
  LrSchedulePoint c = ph.at(109);
  EXPECT_EQ(c.phase_step, 9);
  expect_rel(c.lr, 4e-3 * std::sqrt(0.8), "phase 2 end of warmup", 109);
  LrSchedulePoint d = ph.at(500);  // past the end: last phase, clamped
  EXPECT_EQ(d.phase, 1);
  EXPECT_EQ(d.phase_step, 400);
  EXPECT_EQ(d.lr, 0.0);
  for (int64_t g = 0; g < 150; ++g) {
    LrSchedulePoint q = ph.at(g);
    EXPECT_EQ(q.lr, ph.phase(q.phase).lr(q.phase_step));
  }
}

TEST(Schedule, ValidationErrors) {
  LrScheduleOptions o = c22(LrConvention::google_bert, LrDecay::poly);
  auto bad = [](LrScheduleOptions x) { EXPECT_THROW(LrSchedule{x}, Error); };
  LrScheduleOptions x = o;
  x.num_train_steps = 0;
  bad(x);
  x = o;
  x.num_warmup_steps = 101;
  bad(x);
  x = o;
  x.num_warmup_steps = -1;
  x.warmup_proportion = 1.5;
  bad(x);
  x = o;
  x.power = 0;
  bad(x);
  x = o;
  x.end_learning_rate = 1.0;
  bad(x);
  x = o;
  x.learning_rate = std::nan("");
  bad(x);
  EXPECT_THROW(LrSchedule(o).lr(-1), Error);
  EXPECT_THROW(LrSchedulePhases({}), Error);
  x = o;
  x.num_train_steps = -3;
  try {
    LrSchedulePhases ph({o, x});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("phase 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("num_train_steps"), std::string::npos) << e.what();
  }
}
