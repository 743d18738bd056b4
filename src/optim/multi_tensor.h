// multi_tensor.h: private helpers that cut a list of tensors into fixed-size chunks and run a kernel over all
// chunks in one OpenMP loop (the CPU analogue of apex's multi_tensor_apply). Chunk boundaries depend only on the
// tensor sizes, so per-chunk partial sums combined in chunk order are identical for any thread count.
#pragma once

#include <cstdint>
#include <vector>

namespace bertrain::optim_detail {

/// Elements per chunk: 128 KiB of f32, large enough to amortise scheduling, small enough to balance 110 M
/// parameters over many threads.
constexpr int64_t kChunk = int64_t{1} << 15;

struct Chunk {
  int32_t item = 0;   // index into the caller's tensor list
  int64_t begin = 0;  // element range [begin, end)
  int64_t end = 0;
};

struct ChunkPlan {
  std::vector<Chunk> chunks;
  int64_t total = 0;           // elements over all items
  std::vector<int64_t> first;  // per item: index of its first chunk
  std::vector<int64_t> count;  // per item: number of chunks
};

inline ChunkPlan plan_chunks(const std::vector<int64_t>& numels) {
  ChunkPlan plan;
  plan.first.resize(numels.size());
  plan.count.resize(numels.size());
  for (size_t i = 0; i < numels.size(); ++i) {
    plan.first[i] = static_cast<int64_t>(plan.chunks.size());
    for (int64_t b = 0; b < numels[i]; b += kChunk)
      plan.chunks.push_back({static_cast<int32_t>(i), b, std::min(b + kChunk, numels[i])});
    plan.count[i] = static_cast<int64_t>(plan.chunks.size()) - plan.first[i];
    plan.total += numels[i];
  }
  return plan;
}

/// Below this many elements in all, a step runs on the calling thread: waking a team costs more than the work
/// (and much more on an oversubscribed machine). Results are the same either way.
constexpr int64_t kParallelMin = int64_t{1} << 16;

/// Runs f(chunk_index, chunk) for every chunk, in parallel (static schedule).
template <class F>
void for_each_chunk(const ChunkPlan& plan, F&& f) {
  const int64_t n = static_cast<int64_t>(plan.chunks.size());
#pragma omp parallel for schedule(static) if (plan.total >= kParallelMin && n > 1)
  for (int64_t c = 0; c < n; ++c) f(c, plan.chunks[c]);
}

/// Per item: the chunk partials (indexed by chunk) summed in chunk order.
inline std::vector<double> sum_per_item(const ChunkPlan& plan, const std::vector<double>& partial) {
  std::vector<double> out(plan.first.size(), 0.0);
  for (size_t i = 0; i < out.size(); ++i) {
    double s = 0.0;
    for (int64_t c = plan.first[i]; c < plan.first[i] + plan.count[i]; ++c) s += partial[c];
    out[i] = s;
  }
  return out;
}

/// Sum of x[i]^2 over [0, n) in double. 32 independent accumulators (four AVX-512 registers) hide the add
/// latency; they are combined in a fixed order, so the result depends only on n and the data.
template <class T>
inline double sum_squares(const T* x, int64_t n) {
  constexpr int kLanes = 32;
  double acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
#pragma omp simd
    for (int k = 0; k < kLanes; ++k) {
      const double v = static_cast<double>(x[i + k]);
      acc[k] += v * v;
    }
  }
  double s = 0.0;
  for (int k = 0; k < kLanes; ++k) s += acc[k];
  for (; i < n; ++i) {
    const double v = static_cast<double>(x[i]);
    s += v * v;
  }
  return s;
}

}  // namespace bertrain::optim_detail
