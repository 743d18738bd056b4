// sgd.h: SGD with momentum, torch.optim.SGD semantics (weight decay as L2, dampening, Nesterov).
#pragma once

#include "bertrain/optim/optimizer.h"

namespace bertrain {

/// Options of SGD; validated by Sgd's constructor.
struct SgdOptions {
  double momentum = 0.9;      // >= 0; 0 is plain SGD
  double dampening = 0.0;     // in [0, 1]
  double weight_decay = 0.0;  // >= 0, L2: g += wd * p, for tensors with the weight-decay flag
  bool nesterov = false;      // requires momentum > 0 and dampening == 0 (as PyTorch)
  ParamRules rules;
};

/// torch.optim.SGD: d = g + wd * p; buf = d at the first step, else momentum * buf + (1 - dampening) * d;
/// d = nesterov ? d + momentum * buf : buf; p -= lr * d. State: "momentum_buffer" (zeros until the first step).
class Sgd : public Optimizer {
 public:
  Sgd(const NamedParameters& params, const SgdOptions& options = {});
  const char* name() const override { return "SGD"; }
  const SgdOptions& options() const { return opt_; }

 private:
  void update(double lr) override;
  SgdOptions opt_;
};

}  // namespace bertrain
