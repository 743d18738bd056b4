// gemm.h: the one matrix-product kernel everything uses: c (+)= op(a) * op(b) (+ bias), batched.
// f32 goes through oneDNN's matmul primitive (created once per shape and cached), f64 through Eigen,
// bf16 operands through oneDNN's bf16 matmul with f32 accumulation and an f32 result (mixed precision).
#pragma once

#include <cstdint>
#include <memory>

#include "bertrain/core/tensor.h"

namespace bertrain::kernels {

struct GemmShape {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
};

/// What gemm() applies to each element of its result, inside the product.
enum class GemmEpilogue { none, gelu_erf, gelu_tanh };

/// a holds batch x (M, K) matrices ((K, M) when trans_a), b batch x (K, N) ((N, K) when trans_b),
/// c batch x (M, N). When `accumulate`, c += product, else c = product. bias: (N) or null, added to every row.
/// dtypes: a, b, c, bias all f64; or all f32; or a and b bf16 with c and bias f32 (products accumulated in f32
/// by oneDNN; AVX512_BF16 kernels when the CPU has them, oneDNN's slower bf16 emulation otherwise).
/// act: a function applied to each element of the result (product + bias) inside the product, as a oneDNN eltwise
/// post-op on each block of c while it is in cache (eltwise_gelu_erf, eltwise_gelu_tanh: oneDNN's polynomial
/// approximations of erf and tanh, a few ulp of f32, not libm's); f32 or bf16 operands only, not with accumulate.
void gemm(const GemmShape& s, const Tensor& a, const Tensor& b, Tensor& c, bool accumulate,
          const Tensor* bias = nullptr, GemmEpilogue act = GemmEpilogue::none);

/// A weight W (N, K) of the product y = x W^T, reordered once into the blocked layout oneDNN's f32 matmul prefers
/// for it (oneDNN's format_tag::any; on BERT's shapes the same layout for every M), so products with it skip
/// reading W in its plain layout and packing it on every call: prediction's constant weights, as ONNX Runtime
/// pre-packs a model's constant MatMul weights when a session loads. Holds a copy (N * K floats, about the size of W).
struct PackedWeights {
  int64_t n = 0, k = 0;
  std::shared_ptr<void> impl;  // the reordered dnnl::memory and its descriptor
};

/// Packs `w` (f32, (N, K) row-major). Throws bertrain::Error for another dtype or rank.
PackedWeights pack_weights(const Tensor& w);

/// y (M, N) = x (M, K) W^T + bias (N, or null), act inside the product, with `w` packed by pack_weights; f32 only.
/// The same values as gemm({1, M, N, K, false, true}, x, W, y, false, bias, act) (the same kernel, the packing done
/// ahead). Returns false, computing nothing, when oneDNN's primitive for this M wants another weights layout than
/// the packed one (the caller then calls gemm with W).
bool gemm_packed(const Tensor& x, const PackedWeights& w, Tensor& y, const Tensor* bias,
                 GemmEpilogue act = GemmEpilogue::none);

/// Element strides of one operand of gemm_strided: batch axes 1 and 2, then the row and column of each matrix.
struct GemmStrides {
  int64_t b1 = 0, b2 = 0, row = 0, col = 1;
};

/// Batched product over a (b1, b2) grid of matrices addressed by explicit element strides: for each (i, j),
/// C_ij (+)= A_ij B_ij with A_ij (m, k), B_ij (k, n), C_ij (m, n); a transposed operand is a swap of its row and
/// column strides. Lets attention read Q, K, V in their (B, T, NH, HS) layout and write the context there, with
/// no permute copies (oneDNN's memory descriptors take arbitrary strides). f32 through oneDNN (primitives
/// cached by shape and strides), f64 through Eigen. `dt` is the dtype of all three operands, except bf16: then a
/// and b are bf16 and c is f32 (oneDNN's bf16 matmul, f32 accumulation), as in gemm().
void gemm_strided(DType dt, int64_t b1, int64_t b2, int64_t m, int64_t n, int64_t k, const void* a,
                  const GemmStrides& sa, const void* b, const GemmStrides& sb, void* c, const GemmStrides& sc,
                  bool accumulate);

/// One small product on the calling thread, for ops that run many of them inside their own parallel region (no
/// oneDNN call, no primitive, no threads; Eigen's kernels): C (m, n) (+)= op(A) op(B), where A is stored row-major
/// as (m, k) with row stride lda, or as (k, m) when trans_a; B as (k, n) with row stride ldb, or (n, k) when
/// trans_b; C row-major with row stride ldc. T is float or double. Used by attention_varlen, whose per-sequence
/// products are too small for a oneDNN call each (its fixed cost, ~0.1 ms with OpenMP's fork and join, was 25% of
/// a bert-mini step on short text).
template <class T>
void gemm_serial(int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, bool trans_a, const T* b, int64_t ldb,
                 bool trans_b, T* c, int64_t ldc, bool accumulate);

/// Number of distinct oneDNN matmul primitives created so far (they are cached by shape).
int64_t gemm_primitives_created();
/// Number of primitives cached now (gemm's and gemm_strided's caches together). Each cache holds at most 2048
/// and is emptied when full, so varying shapes (the unpadded encoder's token count) cannot grow it without bound.
int64_t gemm_primitives_cached();

/// True when oneDNN runs bf16 matmuls natively here (its effective ISA includes AVX512_BF16, which
/// DNNL_MAX_CPU_ISA can lower). False: bf16 gemms still work but oneDNN emulates them, slower than f32.
bool gemm_bf16_native();
/// True when oneDNN has any bf16 matmul here: its effective ISA includes AVX-512 (avx512_core; emulated
/// without AVX512_BF16). oneDNN 2.6 has none for AVX2-only CPUs.
bool gemm_bf16_supported();

}  // namespace bertrain::kernels
