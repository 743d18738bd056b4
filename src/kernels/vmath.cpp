// vmath.cpp: see vmath.h. The declarations below are the ones glibc's <bits/math-vector.h> makes under
// -ffast-math; declaring them here lets GCC call libmvec without changing floating-point semantics elsewhere.
#include "kernels/vmath.h"

#include <algorithm>

extern "C" {
#pragma omp declare simd notinbranch
float expf(float);
#pragma omp declare simd notinbranch
float erfcf(float);
#pragma omp declare simd notinbranch
double exp(double);
#pragma omp declare simd notinbranch
double erfc(double);
}

namespace bertrain::kernels {

namespace {

template <class T, class F>
inline void blocked(const T* x, T* y, int64_t n, F f) {
  const int64_t full = n / kVBlock * kVBlock;
  for (int64_t b = 0; b < full; b += kVBlock) f(x + b, y + b);
  if (full < n) {
    T in[kVBlock] = {}, out[kVBlock];
    std::copy(x + full, x + n, in);
    f(in, out);
    std::copy(out, out + (n - full), y + full);
  }
}

}  // namespace

void vexp(const float* x, float* y, int64_t n) {
  blocked(x, y, n, [](const float* a, float* b) {
#pragma omp simd
    for (int i = 0; i < kVBlock; ++i) b[i] = expf(a[i]);
  });
}
void vexp(const double* x, double* y, int64_t n) {
  blocked(x, y, n, [](const double* a, double* b) {
#pragma omp simd
    for (int i = 0; i < kVBlock; ++i) b[i] = exp(a[i]);
  });
}
void verfc(const float* x, float* y, int64_t n) {
  blocked(x, y, n, [](const float* a, float* b) {
#pragma omp simd
    for (int i = 0; i < kVBlock; ++i) b[i] = erfcf(a[i]);
  });
}
void verfc(const double* x, double* y, int64_t n) {
  blocked(x, y, n, [](const double* a, double* b) {
#pragma omp simd
    for (int i = 0; i < kVBlock; ++i) b[i] = erfc(a[i]);
  });
}

}  // namespace bertrain::kernels
