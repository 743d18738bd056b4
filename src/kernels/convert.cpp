// convert.cpp: see convert.h. The AVX512_BF16 path is compiled with a target attribute, so the library
// still builds and runs on CPUs without it (BERTRAIN_NATIVE=OFF or another machine); the choice is made
// once, at run time, from cpuid.
#include "kernels/convert.h"

#include <immintrin.h>

#include <cstring>

namespace bertrain::kernels {

namespace {

#if defined(__x86_64__) && defined(__GNUC__)
#define BERTRAIN_HAVE_BF16_PATH 1
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void convert_avx512bf16(const float* src,
                                                                                        uint16_t* dst,
                                                                                        int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 lo = _mm512_loadu_ps(src + i), hi = _mm512_loadu_ps(src + i + 16);
    const __m512bh r = _mm512_cvtne2ps_pbh(hi, lo);  // words 0-15 from the second operand (lo)
    _mm512_storeu_si512(dst + i, reinterpret_cast<const __m512i&>(r));
  }
  for (; i < n; i += 16) {
    const int64_t left = n - i;
    const __mmask16 m = left >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << left) - 1);
    const __m512 x = _mm512_maskz_loadu_ps(m, src + i);
    const __m256bh r = _mm512_cvtneps_pbh(x);
    _mm256_mask_storeu_epi16(dst + i, m, reinterpret_cast<const __m256i&>(r));
  }
}
#else
#define BERTRAIN_HAVE_BF16_PATH 0
#endif

void convert_scalar(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, src + i, 4);
    dst[i] = f32_to_bf16_bits(u);
  }
}

}  // namespace

bool cpu_has_avx512_bf16() {
#if BERTRAIN_HAVE_BF16_PATH
  static const bool has = __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl");
  return has;
#else
  return false;
#endif
}

void f32_to_bf16_scalar(const float* src, uint16_t* dst, int64_t n) { convert_scalar(src, dst, n); }

bool f32_to_bf16_vector(const float* src, uint16_t* dst, int64_t n) {
#if BERTRAIN_HAVE_BF16_PATH
  if (!cpu_has_avx512_bf16()) return false;
  convert_avx512bf16(src, dst, n);
  return true;
#else
  (void)src, (void)dst, (void)n;
  return false;
#endif
}

void f32_to_bf16(const float* src, uint16_t* dst, int64_t n) {
  constexpr int64_t kChunk = 1 << 15;  // 32768 values: 128 KiB in, 64 KiB out per task
  const bool vec = cpu_has_avx512_bf16();
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t b = c * kChunk, len = n - b < kChunk ? n - b : kChunk;
    if (vec) f32_to_bf16_vector(src + b, dst + b, len);
    else convert_scalar(src + b, dst + b, len);
  }
}

}  // namespace bertrain::kernels
