// optimizer_factory.cpp: see optimizer_factory.h.
#include "bertrain/train/optimizer_factory.h"

#include "bertrain/core/error.h"
#include "bertrain/optim/adamw.h"
#include "bertrain/optim/lamb.h"
#include "bertrain/optim/lars.h"
#include "bertrain/optim/sgd.h"

namespace bertrain {

std::unique_ptr<Optimizer> make_optimizer(const OptimizerRecipe& o, const NamedParameters& params) {
  ParamRules rules;
  rules.exclude_from_weight_decay = o.exclude_from_weight_decay;
  if (o.name == "lamb") {
    LambOptions l;
    l.beta1 = o.beta1;
    l.beta2 = o.beta2;
    l.eps = o.eps;
    l.weight_decay = o.weight_decay;
    l.bias_correction = o.bias_correction;
    l.max_grad_norm = o.max_grad_norm;
    l.rules = rules;
    if (o.layer_adaptation == "all") l.adaptation = LambAdaptation::all;
    else if (o.layer_adaptation == "decayed_only") l.adaptation = LambAdaptation::decayed_only;
    else BERTRAIN_CHECK(o.layer_adaptation == "by_pattern", "recipe: optimizer.layer_adaptation '",
                        o.layer_adaptation, "' is not one of by_pattern, all, decayed_only");
    return std::make_unique<Lamb>(params, l);
  }
  if (o.name == "adamw" || o.name == "adam") {
    AdamWOptions a;
    a.beta1 = o.beta1;
    a.beta2 = o.beta2;
    a.eps = o.eps;
    a.weight_decay = o.weight_decay;
    a.bias_correction = o.bias_correction;
    a.weight_decay_mode = o.name == "adam" ? WeightDecayMode::l2 : WeightDecayMode::decoupled;
    a.rules = rules;
    return std::make_unique<AdamW>(params, a);
  }
  if (o.name == "lars") {
    LarsOptions l;
    l.momentum = o.momentum;
    l.weight_decay = o.weight_decay;
    l.rules = rules;
    return std::make_unique<Lars>(params, l);
  }
  SgdOptions s;
  s.momentum = o.momentum;
  s.weight_decay = o.weight_decay;
  s.rules = rules;
  return std::make_unique<Sgd>(params, s);
}

LrScheduleOptions schedule_of(const PhaseRecipe& p) {
  LrScheduleOptions s;
  s.learning_rate = p.learning_rate;
  s.num_train_steps = p.num_train_steps;
  s.num_warmup_steps = PretrainRecipe::warmup_steps(p);
  s.decay = p.decay == "linear" ? LrDecay::linear : p.decay == "cosine" ? LrDecay::cosine
            : p.decay == "constant"                                     ? LrDecay::constant
                                                                        : LrDecay::poly;
  s.power = p.decay_power;
  s.convention = LrConvention::google_bert;
  return s;
}

}  // namespace bertrain
