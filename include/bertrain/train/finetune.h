// finetune.h: the finetuning loop shared by `bertrain run-classifier` and `bertrain run-squad`: epochs over a
// seeded shuffle, AdamW with google-research/bert's finetuning settings, linear warmup and decay, global-norm
// clipping, evaluation after each epoch, the best checkpoint kept, atomic checkpoints and exact --resume.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bertrain/io/recipe.h"
#include "bertrain/models/bert_config.h"
#include "bertrain/nn/module.h"
#include "bertrain/schedule/schedule.h"

namespace bertrain {

class Communicator;

struct FinetuneOptions {
  std::string output_dir;
  int64_t train_batch_size = 32;
  double learning_rate = 5e-5;
  double num_train_epochs = 3.0;
  double warmup_proportion = 0.1;
  /// Stop after this many optimizer steps (0: num_train_epochs decides). For equal-step comparisons.
  int64_t max_steps = 0;
  uint64_t seed = 12345;
  int64_t save_checkpoints_steps = 1000;  ///< 0: only at the end of each epoch
  int64_t save_total_limit = 2;
  /// Step convention of the learning rate (warmup rounding and step indexing; see LrConvention).
  LrConvention lr_convention = LrConvention::google_bert;
  /// google-research/bert's AdamWeightDecayOptimizer: AdamW without bias correction, eps 1e-6, decay 0.01
  /// except LayerNorm and biases, clipping by global norm 1.0.
  OptimizerRecipe optimizer = OptimizerRecipe::google_bert_finetuning();
  bool resume = false;
  /// Hugging Face's TrainingArguments.group_by_length (LengthGroupedSampler): each epoch's shuffled order is cut
  /// into mega-batches of 50 batches (fewer for small sets) and each mega-batch sorted by length, longest first,
  /// so batches stay random but hold examples of similar length (less padding). Needs FinetuneTask::lengths.
  /// The order is a function of (seed, epoch, lengths), so runs are reproducible and resume exactly.
  bool group_by_length = false;
  bool progress = true;
  /// The job's ranks (bertrain/train/communicator.h); null: world(). With R > 1 ranks each computes the loss of
  /// its B/R rows of every batch (normalised by B), gradients are summed over ranks, and rank 0 alone evaluates
  /// and writes checkpoints and metrics.
  std::shared_ptr<Communicator> communicator;
  double allreduce_bucket_mb = 25;  ///< gradient bucket size for the sums over ranks
  int log_every_steps = 10;
  /// TensorBoard event files of metrics.jsonl's numbers (bertrain/io/tensorboard.h) in tensorboard_dir, or in
  /// output_dir when that is empty; rank 0 only.
  bool tensorboard = true;
  std::string tensorboard_dir;

  /// The schedule of a run of `num_train_steps` updates: linear warmup over warmup_proportion (rounded by the
  /// convention's rule, LrSchedule::warmup_steps) then linear decay to 0, as run_classifier.py /
  /// run_squad.py (google_bert) or Hugging Face's get_linear_schedule_with_warmup (hugging_face).
  LrScheduleOptions schedule(int64_t num_train_steps) const {
    LrScheduleOptions s;
    s.learning_rate = learning_rate;
    s.num_train_steps = num_train_steps;
    s.warmup_proportion = warmup_proportion;
    s.decay = LrDecay::linear;
    s.convention = lr_convention;
    return s;
  }
};

struct FinetuneTask {
  int64_t num_train_examples = 0;  ///< training rows (for SQuAD: windows of doc_stride, not questions)
  std::string example_noun = "examples";  ///< what a row is called in the log ("windows" for SQuAD)
  /// Real tokens of each training row (num_train_examples entries); needed by group_by_length, else may be empty.
  std::vector<int32_t> lengths;
  /// Loss of the rows `rows` (indices into the training set) as a scalar to backpropagate, normalised by the
  /// whole batch; first_sample keys dropout (global sample index of the first row).
  std::function<Variable(const std::vector<int64_t>& rows, int64_t first_sample)> loss;
  /// Metrics after each epoch (and at the end); may be empty. The loop writes nothing itself: the task writes
  /// its eval_results.json and predictions.
  std::function<std::map<std::string, double>(int64_t global_step)> evaluate;
  /// Key of evaluate()'s map that selects the best checkpoint (higher is better); empty: the last is kept.
  std::string primary_metric;
  /// Extra files for every checkpoint directory (vocab.txt, tokenizer config): called with the directory.
  std::function<void(const std::string& dir)> write_extra_files;
};

struct FinetuneResult {
  int64_t global_step = 0;
  std::map<std::string, double> last_metrics;
  double best_metric = 0;
  int64_t best_step = -1;
  int exit_code = 0;  ///< 128 + signal when interrupted (a checkpoint was saved)
};

/// The rows of one epoch: Fisher-Yates over 0..n-1 from Rng(seed, 0x5eed0000 + epoch) (as the pretraining
/// loader), or, with group_by_length, that permutation grouped by length as transformers'
/// get_length_grouped_indices (trainer_pt_utils.py): mega-batches of mega_batch_mult * batch_size consecutive
/// rows, mega_batch_mult = min(n / (4 * batch_size), 50) (at least 1), each sorted by lengths, longest first
/// (stable), and the longest row of all swapped into position 0 (the first batch is the largest, so memory
/// runs out at once if it will). Throws bertrain::Error when group_by_length and lengths.size() != n.
std::vector<int64_t> finetune_epoch_order(uint64_t seed, int64_t epoch, int64_t n, bool group_by_length,
                                          std::span<const int32_t> lengths, int64_t batch_size);

/// Trains `model` (already initialised or loaded) on the task. Writes OUTPUT_DIR/checkpoint-N/ (config.json,
/// model.safetensors, optimizer.safetensors, trainer_state.json), OUTPUT_DIR/best/ (the best model by
/// primary_metric) and OUTPUT_DIR/metrics.jsonl. Throws bertrain::Error on bad options or I/O failure.
FinetuneResult run_finetuning(Module& model, const BertConfig& config, const FinetuneOptions& options,
                              const FinetuneTask& task);

}  // namespace bertrain
