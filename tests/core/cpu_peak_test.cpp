// The measured peaks of core/cpu_peak.h: what holds whatever the machine and its load (no timing is asserted).
#include "bertrain/core/cpu_peak.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "bertrain/core/error.h"

namespace bertrain {
namespace {

TEST(CpuPeak, FmaPeakIsTheBestMeasuredInstructionSet) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") && !__builtin_cpu_supports("avx512f")) GTEST_SKIP() << "no AVX2 or AVX-512F";
  const FmaPeak p = measure_fma_peak(0.01);
  EXPECT_GT(p.gflops, 0.0);
  EXPECT_EQ(p.gflops, std::max(p.avx512, p.avx2));
  EXPECT_EQ(p.isa, p.avx512 >= p.avx2 ? "avx512" : "avx2");
  EXPECT_EQ(p.avx512 > 0, static_cast<bool>(__builtin_cpu_supports("avx512f")));
  EXPECT_GE(p.threads, 1);
}

TEST(CpuPeak, Bf16PeakIsZeroExactlyWithoutAvx512Bf16) {
  __builtin_cpu_init();
  const double bf = measure_bf16_dot_peak(0.01);
  if (__builtin_cpu_supports("avx512bf16")) {
    EXPECT_GT(bf, 0.0);
  } else {
    EXPECT_EQ(bf, 0.0);
  }
}

TEST(CpuPeak, OutlookCanPayOnlyAboveOneAndAHalfTimesFp32) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") && !__builtin_cpu_supports("avx512f")) GTEST_SKIP() << "no AVX2 or AVX-512F";
  const Bf16Outlook o = measure_bf16_outlook(0.01);
  EXPECT_GT(o.fp32_gflops, 0.0);
  EXPECT_EQ(o.can_pay, o.bf16_gflops >= 1.5 * o.fp32_gflops);
  if (o.bf16_gflops == 0.0) {
    EXPECT_FALSE(o.can_pay);
  }
}

TEST(CpuPeak, NonPositiveSecondsAreRefused) {
  EXPECT_THROW(measure_fma_peak(0.0), Error);
  EXPECT_THROW(measure_bf16_dot_peak(-1.0), Error);
}

}  // namespace
}  // namespace bertrain
