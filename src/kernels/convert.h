// convert.h: f32 -> bf16 conversion for the mixed-precision matmuls (ops/matmul.cpp). The rule is bf16::from_float
// (core/dtype.h: nearest even, NaN -> quiet NaN, zero and subnormal inputs -> signed zero), which is what the
// AVX512_BF16 instruction VCVTNE2PS2BF16 does (it ignores MXCSR and treats subnormal inputs as zero, Intel SDM
// vol. 2): the vector path and the scalar fallback give the same bits for every input, so results never depend
// on the CPU (tests/ops/bf16_exhaustive_test.cpp checks all 2^32).
#pragma once

#include <cstdint>

#include "bertrain/core/dtype.h"

namespace bertrain::kernels {

/// The conversion of one value (the scalar fallback): bf16::from_float_bits.
inline uint16_t f32_to_bf16_bits(uint32_t u) { return bf16::from_float_bits(u); }

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
