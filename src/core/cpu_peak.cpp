// cpu_peak.cpp: the cores' fp32 FMA and bf16 dot-product peaks, measured with register-only loops on every OpenMP
// thread (cpu_peak.h). `bertrain bench peak` prints them; they are the MFU denominators of the benchmarks.
#include "bertrain/core/cpu_peak.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>

#include "bertrain/core/error.h"
#include "bertrain/core/threads.h"

namespace bertrain {
namespace {

// 16 independent chains: an FMA has 4 cycles of latency and 2 pipes on Zen 4, Ice Lake and Sapphire Rapids,
// so 8 chains keep both pipes busy; 16 leave margin (and fit in 16 ymm / 32 zmm registers with a and b).
// Each chain is x <- x * a + b with a just below 1, which converges to b / (1 - a): no overflow, no
// denormals. The sum is returned so the compiler cannot drop the loop. Intrinsics, not vector extensions:
// under -std=c++20 GCC does not contract a * b + c into an FMA (-ffp-contract=off).
// The three loops below share these: 16 chains of type T started at 0.0, 0.1, ..., 1.5 (SET1 broadcasts), one
// instruction F(x, u, v) per chain and iteration, and the chains summed pairwise with ADD.
#define BERTRAIN_CHAINS16(T, SET1)                                                                            \
  T x0 = SET1(0.0f), x1 = SET1(0.1f), x2 = SET1(0.2f), x3 = SET1(0.3f), x4 = SET1(0.4f), x5 = SET1(0.5f);     \
  T x6 = SET1(0.6f), x7 = SET1(0.7f), x8 = SET1(0.8f), x9 = SET1(0.9f), x10 = SET1(1.0f), x11 = SET1(1.1f);   \
  T x12 = SET1(1.2f), x13 = SET1(1.3f), x14 = SET1(1.4f), x15 = SET1(1.5f)
#define BERTRAIN_STEP16(F, u, v)                                                                              \
  x0 = F(x0, u, v); x1 = F(x1, u, v); x2 = F(x2, u, v); x3 = F(x3, u, v); x4 = F(x4, u, v);                   \
  x5 = F(x5, u, v); x6 = F(x6, u, v); x7 = F(x7, u, v); x8 = F(x8, u, v); x9 = F(x9, u, v);                   \
  x10 = F(x10, u, v); x11 = F(x11, u, v); x12 = F(x12, u, v); x13 = F(x13, u, v); x14 = F(x14, u, v);         \
  x15 = F(x15, u, v)
#define BERTRAIN_SUM16(ADD)                                                                                   \
  ADD(ADD(ADD(ADD(x0, x1), ADD(x2, x3)), ADD(ADD(x4, x5), ADD(x6, x7))),                                      \
      ADD(ADD(ADD(x8, x9), ADD(x10, x11)), ADD(ADD(x12, x13), ADD(x14, x15))))

// The lanes of v summed through memory. Not _mm512_reduce_add_ps: GCC 12.2 builds that from
// _mm256_undefined_pd(), whose self-initialisation -Wuninitialized reports (GCC bug 105593).
__attribute__((target("avx512f"))) float sum_lanes(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float r = 0;
  for (float x : lanes) r += x;
  return r;
}

__attribute__((target("avx512f"))) float fma_chains_avx512(long iters) {
  const __m512 a = _mm512_set1_ps(0.99999f), b = _mm512_set1_ps(1e-5f);
  BERTRAIN_CHAINS16(__m512, _mm512_set1_ps);
  for (long i = 0; i < iters; ++i) {
    BERTRAIN_STEP16(_mm512_fmadd_ps, a, b);
  }
  return sum_lanes(BERTRAIN_SUM16(_mm512_add_ps));
}

__attribute__((target("avx2,fma"))) float fma_chains_avx2(long iters) {
  const __m256 a = _mm256_set1_ps(0.99999f), b = _mm256_set1_ps(1e-5f);
  BERTRAIN_CHAINS16(__m256, _mm256_set1_ps);
  for (long i = 0; i < iters; ++i) {
    BERTRAIN_STEP16(_mm256_fmadd_ps, a, b);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, BERTRAIN_SUM16(_mm256_add_ps));
  float r = 0;
  for (float v : lanes) r += v;
  return r;
}

// The bf16 loop: x <- x + sum of the 2 products a * b per lane (VDPBF16PS), with a = b = 2^-10 in bf16, so
// each chain grows by 2^-19 per instruction: no overflow or denormals for any realistic run length.
__attribute__((target("avx512f,avx512bf16"))) float dpbf16_chains(long iters) {
  const __m512 q = _mm512_set1_ps(1.0f / 1024);
  const __m512bh a = _mm512_cvtne2ps_pbh(q, q);
  BERTRAIN_CHAINS16(__m512, _mm512_set1_ps);
  for (long i = 0; i < iters; ++i) {
    BERTRAIN_STEP16(_mm512_dpbf16_ps, a, a);
  }
  return sum_lanes(BERTRAIN_SUM16(_mm512_add_ps));
}

#undef BERTRAIN_CHAINS16
#undef BERTRAIN_STEP16
#undef BERTRAIN_SUM16

volatile float g_sink = 0;  // where the loops' results go, so none is optimised away

/// GFLOP/s of `chains(iters)` run on every thread at once; `flops_per_iter` per thread and iteration.
/// Calibrates iters on one thread so a run lasts about `seconds`, then takes the best of 3 parallel runs.
double parallel_gflops(float (*chains)(long), double flops_per_iter, double seconds) {
  using Clock = std::chrono::steady_clock;
  long iters = 1 << 16;
  for (;;) {  // calibrate: grow until one run takes >= 20 ms
    auto t0 = Clock::now();
    g_sink = g_sink + chains(iters);
    double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    if (dt >= 0.02) {
      iters = static_cast<long>(static_cast<double>(iters) * seconds / dt) + 1;
      break;
    }
    iters *= 4;
  }
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    int threads = 1;
    auto t0 = Clock::now();
#pragma omp parallel
    {
#pragma omp single
      threads = omp_get_num_threads();
      float r = chains(iters);
#pragma omp critical(bertrain_cpu_peak_sink)
      g_sink = g_sink + r;  // once per thread and run; `+=` on a volatile is deprecated in C++20
    }
    double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, flops_per_iter * static_cast<double>(iters) * threads / dt / 1e9);
  }
  return best;
}

}  // namespace

FmaPeak measure_fma_peak(double seconds) {
  BERTRAIN_CHECK(seconds > 0, "FMA peak: seconds must be > 0, got ", seconds);
  __builtin_cpu_init();
  FmaPeak p;
  p.threads = num_threads();
  // Per iteration: 16 FMAs of 16 (AVX-512) or 8 (AVX2) lanes, 2 flops each.
  if (__builtin_cpu_supports("avx512f")) p.avx512 = parallel_gflops(fma_chains_avx512, 16.0 * 16 * 2, seconds);
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    p.avx2 = parallel_gflops(fma_chains_avx2, 16.0 * 8 * 2, seconds);
  BERTRAIN_CHECK(p.avx512 > 0 || p.avx2 > 0, "FMA peak: this CPU has neither AVX-512F nor AVX2 with FMA");
  p.gflops = std::max(p.avx512, p.avx2);
  p.isa = p.avx512 >= p.avx2 ? "avx512" : "avx2";
  return p;
}

double measure_bf16_dot_peak(double seconds) {
  BERTRAIN_CHECK(seconds > 0, "bf16 peak: seconds must be > 0, got ", seconds);
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512bf16")) return 0.0;
  // Per iteration: 16 VDPBF16PS of 16 lanes x 2 products, 2 flops each.
  return parallel_gflops(dpbf16_chains, 16.0 * 16 * 2 * 2, seconds);
}

Bf16Outlook measure_bf16_outlook(double seconds) {
  Bf16Outlook o;
  o.fp32_gflops = measure_fma_peak(seconds).gflops;
  o.bf16_gflops = measure_bf16_dot_peak(seconds);
  o.can_pay = o.bf16_gflops >= 1.5 * o.fp32_gflops;
  return o;
}

}  // namespace bertrain
