// index.cpp: embedding lookup, row gather and softmax cross-entropy.
#include <algorithm>
#include <cmath>

#include "bertrain/ops/ops.h"
#include "kernels/vmath.h"
#include "ops/op_util.h"

namespace bertrain {

namespace {

/// Checks ids are i32 and within [0, v); names the op and the first bad position.
void check_ids(const char* op, const Tensor& ids, int64_t v) {
  BERTRAIN_CHECK(ids.dtype() == DType::i32, op, ": ids must be i32, got ", ids.desc());
  const int32_t* p = ids.data<int32_t>();
  for (int64_t i = 0; i < ids.numel(); ++i)
    BERTRAIN_CHECK(p[i] >= 0 && p[i] < v, op, ": id ", p[i], " at position ", i, " is outside [0, ", v, ")");
}

// Rows of table (V, H) at ids (M). Backward scatter-adds dy rows into the table gradient; columns are split
// across threads and ids visited in order, so repeated ids accumulate in a fixed order.
struct GatherOp {
  static constexpr const char* kName = "gather_rows";
  struct Saved {
    Tensor ids;
    Shape table_shape;
  };
  // An id of -1 (gather_rows_or_zero only) gives a row of zeros and takes no gradient.
  template <class T>
  static void fwd(const T* tab, const int32_t* ids, T* y, int64_t m, int64_t h) {
#pragma omp parallel for schedule(static) if (m * h > 32768)
    for (int64_t i = 0; i < m; ++i) {
      if (ids[i] < 0) std::fill(y + i * h, y + i * h + h, T(0));
      else std::copy(tab + ids[i] * h, tab + ids[i] * h + h, y + i * h);
    }
  }
  template <class T>
  static void bwd(const Saved& sv, const Tensor& dy, GradSlot& g) {
    const int64_t h = sv.table_shape[1], m = sv.ids.numel();
    Tensor& dt = g.prepare(sv.table_shape, dy.dtype());
    if (!g.accumulate) dt.zero();
    T* o = dt.data<T>();
    const T* d = dy.data<T>();
    const int32_t* ids = sv.ids.data<int32_t>();
    constexpr int64_t kCols = 64;
    const int64_t blocks = (h + kCols - 1) / kCols;
#pragma omp parallel for schedule(static) if (m * h > 32768)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t c0 = b * kCols, c1 = std::min(h, c0 + kCols);
      for (int64_t i = 0; i < m; ++i) {
        if (ids[i] < 0) continue;
        T* orow = o + ids[i] * h;
        const T* drow = d + i * h;
        for (int64_t c = c0; c < c1; ++c) orow[c] += drow[c];
      }
    }
  }
  static void backward(const Saved& sv, const Tensor& dy, std::vector<GradSlot>& g) {
    if (!g[0].needed()) return;
    BERTRAIN_DISPATCH_FLOAT(dy.dtype(), kName, bwd<T>(sv, dy, g[0]));
  }
};

Variable gather(const char* op, const Variable& table, const Tensor& ids, Shape out_shape) {
  const Tensor& t = table.value();
  detail::check_float(op, t);
  BERTRAIN_CHECK(t.dim() == 2, op, ": table ", t.shape().str(), " must be 2-d (rows, features)");
  check_ids(op, ids, t.size(0));
  const int64_t h = t.size(1), m = ids.numel();
  out_shape.push_back(h);
  Tensor y = Tensor::empty(out_shape, t.dtype());
  BERTRAIN_DISPATCH_FLOAT(t.dtype(), op, GatherOp::fwd<T>(t.data<T>(), ids.data<int32_t>(), y.data<T>(), m, h));
  return detail::record<GatherOp>(y, {table}, {ids.clone(), t.shape()});
}

// loss = sum_i w_i (logsumexp(x_i) - x_i[y_i]) / normalizer; dx_i = dloss * w_i / normalizer * (p_i - e_{y_i}).
// The forward keeps the softmax probabilities p (rows with weight 0 are left untouched and never read).
struct CrossEntropyOp {
  static constexpr const char* kName = "cross_entropy";
  struct Saved {
    Tensor probs, labels, w;  // probs: (N, C); w: effective weights (N) in the logits' dtype
    double normalizer;
  };
  // The gradient w * up * (probs - onehot(label)) is written over the saved probabilities when the slot is
  // fresh (the node dies after its backward), so no second (N, C) buffer is allocated.
  template <class T>
  static void bwd(Saved& sv, const Tensor& dy, GradSlot& g) {
    const int64_t n = sv.probs.size(0), c = sv.probs.size(1);
    const bool acc = g.accumulate;
    if (!acc) *g.grad = std::move(sv.probs);
    Tensor& dx = acc ? g.prepare(sv.probs.shape(), dy.dtype()) : *g.grad;
    const T* pr = acc ? sv.probs.data<T>() : dx.data<T>();
    const int32_t* y = sv.labels.data<int32_t>();
    const T* w = sv.w.data<T>();
    T* o = dx.data<T>();
    const T up = static_cast<T>(dy.item() / sv.normalizer);
#pragma omp parallel for schedule(static) if (n * c > 16384)
    for (int64_t i = 0; i < n; ++i) {
      const T* pi = pr + i * c;
      T* orow = o + i * c;
      const T wi = w[i] * up;
      if (wi == T(0)) {
        if (!acc) std::fill(orow, orow + c, T(0));
        continue;
      }
      if (acc) {
#pragma omp simd
        for (int64_t j = 0; j < c; ++j) orow[j] += wi * pi[j];
      } else {
#pragma omp simd
        for (int64_t j = 0; j < c; ++j) orow[j] = wi * orow[j];
      }
      orow[y[i]] -= wi;
    }
  }
  static void backward(Saved& sv, const Tensor& dy, std::vector<GradSlot>& g) {
    if (!g[0].needed()) return;
    BERTRAIN_DISPATCH_FLOAT(dy.dtype(), kName, bwd<T>(sv, dy, g[0]));
  }
};

}  // namespace

Variable embedding(const Variable& table, const Tensor& ids) { return gather("embedding", table, ids, ids.shape()); }

Variable gather_rows_or_zero(const Variable& x, const Tensor& idx) {
  BERTRAIN_CHECK(idx.dim() == 1 && idx.dtype() == DType::i32, "gather_rows_or_zero: indices must be i32 (M), got ",
                 idx.desc());
  const Tensor& t = x.value();
  BERTRAIN_CHECK(t.dim() == 2, "gather_rows_or_zero: x ", t.shape().str(), " must be 2-d (rows, features)");
  const int32_t* p = idx.data<int32_t>();
  for (int64_t i = 0; i < idx.numel(); ++i)
    BERTRAIN_CHECK(p[i] >= -1 && p[i] < t.size(0), "gather_rows_or_zero: index ", p[i], " at ", i,
                   " is outside [-1, ", t.size(0), ")");
  detail::check_float("gather_rows_or_zero", t);
  const int64_t h = t.size(1), m = idx.numel();
  Tensor y = Tensor::empty({m, h}, t.dtype());
  BERTRAIN_DISPATCH_FLOAT(t.dtype(), "gather_rows_or_zero",
                          GatherOp::fwd<T>(t.data<T>(), p, y.data<T>(), m, h));
  return detail::record<GatherOp>(y, {x}, {idx.clone(), t.shape()});
}

Variable gather_rows(const Variable& x, const Tensor& idx) {
  BERTRAIN_CHECK(idx.dim() == 1, "gather_rows: indices must be 1-d, got ", idx.shape().str());
  return gather("gather_rows", x, idx, idx.shape());
}

Variable cross_entropy(const Variable& logits, const Tensor& labels, const Tensor& weights, double normalizer,
                       int32_t ignore_index) {
  const Tensor& x = logits.value();
  detail::check_float("cross_entropy", x);
  BERTRAIN_CHECK(x.dim() == 2, "cross_entropy: logits must be (N, C), got ", x.shape().str());
  const int64_t n = x.size(0), c = x.size(1);
  BERTRAIN_CHECK(labels.dtype() == DType::i32 && labels.shape() == Shape({n}), "cross_entropy: logits ",
                 x.shape().str(), " need i32 labels of shape (", n, "), got ", labels.desc());
  if (weights.defined())
    BERTRAIN_CHECK(weights.numel() == n && dtype_is_float(weights.dtype()), "cross_entropy: logits ", x.shape().str(),
                   " need weights of shape (", n, "), got ", weights.desc());
  BERTRAIN_CHECK(normalizer > 0 && std::isfinite(normalizer), "cross_entropy: normalizer must be positive, got ",
                 normalizer);
  const int32_t* y = labels.data<int32_t>();
  Tensor w = Tensor::empty({n}, x.dtype());
  for (int64_t i = 0; i < n; ++i) {
    if (y[i] == ignore_index) {
      w.set(i, 0.0);
      continue;
    }
    BERTRAIN_CHECK(y[i] >= 0 && y[i] < c, "cross_entropy: label ", y[i], " in row ", i, " is outside [0, ", c, ")");
    w.set(i, weights.defined() ? weights.get(i) : 1.0);
  }
  double total = 0;
  Tensor probs = Tensor::empty({n, c}, x.dtype());
  BERTRAIN_DISPATCH_FLOAT(x.dtype(), "cross_entropy", {
    const T* xs = x.data<T>();
    const T* ws = w.data<T>();
    T* ps = probs.data<T>();
    std::vector<double> ce(static_cast<size_t>(n), 0.0);
_Pragma("omp parallel for schedule(static) if (n * c > 16384)")
    for (int64_t i = 0; i < n; ++i) {
      if (ws[i] == T(0)) continue;
      const T* xr = xs + i * c;
      T* pr = ps + i * c;
      T mx = -INFINITY;
_Pragma("omp simd reduction(max : mx)")
      for (int64_t j = 0; j < c; ++j) mx = std::max(mx, xr[j]);
_Pragma("omp simd")
      for (int64_t j = 0; j < c; ++j) pr[j] = xr[j] - mx;
      kernels::vexp(pr, pr, c);
      T s = 0;
_Pragma("omp simd reduction(+ : s)")
      for (int64_t j = 0; j < c; ++j) s += pr[j];
      const T inv = T(1) / s;
_Pragma("omp simd")
      for (int64_t j = 0; j < c; ++j) pr[j] *= inv;
      ce[static_cast<size_t>(i)] = static_cast<double>(ws[i]) * (static_cast<double>(mx + std::log(s)) - xr[y[i]]);
    }
    for (double v : ce) total += v;
  });
  Tensor out = Tensor::full({}, total / normalizer, x.dtype());
  return detail::record<CrossEntropyOp>(out, {logits}, {probs, labels.clone(), w, normalizer});
}

}  // namespace bertrain
