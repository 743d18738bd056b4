// train_step.cpp: see train_step.h. The order of operations (micro-batches, sums over ranks, norm, update) is
// the one the golden and resume tests pin: changing it changes results in the last bits.
#include "bertrain/train/train_step.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>

#include "bertrain/core/cpu_peak.h"
#include "bertrain/core/error.h"
#include "bertrain/ops/ops.h"
#include "bertrain/optim/clip.h"
#include "bertrain/train/signals.h"

namespace bertrain {

TrainStep::TrainStep(const NamedParameters& params, Optimizer& optimizer, const TrainStepOptions& o,
                     std::shared_ptr<Communicator> comm)
    : params_(params), opt_(optimizer), opt_options_(o), comm_(std::move(comm)) {
  BERTRAIN_CHECK(o.clip_grad_norm >= 0 && std::isfinite(o.clip_grad_norm),
                 "TrainStepOptions.clip_grad_norm must be finite and >= 0, got ", o.clip_grad_norm);
  BERTRAIN_CHECK(o.max_consecutive_skipped_steps >= 0, "TrainStepOptions.max_consecutive_skipped_steps must be >= 0, got ",
                 o.max_consecutive_skipped_steps);
  BERTRAIN_CHECK(o.allreduce_bucket_mb > 0, "allreduce_bucket_mb must be positive, got ", o.allreduce_bucket_mb);
  BERTRAIN_CHECK(o.allreduce_dtype == DType::f32 || o.allreduce_dtype == DType::bf16,
                 "allreduce_dtype must be f32 or bf16, got ", dtype_name(o.allreduce_dtype));
  if (!comm_) comm_ = world();
  if (comm_->size() > 1) {
    check_same_parameters(params_, *comm_);  // same seed or same checkpoint on every rank
    reducer_ = std::make_unique<GradientReducer>(params_, comm_,
                                                 static_cast<int64_t>(o.allreduce_bucket_mb * (1 << 20)),
                                                 o.allreduce_dtype);
    int64_t wire = 0;
    for (int64_t b : reducer_->bucket_wire_bytes()) wire += b;
    spdlog::info("data parallel: {}; gradients summed in {} buckets, {:.1f} MB in {} per step", comm_->description(),
                 reducer_->num_buckets(), static_cast<double>(wire) / 1e6, dtype_name(o.allreduce_dtype));
  }
}

TrainStep::~TrainStep() = default;

void TrainStep::allreduce(std::vector<double>& v) {
  if (comm_->size() > 1 && !v.empty()) comm_->allreduce(v.data(), static_cast<int64_t>(v.size()));
}

StepStats TrainStep::run(int64_t num_micro, const MicroBatchFn& micro_batch, double lr, TrainState& state,
                         bool may_stop_mid_step) {
  BERTRAIN_CHECK(num_micro >= 1, "TrainStep::run: num_micro must be >= 1, got ", num_micro);
  BERTRAIN_ASSERT(state.micro_batch_index < num_micro, "resumed at micro-batch ", state.micro_batch_index, " of ",
                  num_micro);
  using clock = std::chrono::steady_clock;
  auto seconds_since = [](clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); };
  StepStats st;
  st.lr = lr;
  std::vector<double> losses = state.micro_batch_index > 0 ? state.partial_losses : std::vector<double>{};
  // Compute: from here to the end of the last micro-batch, the loop's own bookkeeping included, so that data,
  // compute, exposed communication and optimizer tile the step.
  const auto t_compute = clock::now();
  for (int64_t m = state.micro_batch_index; m < num_micro; ++m) {
    if (reducer_ && m == num_micro - 1) reducer_->arm();  // sums start as gradients complete
    const std::vector<double> parts = micro_batch(m);
    st.times.compute = seconds_since(t_compute);
    if (losses.size() < parts.size()) losses.resize(parts.size(), 0.0);
    for (size_t i = 0; i < parts.size(); ++i) losses[i] += parts[i];
    if (may_stop_mid_step && comm_->size() == 1 && signal_received() && m + 1 < num_micro) {
      state.micro_batch_index = m + 1;
      state.partial_losses = losses;
      st.losses = losses;
      st.completed = false;
      st.stop_signal = signal_received();
      spdlog::warn("signal {} received during step {}: stopping after micro-batch {}/{}", st.stop_signal,
                   state.global_step + 1, m + 1, num_micro);
      return st;
    }
  }
  state.micro_batch_index = 0;
  state.partial_losses.clear();
  int stop_signal = signal_received();
  if (reducer_) {
    const auto t_comm = clock::now();
    reducer_->finish();
    spdlog::debug("step {}: {} of {} gradient buckets started during backward", state.global_step + 1,
                  reducer_->started_during_backward(), reducer_->num_buckets());
    allreduce(losses);
    double sig = stop_signal;  // a signal on any rank stops every rank after this step
    comm_->allreduce(&sig, 1, ReduceOp::max);
    stop_signal = static_cast<int>(sig);
    const GradientReducer::Timing& t = reducer_->timing();
    st.times.comm_exposed = seconds_since(t_comm);
    st.times.allreduce = t.allreduce;
    st.times.allreduce_wire_bytes = t.wire_bytes;
    st.times.allreduce_bytes = allreduce_bytes_per_rank(static_cast<double>(t.wire_bytes), comm_->size());
  }
  const auto t_opt = clock::now();
  st.losses = losses;
  st.stop_signal = stop_signal;
  st.grad_norm = opt_options_.clip_grad_norm > 0 ? clip_grad_norm(params_, opt_options_.clip_grad_norm)
                                                  : global_grad_norm(params_);
  const double loss = losses.empty() ? 0.0 : losses[0];
  if (!std::isfinite(st.grad_norm) || !std::isfinite(loss)) {
    st.skipped = true;
    ++state.skipped_steps;
    ++state.consecutive_skipped_steps;
    spdlog::warn("step {}: non-finite {} ({}), step skipped ({} in a row)", state.global_step + 1,
                 std::isfinite(st.grad_norm) ? "loss" : "gradient norm", std::isfinite(st.grad_norm) ? loss : st.grad_norm,
                 state.consecutive_skipped_steps);
    const int64_t max = opt_options_.max_consecutive_skipped_steps;
    BERTRAIN_CHECK(max == 0 || state.consecutive_skipped_steps < max, state.consecutive_skipped_steps,
                   " consecutive steps had a non-finite loss or gradient norm (max_consecutive_skipped_steps = ", max,
                   "); stopping");
  } else {
    state.consecutive_skipped_steps = 0;
    opt_.step(lr);
  }
  opt_.zero_grad();
  st.times.optimizer = seconds_since(t_opt);
  state.optimizer_step = opt_.counters().step;
  ++state.global_step;
  ++state.phase_step;
  return st;
}

void append_step_times(MetricsRecord& rec, const StepTimes& t, double step_seconds, int ranks) {
  rec.emplace_back("step_seconds", step_seconds);
  rec.emplace_back("compute_seconds", t.compute);
  rec.emplace_back("optimizer_seconds", t.optimizer);
  if (ranks > 1) {
    rec.emplace_back("allreduce_seconds", t.allreduce);
    rec.emplace_back("comm_exposed_seconds", t.comm_exposed);
    rec.emplace_back("allreduce_bytes", static_cast<int64_t>(std::llround(t.allreduce_bytes)));
  }
}

void set_progress_comm(StepProgress& p, const StepTimes& t, double step_seconds, int ranks) {
  if (ranks <= 1 || step_seconds <= 0) return;
  p.comm_exposed_fraction = t.comm_exposed / step_seconds;
  p.allreduce_seconds = t.allreduce;
  p.allreduce_bytes = t.allreduce_bytes;
}

void log_bf16_outlook() {
  constexpr const char* what = "bf16 mixed precision: matmuls in bf16 with f32 accumulation, f32 master weights";
  if (!matmul_bf16_native()) {
    spdlog::warn("{} (this CPU has no AVX512_BF16: oneDNN emulates it, slower than f32)", what);
    return;
  }
  try {
    const Bf16Outlook o = measure_bf16_outlook();
    if (o.can_pay)
      spdlog::info("{} (native AVX512_BF16; measured peaks: bf16 {:.0f}, fp32 {:.0f} GFLOP/s)", what, o.bf16_gflops,
                   o.fp32_gflops);
    else
      spdlog::warn("{} (native AVX512_BF16, but this CPU's measured bf16 dot-product peak, {:.0f} GFLOP/s, is not "
                   "above its fp32 FMA peak, {:.0f} GFLOP/s: expect --bf16 to be slower than f32 here; README "
                   "\"Mixed precision\")",
                   what, o.bf16_gflops, o.fp32_gflops);
  } catch (const Error& e) {  // no FMA at all: the log line must not stop the run
    spdlog::info("{} (native AVX512_BF16; peaks not measured: {})", what, e.what());
  }
}

}  // namespace bertrain
