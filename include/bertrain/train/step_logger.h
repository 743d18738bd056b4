// step_logger.h: one place for what a training run reports per step: a JSON object per line in
// OUTPUT_DIR/metrics.jsonl (rank 0 only) and a progress line on stderr (live on a terminal, log lines otherwise).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace bertrain {

/// One metrics.jsonl record: keys and values (written as a JSON object with its keys sorted).
using MetricValue = std::variant<std::monostate, bool, int64_t, double, std::string>;  // monostate = null
using MetricsRecord = std::vector<std::pair<std::string, MetricValue>>;

/// The record as a JSON object text with sorted keys (`indent` < 0: one line), as metrics.jsonl and
/// eval_results.json hold it.
std::string metrics_json(const MetricsRecord& r, int indent = 2);

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
  StepLogger(std::string metrics_path, bool write, bool live, int64_t log_every);
  /// Empties metrics.jsonl (a new run).
  void start_new();
  /// Keeps only the records whose "step" is <= `step` (a resumed run drops what came after its checkpoint,
  /// and lines cut by a crash). Atomic.
  void truncate_after(int64_t step);
  /// Appends a record (no-op unless `write`).
  void record(const MetricsRecord& r);
  /// Shows the progress of step `step_in_segment` (1-based; every log_every-th, and the last).
  void progress(const StepProgress& p, int64_t step_number);
  /// Starts the clock of the ETA (steps done before it are not counted).
  void restart_clock() { t0_ = std::chrono::steady_clock::now(); }
  /// Seconds since restart_clock().
  double elapsed() const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool write_, live_;
  int64_t log_every_;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

}  // namespace bertrain
