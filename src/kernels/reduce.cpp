// reduce.cpp: deterministic parallel reductions (see reduce.h).
#include "kernels/reduce.h"

#include <algorithm>
#include <vector>

#include "kernels/convert.h"

namespace bertrain::kernels {

template <class T>
void sum_rows_prod(const T* a, const T* b, int64_t rows, int64_t cols, T* out_prod, bool acc_prod, T* out_a,
                   bool acc_a) {
  const int64_t chunks = (rows + kRowChunk - 1) / kRowChunk;
  std::vector<T> pp(out_prod ? chunks * cols : 0), pa(out_a ? chunks * cols : 0);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t ch = 0; ch < chunks; ++ch) {
    T* sp = out_prod ? pp.data() + ch * cols : nullptr;
    T* sa = out_a ? pa.data() + ch * cols : nullptr;
    for (int64_t c = 0; c < cols; ++c) {
      if (sp) sp[c] = 0;
      if (sa) sa[c] = 0;
    }
    const int64_t r1 = std::min(rows, (ch + 1) * kRowChunk);
    for (int64_t r = ch * kRowChunk; r < r1; ++r) {
      const T* ar = a + r * cols;
      if (sp) {
        const T* br = b + r * cols;
#pragma omp simd
        for (int64_t c = 0; c < cols; ++c) sp[c] += ar[c] * br[c];
      }
      if (sa) {
#pragma omp simd
        for (int64_t c = 0; c < cols; ++c) sa[c] += ar[c];
      }
    }
  }
  auto combine = [&](std::vector<T>& part, T* out, bool acc) {
    for (int64_t c = 0; c < cols; ++c) {
      T s = 0;
      for (int64_t ch = 0; ch < chunks; ++ch) s += part[ch * cols + c];
      out[c] = acc ? out[c] + s : s;
    }
  };
  if (out_prod) combine(pp, out_prod, acc_prod);
  if (out_a) combine(pa, out_a, acc_a);
}

template <class T>
void sum_rows(const T* x, int64_t rows, int64_t cols, T* out, bool accumulate) {
  sum_rows_prod<T>(x, nullptr, rows, cols, nullptr, false, out, accumulate);
}

void sum_rows_to_bf16(const float* x, int64_t rows, int64_t cols, uint16_t* dst, float* out, bool accumulate) {
  const int64_t chunks = (rows + kRowChunk - 1) / kRowChunk;
  const bool vec = cpu_has_avx512_bf16();
  std::vector<float> pa(chunks * cols);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t ch = 0; ch < chunks; ++ch) {
    float* sa = pa.data() + ch * cols;
    for (int64_t c = 0; c < cols; ++c) sa[c] = 0;
    const int64_t r1 = std::min(rows, (ch + 1) * kRowChunk);
    for (int64_t r = ch * kRowChunk; r < r1; ++r) {
      const float* ar = x + r * cols;
      if (vec) f32_to_bf16_vector(ar, dst + r * cols, cols);
      else f32_to_bf16_scalar(ar, dst + r * cols, cols);
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) sa[c] += ar[c];  // sum_rows_prod's loop: the same order
    }
  }
  for (int64_t c = 0; c < cols; ++c) {
    float s = 0;
    for (int64_t ch = 0; ch < chunks; ++ch) s += pa[ch * cols + c];
    out[c] = accumulate ? out[c] + s : s;
  }
}

template <class T>
double sum_all(const T* x, int64_t n) {
  constexpr int64_t kChunk = 4096;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> part(chunks);
#pragma omp parallel for schedule(static) if (chunks > 8)
  for (int64_t ch = 0; ch < chunks; ++ch) {
    double s = 0;
    const int64_t e = std::min(n, (ch + 1) * kChunk);
    for (int64_t i = ch * kChunk; i < e; ++i) s += x[i];
    part[ch] = s;
  }
  double s = 0;
  for (double p : part) s += p;
  return s;
}

template void sum_rows<float>(const float*, int64_t, int64_t, float*, bool);
template void sum_rows<double>(const double*, int64_t, int64_t, double*, bool);
template void sum_rows_prod<float>(const float*, const float*, int64_t, int64_t, float*, bool, float*, bool);
template void sum_rows_prod<double>(const double*, const double*, int64_t, int64_t, double*, bool, double*, bool);
template double sum_all<float>(const float*, int64_t);
template double sum_all<double>(const double*, int64_t);

}  // namespace bertrain::kernels
