// dtype.h: element types of a Tensor, and the bf16 storage type with round-to-nearest-even conversion.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace bertrain {

/// Element types. f32 computes, f64 is for gradient checks, bf16 stores (mixed precision);
/// the integer types carry token ids, masks and labels.
enum class DType : uint8_t { f32, f64, bf16, i32, i64, i8 };

/// Size of one element in bytes.
size_t dtype_size(DType t);
/// "f32", "f64", "bf16", "i32", "i64", "i8".
const char* dtype_name(DType t);
/// True for f32, f64 and bf16.
bool dtype_is_float(DType t);

/// bfloat16: the upper 16 bits of an IEEE float32. Conversion from float, the one rule of every path in bertrain
/// (this one, the matmuls' scalar fallback and the AVX512_BF16 instruction VCVTNE2PS2BF16 give the same bits for
/// all 2^32 inputs; tests/ops/bf16_exhaustive_test.cpp): round to nearest, ties to even; finite values beyond the
/// largest bf16 become +-Inf; NaN becomes a quiet NaN keeping the sign and the upper payload ((bits >> 16) |
/// 0x40); zero and f32 subnormals (|x| < 2^-126) become a signed zero, because the instruction treats subnormal
/// inputs as zero (Intel SDM vol. 2; PyTorch's scalar conversion would keep them).
struct bf16 {
  uint16_t bits = 0;
  bf16() = default;
  explicit bf16(float f) : bits(from_float(f)) {}
  explicit operator float() const { return to_float(bits); }
  static uint16_t from_float(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return from_float_bits(u);
  }
  /// from_float on the bits of a float.
  static uint16_t from_float_bits(uint32_t u) {
    if ((u & 0x7f800000u) == 0) return static_cast<uint16_t>((u >> 16) & 0x8000u);        // zero, subnormal
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
  }
  static float to_float(uint16_t b) {
    uint32_t u = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

template <class T>
struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::f32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::f64; };
template <> struct DTypeOf<bf16> { static constexpr DType value = DType::bf16; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::i32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::i64; };
template <> struct DTypeOf<int8_t> { static constexpr DType value = DType::i8; };
template <class T>
inline constexpr DType dtype_of = DTypeOf<T>::value;

}  // namespace bertrain
