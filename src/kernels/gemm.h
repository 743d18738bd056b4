// gemm.h: the one matrix-product kernel everything uses: c (+)= op(a) * op(b) (+ bias), batched.
// f32 goes through oneDNN's matmul primitive (created once per shape and cached), f64 through Eigen.
#pragma once

#include <cstdint>

#include "bertrain/core/tensor.h"

namespace bertrain::kernels {

struct GemmShape {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
};

/// a holds batch x (M, K) matrices ((K, M) when trans_a), b batch x (K, N) ((N, K) when trans_b),
/// c batch x (M, N). When `accumulate`, c += product, else c = product. bias: (N) or null, added to every row.
void gemm(const GemmShape& s, const Tensor& a, const Tensor& b, Tensor& c, bool accumulate,
          const Tensor* bias = nullptr);

/// Number of distinct oneDNN matmul primitives created so far (they are cached by shape).
int64_t gemm_primitives_created();

}  // namespace bertrain::kernels
