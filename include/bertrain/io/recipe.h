// recipe.h: the pretraining recipe (one documented JSON schema, see README "Recipes"), its typed structs,
// and the flag overrides of `bertrain pretrain` (`--learning_rate=1e-3` for every phase,
// `--phases.2.learning_rate=4e-3` for the second; phases are numbered from 1).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace bertrain {

/// One phase of a multi-phase schedule (NVIDIA's phase 1 at length 128, phase 2 at 512).
struct PhaseRecipe {
  int64_t max_seq_length = 128;
  int64_t max_predictions_per_seq = 20;
  std::string input_dir;         ///< directory of HDF5 shards (names containing "training")
  int64_t train_batch_size = 32; ///< global batch: sequences per optimizer step over all ranks
  int64_t micro_batch_size = 32; ///< sequences per forward/backward on one rank
  double learning_rate = 1e-4;
  int64_t num_warmup_steps = -1;  ///< -1: use warmup_proportion
  double warmup_proportion = 0.0;
  std::string decay = "poly";     ///< poly, linear, cosine or constant
  double decay_power = 1.0;       ///< poly power: 1.0 google-research/bert, 0.5 NVIDIA
  int64_t num_train_steps = 0;
};

/// Optimizer name and options; unset values keep the optimizer's defaults.
struct OptimizerRecipe {
  std::string name = "lamb";  ///< lamb, adamw, adam (L2), lars, sgd
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-6, weight_decay = 0.01, momentum = 0.9;
  bool bias_correction = true;
  /// LAMB: "by_pattern" (decay exclusions also skip the trust ratio, TF Addons), "all", "decayed_only" (NVLAMB).
  std::string layer_adaptation = "by_pattern";
  double max_grad_norm = 0.0;   ///< LAMB gradient pre-normalisation by the global norm (NVIDIA FusedLAMB); 0 = off
  double clip_grad_norm = 1.0;  ///< global-norm clipping of the accumulated gradient; 0 = off
  std::vector<std::string> exclude_from_weight_decay = {"LayerNorm", "layer_norm", "bias"};
};

struct PretrainRecipe {
  std::string bert_config_file;  ///< Hugging Face config.json or google-research/bert bert_config.json
  std::string vocab_file;
  bool do_lower_case = true;
  std::string output_dir;
  std::string init_checkpoint;   ///< checkpoint directory or .safetensors file; empty = random init
  uint64_t seed = 12345;
  OptimizerRecipe optimizer;
  int64_t save_checkpoints_steps = 1000;
  int64_t save_total_limit = 3;  ///< newest checkpoints kept; 0 = all
  std::string eval_dir;
  int64_t eval_every_steps = 0;  ///< 0 = only at the end of each phase when eval_dir is set
  int64_t max_eval_steps = 0;    ///< 0 = the whole eval set
  bool next_sentence = true;     ///< false: masked-LM only (RoBERTa)
  int64_t max_consecutive_skipped_steps = 10;
  int64_t log_every_steps = 1;
  bool activation_checkpointing = false;
  bool dynamic_masking = false;
  /// Mixed precision: matmuls in bf16 with f32 accumulation, f32 master weights (MatmulPrecision::bf16 in
  /// bertrain/ops/ops.h); also for evaluation. `--bf16` on the command line.
  bool bf16 = false;
  bool do_train = true;
  bool do_eval = false;
  std::vector<PhaseRecipe> phases;

  /// Throws bertrain::Error naming the key when a value is out of range or inconsistent (no phases, a
  /// global batch not divisible by the micro-batch, non-positive steps, unknown optimizer or decay...).
  /// `world_size` ranks share each global batch.
  void validate(int world_size = 1) const;
  /// Warmup steps of a phase: num_warmup_steps, or round(warmup_proportion * num_train_steps).
  static int64_t warmup_steps(const PhaseRecipe& p);
};

/// Reads a recipe file (JSON), applies `overrides` ("key=value" or ("key", "value") pairs, value parsed as
/// JSON when it parses, else as a string), and validates. A top-level key that belongs to phases applies to
/// every phase; `phases.N.key` to phase N (1-based). Paths are used as given (relative ones resolve against the working directory, as flags do).
/// Throws bertrain::Error naming the file and key on unknown keys, wrong types or bad values.
PretrainRecipe load_pretrain_recipe(const std::string& path, const std::vector<std::pair<std::string, std::string>>& overrides);

/// The recipe as JSON text (the fully resolved configuration every run writes next to its checkpoints).
std::string pretrain_recipe_to_json(const PretrainRecipe& r);
/// Parses JSON produced by pretrain_recipe_to_json (or a recipe file without its relative-path handling).
PretrainRecipe pretrain_recipe_from_json(const std::string& json, const std::string& what);

}  // namespace bertrain
