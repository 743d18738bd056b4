// estimate_test.cpp: the counting behind `bertrain estimate` (bertrain/train/estimate.h). The evaluations of a
// phase equal a step-by-step count of the trainer's rule (one at every multiple of eval_every_steps before the
// phase's last step, one at its end); the long run's recipe (configs/pretrain/bert-mini-long.json) as a worked
// case. Times are not asserted; tests/tools/estimate_test.sh checks the command against `pretrain`'s log.
#include <gtest/gtest.h>

#include "bertrain/core/error.h"
#include "bertrain/train/estimate.h"

using namespace bertrain;

namespace {

int64_t evaluations_step_by_step(int64_t first, int64_t n, int64_t every) {
  int64_t k = 0;
  for (int64_t s = first + 1; s <= first + n; ++s)
    if (s == first + n || (every > 0 && s % every == 0)) ++k;
  return k;
}

TEST(Estimate, EvaluationsMatchTheTrainersRuleStepByStep) {
  for (int64_t first : {0, 1, 7, 12, 512})
    for (int64_t n = 1; n <= 40; ++n)
      for (int64_t every : {0, 1, 3, 4, 12, 50})
        EXPECT_EQ(evaluations_in_phase(first, n, every), evaluations_step_by_step(first, n, every))
            << "first " << first << " n " << n << " every " << every;
}

TEST(Estimate, TheLongRunsTwoPhases) {
  // Phase 1: steps 1..12288, every 512: 23 before the end (512 .. 11776) and one at 12288.
  EXPECT_EQ(evaluations_in_phase(0, 12288, 512), 24);
  // Phase 2: steps 12289..15019: 12800, 13312, 13824, 14336, 14848 and one at 15019.
  EXPECT_EQ(evaluations_in_phase(12288, 2731, 512), 6);
}

TEST(Estimate, EvalBatchesRoundUpPerShardAndCap) {
  EXPECT_EQ(eval_batches({100, 30, 1}, 32, 0), 4 + 1 + 1);
  EXPECT_EQ(eval_batches({64}, 32, 0), 2);
  EXPECT_EQ(eval_batches({100, 30, 1}, 32, 5), 5);
  EXPECT_EQ(eval_batches({}, 32, 0), 0);
}

TEST(Estimate, RefusesNoTimedSteps) {
  EXPECT_THROW(estimate_recipe(PretrainRecipe{}, 0), Error);
}

}  // namespace
