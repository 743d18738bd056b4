// cpu_peak.h: the cores' measured fp32 FMA and bf16 dot-product peaks (the MFU denominators of `bertrain bench`),
// and whether --bf16 can be faster than f32 on this CPU at all.
#pragma once

#include <string>

namespace bertrain {

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
/// Throws bertrain::Error when seconds <= 0.
double measure_bf16_dot_peak(double seconds = 0.25);

/// Whether bf16 matmuls can beat f32 here: both peaks above, measured for `seconds` per loop.
struct Bf16Outlook {
  double fp32_gflops = 0;  ///< measure_fma_peak(seconds).gflops
  double bf16_gflops = 0;  ///< measure_bf16_dot_peak(seconds); 0 without AVX512_BF16
  /// bf16_gflops >= 1.5 x fp32_gflops. bf16 matmuls also halve the bytes moved, but GEMMs are bound by the
  /// multiply-add rate: a CPU whose VDPBF16PS rate is no higher than its fp32 FMA rate (Intel Sapphire and
  /// Emerald Rapids without AMX, e.g. in a VM that hides AMX: half the fp32 rate) runs --bf16 slower than f32,
  /// however good the kernels (README "Mixed precision"). AMD Zen 4 has twice the fp32 rate.
  bool can_pay = false;
};
Bf16Outlook measure_bf16_outlook(double seconds = 0.05);

}  // namespace bertrain
