// recipe.h: the pretraining recipe (one documented JSON schema, see README "Recipes"), held as the typed options
// structs of the layers that use them (LambOptions, AdamWOptions, ..., LrScheduleOptions), and the flag overrides
// of `bertrain pretrain` (`--learning_rate=1e-3` for every phase, `--phases.2.learning_rate=4e-3` for the
// second; phases are numbered from 1). Strings become enums here and nowhere else.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bertrain/models/bert.h"
#include "bertrain/optim/adamw.h"
#include "bertrain/optim/lamb.h"
#include "bertrain/optim/lars.h"
#include "bertrain/optim/sgd.h"
#include "bertrain/schedule/schedule.h"

namespace bertrain {

enum class OptimizerName { lamb, adamw, adam, lars, sgd };

/// Which optimizer, and its options. Recipe keys under "optimizer" set the field of that name in every options
/// struct that has it (so `--optimizer.name=adamw` on a LAMB recipe keeps its betas and decay); the struct of
/// `name` is the one used (`adam` is AdamW with weight_decay_mode l2). Validated by the optimizer's constructor.
struct OptimizerRecipe {
  OptimizerName name = OptimizerName::lamb;
  LambOptions lamb;
  AdamWOptions adamw;
  LarsOptions lars;
  SgdOptions sgd;
  /// Global-norm clipping of the summed gradient before the update (torch.nn.utils.clip_grad_norm_); 0 = off.
  double clip_grad_norm = 1.0;

  /// google-research/bert's finetuning optimizer (AdamWeightDecayOptimizer): AdamW without bias correction,
  /// eps 1e-6, weight decay 0.01 except LayerNorm and biases, clipping by global norm 1.0.
  static OptimizerRecipe google_bert_finetuning();
};

/// One phase of a multi-phase schedule (NVIDIA's phase 1 at length 128, phase 2 at 512).
struct PhaseRecipe {
  int64_t max_seq_length = 128;
  int64_t max_predictions_per_seq = 20;
  std::string input_dir;          ///< directory of HDF5 shards (see data::list_training_shards)
  int64_t train_batch_size = 32;  ///< global batch: sequences per optimizer step over all ranks
  /// Sequences per forward/backward on one rank. 0 (the key not given): train_batch_size / ranks, one
  /// micro-batch per rank and step, as google-research/bert and NVIDIA's recipes treat their batch flags under
  /// several workers (resolved by PretrainRecipe::resolve_micro_batch_size).
  int64_t micro_batch_size = 0;

  /// The micro-batch each of `world_size` ranks runs: micro_batch_size, or train_batch_size / world_size when
  /// it is 0 (integer division; validate() checks that it divides).
  int64_t micro_batch_for(int world_size) const {
    return micro_batch_size > 0 ? micro_batch_size : train_batch_size / world_size;
  }
  /// The phase's learning rate: keys learning_rate, num_train_steps, num_warmup_steps, warmup_proportion, decay,
  /// decay_power, end_learning_rate, lr_convention. The default lr is 1e-4 with google-research/bert's convention.
  LrScheduleOptions schedule = [] {
    LrScheduleOptions s;
    s.learning_rate = 1e-4;
    return s;
  }();
};

struct PretrainRecipe {
  std::string bert_config_file;  ///< Hugging Face config.json or google-research/bert bert_config.json
  std::string vocab_file;
  bool do_lower_case = true;
  bool do_lower_case_given = false;  ///< the recipe or a flag set do_lower_case (else it may come from init_checkpoint)
  std::string output_dir;
  std::string init_checkpoint;   ///< checkpoint directory, .safetensors file or TF prefix; empty = random init
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
  /// The loader's window (data::LoaderOptions::window_shards): the samples of this many consecutive shards of each
  /// epoch's shard permutation are shuffled together; memory holds about two windows.
  int64_t shuffle_window_shards = 4;
  /// Mixed precision: matmuls in bf16 with f32 accumulation, f32 master weights (MatmulPrecision::bf16 in
  /// bertrain/ops/ops.h); also for evaluation. `--bf16` on the command line.
  bool bf16 = false;
  /// The encoder path (models/bert.h Unpad): "auto" (default), "always" or "never"; `--unpad` on the command line.
  /// Pretraining batches hold padding where short_seq_prob made a sequence short or a document ran out.
  Unpad unpad = Unpad::automatic;
  /// The gradients' dtype on the wire between ranks (key `allreduce_dtype`: "f32" or "bf16"): bf16 halves the
  /// bytes of every sum over ranks (docs/guides/cluster.md); no effect in a single process.
  DType allreduce_dtype = DType::f32;
  bool do_train = true;
  bool do_eval = false;
  /// TensorBoard event files of the run's metrics (bertrain/io/tensorboard.h, docs/guides/tensorboard.md): written
  /// by default into tensorboard_dir, or output_dir when that is empty; `--tensorboard=false` turns them off.
  bool tensorboard = true;
  std::string tensorboard_dir;
  std::vector<PhaseRecipe> phases;

  /// Throws bertrain::Error naming the key when a value is out of range or inconsistent (no phases, a
  /// global batch not divisible by the micro-batch, an invalid schedule or optimizer option...).
  /// `world_size` ranks share each global batch.
  void validate(int world_size = 1) const;
  /// Sets every phase's micro_batch_size that is 0 (not given) to train_batch_size / world_size. Call after
  /// validate(world_size). The trainer does this itself.
  void resolve_micro_batch_size(int world_size);
};

/// Reads a recipe file (JSON), applies `overrides` ("key=value" or ("key", "value") pairs, value parsed as
/// JSON when it parses, else as a string), and validates. A top-level key that belongs to phases applies to
/// every phase; `phases.N.key` to phase N (1-based). Paths are used as given (relative ones resolve against the
/// working directory, as flags do).
/// Throws bertrain::Error naming the file and key on unknown keys, wrong types or bad values.
PretrainRecipe load_pretrain_recipe(const std::string& path, const std::vector<std::pair<std::string, std::string>>& overrides);

/// The flag overrides of `bertrain pretrain` and `bertrain estimate` (the arguments after the command's own
/// flags) as (key, value) pairs for load_pretrain_recipe, in one grammar: `--key=value`; `--key value` when the
/// next argument does not start with "--"; a bare `--flag` (last, or followed by another `--...`) means "true".
/// `--bf16 --learning_rate 1e-3 --phases.2.input_dir=D` -> (bf16, true), (learning_rate, 1e-3),
/// (phases.2.input_dir, D). Values are kept as text (load_pretrain_recipe parses them).
/// Throws bertrain::Error naming `command` and the argument when one does not start with "--" or is "--" alone.
std::vector<std::pair<std::string, std::string>> parse_flag_overrides(const std::vector<std::string>& args,
                                                                      const std::string& command);

/// The recipe as JSON text (the fully resolved configuration every run writes next to its checkpoints). The
/// optimizer section holds the options of the optimizer the recipe names.
std::string pretrain_recipe_to_json(const PretrainRecipe& r);
/// Parses JSON produced by pretrain_recipe_to_json (or a recipe file without its relative-path handling).
PretrainRecipe pretrain_recipe_from_json(const std::string& json, const std::string& what);

/// Enum <-> recipe string ("lamb", "google_bert", "poly", "by_pattern", "decoupled", ...). The parsers throw
/// bertrain::Error listing the accepted values, `what` naming the key.
std::string to_string(OptimizerName v);
std::string to_string(LrConvention v);
std::string to_string(LrDecay v);
std::string to_string(LambAdaptation v);
std::string to_string(WeightDecayMode v);
std::string to_string(Unpad v);  ///< "auto", "always", "never"
OptimizerName parse_optimizer_name(const std::string& s, const std::string& what);
LrConvention parse_lr_convention(const std::string& s, const std::string& what);
LrDecay parse_lr_decay(const std::string& s, const std::string& what);
Unpad parse_unpad(const std::string& s, const std::string& what);

}  // namespace bertrain
