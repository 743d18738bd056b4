// checkpoint_dir.h: atomic checkpoint directories. Files are written into OUTPUT_DIR/.tmp-checkpoint-N-PID,
// fsynced, and the directory is renamed to checkpoint-N only when complete, so a crash (even SIGKILL) during
// a save leaves every earlier checkpoint whole and no half-written checkpoint-N.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "bertrain/models/bert_config.h"
#include "bertrain/nn/module.h"
#include "bertrain/optim/optimizer.h"
#include "bertrain/train/train_state.h"

namespace bertrain {

/// "checkpoint-<step>".
std::string checkpoint_dir_name(int64_t step);

class CheckpointWriter {
 public:
  /// Creates the temporary directory. Throws bertrain::Error on I/O failure.
  CheckpointWriter(const std::string& output_dir, int64_t step);
  /// Removes the temporary directory unless commit() ran.
  ~CheckpointWriter();
  const std::string& dir() const { return tmp_; }
  std::string path(const std::string& file) const;
  /// fsyncs every file and the directory, then renames it to checkpoint-<step> (replacing one of that step).
  void commit();
  /// Like commit() but renames to OUTPUT_DIR/<name> (e.g. "best").
  void commit_as(const std::string& name);

 private:
  std::string out_, tmp_, final_;
  bool committed_ = false;
};

/// The newest complete checkpoint directory of output_dir (highest step with a trainer_state.json), if any.
/// Leftover temporary directories of interrupted saves are removed.
std::optional<std::string> newest_checkpoint(const std::string& output_dir);

/// Keeps the `limit` newest checkpoint-N directories (all when limit is 0).
void prune_checkpoints(const std::string& output_dir, int64_t limit);

/// What a training checkpoint directory holds. Every pointer may be null except model and state.
struct CheckpointContents {
  const Module* model = nullptr;         ///< model.safetensors (Hugging Face names) + config.json
  const BertConfig* config = nullptr;
  const Optimizer* optimizer = nullptr;  ///< optimizer.safetensors (null for best/: weights only)
  /// Saved between micro-batches: the parameters whose accumulated .grad go to partial_gradients.safetensors.
  const NamedParameters* partial_gradients = nullptr;
  const TrainState* state = nullptr;     ///< trainer_state.json, written last
  /// Further files (vocab.txt and tokenizer files, recipe.json): called with the temporary directory.
  std::function<void(const std::string& dir)> write_extra_files;
};

/// The one checkpoint writer of pretraining and finetuning: writes OUTPUT_DIR/<name> (checkpoint-<step>, best)
/// through CheckpointWriter (temporary directory, fsync, rename). Returns the final path. Throws bertrain::Error
/// on I/O failure, leaving every earlier checkpoint whole.
std::string save_checkpoint(const std::string& output_dir, const std::string& name, int64_t step,
                            const CheckpointContents& contents);

/// Restores a checkpoint written by save_checkpoint: the weights into `model` (strict: every tensor must match),
/// the optimizer's state and step counter (when `optimizer` is given), and the partial gradient sum of a step
/// saved mid-way into `params`' .grad (when state.micro_batch_index > 0). Returns its TrainState. Throws
/// bertrain::Error naming the file on a missing or malformed file or a tensor of the wrong shape.
TrainState load_checkpoint(const std::string& dir, Module& model, Optimizer* optimizer, const NamedParameters& params);

}  // namespace bertrain
