// train_step.h: one optimizer step, shared by pretraining and every finetuning task: the micro-batches of this
// rank (forward + backward each, gradients accumulating), the sum of gradients over ranks, the global gradient
// norm and clipping, then the update, or a skip when the loss or the norm is not finite.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "bertrain/optim/optimizer.h"
#include "bertrain/train/communicator.h"
#include "bertrain/train/grad_reducer.h"
#include "bertrain/train/step_logger.h"
#include "bertrain/train/train_state.h"

namespace bertrain {

/// Validated by TrainStep's constructor.
struct TrainStepOptions {
  /// > 0: clip the summed gradient to this global L2 norm (torch.nn.utils.clip_grad_norm_, once per step, after
  /// the sum over ranks: CASES C40); 0: only measure the norm.
  double clip_grad_norm = 1.0;
  /// Stop with an error after this many non-finite steps in a row (the last good checkpoint stays); 0: never.
  int64_t max_consecutive_skipped_steps = 0;
  /// Gradient bucket size for the sums over ranks (PyTorch DDP's bucket_cap_mb); > 0.
  double allreduce_bucket_mb = 25;
  /// The gradients' dtype on the wire: DType::f32 (exact sums of f32 gradients) or DType::bf16 (half the bytes;
  /// see GradientReducer). Recipe key `allreduce_dtype`.
  DType allreduce_dtype = DType::f32;
};

/// Where one step's wall time went on this rank, in seconds (steady clock). compute + comm_exposed + optimizer
/// is the time inside TrainStep::run; the caller's own work (reading data) comes on top.
struct StepTimes {
  double compute = 0;        ///< forward + backward of the micro-batches (with the bucket copies and sum starts in it)
  /// Collectives after the last backward that backward did not hide: GradientReducer::Timing::exposed plus the
  /// step's small blocking sums (losses, the stop signal). A rank waiting for a slower one waits here.
  double comm_exposed = 0;
  double optimizer = 0;      ///< norm, clipping, the update and zeroing the gradients
  double allreduce = 0;      ///< GradientReducer::Timing::allreduce (0 with one rank)
  int64_t allreduce_wire_bytes = 0;  ///< the gradient buckets' bytes (0 with one rank)
  double allreduce_bytes = 0;        ///< allreduce_bytes_per_rank(allreduce_wire_bytes, ranks)
};

/// What one step did.
struct StepStats {
  /// The step's loss and its parts as the micro-batch function returns them, summed over micro-batches and ranks.
  std::vector<double> losses;
  double grad_norm = 0;    ///< global L2 norm of the summed gradient, before clipping (double, any thread count)
  double lr = 0;
  bool skipped = false;    ///< loss or norm not finite: no update (counted in TrainState)
  /// false: a signal arrived between micro-batches and the step was left unfinished (single process only): the
  /// gradients of micro-batches [0, state.micro_batch_index) are in the parameters' .grad, their losses in
  /// state.partial_losses; save a checkpoint with them and exit.
  bool completed = true;
  int stop_signal = 0;     ///< SIGINT/SIGTERM seen on any rank during the step (0: none)
  StepTimes times;
};

/// Adds a step's times to its metrics.jsonl record: step_seconds (the caller's wall time of the whole step),
/// compute_seconds, optimizer_seconds, and with more than one rank allreduce_seconds, comm_exposed_seconds and
/// allreduce_bytes (per rank, StepTimes::allreduce_bytes rounded). step_seconds - compute - comm_exposed -
/// optimizer is what the caller did besides (reading and batching data: data_wait_seconds and more).
void append_step_times(MetricsRecord& rec, const StepTimes& t, double step_seconds, int ranks);
/// Fills StepProgress's communication part (shown with more than one rank).
void set_progress_comm(StepProgress& p, const StepTimes& t, double step_seconds, int ranks);

class TrainStep {
 public:
  /// Forward + backward of micro-batch `m` of this rank's share of the step; returns this rank's loss parts
  /// ({total, parts...}), each already normalised by the whole global batch so that sums over micro-batches and
  /// ranks are the global batch's losses.
  using MicroBatchFn = std::function<std::vector<double>(int64_t m)>;

  /// With more than one rank, installs a GradientReducer on `params` (see grad_reducer.h) and checks that every
  /// rank starts from the same parameters (collective). Throws bertrain::Error on invalid options.
  TrainStep(const NamedParameters& params, Optimizer& optimizer, const TrainStepOptions& options,
            std::shared_ptr<Communicator> comm);
  ~TrainStep();

  /// Runs micro-batches [state.micro_batch_index, num_micro) (a step resumed mid-way starts where it stopped,
  /// with state.partial_losses), then: sums over ranks, norm and clipping, update with `lr` or skip, zero_grad.
  /// Updates `state`: global_step and phase_step (+1), skipped counters, micro_batch_index / partial_losses.
  /// `may_stop_mid_step`: poll SIGINT/SIGTERM between micro-batches (single process; under MPI the signal is
  /// acted on at the step's end by every rank). Throws bertrain::Error after max_consecutive_skipped_steps
  /// non-finite steps in a row, or when the transport fails.
  StepStats run(int64_t num_micro, const MicroBatchFn& micro_batch, double lr, TrainState& state,
                bool may_stop_mid_step);

  /// Sums `values` over ranks in place (double; no-op with one rank). Collective.
  void allreduce(std::vector<double>& values);
  Communicator& comm() { return *comm_; }

 private:
  NamedParameters params_;
  Optimizer& opt_;
  TrainStepOptions opt_options_;
  std::shared_ptr<Communicator> comm_;
  std::unique_ptr<GradientReducer> reducer_;
};

/// Logs, once at the start of a --bf16 run, what bf16 matmuls do on this CPU: oneDNN's emulation (a warning: slower
/// than f32) or native AVX512_BF16 with both measured peaks (bertrain/core/cpu_peak.h, about 0.3 s of loops), and a
/// warning when the bf16 peak is not 1.5x the fp32 peak, so that --bf16 will be slower than f32 here (README
/// "Mixed precision"). Call after set_matmul_precision(bf16) succeeded. Nothing is thrown.
void log_bf16_outlook();

}  // namespace bertrain
