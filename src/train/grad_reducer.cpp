// grad_reducer.cpp: see grad_reducer.h.
#include "bertrain/train/grad_reducer.h"

#include <cstring>

#include "bertrain/core/error.h"

namespace bertrain {

void check_same_parameters(const NamedParameters& params, Communicator& comm) {
  double sums[2] = {0, 0};
  double k = 1;
  for (const auto& [n, v] : params) {
    const Tensor& t = v.value();
    double s = 0;
    for (int64_t i = 0; i < t.numel(); ++i) s += t.get(i);
    sums[0] += s;
    sums[1] += s * k++;
  }
  double ref[2] = {sums[0], sums[1]};
  comm.broadcast(ref, sizeof ref, 0);
  BERTRAIN_CHECK(ref[0] == sums[0] && ref[1] == sums[1], "rank ", comm.rank(),
                 " holds other weights than rank 0 (checksum ", sums[0], " vs ", ref[0],
                 "): every rank must load the same init_checkpoint, or the same checkpoint for --resume (at a later "
                 "step: the ranks received different gradient sums)");
}

double allreduce_bytes_per_rank(double bytes, int ranks) {
  BERTRAIN_CHECK(ranks >= 1, "allreduce_bytes_per_rank: ranks must be >= 1, got ", ranks);
  return 2.0 * (ranks - 1) / ranks * bytes;
}

GradientReducer::GradientReducer(const NamedParameters& params, std::shared_ptr<Communicator> comm,
                                 int64_t bucket_bytes, DType wire)
    : comm_(std::move(comm)), wire_(wire) {
  BERTRAIN_CHECK(bucket_bytes > 0, "gradient bucket size must be positive, got ", bucket_bytes);
  BERTRAIN_CHECK(wire == DType::f32 || wire == DType::f64 || wire == DType::bf16,
                 "gradients are summed over ranks in f32, f64 or bf16, not ", dtype_name(wire));
  for (const auto& [name, v] : params) {
    if (!v.requires_grad()) continue;
    BERTRAIN_CHECK(v.dtype() == DType::f32 || v.dtype() == DType::f64, "data-parallel training: parameter ", name,
                   " is ", v.value().desc(), "; gradients are summed in f32 or f64 only");
    BERTRAIN_CHECK(wire != DType::bf16 || v.dtype() == DType::f32, "data-parallel training: parameter ", name,
                   " is ", v.value().desc(), "; a bf16 exchange is for f32 gradients");
    params_.push_back(v);
  }
  const size_t n = params_.size();
  bucket_of_.assign(n, 0);
  ready_.assign(n, 0);
  seen_.assign(n, 0);
  unused_.assign(n, 0);
  // Reverse registration order: the heads' gradients are complete first, the embeddings' last.
  int64_t bytes = 0;
  for (size_t k = n; k-- > 0;) {
    const Variable& v = params_[k];
    const int64_t nb = static_cast<int64_t>(v.value().nbytes());
    const bool fresh = buckets_.empty() || bytes + nb > bucket_bytes ||
                       params_[buckets_.back().params.front()].dtype() != v.dtype();
    if (fresh) {
      buckets_.emplace_back();
      bytes = 0;
    }
    Bucket& b = buckets_.back();
    b.offsets.push_back(b.params.empty() ? 0 : b.offsets.back() + params_[b.params.back()].numel());
    b.params.push_back(k);
    bucket_of_[k] = buckets_.size() - 1;
    bytes += nb;
  }
  for (Bucket& b : buckets_) {
    const Variable& last = params_[b.params.back()];
    b.buffer = Tensor::empty({b.offsets.back() + last.numel()}, wire_ == DType::bf16 ? DType::bf16 : last.dtype());
  }
  for (size_t i = 0; i < n; ++i) params_[i].set_grad_ready_hook([this, i](Variable&) { on_ready(i); });
}

GradientReducer::~GradientReducer() {
  for (Variable& v : params_) v.set_grad_ready_hook(nullptr);
}

std::vector<int64_t> GradientReducer::bucket_wire_bytes() const {
  std::vector<int64_t> out;
  for (const Bucket& b : buckets_) out.push_back(static_cast<int64_t>(b.buffer.nbytes()));
  return out;
}

double GradientReducer::since_arm() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t_arm_).count();
}

void GradientReducer::arm() {
  BERTRAIN_ASSERT(!armed_, "GradientReducer::arm() twice without finish()");
  armed_ = true;
  next_start_ = 0;
  started_early_ = 0;
  t_arm_ = std::chrono::steady_clock::now();
  t_first_start_ = t_done_ = -1;
  timing_ = Timing{};
  timing_.bucket_ready.assign(buckets_.size(), 0.0);
  for (Bucket& b : buckets_) {
    b.pending = static_cast<int64_t>(b.params.size());
    b.started = false;
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    ready_[i] = 0;
    seen_[i] = 0;
    if (unused_[i]) {
      ready_[i] = 1;
      --buckets_[bucket_of_[i]].pending;
    }
  }
  start_ready_buckets();  // buckets of unused parameters only
}

void GradientReducer::on_ready(size_t i) {
  if (!armed_) return;
  seen_[i] = 1;
  BERTRAIN_CHECK(!unused_[i], "data-parallel training: a parameter that had no gradient in the first step has one "
                 "now; the model must use the same parameters in every step");
  if (ready_[i]) return;  // a second firing (a nested backward of activation checkpointing): counted once
  ready_[i] = 1;
  if (--buckets_[bucket_of_[i]].pending == 0) start_ready_buckets();
  comm_->progress();
  if (t_done_ < 0 && next_start_ == buckets_.size() && comm_->sums_complete()) t_done_ = since_arm();
}

void GradientReducer::start_ready_buckets() {
  // Strictly in bucket order, so every rank starts the same sums in the same order whatever its timing.
  while (next_start_ < buckets_.size() && buckets_[next_start_].pending == 0) {
    start(buckets_[next_start_]);
    ++next_start_;
    ++started_early_;
  }
}

void GradientReducer::start(Bucket& b) {
  char* dst = static_cast<char*>(b.buffer.raw_data());
  const size_t es = dtype_size(b.buffer.dtype());
  const bool to_bf16 = b.buffer.dtype() == DType::bf16;
  for (size_t j = 0; j < b.params.size(); ++j) {
    const Variable& v = params_[b.params[j]];
    char* at = dst + static_cast<size_t>(b.offsets[j]) * es;
    if (!v.grad().defined()) {
      std::memset(at, 0, static_cast<size_t>(v.numel()) * es);
    } else if (to_bf16) {  // round to nearest even (bertrain::bf16, the rule of every bf16 path)
      const float* g = v.grad().data<float>();
      uint16_t* w = reinterpret_cast<uint16_t*>(at);
      for (int64_t k = 0; k < v.numel(); ++k) w[k] = bf16::from_float(g[k]);
    } else {
      std::memcpy(at, v.grad().raw_data(), v.grad().nbytes());
    }
  }
  const double now = since_arm();
  timing_.bucket_ready[static_cast<size_t>(&b - buckets_.data())] = now;
  if (t_first_start_ < 0) t_first_start_ = now;
  comm_->start_allreduce_sum(b.buffer);
  b.started = true;
}

void GradientReducer::finish() {
  BERTRAIN_ASSERT(armed_, "GradientReducer::finish() without arm()");
  const double t_finish = since_arm();
  timing_.backward_end = t_finish;
  for (; next_start_ < buckets_.size(); ++next_start_) start(buckets_[next_start_]);
  comm_->wait_all();
  // When the communicator first saw the sums done (with a progress thread, possibly between two hooks); else
  // the first hook or wait that found them done.
  if (const auto at = comm_->sums_completed_at(); at != std::chrono::steady_clock::time_point{})
    t_done_ = std::chrono::duration<double>(at - t_arm_).count();
  if (t_done_ < 0) t_done_ = since_arm();
  for (const Bucket& b : buckets_) {
    const char* src = static_cast<const char*>(b.buffer.raw_data());
    const size_t es = dtype_size(b.buffer.dtype());
    const bool from_bf16 = b.buffer.dtype() == DType::bf16;
    for (size_t j = 0; j < b.params.size(); ++j) {
      Variable& v = params_[b.params[j]];
      if (!v.grad().defined()) continue;
      const char* at = src + static_cast<size_t>(b.offsets[j]) * es;
      if (from_bf16) {
        const uint16_t* w = reinterpret_cast<const uint16_t*>(at);
        float* g = v.mutable_grad().data<float>();
        for (int64_t k = 0; k < v.numel(); ++k) g[k] = bf16::to_float(w[k]);
      } else {
        std::memcpy(v.mutable_grad().raw_data(), at, v.grad().nbytes());
      }
    }
    timing_.wire_bytes += static_cast<int64_t>(b.buffer.nbytes());
  }
  timing_.allreduce = t_first_start_ < 0 ? 0.0 : t_done_ - t_first_start_;
  timing_.exposed = since_arm() - t_finish;
  if (!learned_unused_) {
    for (size_t i = 0; i < params_.size(); ++i) unused_[i] = !seen_[i];
    learned_unused_ = true;
  }
  armed_ = false;
}

}  // namespace bertrain
