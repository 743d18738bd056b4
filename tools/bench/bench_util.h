// bench_util.h: the registry of `bertrain bench <name>` benchmarks and the model sizes, timing, bandwidth and FMA-peak
// helpers they share.
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

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

/// Result of the FMA throughput loop.
struct FmaPeak {
  double gflops = 0;    ///< fp32 GFLOP/s of the best instruction set, all threads (an FMA counts as 2 flops)
  double avx512 = 0;    ///< GFLOP/s with 512-bit FMAs; 0 where the CPU lacks AVX-512F
  double avx2 = 0;      ///< GFLOP/s with 256-bit FMAs; 0 where the CPU lacks AVX2 + FMA
  std::string isa;      ///< "avx512", "avx2" or "none"
  int threads = 0;
};

/// The cores' fp32 FMA peak, measured: every OpenMP thread runs a loop of independent fused multiply-adds
/// on registers only (16 accumulators, more than FMA latency x FMA ports on current x86 cores), for about
/// `seconds` per instruction set; the best of 3 repeats. Both AVX-512 and AVX2 are measured where the CPU
/// has them (chosen at run time with __builtin_cpu_supports, so the binary needs no -march flag): cores
/// that split 512-bit FMAs into two 256-bit halves (AMD Zen 4) reach the same peak with either. Throws
/// bertrain::Error when the CPU has neither AVX2+FMA nor AVX-512F, or seconds <= 0.
FmaPeak measure_fma_peak(double seconds = 0.25);

/// The cores' bf16 dot-product peak in GFLOP/s, measured the same way with AVX512_BF16's VDPBF16PS (16 lanes x
/// 2 bf16 products accumulated in f32 per instruction = 64 flops), the instruction oneDNN's bf16 matmuls use
/// on CPUs without AMX: the MFU denominator of `bench train --bf16`. 0 when the CPU lacks AVX512_BF16.
double measure_bf16_dot_peak(double seconds = 0.25);

}  // namespace bertrain::cli
