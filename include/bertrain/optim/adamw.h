// adamw.h: Adam with decoupled weight decay (AdamW, PyTorch and google-research/bert flavours) or with L2 decay.
#pragma once

#include "bertrain/optim/optimizer.h"

namespace bertrain {

/// How weight decay enters Adam.
enum class WeightDecayMode {
  /// AdamW (Loshchilov & Hutter 2019, Algorithm 2): the parameter decays by lr * weight_decay outside the
  /// moments.
  decoupled,
  /// Adam with L2 (torch.optim.Adam weight_decay): grad += weight_decay * param before the moments.
  l2,
};

/// Options of AdamW; validated by AdamW's constructor (libtorch AdamWOptions style).
struct AdamWOptions {
  double beta1 = 0.9;         // in [0, 1)
  double beta2 = 0.999;       // in [0, 1)
  double eps = 1e-6;          // > 0; google-research/bert uses 1e-6, PyTorch defaults to 1e-8
  double weight_decay = 0.01; // >= 0; applied only to parameters with the weight-decay flag (ParamRules)
  /// true: PyTorch torch.optim.AdamW exactly: p *= 1 - lr * wd; m, v updated; p -= lr / (1 - beta1^t) * m /
  /// (sqrt(v) / sqrt(1 - beta2^t) + eps) (eps added to sqrt(v_hat)).
  /// false: google-research/bert AdamWeightDecayOptimizer: update = m / (sqrt(v) + eps) + wd * p;
  /// p -= lr * update; no bias correction.
  bool bias_correction = true;
  WeightDecayMode weight_decay_mode = WeightDecayMode::decoupled;
  ParamRules rules;
};

/// Adam / AdamW. State: "exp_avg" (m) and "exp_avg_sq" (v), zero-initialised. One fused pass per element
/// reads p, g, m, v and writes p, m, v (7 accesses); vectorised and multi-threaded over fixed chunks.
/// Throws bertrain::Error from the constructor on invalid options (e.g. "AdamWOptions.beta1 must be in [0, 1),
/// got 1").
class AdamW : public Optimizer {
 public:
  AdamW(const NamedParameters& params, const AdamWOptions& options = {});
  const char* name() const override { return "AdamW"; }
  const AdamWOptions& options() const { return opt_; }

 private:
  void update(double lr) override;
  AdamWOptions opt_;
};

}  // namespace bertrain
