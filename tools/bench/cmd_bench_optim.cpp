// cmd_bench_optim.cpp: `bertrain bench optim`: LAMB and AdamW step time over BERT-base's 110 M parameters next to
// the memory-bandwidth bound (bytes the step must move / STREAM-style triad bandwidth measured in the same run).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bertrain/core/error.h"
#include "bertrain/core/threads.h"
#include "bertrain/models/bert.h"
#include "bertrain/optim/adamw.h"
#include "bertrain/optim/clip.h"
#include "bertrain/optim/lamb.h"
#include "bench_util.h"
#include "commands.h"

namespace bertrain::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Cheap deterministic fill in (-scale, scale), in parallel (values only need to be normal floats).
void fill_hash(Tensor& t, uint64_t seed, float scale) {
  float* x = t.data<float>();
  const int64_t n = t.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    uint64_t h = (static_cast<uint64_t>(i) + seed * 0x9E3779B97F4A7C15ull) * 0xD6E8FEB86659FD93ull;
    h ^= h >> 32;
    x[i] = scale * (static_cast<float>(h & 0xFFFFFF) / 8388608.0f - 1.0f);
  }
}

// STREAM triad a[i] = b[i] + s * c[i] over three arrays of `n` doubles; returns the best time over `reps` runs.
// STREAM counts 24 bytes per element; the store to a[] also reads each line first (write-allocate), so the memory
// really moves 32 bytes per element. The optimizer's stores go to lines it has just read (p, m, v), which need
// no extra read, so the bound uses the 32-byte figure; both are printed.
double triad_seconds(int64_t n, int reps) {
  std::unique_ptr<double[]> a(new double[n]), b(new double[n]), c(new double[n]);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    a[i] = 0.0;
    b[i] = 1.0;
    c[i] = 2.0;
  }
  double best = 1e300;
  const double s = 3.0;
  for (int r = 0; r < reps; ++r) {
    double* pa = a.get();
    const double* pb = b.get();
    const double* pc = c.get();
    auto t0 = Clock::now();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) pa[i] = pb[i] + s * pc[i];
    const double dt = seconds_since(t0);
    best = std::min(best, dt);
  }
  volatile double sink = a[n / 2];  // keep the stores
  (void)sink;
  return best;
}

struct Timing {
  double best = 0, median = 0;
};

Timing time_it(int iters, const std::function<void()>& f) {
  f();  // warm-up: page faults, first touch of the optimizer state
  std::vector<double> ts;
  for (int i = 0; i < iters; ++i) {
    auto t0 = Clock::now();
    f();
    ts.push_back(seconds_since(t0));
  }
  std::sort(ts.begin(), ts.end());
  return {ts.front(), ts[ts.size() / 2]};
}

int run_bench(int iters, int64_t triad_mb) {
  BERTRAIN_CHECK(iters >= 1, "--iters must be >= 1, got ", iters);
  BERTRAIN_CHECK(triad_mb >= 8, "--triad_mb must be >= 8, got ", triad_mb);
  // BERT-base's parameters under their Hugging Face names, from the model itself (BertConfig's defaults are
  // bert-base; the tied MLM decoder appears once). Values are overwritten: only names and shapes matter.
  Rng init(1);
  BertForPreTraining model(BertConfig{}, init);
  NamedParameters params = model.named_parameters();
  int64_t numel = 0;
  uint64_t seed = 1;
  for (auto& [name, v] : params) {
    Tensor w = v.value();
    fill_hash(w, seed++, name.find("LayerNorm.weight") != std::string::npos ? 1.0f : 0.02f);
    Tensor g = Tensor::empty(w.shape());
    fill_hash(g, seed++, 1e-3f);
    v.mutable_grad() = g;
    numel += w.numel();
  }
  const int64_t triad_n = triad_mb * (int64_t{1} << 20) / 8;
  double triad_t = triad_seconds(triad_n, 10);
  std::printf("BERT-base parameter set: %zu tensors, %.2f M parameters (f32), %d threads\n", params.size(),
              numel / 1e6, num_threads());
  std::vector<std::pair<std::string, std::pair<Timing, double>>> rows;
  auto record = [&](const char* what, Timing t, double bytes_per_param) { rows.push_back({what, {t, bytes_per_param}}); };
  auto report = record;
  // Bytes per parameter (f32, 4 B per access): AdamW reads p, g, m, v and writes p, m, v: 7 accesses. LAMB pass 1
  // reads p, g, m, v and writes m, v; pass 2 reads p, m, v and writes p: 10 accesses; with max_grad_norm the global
  // norm reads g once more: 11. clip_grad_norm reads g for the norm, then reads and writes it to scale: 3.
  {
    AdamW opt(params);
    report("AdamW (decoupled, bias-corrected)", time_it(iters, [&] { opt.step(1e-4); }), 7 * 4.0);
  }
  {
    Lamb opt(params);
    report("LAMB (tfa/ALBERT-style, by pattern)", time_it(iters, [&] { opt.step(1e-4); }), 10 * 4.0);
  }
  {
    LambOptions o;
    o.adaptation = LambAdaptation::decayed_only;
    o.max_grad_norm = 1.0;
    o.rules.exclude_from_weight_decay = {"bias", "gamma", "beta", "LayerNorm"};
    Lamb opt(params, o);
    report("LAMB (NVIDIA FusedLAMB options)", time_it(iters, [&] { opt.step(1e-4); }), 11 * 4.0);
  }
  // Halving max_norm at every call makes every call scale (a fixed max_norm stops scaling once the norm is there).
  double max_norm = global_grad_norm(params);
  report("clip_grad_norm (scaling)", time_it(iters, [&] { max_norm = 0.5 * clip_grad_norm(params, 0.5 * max_norm); }),
         3 * 4.0);
  report("global_grad_norm", time_it(iters, [&] { (void)global_grad_norm(params); }), 1 * 4.0);
  // Triad again after the optimizers (the best of both runs), so a busy moment does not set the bound.
  triad_t = std::min(triad_t, triad_seconds(triad_n, 10));
  const double bw = 32.0 * static_cast<double>(triad_n) / triad_t;
  std::printf("triad bandwidth: %.2f GB/s with write-allocate (%.2f GB/s STREAM counting); best of 20, 3 arrays of "
              "%lld MiB\n\n",
              bw / 1e9, 24.0 * static_cast<double>(triad_n) / triad_t / 1e9, static_cast<long long>(triad_mb));
  std::printf("%-38s %10s %10s %12s %10s %9s\n", "step", "best ms", "median ms", "bytes/step", "bound ms", "of bound");
  for (const auto& [what, tb] : rows) {
    const auto& [t, bytes_per_param] = tb;
    const double bytes = bytes_per_param * static_cast<double>(numel);
    const double bound = bytes / bw;
    std::printf("%-38s %10.1f %10.1f %10.2f GB %10.1f %8.0f%%\n", what.c_str(), t.best * 1e3, t.median * 1e3,
                bytes / 1e9, bound * 1e3, 100.0 * bound / t.best);
  }
  std::printf("\nbound = bytes the step must move / triad bandwidth; 'of bound' = bound / best time (100%% = at the "
              "memory roofline).\n");
  return 0;
}

BenchRegistrar reg{{"optim",
               "time LAMB and AdamW steps over BERT-base's parameters against the memory-bandwidth bound",
               [](CLI::App& sub) {
                 auto iters = std::make_shared<int>(5);
                 auto triad_mb = std::make_shared<int64_t>(256);
                 sub.add_option("--iters", *iters, "timed steps per optimizer (after one warm-up step)");
                 sub.add_option("--triad_mb", *triad_mb, "size of each triad array in MiB (far above the caches)");
                 return std::function<int()>([iters, triad_mb] { return run_bench(*iters, *triad_mb); });
               }}};

}  // namespace
}  // namespace bertrain::cli
