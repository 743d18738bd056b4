// train_step_test.cpp: TrainStep's order of operations with several ranks (CASES.md C40): the gradient is summed
// over ranks first, its global norm is taken once and reported as such, clipping applies once, and LAMB's trust
// ratios see the reduced, clipped gradient; 1 rank x 2 micro-batches gives the same. A fake communicator stands
// for the second rank.
#include <gtest/gtest.h>

#include <vector>

#include "bertrain/ops/ops.h"
#include "bertrain/optim/clip.h"
#include "bertrain/optim/lamb.h"
#include "bertrain/optim/sgd.h"
#include "bertrain/train/communicator.h"
#include "bertrain/train/train_step.h"

using namespace bertrain;

namespace {

/// Rank 0 of 2; the other rank's contributions are fixed: `peer_grad` to the (single) gradient bucket, `peer_loss`
/// to each loss value. Counts the sums, so a norm reduced a second time would be seen.
class PeerCommunicator final : public Communicator {
 public:
  PeerCommunicator(std::vector<float> grad, double loss) : peer_grad(std::move(grad)), peer_loss(loss) {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string description() const override { return "fake 2 ranks"; }
  void allreduce(double* d, int64_t n, ReduceOp op) override {
    ++double_sums;
    if (op == ReduceOp::sum)
      for (int64_t i = 0; i < n; ++i) d[i] += peer_loss;
  }
  void broadcast(void*, int64_t, int) override {}
  void barrier() override {}
  void start_allreduce_sum(Tensor& b) override { started.push_back(b); }
  void progress() override {}
  void wait_all() override {
    for (Tensor& b : started) {
      ASSERT_EQ(b.numel(), static_cast<int64_t>(peer_grad.size()));
      for (int64_t i = 0; i < b.numel(); ++i) b.set(i, b.get(i) + peer_grad[static_cast<size_t>(i)]);
      ++gradient_sums;
    }
    started.clear();
  }
  [[noreturn]] void abort(int, const std::string& m) override { throw Error(m); }
  std::vector<float> peer_grad;
  double peer_loss;
  std::vector<Tensor> started;
  int gradient_sums = 0, double_sums = 0;
};

// One parameter w = [0.5, -0.5]; a micro-batch with contribution c has loss sum(w * c), so its gradient is c
// (bertrain's formulation: each rank's loss is already divided by the global count, gradients are summed).
struct Model {
  Variable w{Tensor::from_vector({0.5, -0.5}, {2}), true};
  NamedParameters params{{"w", w}};
  std::vector<double> micro_batch(const std::vector<double>& c) {
    Variable loss = sum(mul(w, Variable(Tensor::from_vector(c, {2}))));
    loss.backward();
    return {loss.item()};
  }
};

}  // namespace

TEST(TrainStepC40, NormOfTheReducedGradientOnceAndClipOnce) {
  // Rank 0 contributes [1.5, 2.0], rank 1 [-1.5, 0.0]: reduced [0, 2], norm 2.0, clipped to [0, 1] (times
  // 1 / (1 + 5e-7), torch's max_norm / (norm + 1e-6)). SGD with lr 1, no momentum, shows the applied gradient.
  const double clip_factor = 1.0 / (2.0 + 1e-6);
  for (bool two_ranks : {true, false}) {
    SCOPED_TRACE(two_ranks ? "2 ranks x 1 micro-batch" : "1 rank x 2 micro-batches");
    Model m;
    SgdOptions so;
    so.momentum = 0;
    Sgd opt(m.params, so);
    TrainStepOptions o;
    o.clip_grad_norm = 1.0;
    auto peer = std::make_shared<PeerCommunicator>(std::vector<float>{-1.5f, 0.0f}, 0.25);
    TrainStep step(m.params, opt, o, two_ranks ? std::shared_ptr<Communicator>(peer) : make_single_process_communicator());
    TrainState state;
    const StepStats st = step.run(
        two_ranks ? 1 : 2,
        [&](int64_t k) { return m.micro_batch(k == 0 ? std::vector<double>{1.5, 2.0} : std::vector<double>{-1.5, 0.0}); },
        1.0, state, false);
    EXPECT_EQ(st.grad_norm, 2.0);  // not sqrt(8) = 2.828427 (norm reduced twice), not a per-rank norm
    EXPECT_FALSE(st.skipped);
    EXPECT_EQ(m.w.value().get(0), 0.5f);  // the first component sums to 0 on every path that reduces first
    EXPECT_NEAR(m.w.value().get(1), -0.5 - 2.0 * clip_factor, 1e-7);  // [0, 1] applied, not [-0.2, 0.4] or [0, 0.707]
    EXPECT_EQ(state.global_step, 1);
    if (two_ranks) {
      EXPECT_EQ(peer->gradient_sums, 1);                          // one bucket summed once
      EXPECT_EQ(st.losses[0], 0.5 * 1.5 - 0.5 * 2.0 + 0.25);      // losses summed over ranks
    }
  }
}

TEST(TrainStepC40, LambTrustRatiosSeeTheReducedClippedGradient) {
  // Two LAMB steps with several ranks or micro-batches must equal LAMB stepping on the gradient reduced and
  // clipped by hand: the same bits.
  LambOptions lo;
  lo.weight_decay = 0.01;
  lo.adaptation = LambAdaptation::all;
  const std::vector<std::vector<double>> rank0 = {{1.5, 2.0}, {0.3, -0.9}}, rank1 = {{-1.5, 0.0}, {0.2, 0.1}};
  Model ref;
  Lamb ref_opt(ref.params, lo);
  for (int s = 0; s < 2; ++s) {
    Variable handle = ref.w;
    auto f32_sum = [&](int i) {  // the sum in f32, as the gradient buffers hold it
      return static_cast<double>(static_cast<float>(rank0[s][i]) + static_cast<float>(rank1[s][i]));
    };
    handle.mutable_grad() = Tensor::from_vector({f32_sum(0), f32_sum(1)}, {2});
    clip_grad_norm(ref.params, 1.0);
    ref_opt.step(1e-2);
    ref_opt.zero_grad();
  }
  for (bool two_ranks : {true, false}) {
    SCOPED_TRACE(two_ranks ? "2 ranks" : "1 rank x 2 micro-batches");
    Model m;
    Lamb opt(m.params, lo);
    TrainStepOptions o;
    o.clip_grad_norm = 1.0;
    TrainState state;
    for (int s = 0; s < 2; ++s) {
      auto peer = std::make_shared<PeerCommunicator>(
          std::vector<float>{static_cast<float>(rank1[s][0]), static_cast<float>(rank1[s][1])}, 0.0);
      TrainStep step(m.params, opt, o, two_ranks ? std::shared_ptr<Communicator>(peer) : make_single_process_communicator());
      step.run(two_ranks ? 1 : 2, [&](int64_t k) { return m.micro_batch(k == 0 ? rank0[s] : rank1[s]); }, 1e-2, state,
               false);
    }
    EXPECT_EQ(m.w.value().to_vector(), ref.w.value().to_vector());
  }
}
