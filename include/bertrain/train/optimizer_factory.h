// optimizer_factory.h: the optimizer a recipe's OptimizerRecipe names, shared by pretraining and finetuning.
#pragma once

#include <memory>

#include "bertrain/io/recipe.h"
#include "bertrain/optim/optimizer.h"

namespace bertrain {

/// The optimizer `o.name` selects, built from its options struct (`adam`: AdamW with weight_decay_mode l2).
/// Throws bertrain::Error from the optimizer's constructor on invalid options.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerRecipe& o, const NamedParameters& params);

}  // namespace bertrain
