// step_logger.h: one place for what a training run reports per step: a JSON object per line in
// OUTPUT_DIR/metrics.jsonl (rank 0 only), the same numbers as TensorBoard scalars in an event file (rank 0, unless
// switched off) and a progress line on stderr (live on a terminal, log lines otherwise).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace bertrain {

namespace tensorboard {
class EventFileWriter;
struct Scalar;
}  // namespace tensorboard

/// One metrics.jsonl record: keys and values (written as a JSON object with its keys sorted).
using MetricValue = std::variant<std::monostate, bool, int64_t, double, std::string>;  // monostate = null
using MetricsRecord = std::vector<std::pair<std::string, MetricValue>>;

/// The record as a JSON object text with sorted keys (`indent` < 0: one line), as metrics.jsonl and
/// eval_results.json hold it.
std::string metrics_json(const MetricsRecord& r, int indent = 2);

/// The TensorBoard scalars of a metrics.jsonl record, each the record's own number (as float32), tagged as the
/// Hugging Face Trainer does. A training record (no "eval" key) gives, for each key it holds:
///   loss -> train/loss, lr -> train/learning_rate, grad_norm -> train/grad_norm, epoch -> train/epoch,
///   mlm_loss -> train/mlm_loss, nsp_loss -> train/nsp_loss, sequences_per_second -> train/sequences_per_second,
///   real_tokens_per_second -> train/tokens_per_second, data_wait_fraction -> train/data_wait,
///   skipped_steps -> train/skipped_steps, phase -> train/phase;
/// an evaluation record ("eval": true) gives eval/<key> for every numeric key but step and global_step. Null,
/// boolean and text values are left out, and so are non-finite numbers (metrics.jsonl holds null for them). The
/// step is the record's "step" (absent: no scalars).
std::vector<tensorboard::Scalar> tensorboard_scalars(const MetricsRecord& r);

/// The progress line of one step: "<where> | loss L (name v ...) | lr | gnorm | seq/s tok/s | eta h:mm:ss".
struct StepProgress {
  std::string where;                                   ///< "phase 1/2 step 10/100", "epoch 0.50 step 10/100"
  double loss = 0;
  std::vector<std::pair<std::string, double>> parts;   ///< e.g. {"mlm", 7.1}, {"nsp", 0.69}
  double lr = 0, grad_norm = 0;
  double sequences_per_second = 0, tokens_per_second = 0;
  double data_wait_fraction = -1;                      ///< share of the step spent waiting for data (< 0: not shown)
  /// Data parallel: share of the step in communication backward did not hide (< 0: not shown), the gradient sums'
  /// wall time and the bytes each rank sent (train_step.h StepTimes).
  double comm_exposed_fraction = -1, allreduce_seconds = 0, allreduce_bytes = 0;
  int64_t done = 0, total = 0;                         ///< steps done and planned in this run segment, for the ETA
  bool last = false;                                   ///< the segment's last step (ends the live line)
};

class StepLogger {
 public:
  /// `write`: this process writes metrics.jsonl (rank 0). `live`: redraw one progress line on a terminal
  /// (stderr is a tty and progress was not switched off); otherwise every `log_every` steps a log line.
  /// `tensorboard_dir`: also write each record's scalars (tensorboard_scalars) to a new TensorBoard event file
  /// there, opened at the first record; empty: no event file.
  StepLogger(std::string metrics_path, bool write, bool live, int64_t log_every, std::string tensorboard_dir = {});
  ~StepLogger();
  StepLogger(StepLogger&&) noexcept;
  StepLogger& operator=(StepLogger&&) noexcept;
  /// Empties metrics.jsonl and removes the event files of tensorboard_dir (a new run).
  void start_new();
  /// Keeps only the records whose "step" is <= `step` (a resumed run drops what came after its checkpoint,
  /// and lines cut by a crash). Atomic. The event files of tensorboard_dir lose the same steps
  /// (tensorboard::truncate_event_files), so over all of them each step appears once.
  void truncate_after(int64_t step);
  /// Appends a record, and its scalars to the event file (no-op unless `write`).
  void record(const MetricsRecord& r);
  /// Makes what was recorded durable (fsync of the event file); called with each checkpoint.
  void sync();
  /// The event file written so far ("" before the first record or without tensorboard_dir).
  std::string tensorboard_file() const;
  /// Shows the progress of step `step_in_segment` (1-based; every log_every-th, and the last).
  void progress(const StepProgress& p, int64_t step_number);
  /// Starts the clock of the ETA (steps done before it are not counted).
  void restart_clock() { t0_ = std::chrono::steady_clock::now(); }
  /// Seconds since restart_clock().
  double elapsed() const;
  const std::string& path() const { return path_; }

 private:
  std::string path_, tensorboard_dir_;
  std::unique_ptr<tensorboard::EventFileWriter> events_;
  bool write_, live_;
  int64_t log_every_;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

}  // namespace bertrain
