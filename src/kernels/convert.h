// convert.h: f32 -> bf16 conversion for the mixed-precision matmuls (ops/matmul.cpp).
// Semantics (identical on both paths, tested bit for bit): round to nearest, ties to even; NaN -> quiet NaN
// with the sign and upper payload kept ((bits >> 16) | 0x40); +-Inf -> +-Inf; finite values above the largest
// bf16 round to +-Inf; zero and subnormal inputs -> signed zero. The last rule is what the AVX512_BF16
// instruction VCVTNE2PS2BF16 does (it ignores MXCSR and treats subnormal inputs as zero, Intel SDM vol. 2),
// and the scalar path copies it so results never depend on the CPU. It differs from bf16::from_float
// (dtype.h) only for f32 subnormals (|x| < 2^-126), which is irrelevant for training values.
#pragma once

#include <cstdint>

namespace bertrain::kernels {

/// The conversion of one value, as described above (the scalar reference and fallback).
inline uint16_t f32_to_bf16_bits(uint32_t u) {
  if ((u & 0x7f800000u) == 0) return static_cast<uint16_t>((u >> 16) & 0x8000u);  // zero, subnormal
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

/// True when this CPU executes AVX512_BF16 instructions (cpuid), i.e. f32_to_bf16 takes its vector path.
bool cpu_has_avx512_bf16();

/// dst[i] = bf16 bits of src[i] for i in [0, n). Vectorised (AVX512_BF16, 32 values per instruction) when the
/// CPU has it, else scalar; parallel over threads for large n. src and dst must not overlap.
void f32_to_bf16(const float* src, uint16_t* dst, int64_t n);

/// The two paths separately, for tests. The vector one returns false (and writes nothing) when the CPU lacks
/// AVX512_BF16. Both are single-threaded.
void f32_to_bf16_scalar(const float* src, uint16_t* dst, int64_t n);
bool f32_to_bf16_vector(const float* src, uint16_t* dst, int64_t n);

}  // namespace bertrain::kernels
