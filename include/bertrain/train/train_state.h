// train_state.h: what a training run must remember to continue exactly where it stopped, for pretraining and
// finetuning alike; saved as trainer_state.json in every checkpoint (one reader, one writer).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bertrain/data/loader.h"

namespace bertrain {

struct TrainState {
  // ---- position
  int64_t global_step = 0;       ///< optimizer updates done, over all phases; names checkpoints
  int phase = 0;                 ///< 0-based phase being trained (written 1-based, as the recipe numbers them)
  int64_t phase_step = 0;        ///< updates done in `phase` (its schedule's own step)
  bool phase_initialized = false;  ///< false: `phase` has not started (optimizer step and data not reset yet)
  data::LoaderCursor data_cursor;  ///< pretraining: where the next step's micro-batches start
  int64_t optimizer_step = 0;    ///< the optimizer's own counter (bias correction; reset at each phase)
  // ---- non-finite steps (skipped, counted; see TrainStep)
  int64_t skipped_steps = 0;
  int64_t consecutive_skipped_steps = 0;
  // ---- a checkpoint saved between micro-batches (SIGINT/SIGTERM during a long accumulation)
  int64_t micro_batch_index = 0;        ///< > 0: micro-batches [0, index) are in partial_gradients.safetensors
  std::vector<double> partial_losses;   ///< their loss sums (total, then the parts the caller logs)
  /// Pretraining: the masked-token count of the whole global batch of the step saved mid-way (the masked-LM
  /// loss's normaliser), so a resumed run reads only the step's remaining micro-batches (CASES.md C38).
  double step_masked_tokens = 0;
  // ---- finetuning
  std::optional<double> best_metric;    ///< best value of primary_metric so far
  int64_t best_step = -1;
  std::string primary_metric;
  // ---- informational (written for people reading the checkpoint; checked where it matters)
  double epoch = 0;               ///< finetuning: global_step / steps per epoch
  double learning_rate = 0;       ///< the lr of the next update
  uint64_t seed = 0;
  int world_size = 1;
  int64_t grad_accum_steps = 0;   ///< micro-batches per rank per step when saved (rescaled on resume)
  std::string vocab_sha256;
  std::string recipe_json;        ///< the resolved recipe (pretraining), embedded as an object

  /// trainer_state.json text (2-space indented JSON).
  std::string to_json() const;
  /// Parses trainer_state.json text; `what` names the file in errors. Keys missing in older files keep their
  /// defaults. Throws bertrain::Error on malformed JSON or a key of the wrong type.
  static TrainState from_json(const std::string& text, const std::string& what);
  /// Reads DIR/trainer_state.json. Throws bertrain::Error naming the file when it is missing or malformed.
  static TrainState read(const std::string& checkpoint_dir);
};

}  // namespace bertrain
