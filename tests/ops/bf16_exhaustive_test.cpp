// bf16_exhaustive_test.cpp: f32 -> bf16 rounding pinned bit for bit over all 2^32 float32 inputs: bf16::from_float
// (core/dtype.h, Tensor::to), the matmuls' scalar fallback (kernels::f32_to_bf16_scalar), the AVX512_BF16
// instruction (kernels::f32_to_bf16_vector, where the CPU has it) and a reference computed from the definition with
// double arithmetic (the nearer of the two bf16 neighbours, ties to the even one) must all agree.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "bertrain/core/dtype.h"
#include "kernels/convert.h"

using namespace bertrain;

namespace {

float as_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The rule of dtype.h written from its definition, not from the bit trick: compare distances to the two bf16
// values around x in double (exact for floats), pick the nearer, on a tie the one with an even last mantissa bit.
uint16_t reference(uint32_t u) {
  const uint32_t exp = (u >> 23) & 0xffu, mant = u & 0x7fffffu;
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  if (exp == 0) return sign;                                                      // zero, subnormal: signed zero
  if (exp == 0xffu) return mant ? static_cast<uint16_t>((u >> 16) | 0x40) : static_cast<uint16_t>(u >> 16);
  const uint32_t lo = u & 0xffff0000u;                     // toward zero
  const uint32_t hi = lo + 0x10000u;                       // away from zero: may be Inf
  const double x = std::fabs(static_cast<double>(as_float(u)));
  const double dlo = std::fabs(static_cast<double>(as_float(lo)));
  const double dhi = ((hi >> 23) & 0xffu) == 0xffu ? std::ldexp(1.0, 128) : std::fabs(static_cast<double>(as_float(hi)));
  const double below = x - dlo, above = dhi - x;
  if (below < above) return static_cast<uint16_t>(lo >> 16);
  if (above < below) return static_cast<uint16_t>(hi >> 16);
  return ((lo >> 16) & 1u) == 0 ? static_cast<uint16_t>(lo >> 16) : static_cast<uint16_t>(hi >> 16);
}

}  // namespace

TEST(Bf16Exhaustive, ReferenceMatchesKnownValues) {
  // A reference that cannot fail would prove nothing: it must give the hand-checked answers.
  EXPECT_EQ(reference(0x3f808000u), 0x3f80);  // 1 + 2^-8: tie, to even (down)
  EXPECT_EQ(reference(0x3f818000u), 0x3f82);  // tie, to even (up)
  EXPECT_EQ(reference(0x3f808001u), 0x3f81);
  EXPECT_EQ(reference(0x7f7fffffu), 0x7f80);  // FLT_MAX -> +Inf
  EXPECT_EQ(reference(0x7f7f7fffu), 0x7f7f);
  EXPECT_EQ(reference(0xff7f8000u), 0xff80);  // halfway to 2^128: Inf (even), negative
  EXPECT_EQ(reference(0x807fffffu), 0x8000);  // subnormal -> -0
  EXPECT_EQ(reference(0xff812345u), 0xffc1);  // signalling NaN -> quiet, sign and upper payload kept
  EXPECT_EQ(reference(0x7f800001u), 0x7fc0);  // payload only in the low half: still NaN, not Inf
}

TEST(Bf16Exhaustive, AllFloat32InputsGiveTheSameBitsOnEveryPath) {
  const bool vector = kernels::cpu_has_avx512_bf16();
  if (!vector) std::printf("this CPU has no AVX512_BF16: checking dtype.h, the scalar fallback and the reference\n");
  constexpr uint64_t kChunk = 1 << 20;
  int64_t mismatches = 0;
  uint32_t first = 0;
  bool have_first = false;
#pragma omp parallel for schedule(dynamic, 16) reduction(+ : mismatches)
  for (int64_t c = 0; c < int64_t{1} << 12; ++c) {
    std::vector<float> src(kChunk);
    std::vector<uint16_t> scalar(kChunk), vec(kChunk);
    const uint64_t base = static_cast<uint64_t>(c) * kChunk;
    for (uint64_t i = 0; i < kChunk; ++i) src[i] = as_float(static_cast<uint32_t>(base + i));
    kernels::f32_to_bf16_scalar(src.data(), scalar.data(), static_cast<int64_t>(kChunk));
    if (vector) kernels::f32_to_bf16_vector(src.data(), vec.data(), static_cast<int64_t>(kChunk));
    for (uint64_t i = 0; i < kChunk; ++i) {
      const uint32_t u = static_cast<uint32_t>(base + i);
      const uint16_t want = reference(u);
      if (bf16::from_float(src[i]) != want || scalar[i] != want || (vector && vec[i] != want)) {
        ++mismatches;
#pragma omp critical
        if (!have_first || u < first) first = u, have_first = true;
      }
    }
  }
  ASSERT_EQ(mismatches, 0) << "first mismatch at 0x" << std::hex << first << ": reference " << reference(first)
                           << ", dtype.h " << bf16::from_float(as_float(first));
}
