// estimate.h: a pretraining recipe's wall time on this machine, projected from a few timed steps of each phase
// (`bertrain estimate`). The steps are timed on synthetic batches of the phase's shapes, with the recipe's own
// model, precision and optimizer; evaluations are counted as PretrainTrainer runs them.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "bertrain/io/recipe.h"

namespace bertrain {

/// Evaluations PretrainTrainer runs in a phase covering global steps (first, first + n]: one at every multiple
/// of `every` before the phase's last step, and one at its end (train() and end_phase()). every <= 0: the one at
/// the end only.
int64_t evaluations_in_phase(int64_t first, int64_t n, int64_t every);

/// Forward passes of one evaluation: ceil(samples / batch) per evaluation shard (PretrainTrainer::evaluate), capped
/// at max_eval_steps when that is > 0. `shard_samples` holds each shard's number of instances.
int64_t eval_batches(const std::vector<int64_t>& shard_samples, int64_t batch, int64_t max_eval_steps);

/// One phase's projection. Times are seconds of wall time, each the median of the timed calls.
struct PhaseEstimate {
  int64_t max_seq_length = 0;
  int64_t train_batch_size = 0;
  int64_t micro_batch_size = 0;
  int64_t accumulation = 0;               ///< micro-batches per optimizer step
  double seconds_per_micro_batch = 0;     ///< forward + backward of one micro-batch
  double seconds_per_step = 0;            ///< accumulation micro-batches + clipping + the optimizer's update
  int64_t evaluations = 0;                ///< 0 when the recipe has no eval_dir
  int64_t batches_per_evaluation = 0;
  double seconds_per_evaluation = 0;      ///< forward passes in eval mode at the micro-batch size
  double projected_seconds = 0;           ///< num_train_steps steps and the evaluations
};

/// Times `micro_steps` micro-batches (and as many updates and evaluation batches) of each phase of `r` after one
/// untimed warm-up, and projects each phase's wall time; `on_phase(i, estimate)` is called as each phase i
/// (0-based) is done, so a long estimate can show its rows as they come. The shards of r.eval_dir are inspected
/// for their sizes only. Throws bertrain::Error when the model config, an evaluation shard or the optimizer
/// options are invalid, or micro_steps < 1.
std::vector<PhaseEstimate> estimate_recipe(const PretrainRecipe& r, int micro_steps,
                                           const std::function<void(size_t, const PhaseEstimate&)>& on_phase = {});

}  // namespace bertrain
