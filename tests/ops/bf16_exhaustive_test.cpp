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

// The rule of dtype.h written from its definition, not from the bit trick: for all 2^16 floats whose upper half is
// `upper`, compare distances to the two bf16 values around x in double (exact for floats), pick the nearer, on a tie
// the one with an even last mantissa bit. The two neighbours depend on `upper` alone, so they are computed once.
void reference_block(uint32_t upper, uint16_t* out) {
  const uint32_t exp = (upper >> 7) & 0xffu;
  const uint16_t sign = static_cast<uint16_t>(upper & 0x8000u);
  const uint32_t lo = upper << 16;                       // toward zero
  const uint32_t hi = lo + 0x10000u;                     // away from zero: may be Inf
  for (uint32_t low = 0; low < 0x10000u; ++low) {
    const uint32_t u = lo | low;
    if (exp == 0) {                                      // zero, subnormal: signed zero
      out[low] = sign;
    } else if (exp == 0xffu) {                           // Inf stays, NaN: quiet, sign and upper payload kept
      out[low] = (u & 0x7fffffu) ? static_cast<uint16_t>(upper | 0x40u) : static_cast<uint16_t>(upper);
    } else {
      const double x = std::fabs(static_cast<double>(as_float(u)));
      const double dlo = std::fabs(static_cast<double>(as_float(lo)));
      const double dhi = ((hi >> 23) & 0xffu) == 0xffu ? std::ldexp(1.0, 128) : std::fabs(static_cast<double>(as_float(hi)));
      const double below = x - dlo, above = dhi - x;
      const bool up = above < below || (above == below && (upper & 1u));
      out[low] = static_cast<uint16_t>(up ? hi >> 16 : upper);
    }
  }
}

uint16_t reference(uint32_t u) {
  static thread_local std::vector<uint16_t> block(0x10000);
  reference_block(u >> 16, block.data());
  return block[u & 0xffffu];
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
  // One block per value of the upper 16 bits; buffers per thread, allocated once.
  int64_t mismatches = 0;
  uint32_t first = 0;
  bool have_first = false;
#pragma omp parallel reduction(+ : mismatches)
  {
    std::vector<float> src(0x10000);
    std::vector<uint16_t> want(0x10000), scalar(0x10000), vec(0x10000);
#pragma omp for schedule(dynamic, 64)
    for (int64_t upper = 0; upper < 0x10000; ++upper) {
      const uint32_t base = static_cast<uint32_t>(upper) << 16;
      for (uint32_t low = 0; low < 0x10000u; ++low) src[low] = as_float(base | low);
      reference_block(static_cast<uint32_t>(upper), want.data());
      kernels::f32_to_bf16_scalar(src.data(), scalar.data(), 0x10000);
      if (vector) kernels::f32_to_bf16_vector(src.data(), vec.data(), 0x10000);
      for (uint32_t low = 0; low < 0x10000u; ++low) {
        if (bf16::from_float(src[low]) != want[low] || scalar[low] != want[low] || (vector && vec[low] != want[low])) {
          ++mismatches;
          const uint32_t u = base | low;
#pragma omp critical
          if (!have_first || u < first) first = u, have_first = true;
        }
      }
    }
  }
  ASSERT_EQ(mismatches, 0) << "first mismatch at 0x" << std::hex << first << ": reference " << reference(first)
                           << ", dtype.h " << bf16::from_float(as_float(first));
}
