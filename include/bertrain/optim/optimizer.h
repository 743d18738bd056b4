// optimizer.h: Optimizer, the base of every optimizer: named parameters with per-parameter weight-decay and
// layer-adaptation flags from name patterns, step(lr), zero_grad(), and a state that saves and loads exactly.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bertrain/autograd/variable.h"
#include "bertrain/core/tensor.h"

namespace bertrain {

using NamedParameters = std::vector<std::pair<std::string, Variable>>;

/// True when `name` contains any of `patterns` as a case-sensitive substring. google-research/bert
/// optimization.py `_do_use_weight_decay` matches with re.search; its patterns are plain words, so a substring
/// test is the same and needs no regex engine (CASES C18).
bool name_matches_any(const std::string& name, const std::vector<std::string>& patterns);

/// How parameters are split into groups by name. Defaults are google-research/bert's
/// exclude_from_weight_decay = ["LayerNorm", "layer_norm", "bias"], which match both TF names
/// (bert/embeddings/LayerNorm/gamma) and Hugging Face names (bert.embeddings.LayerNorm.weight, ...).
/// NVIDIA's run_pretraining.py uses {"bias", "gamma", "beta", "LayerNorm"}.
struct ParamRules {
  std::vector<std::string> exclude_from_weight_decay = {"LayerNorm", "layer_norm", "bias"};
  /// Patterns whose tensors get no layer adaptation (LAMB trust ratio, LARS local lr). nullopt: the same as
  /// exclude_from_weight_decay (TensorFlow Addons and ALBERT lamb: "exclude_from_layer_adaptation is set to
  /// exclude_from_weight_decay if the arg is None").
  std::optional<std::vector<std::string>> exclude_from_layer_adaptation;
};

/// One optimised parameter and the group flags derived from its name.
struct OptimizerParam {
  std::string name;
  Variable var;
  bool weight_decay = true;      // not matched by exclude_from_weight_decay
  bool layer_adaptation = true;  // not matched by exclude_from_layer_adaptation
};

/// Scalar state of an optimizer: together with state_tensors() everything needed to continue exactly.
struct OptimizerCounters {
  int64_t step = 0;  // number of step() calls so far; bias correction uses it (1-based inside step)
};

/// Base optimizer. Parameters are f32 or f64 leaves, optimised in place through their value's storage. A
/// parameter whose gradient is undefined at step() is skipped (its moments do not move); unlike PyTorch's
/// per-parameter step, bias correction uses the optimizer's one step counter.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// One update with learning rate `lr` (finite, >= 0; throws bertrain::Error otherwise, and when a gradient's
  /// shape or dtype differs from its parameter's). Runs under NoGradGuard. The lr comes from a schedule the
  /// optimizer knows nothing of (DESIGN.md section 1).
  void step(double lr);
  /// Sets every parameter's gradient to zero, keeping the buffers.
  void zero_grad();

  /// The parameters in the order given, with their group flags.
  const std::vector<OptimizerParam>& params() const { return params_; }
  /// Names of the parameters with (true) or without (false) weight decay, in parameter order.
  std::vector<std::string> param_names(bool with_weight_decay) const;
  /// "AdamW", "LAMB", "LARS" or "SGD".
  virtual const char* name() const = 0;

  const OptimizerCounters& counters() const { return counters_; }
  /// Every state tensor, named "<slot>.<parameter name>" (slots: "exp_avg", "exp_avg_sq" for AdamW and LAMB,
  /// "momentum_buffer" for LARS and SGD, as PyTorch names them), in parameter order, slot by slot. The tensors
  /// alias the live state: clone them for a snapshot. Meant for io's optimizer.safetensors.
  std::vector<std::pair<std::string, Tensor>> state_tensors() const;
  /// Copies saved state in (bit for bit). Throws bertrain::Error naming the tensor when one is missing,
  /// unexpected, or of another shape or dtype, or when counters.step < 0. Nothing is changed on error.
  void load_state(const std::vector<std::pair<std::string, Tensor>>& tensors, const OptimizerCounters& counters);
  /// Overrides the step counter (NVIDIA's phase 2 resets the optimizer step, and with it bias correction,
  /// while keeping the moments). step >= 0.
  void set_step(int64_t step);

 protected:
  /// Validates the parameters (non-empty, defined, f32 or f64, unique names) and allocates zeroed slots.
  Optimizer(const NamedParameters& params, const ParamRules& rules, std::vector<std::string> slot_names);
  /// The update; counters_.step has already been incremented (it is t of the papers).
  virtual void update(double lr) = 0;
  Tensor& slot(size_t slot_index, size_t param_index) { return slots_[slot_index][param_index]; }
  /// Parameters that have a gradient this step (checked against their values).
  std::vector<size_t> params_with_grad() const;

  std::vector<OptimizerParam> params_;
  OptimizerCounters counters_;

 private:
  std::vector<std::string> slot_names_;
  std::vector<std::vector<Tensor>> slots_;  // [slot][param], same shape and dtype as the parameter
};

}  // namespace bertrain
