// checkpoint_dir.h: atomic checkpoint directories. Files are written into OUTPUT_DIR/.tmp-checkpoint-N-PID,
// fsynced, and the directory is renamed to checkpoint-N only when complete, so a crash (even SIGKILL) during
// a save leaves every earlier checkpoint whole and no half-written checkpoint-N.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

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

/// Writes `text` to `path` atomically (temporary file, fsync, rename). Throws bertrain::Error on failure.
void write_text(const std::string& path, const std::string& text);

}  // namespace bertrain
