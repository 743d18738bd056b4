// checkpoint.cpp: activation checkpointing as an op: forward without a tape, backward by recomputation.
#include "bertrain/ops/ops.h"
#include "ops/op_util.h"

namespace bertrain {

namespace {

class CheckpointNode final : public Node {
 public:
  CheckpointNode(std::function<Variable(const Variable&)> f, Tensor x)
      : f_(std::move(f)), x_(std::move(x)), precision_(matmul_precision()) {}
  const char* name() const override { return "checkpoint"; }
  void backward(const Tensor& dy, std::vector<GradSlot>& g) override {
    Variable xr(x_, g[0].needed());
    MatmulPrecisionGuard mp(precision_);  // recompute in the precision the forward ran in
    Variable y = f_(xr);
    BERTRAIN_ASSERT(y.shape() == dy.shape(), "checkpoint: recomputed output ", y.value().desc(), " vs gradient ",
                    dy.desc());
    if (y.requires_grad()) y.backward(dy);
    if (g[0].needed() && xr.grad().defined()) g[0].add(xr.grad());
  }

 private:
  std::function<Variable(const Variable&)> f_;
  Tensor x_;
  MatmulPrecision precision_;
};

}  // namespace

Variable checkpoint(const std::function<Variable(const Variable&)>& f, const Variable& x, bool needs_grad) {
  if (!grad_mode_enabled() || !(needs_grad || x.requires_grad())) return f(x);
  Tensor y;
  {
    NoGradGuard ng;
    y = f(x.detach()).value();
  }
  auto node = std::make_shared<CheckpointNode>(f, x.value());
  node->inputs = {x};
  return Variable::make_output(y, node);
}

}  // namespace bertrain
