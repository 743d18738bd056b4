// lamb.h: LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning: Training BERT in 76 minutes",
// Algorithm 2) with the options that distinguish the paper, NVIDIA's FusedLAMB, TensorFlow Addons and ALBERT.
#pragma once

#include "bertrain/optim/adamw.h"
#include "bertrain/optim/optimizer.h"

namespace bertrain {

/// Which tensors get the trust ratio.
enum class LambAdaptation {
  /// All tensors not matched by ParamRules::exclude_from_layer_adaptation (which defaults to the weight-decay
  /// exclusions): TensorFlow Addons LAMB and ALBERT lamb_optimizer.py.
  by_pattern,
  /// Every tensor: NVIDIA's NVLAMB (FusedLAMB use_nvlamb=True) and the paper's Algorithm 2.
  all,
  /// Only tensors whose effective weight decay is non-zero: FusedLAMB use_nvlamb=False
  /// (`if (use_nvlamb || decay != 0)` in apex csrc/multi_tensor_lamb.cu); with weight_decay 0 none is adapted.
  decayed_only,
};

/// Options of LAMB; validated by Lamb's constructor.
///
/// Option sets that reproduce the references (lr comes from step(lr); eps and weight_decay as the run sets them):
/// - Paper, Algorithm 2: bias_correction=true, adaptation=all, rules.exclude_from_weight_decay={} (if the run
///   decays everything), max_grad_norm=0, no clamp (phi = identity, as in the paper's experiments).
/// - NVIDIA apex FusedLAMB as used by DeepLearningExamples BERT: bias_correction=true, adaptation=decayed_only
///   (use_nvlamb=True: all), max_grad_norm=1.0, eps=1e-6, weight_decay=0.01,
///   rules.exclude_from_weight_decay={"bias", "gamma", "beta", "LayerNorm"}, decoupled (adam_w_mode=True).
/// - TensorFlow Addons LAMB: bias_correction=true, adaptation=by_pattern, max_grad_norm=0, no clamp;
///   exclude_from_weight_decay as passed to tfa (its default None decays everything: set {}).
/// - ALBERT lamb_optimizer.py: bias_correction=false, adaptation=by_pattern, max_grad_norm=0, no clamp,
///   exclude_from_weight_decay={"LayerNorm", "layer_norm", "bias"} (ALBERT's optimization.py; the default here).
/// All four use ratio = 1 where ||w|| or ||update|| is 0 (CASES C19), as this implementation always does.
struct LambOptions {
  double beta1 = 0.9;          // in [0, 1)
  double beta2 = 0.999;        // in [0, 1)
  double eps = 1e-6;           // > 0, added to sqrt(v_hat)
  double weight_decay = 0.01;  // >= 0, lambda of Algorithm 2, for tensors with the weight-decay flag
  bool bias_correction = true; // m_hat = m / (1 - beta1^t), v_hat = v / (1 - beta2^t)
  LambAdaptation adaptation = LambAdaptation::by_pattern;
  /// Optional clamp of the trust ratio to [trust_clamp_min, trust_clamp_max] (off by default, as every reference;
  /// cybertronai/pytorch-lamb clamps ||w|| to 10). Requires 0 <= min <= max. Applies to the measured ratio
  /// ||w|| / ||r|| only: the fallback 1 where a norm is 0 is not clamped.
  bool trust_clamp = false;
  double trust_clamp_min = 0.0;
  double trust_clamp_max = 10.0;
  /// > 0: pre-normalise gradients by the global gradient norm as FusedLAMB: g /= max(1, ||g||_global /
  /// max_grad_norm), over all parameters with a gradient. 0: off. A non-finite global norm propagates as in
  /// apex (NaN leaves g as it is, inf zeroes it); check clip_grad_norm's report before stepping.
  double max_grad_norm = 0.0;
  /// decoupled (apex adam_w_mode=True, the paper): update r = m_hat / (sqrt(v_hat) + eps) + lambda * w.
  /// l2 (adam_w_mode=False): g += lambda * w before the moments and r has no decay term.
  WeightDecayMode weight_decay_mode = WeightDecayMode::decoupled;
  ParamRules rules;
};

/// LAMB. Per tensor: m, v as Adam; r = m_hat / (sqrt(v_hat) + eps) + lambda * w; trust ratio
/// ||w|| / ||r|| (1 where either norm is 0, optionally clamped) for adapted tensors, 1 otherwise;
/// w -= lr * ratio * r. Two passes per tensor: the first updates m and v and accumulates ||w||^2 and ||r||^2 in
/// double over fixed chunks (deterministic for any thread count), the second recomputes r from m, v, w and
/// applies it (10 element accesses; no update buffer, gradients stay intact).
/// State: "exp_avg", "exp_avg_sq". Throws bertrain::Error from the constructor on invalid options.
class Lamb : public Optimizer {
 public:
  Lamb(const NamedParameters& params, const LambOptions& options = {});
  const char* name() const override { return "LAMB"; }
  const LambOptions& options() const { return opt_; }
  /// The trust ratio applied to each parameter at the last step (1 for non-adapted or skipped ones).
  const std::vector<double>& last_trust_ratios() const { return last_ratio_; }
  /// The global gradient norm of the last step when max_grad_norm > 0 (0 otherwise).
  double last_global_grad_norm() const { return last_grad_norm_; }

 private:
  void update(double lr) override;
  bool adapted(size_t i) const;
  LambOptions opt_;
  std::vector<double> last_ratio_;
  double last_grad_norm_ = 0.0;
};

}  // namespace bertrain
