// lars.h: LARS (You, Gitman & Ginsburg 2017, "Large Batch Training of Convolutional Networks", Algorithm 1).
#pragma once

#include "bertrain/optim/optimizer.h"

namespace bertrain {

/// Options of LARS; validated by Lars's constructor.
struct LarsOptions {
  double momentum = 0.9;             // m of Algorithm 1, in [0, 1)
  double weight_decay = 0.0005;      // beta of Algorithm 1, >= 0, for tensors with the weight-decay flag
  double trust_coefficient = 0.001;  // eta of Algorithm 1, > 0
  double eps = 0.0;                  // >= 0, added to the local-lr denominator (the paper has none)
  ParamRules rules;
};

/// LARS, Algorithm 1: per tensor local lr lambda = eta * ||w|| / (||g|| + beta * ||w|| + eps);
/// v = m * v + lr * lambda * (g + beta * w); w -= v. lambda = 1 where ||w|| or the denominator is 0 (so a
/// zero-initialised tensor still moves, as LAMB's CASES C19) and for tensors excluded from layer adaptation.
/// Two passes: norms (fixed chunks, deterministic), then the fused update. State: "momentum_buffer".
class Lars : public Optimizer {
 public:
  Lars(const NamedParameters& params, const LarsOptions& options = {});
  const char* name() const override { return "LARS"; }
  const LarsOptions& options() const { return opt_; }
  const std::vector<double>& last_local_lrs() const { return last_local_; }

 private:
  void update(double lr) override;
  LarsOptions opt_;
  std::vector<double> last_local_;
};

}  // namespace bertrain
