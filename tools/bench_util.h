// bench_util.h: timing helpers shared by the `bertrain bench ...` subcommands.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace bertrain::cli {

/// Median wall time in seconds of `reps` calls of f, after `warmup` untimed calls.
inline double median_seconds(const std::function<void()>& f, int reps, int warmup = 2) {
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto a = std::chrono::steady_clock::now();
    f();
    auto b = std::chrono::steady_clock::now();
    t.push_back(std::chrono::duration<double>(b - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

/// Memory bandwidth in GB/s of a multi-threaded STREAM triad a[i] = b[i] + s * c[i] over three arrays of
/// `n` floats (default 3 x 128 MiB, far beyond cache); counts 3 * 4 * n bytes per pass, as STREAM does.
double triad_bandwidth_gbs(long n = 32L << 20);

}  // namespace bertrain::cli
