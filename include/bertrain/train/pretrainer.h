// pretrainer.h: the pretraining trainer behind `bertrain pretrain`: multi-phase schedules with re-warm-up,
// gradient accumulation normalised over the global batch, skipping of non-finite steps, evaluation,
// atomic checkpoints every N steps and on SIGINT/SIGTERM (mid-accumulation included), and exact resume.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bertrain/io/recipe.h"

namespace bertrain {

class Communicator;

/// What PretrainOptions::on_micro_batch is told after each micro-batch's forward and backward on this rank.
struct MicroBatchEvent {
  int64_t global_step = 0;  ///< updates done before this step (the step being accumulated is global_step + 1)
  int64_t micro = 0;        ///< micro-batch index within the step, in [0, A)
  int64_t epoch = 0;        ///< the loader's epoch and step within it (data::PretrainingBatch)
  int64_t epoch_step = 0;
  std::vector<int64_t> sample_index;  ///< the dataset index of each row
};

struct PretrainOptions {
  bool resume = false;  ///< continue from the newest complete checkpoint in output_dir
  int only_phase = 0;   ///< 1-based phase to run alone; 0 = all phases
  int world_size = 1;   ///< set from `communicator` when it has more than one rank
  int rank = 0;
  /// The job's ranks (bertrain/train/communicator.h); null: world(). With R > 1 ranks each reads its part of
  /// every global batch, gradients are summed over ranks once per step, rank 0 alone writes files.
  std::shared_ptr<Communicator> communicator;
  /// Gradient bucket size for the sums over ranks (PyTorch DDP's bucket_cap_mb); > 0.
  double allreduce_bucket_mb = 25;
  bool progress = true; ///< live progress line on the console
  /// Called on this rank after each micro-batch (for embedding programs and tests; e.g. raising SIGTERM there
  /// stops the step after that micro-batch, as a signal arriving then would).
  std::function<void(const MicroBatchEvent&)> on_micro_batch;
};

/// google-research/bert run_pretraining.py's evaluation keys.
struct PretrainEvalResult {
  double masked_lm_loss = 0, masked_lm_accuracy = 0, next_sentence_loss = 0, next_sentence_accuracy = 0, loss = 0;
  int64_t global_step = 0;
  int64_t examples = 0;
};

class PretrainTrainer {
 public:
  /// Builds the model (random init from the seed, or init_checkpoint), the optimizer and the schedule, and
  /// runs the start-up checks. Throws bertrain::Error with a clear message: a vocab file with more entries
  /// than vocab_size, max_seq_length above max_position_embeddings, a checkpoint of another shape.
  PretrainTrainer(const PretrainRecipe& recipe, const PretrainOptions& options);
  ~PretrainTrainer();
  /// Trains the remaining steps. Returns 0 when done, or 128 + signal number after SIGINT/SIGTERM (a
  /// checkpoint was saved first). Throws bertrain::Error when max_consecutive_skipped_steps non-finite steps
  /// occur in a row (the last good checkpoint stays) or on bad data.
  int train();
  /// Evaluates on the shards of `eval_dir` and writes OUTPUT_DIR/eval_results.json.
  PretrainEvalResult evaluate(const std::string& eval_dir);
  int64_t global_step() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace bertrain
