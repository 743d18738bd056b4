// optimizer_factory.h: recipe structs -> optimizer and schedule objects, shared by pretraining and finetuning.
#pragma once

#include <memory>

#include "bertrain/io/recipe.h"
#include "bertrain/optim/optimizer.h"
#include "bertrain/schedule/schedule.h"

namespace bertrain {

/// The optimizer a recipe names (lamb, adamw, adam, lars, sgd) with its options. Throws on unknown values.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerRecipe& o, const NamedParameters& params);
/// The learning-rate schedule of one phase (google-research/bert's step convention).
LrScheduleOptions schedule_of(const PhaseRecipe& p);

}  // namespace bertrain
