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

namespace {

// A phase as estimate_recipe measures it: 0.1 s per sequence (micro-batches of 32 in 3.2 s) with 2 threads, global
// batch 256, an update of 0.2 s, two buckets of 25 MB and 20 MB, the first ready 0.5 s before backward ends, the
// second at its end. 10 steps, no evaluation.
PhaseEstimate worked_phase() {
  PhaseEstimate e;
  e.train_batch_size = 256;
  e.micro_batch_size = 32;
  e.seconds_per_micro_batch = 3.2;
  e.seconds_optimizer = 0.2;
  e.threads = 2;
  e.num_train_steps = 10;
  e.bucket_bytes = {25000000, 20000000};
  e.bucket_lead_seconds = {0.5, 0.0};
  return e;
}

}  // namespace

TEST(ClusterModel, RingAllreduceTime) {
  // 2 (4 - 1) / 4 x 25 MB x 8 bits / 10 Gb/s = 0.03 s, plus 2 (4 - 1) x 5 us.
  EXPECT_DOUBLE_EQ(ring_allreduce_seconds(25e6, 4, 10, 5), 0.03 + 30e-6);
  EXPECT_DOUBLE_EQ(ring_allreduce_seconds(25e6, 2, 10, 0), 0.02);
  EXPECT_EQ(ring_allreduce_seconds(25e6, 1, 10, 5), 0.0);
  EXPECT_THROW(ring_allreduce_seconds(1, 0, 10, 5), Error);
  EXPECT_THROW(ring_allreduce_seconds(1, 2, 0, 5), Error);
}

TEST(ClusterModel, FourRanksOnFourNodes) {
  ClusterOptions c;  // 1 rank per node, cores as timed, 10 Gb/s, 5 us
  c.price_per_hour = 3;
  const ClusterStep one = project_cluster_step(worked_phase(), c, 1);
  EXPECT_DOUBLE_EQ(one.compute, 25.6);
  EXPECT_EQ(one.allreduce, 0.0);
  EXPECT_EQ(one.exposed, 0.0);
  EXPECT_DOUBLE_EQ(one.step, 25.8);
  EXPECT_DOUBLE_EQ(one.efficiency, 1.0);
  const ClusterStep s = project_cluster_step(worked_phase(), c, 4);
  EXPECT_EQ(s.nodes, 4);
  EXPECT_EQ(s.sequences_per_rank, 64);
  EXPECT_DOUBLE_EQ(s.compute, 6.4);
  // Bucket 0 starts at -0.5 s and takes 0.03003 s, hidden; bucket 1 starts at backward's end and takes 0.02403 s.
  EXPECT_NEAR(s.allreduce, 0.5 + 0.02403, 1e-12);
  EXPECT_NEAR(s.exposed, 0.02403, 1e-12);
  EXPECT_NEAR(s.step, 6.4 + 0.02403 + 0.2, 1e-12);
  EXPECT_NEAR(s.efficiency, 25.8 / (4 * 6.62403), 1e-12);
  EXPECT_NEAR(s.wall_seconds, 66.2403, 1e-9);
  EXPECT_NEAR(s.cost, 66.2403 / 3600 * 4 * 3, 1e-12);
}

TEST(ClusterModel, SlowNetworkQueuesTheBucketsAndCoresScaleCompute) {
  ClusterOptions c;
  c.network_gbps = 0.4;  // 2 ranks: bucket 0 takes 0.5 s + 2 x 10 us, bucket 1 0.4 s + 2 x 10 us
  c.network_latency_us = 10;
  c.cores_per_rank = 4;  // timed with 2 threads: compute, lead times and the update take half as long
  const ClusterStep s = project_cluster_step(worked_phase(), c, 2);
  EXPECT_DOUBLE_EQ(s.compute, 128 * 0.1 / 2);
  // Bucket 0 ready at -0.25 s, ends at 0.25002 s; bucket 1 (ready at 0) waits for it and ends at 0.65004 s.
  EXPECT_NEAR(s.exposed, 0.65004, 1e-12);
  EXPECT_NEAR(s.allreduce, 0.25 + 0.65004, 1e-12);
  EXPECT_NEAR(s.step, 6.4 + 0.65004 + 0.1, 1e-12);
  // The reducer's copies after backward add to the exposed time as timed (one thread's memcpy: not scaled).
  PhaseEstimate e = worked_phase();
  e.seconds_after_backward = 0.03;
  const ClusterStep t = project_cluster_step(e, c, 2);
  EXPECT_NEAR(t.exposed, 0.65004 + 0.03, 1e-12);
  EXPECT_NEAR(t.step, 6.4 + 0.65004 + 0.03 + 0.1, 1e-12);
  EXPECT_EQ(project_cluster_step(e, c, 1).exposed, 0.0);
}

TEST(ClusterModel, OneNodeUsesSharedMemorySmallShareShrinksTheLastMicroBatch) {
  ClusterOptions c;
  c.ranks_per_node = 8;
  c.node_gbps = 100;
  c.node_latency_us = 0;
  c.network_gbps = 1;  // not used: the job fits on one node
  const ClusterStep s = project_cluster_step(worked_phase(), c, 8);
  EXPECT_EQ(s.nodes, 1);
  EXPECT_EQ(s.sequences_per_rank, 32);
  // 2 x 7 / 8 x 25e6 x 8 / 1e11 = 0.0035 s; bucket 1: 0.0028 s
  EXPECT_NEAR(s.exposed, 0.0028, 1e-12);
  // 16 ranks on 2 nodes: 16 sequences each, so the last micro-batch is half a timed one: bucket 0 ready at -0.25 s.
  const ClusterStep t = project_cluster_step(worked_phase(), c, 16);
  EXPECT_EQ(t.nodes, 2);
  EXPECT_EQ(t.sequences_per_rank, 16);
  EXPECT_DOUBLE_EQ(t.compute, 1.6);
  // Over the 1 Gb/s network: bucket 0 takes 2 x 15 / 16 x 25e6 x 8 / 1e9 + 30 x 5 us = 0.37515 s from -0.25 s, so
  // bucket 1 (0.30015 s) waits until 0.12515 s and ends at 0.4253 s.
  EXPECT_NEAR(t.exposed, 0.4253, 1e-12);
  EXPECT_NEAR(t.allreduce, 0.4253 + 0.25, 1e-12);
}

TEST(ClusterModel, TheSumsCpuTimeAddsToTheComputeUnscaledByCores) {
  ClusterOptions c;  // 10 Gb/s, 5 us
  c.cores_per_rank = 4;
  c.comm_cpu_ns_per_byte = 2;
  // 4 ranks send 2 x 3 / 4 x 45 MB = 67.5 MB each: 2 ns a byte is 0.135 s, whatever the cores.
  const ClusterStep s = project_cluster_step(worked_phase(), c, 4);
  EXPECT_NEAR(s.comm_cpu, 0.135, 1e-12);
  EXPECT_NEAR(s.compute, 64 * 0.1 / 2 + 0.135, 1e-12);
  EXPECT_NEAR(s.step, s.compute + s.exposed + s.optimizer, 1e-12);
  c.comm_cpu_ns_per_byte = 0;
  EXPECT_NEAR(project_cluster_step(worked_phase(), c, 4).step, s.step - 0.135, 1e-12);
  c.comm_cpu_ns_per_byte = 2;
  EXPECT_EQ(project_cluster_step(worked_phase(), c, 1).comm_cpu, 0.0);  // one rank sends nothing
  c.comm_cpu_ns_per_byte = -1;
  EXPECT_THROW(project_cluster_step(worked_phase(), c, 4), Error);
}

TEST(ClusterModel, GlobalBatchNotSplittingIsInfeasible) {
  const ClusterStep s = project_cluster_step(worked_phase(), ClusterOptions{}, 3);
  EXPECT_FALSE(s.feasible);
  EXPECT_FALSE(project_cluster_step(worked_phase(), ClusterOptions{}, 512).feasible);
  EXPECT_TRUE(project_cluster_step(worked_phase(), ClusterOptions{}, 256).feasible);
  EXPECT_THROW(project_cluster_step(worked_phase(), ClusterOptions{}, 0), Error);
}
