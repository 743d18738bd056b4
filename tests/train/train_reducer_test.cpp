// train_reducer_test.cpp: GradientReducer with an in-process fake communicator standing for 2 identical ranks:
// bucket layout and start order, sums started during backward, unused parameters, sums written back.
#include <gtest/gtest.h>

#include <vector>

#include "bertrain/core/rng.h"
#include "bertrain/ops/ops.h"
#include "bertrain/train/communicator.h"
#include "bertrain/train/grad_reducer.h"

using namespace bertrain;

namespace {

/// Two ranks with the same gradients: a started sum doubles its buffer at wait_all(). Records what was started
/// and when (during backward or in finish()).
class TwinCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string description() const override { return "twin"; }
  void allreduce(double* d, int64_t n, ReduceOp op) override {
    for (int64_t i = 0; i < n; ++i) d[i] = op == ReduceOp::sum ? 2 * d[i] : d[i];
  }
  void broadcast(void*, int64_t, int) override {}
  void barrier() override {}
  void start_allreduce_sum(Tensor& b) override {
    started.push_back(b);
    sizes.push_back(b.numel());
  }
  void progress() override { ++progress_calls; }
  void wait_all() override {
    for (Tensor& b : started)
      for (int64_t i = 0; i < b.numel(); ++i) b.set(i, 2 * b.get(i));
    started.clear();
  }
  [[noreturn]] void abort(int, const std::string& m) override { throw Error(m); }
  std::vector<Tensor> started;
  std::vector<int64_t> sizes;
  int progress_calls = 0;
};

struct Net {
  // Registration order a, b, c, unused; backward completes c's gradient first and a's last.
  NamedParameters params;
  Variable a, b, c, unused;
  Net() {
    Rng rng(3, 0);
    a = Variable(Tensor::uniform({4, 8}, -1, 1, rng), true);
    b = Variable(Tensor::uniform({8, 8}, -1, 1, rng), true);
    c = Variable(Tensor::uniform({8, 2}, -1, 1, rng), true);
    unused = Variable(Tensor::uniform({3}, -1, 1, rng), true);
    params = {{"a", a}, {"b", b}, {"c", c}, {"unused", unused}};
  }
  Variable loss(const Variable& x) const { return sum(matmul(tanh(matmul(tanh(matmul(x, a)), b)), c)); }
};

Variable input() {
  Rng rng(5, 0);
  return Variable(Tensor::uniform({3, 4}, -1, 1, rng));
}

}  // namespace

TEST(GradientReducer, BucketsInReverseOrderStartDuringBackwardAndSumsAreWrittenBack) {
  Net net;
  auto comm = std::make_shared<TwinCommunicator>();
  // 64 floats = 256 bytes per bucket: c (16) + unused (3) share one, b (64) and a (32) get their own.
  GradientReducer red(net.params, comm, 256);
  ASSERT_EQ(red.num_buckets(), 3);

  // Step 1, two micro-batches: the first accumulates locally, the second is armed.
  net.loss(input()).backward();
  EXPECT_TRUE(comm->sizes.empty());
  const Tensor g1a = net.a.grad().clone();
  red.arm();
  net.loss(input()).backward();
  const Tensor local_a = net.a.grad().clone();
  // The unused parameter's hook never fires: bucket 0 (c, unused) is not complete, and buckets start in order only.
  EXPECT_EQ(red.started_during_backward(), 0);
  red.finish();
  EXPECT_EQ(comm->sizes, (std::vector<int64_t>{19, 64, 32}));
  for (int64_t i = 0; i < local_a.numel(); ++i) {
    EXPECT_FLOAT_EQ(local_a.get(i), 2 * g1a.get(i));  // two identical micro-batches
    EXPECT_FLOAT_EQ(net.a.grad().get(i), 2 * local_a.get(i));  // summed over the two twin ranks
  }
  EXPECT_FALSE(net.unused.grad().defined());

  // Step 2: the unused parameter is known now, so all three sums start while backward runs, in order.
  for (auto& [n, v] : net.params)
    if (v.grad().defined()) v.zero_grad();
  comm->sizes.clear();
  red.arm();
  net.loss(input()).backward();
  EXPECT_EQ(red.started_during_backward(), 3);
  EXPECT_EQ(comm->sizes, (std::vector<int64_t>{19, 64, 32}));
  EXPECT_GT(comm->progress_calls, 0);
  red.finish();
  for (int64_t i = 0; i < g1a.numel(); ++i) EXPECT_FLOAT_EQ(net.a.grad().get(i), 2 * g1a.get(i));
}

TEST(GradientReducer, SingleParameterLargerThanTheBucketGetsItsOwnAndHooksAreRemoved) {
  Net net;
  auto comm = std::make_shared<TwinCommunicator>();
  {
    GradientReducer red(net.params, comm, 8);  // smaller than any parameter: one bucket each
    EXPECT_EQ(red.num_buckets(), 4);
  }
  net.loss(input()).backward();  // no reducer: the hooks are gone, nothing starts
  EXPECT_TRUE(comm->sizes.empty());
  EXPECT_THROW(GradientReducer(net.params, comm, 0), Error);
}

TEST(GradientReducer, ParameterUsedAfterBeingLearnedUnusedIsAnError) {
  Net net;
  auto comm = std::make_shared<TwinCommunicator>();
  GradientReducer red(net.params, comm, 1 << 20);
  red.arm();
  net.loss(input()).backward();
  red.finish();
  red.arm();
  Variable l = add(net.loss(input()), sum(net.unused));
  EXPECT_THROW(l.backward(), Error);
}

TEST(GradientReducer, Bf16WireHalvesTheBytesAndRoundsEachGradientToNearestEven) {
  Net net;
  auto comm = std::make_shared<TwinCommunicator>();
  {
    GradientReducer f32(net.params, comm, 256);
    EXPECT_EQ(f32.bucket_wire_bytes(), (std::vector<int64_t>{19 * 4, 64 * 4, 32 * 4}));
  }
  GradientReducer red(net.params, comm, 256, DType::bf16);
  // The same buckets (sized by the parameters' bytes), half the bytes on the wire.
  EXPECT_EQ(red.bucket_wire_bytes(), (std::vector<int64_t>{19 * 2, 64 * 2, 32 * 2}));
  red.arm();
  net.loss(input()).backward();
  const Tensor local_b = net.b.grad().clone();
  red.finish();
  int64_t changed = 0;
  for (int64_t i = 0; i < local_b.numel(); ++i) {
    const float g = local_b.data<float>()[i];
    // Twin ranks: bf16(g) + bf16(g) in f32 is exact, and so is its rounding back to bf16.
    EXPECT_EQ(net.b.grad().data<float>()[i], 2 * bf16::to_float(bf16::from_float(g))) << i;
    changed += net.b.grad().data<float>()[i] != 2 * g;
  }
  EXPECT_GT(changed, 0);  // the rounding happened (random f32 gradients are rarely bf16 values)
  const GradientReducer::Timing& t = red.timing();
  EXPECT_EQ(t.wire_bytes, (19 + 64 + 32) * 2);
  ASSERT_EQ(t.bucket_ready.size(), 3u);
  EXPECT_GE(t.allreduce, 0);
  EXPECT_GE(t.exposed, 0);
  // The first step does not know the unused parameter yet: bucket 0 never completes, so all start in finish().
  for (double r : t.bucket_ready) EXPECT_GE(r, t.backward_end);
  // From the second step on all three start during backward, in order.
  for (auto& [n, v] : net.params)
    if (v.grad().defined()) v.zero_grad();
  red.arm();
  net.loss(input()).backward();
  red.finish();
  EXPECT_EQ(red.started_during_backward(), 3);
  EXPECT_LE(t.bucket_ready[0], t.bucket_ready[1]);  // c's gradient completes first, then b's, then a's
  EXPECT_LE(t.bucket_ready[1], t.bucket_ready[2]);
  EXPECT_LE(t.bucket_ready[2], t.backward_end);
  EXPECT_THROW(GradientReducer(net.params, comm, 256, DType::i32), Error);
}

TEST(GradientReducer, BytesPerRankAreTheRingsTwoTimesRMinusOneOverR) {
  EXPECT_EQ(allreduce_bytes_per_rank(1000, 1), 0.0);
  EXPECT_EQ(allreduce_bytes_per_rank(1000, 2), 1000.0);
  EXPECT_EQ(allreduce_bytes_per_rank(1000, 4), 1500.0);
  EXPECT_EQ(allreduce_bytes_per_rank(1024, 1024), 2046.0);
  EXPECT_THROW(allreduce_bytes_per_rank(1, 0), Error);
}
