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
                 " starts from other weights than rank 0 (checksum ", sums[0], " vs ", ref[0],
                 "): every rank must load the same init_checkpoint, or the same checkpoint for --resume");
}

GradientReducer::GradientReducer(const NamedParameters& params, std::shared_ptr<Communicator> comm,
                                 int64_t bucket_bytes)
    : comm_(std::move(comm)) {
  BERTRAIN_CHECK(bucket_bytes > 0, "gradient bucket size must be positive, got ", bucket_bytes);
  for (const auto& [name, v] : params) {
    if (!v.requires_grad()) continue;
    BERTRAIN_CHECK(v.dtype() == DType::f32 || v.dtype() == DType::f64, "data-parallel training: parameter ", name,
                   " is ", v.value().desc(), "; gradients are summed in f32 or f64 only");
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
    b.buffer = Tensor::empty({b.offsets.back() + last.numel()}, last.dtype());
  }
  for (size_t i = 0; i < n; ++i) params_[i].set_grad_ready_hook([this, i](Variable&) { on_ready(i); });
}

GradientReducer::~GradientReducer() {
  for (Variable& v : params_) v.set_grad_ready_hook(nullptr);
}

void GradientReducer::arm() {
  BERTRAIN_ASSERT(!armed_, "GradientReducer::arm() twice without finish()");
  armed_ = true;
  next_start_ = 0;
  started_early_ = 0;
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
  for (size_t j = 0; j < b.params.size(); ++j) {
    const Variable& v = params_[b.params[j]];
    char* at = dst + static_cast<size_t>(b.offsets[j]) * es;
    if (v.grad().defined()) std::memcpy(at, v.grad().raw_data(), v.grad().nbytes());
    else std::memset(at, 0, static_cast<size_t>(v.numel()) * es);
  }
  comm_->start_allreduce_sum(b.buffer);
  b.started = true;
}

void GradientReducer::finish() {
  BERTRAIN_ASSERT(armed_, "GradientReducer::finish() without arm()");
  for (; next_start_ < buckets_.size(); ++next_start_) start(buckets_[next_start_]);
  comm_->wait_all();
  for (const Bucket& b : buckets_) {
    const char* src = static_cast<const char*>(b.buffer.raw_data());
    const size_t es = dtype_size(b.buffer.dtype());
    for (size_t j = 0; j < b.params.size(); ++j) {
      Variable& v = params_[b.params[j]];
      if (v.grad().defined())
        std::memcpy(v.mutable_grad().raw_data(), src + static_cast<size_t>(b.offsets[j]) * es, v.grad().nbytes());
    }
  }
  if (!learned_unused_) {
    for (size_t i = 0; i < params_.size(); ++i) unused_[i] = !seen_[i];
    learned_unused_ = true;
  }
  armed_ = false;
}

}  // namespace bertrain
