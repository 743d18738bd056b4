// bench_util.h: the registry of `bertrain bench <name>` benchmarks and the model sizes, timing and bandwidth helpers
// they share (the fp32 and bf16 peaks come from bertrain/core/cpu_peak.h).
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "bertrain/core/cpu_peak.h"  // FmaPeak, measure_fma_peak, measure_bf16_dot_peak
#include "bertrain/models/bert_config.h"

namespace bertrain::cli {

/// A benchmark under `bertrain bench`: `setup` adds its options to `sub`; the returned function runs it and
/// returns the exit code (as Command in commands.h, one level down).
struct BenchCommand {
  std::string name;
  std::string help;
  std::function<std::function<int()>(CLI::App& sub)> setup;
};

/// The benchmarks; a file adds one with a static `BenchRegistrar`. cmd_bench.cpp turns each into a
/// subcommand of `bench` when main() sets up the command line (after every static registrar has run).
std::vector<BenchCommand>& bench_registry();

struct BenchRegistrar {
  explicit BenchRegistrar(BenchCommand c) { bench_registry().push_back(std::move(c)); }
};

/// The non-empty items of a comma-separated list: "a,,b" -> {"a", "b"}.
std::vector<std::string> bench_split_commas(const std::string& s);

/// Google's BERT sizes by name (google-research/bert README, "BERT-Tiny" ... "BERT-Base": tiny, mini, small,
/// base), the same values as configs/model/bert-<name>.json; anything ending in .json is read as a config file
/// instead. Throws bertrain::Error for an unknown name (and as load_bert_config).
BertConfig bench_model_config(const std::string& name);

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
