// vmath.h: vectorised exp and erfc over arrays through glibc's libmvec (the _ZGV* SIMD variants of expf,
// erfcf, exp, erfc; documented accuracy within 4 ulp). Arrays are processed in fixed blocks of kBlock
// elements and a partial last block goes through a padded buffer, so every element takes the same SIMD path
// whatever the array length, offset or thread split: results are identical for any thread count.
#pragma once

#include <cstdint>

namespace bertrain::kernels {

constexpr int64_t kVBlock = 16;

/// y[i] = exp(x[i]) for i in [0, n). x and y may alias.
void vexp(const float* x, float* y, int64_t n);
void vexp(const double* x, double* y, int64_t n);
/// y[i] = erfc(x[i]).
void verfc(const float* x, float* y, int64_t n);
void verfc(const double* x, double* y, int64_t n);

}  // namespace bertrain::kernels
