// optimizer_factory.cpp: see optimizer_factory.h.
#include "bertrain/train/optimizer_factory.h"

#include "bertrain/optim/adamw.h"
#include "bertrain/optim/lamb.h"
#include "bertrain/optim/lars.h"
#include "bertrain/optim/sgd.h"

namespace bertrain {

std::unique_ptr<Optimizer> make_optimizer(const OptimizerRecipe& o, const NamedParameters& params) {
  switch (o.name) {
    case OptimizerName::lamb: return std::make_unique<Lamb>(params, o.lamb);
    case OptimizerName::adamw: return std::make_unique<AdamW>(params, o.adamw);
    case OptimizerName::adam: {
      AdamWOptions a = o.adamw;
      a.weight_decay_mode = WeightDecayMode::l2;
      return std::make_unique<AdamW>(params, a);
    }
    case OptimizerName::lars: return std::make_unique<Lars>(params, o.lars);
    case OptimizerName::sgd: return std::make_unique<Sgd>(params, o.sgd);
  }
  return nullptr;
}

}  // namespace bertrain
