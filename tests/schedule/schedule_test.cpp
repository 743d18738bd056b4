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
  EXPECT_EQ(s.warmup_steps(), 9);  // updates 0..8 (p = 0.01 .. 0.09 < 0.1); update 9 has p = w: decay branch
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

// CASES C39: for each convention, the warmup and total step counts and the lr at the first update, the
// last warmup update, the first decay update and the last update, written in the reference's own step indexing.
// MRPC: 3668 examples, batch 32, 3 epochs, lr 2e-5, warmup_proportion 0.1.
TEST(Schedule, C39StepCountsAndLrPerConvention) {
  auto mrpc = [](LrConvention conv, int64_t total) {
    LrScheduleOptions o;
    o.learning_rate = 2e-5;
    o.num_train_steps = total;
    o.warmup_proportion = 0.1;
    o.decay = LrDecay::linear;
    o.convention = conv;
    return LrSchedule(o);
  };
  // google-research/bert run_classifier.py: num_train_steps = int(3668 / 32 * 3) = 343,
  // num_warmup_steps = int(343 * 0.1) = 34. optimization.py at global_step g (the update about to run, from 0):
  //   g < 34: lr = 2e-5 * g / 34;  else lr = 2e-5 * (1 - g / 343)   (polynomial_decay, power 1, end 0)
  const LrSchedule g = mrpc(LrConvention::google_bert, static_cast<int64_t>(3668.0 / 32 * 3));
  EXPECT_EQ(g.options().num_train_steps, 343);
  EXPECT_EQ(g.warmup_steps(), 34);
  expect_rel(g.lr(0), 0.0, "google first update", 0);
  expect_rel(g.lr(33), 1.941176e-5, "google last warmup update", 33);   // 2e-5 * 33 / 34
  expect_rel(g.lr(34), 1.801749e-5, "google first decay update", 34);   // 2e-5 * (1 - 34/343)
  expect_rel(g.lr(342), 5.830904e-8, "google last update", 342);        // 2e-5 * (1 - 342/343)
  expect_rel(g.lr(343), 0.0, "google after the end", 343);
  // Hugging Face Trainer: ceil(3668 / 32) = 115 updates per epoch, 345 in all; get_warmup_steps =
  // ceil(345 * 0.1) = 35; get_linear_schedule_with_warmup at step s (0 for the first optimizer.step()):
  //   s < 35: lr = 2e-5 * s / 35;  else lr = 2e-5 * max(0, (345 - s) / (345 - 35))
  const LrSchedule h = mrpc(LrConvention::hugging_face, 345);
  EXPECT_EQ(h.warmup_steps(), 35);
  expect_rel(h.lr(0), 0.0, "hf first update", 0);
  expect_rel(h.lr(34), 2e-5 * 34.0 / 35.0, "hf last warmup update", 34);
  expect_rel(h.lr(35), 2e-5, "hf first decay update", 35);
  expect_rel(h.lr(344), 6.451613e-8, "hf last update", 344);             // 2e-5 / 310
  // NVIDIA schedulers.py LinearWarmUpScheduler: scheduler.step() runs before optimizer.step() and sets
  // last_epoch = param_group['step'] + 1, so update k (k updates done before it) has progress p = (k + 1) / 343:
  //   p < 0.1: lr = 2e-5 * p / 0.1;  else lr = 2e-5 * max((p - 1) / (0.1 - 1), 0)
  // p < 0.1 <=> k + 1 < 34.3: updates 0..33 warm up (34 of them), update 34 (p = 35/343) decays.
  const LrSchedule n = mrpc(LrConvention::nvidia, 343);
  EXPECT_EQ(n.warmup_steps(), 34);
  expect_rel(n.lr(0), 2e-5 * (1.0 / 343) / 0.1, "nvidia first update", 0);
  expect_rel(n.lr(33), 2e-5 * (34.0 / 343) / 0.1, "nvidia last warmup update", 33);
  expect_rel(n.lr(34), 2e-5 * ((35.0 / 343) - 1) / (0.1 - 1), "nvidia first decay update", 34);
  expect_rel(n.lr(342), 0.0, "nvidia last update", 342);                   // p = 1
  expect_rel(n.lr(341), 2e-5 * ((342.0 / 343) - 1) / (0.1 - 1), "nvidia second-last update", 341);
}

// configs/pretrain/lamb-bert-base.json, NVIDIA's phase 1: 7038 updates, warmup 0.2843, poly power 0.5, lr 6e-3.
// 7038 * 0.2843 = 2000.90: NVIDIA's PolyWarmUpScheduler warms up while (k + 1) / 7038 < 0.2843, i.e. for updates
// 0..1999 (2000 of them); google-research/bert's int() gives 2000 too; rounding to nearest (bertrain before
// 2026-12) gave 2001.
TEST(Schedule, LambBertBasePhase1WarmupCount) {
  LrScheduleOptions o;
  o.learning_rate = 6e-3;
  o.num_train_steps = 7038;
  o.warmup_proportion = 0.2843;
  o.power = 0.5;
  o.convention = LrConvention::nvidia;
  const LrSchedule s(o);
  EXPECT_EQ(s.warmup_steps(), 2000);
  expect_rel(s.lr(0), 6e-3 * (1.0 / 7038) / 0.2843, "nvidia first update", 0);
  expect_rel(s.lr(1999), 6e-3 * (2000.0 / 7038) / 0.2843, "nvidia last warmup update", 1999);
  expect_rel(s.lr(2000), 6e-3 * std::sqrt(1.0 - 2001.0 / 7038), "nvidia first decay update", 2000);
  expect_rel(s.lr(7037), 0.0, "nvidia last update", 7037);
  o.convention = LrConvention::google_bert;
  EXPECT_EQ(LrSchedule(o).warmup_steps(), 2000);
  o.convention = LrConvention::hugging_face;
  EXPECT_EQ(LrSchedule(o).warmup_steps(), 2001);
}
