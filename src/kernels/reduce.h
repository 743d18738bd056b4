// reduce.h: reductions with a summation order fixed by the data size alone (chunks of kRowChunk rows,
// combined in chunk order), so results are bit-identical for every thread count.
#pragma once

#include <cstdint>

namespace bertrain::kernels {

constexpr int64_t kRowChunk = 256;

/// out[c] (+)= sum over rows r of x[r * cols + c]; x: (rows, cols). When !accumulate out is overwritten.
template <class T>
void sum_rows(const T* x, int64_t rows, int64_t cols, T* out, bool accumulate);

/// Like sum_rows for two inputs at once: outa[c] (+)= sum_r a[r,c] * b[r,c], outb[c] (+)= sum_r a[r,c] (layer
/// norm's gamma and beta gradients: a = dy, b = x_hat). Either output may be null.
template <class T>
void sum_rows_prod(const T* a, const T* b, int64_t rows, int64_t cols, T* out_prod, bool acc_prod, T* out_a,
                   bool acc_a);

/// sum_rows fused with the bf16 rounding of x, in one pass (mixed precision's linear backward: the incoming
/// gradient is rounded to bf16 for the two gradient gemms and summed over rows for the bias gradient while each
/// row is in cache). dst (rows, cols) receives x rounded to bf16 bits as kernels/convert.h's f32_to_bf16 does
/// (the same bits); out[c] (+)= sum over rows r of x[r * cols + c], bit-identical to sum_rows (the same chunks
/// of kRowChunk rows, the same order). x and dst must not overlap.
void sum_rows_to_bf16(const float* x, int64_t rows, int64_t cols, uint16_t* dst, float* out, bool accumulate);

/// Sum of all n elements, in chunks of 4096 combined in order.
template <class T>
double sum_all(const T* x, int64_t n);

}  // namespace bertrain::kernels
