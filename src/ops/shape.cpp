// shape.cpp: reshape (a view), permute/transpose, slice and concat (copies), sum and mean.
#include <cstring>
#include <numeric>

#include "bertrain/ops/ops.h"
#include "kernels/reduce.h"
#include "ops/op_util.h"

namespace bertrain {

namespace {

struct ReshapeOp {
  static constexpr const char* kName = "reshape";
  struct Saved {
    Shape in_shape;
  };
  static void backward(const Saved& sv, const Tensor& dy, std::vector<GradSlot>& g) {
    if (g[0].needed()) g[0].add(dy.reshape(sv.in_shape));
  }
};

/// out[perm-index] = in: copies x into the permuted layout. The last axis is copied in runs when unchanged.
Tensor permute_copy(const Tensor& x, const std::vector<int>& perm) {
  const int nd = x.dim();
  Shape out_shape;
  for (int i = 0; i < nd; ++i) out_shape.push_back(x.size(perm[i]));
  Tensor y = Tensor::empty(out_shape, x.dtype());
  const int64_t n = x.numel();
  if (n == 0) return y;
  std::vector<int64_t> in_stride(nd, 1);
  for (int i = nd - 2; i >= 0; --i) in_stride[i] = in_stride[i + 1] * x.size(i + 1);
  // Run length: trailing output axes that are also the input's trailing axes in order.
  int tail = 0;
  while (tail < nd && perm[nd - 1 - tail] == nd - 1 - tail) ++tail;
  int64_t run = 1;
  for (int i = nd - tail; i < nd; ++i) run *= x.size(i);
  const int outer_nd = nd - tail;
  const int64_t runs = n / run;
  const size_t es = dtype_size(x.dtype());
  const char* src = static_cast<const char*>(x.raw_data());
  char* dst = static_cast<char*>(y.raw_data());
#pragma omp parallel for schedule(static) if (n > 32768)
  for (int64_t r = 0; r < runs; ++r) {
    int64_t rem = r, off = 0;
    for (int i = outer_nd - 1; i >= 0; --i) {
      const int64_t d = out_shape[i];
      off += (rem % d) * in_stride[perm[i]];
      rem /= d;
    }
    if (run == 1) std::memcpy(dst + r * es, src + off * es, es);
    else std::memcpy(dst + r * run * es, src + off * es, run * es);
  }
  return y;
}

struct PermuteOp {
  static constexpr const char* kName = "permute";
  struct Saved {
    std::vector<int> inverse;
  };
  static void backward(const Saved& sv, const Tensor& dy, std::vector<GradSlot>& g) {
    if (g[0].needed()) g[0].add(permute_copy(dy, sv.inverse));
  }
};

/// Copies the block [begin, end) of axis `dim` between a full tensor and a sliced one.
/// to_slice: full -> part; otherwise part -> full (adding when accumulate).
void slice_copy(const Tensor& full, const Tensor& part, int dim, int64_t begin, bool to_slice, bool accumulate) {
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < dim; ++i) outer *= full.size(i);
  for (int i = dim + 1; i < full.dim(); ++i) inner *= full.size(i);
  const int64_t fl = full.size(dim), pl = part.size(dim);
  const size_t es = dtype_size(full.dtype());
  char* f = static_cast<char*>(full.raw_data());
  char* p = static_cast<char*>(part.raw_data());
  if (accumulate && !to_slice) {
    BERTRAIN_DISPATCH_FLOAT(full.dtype(), "slice", {
      T* ft = reinterpret_cast<T*>(f);
      const T* pt = reinterpret_cast<const T*>(p);
_Pragma("omp parallel for schedule(static) if (outer * pl * inner > 32768)")
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < pl * inner; ++i) ft[(o * fl + begin) * inner + i] += pt[o * pl * inner + i];
    });
    return;
  }
#pragma omp parallel for schedule(static) if (outer * pl * inner > 32768)
  for (int64_t o = 0; o < outer; ++o) {
    char* fp = f + ((o * fl + begin) * inner) * es;
    char* pp = p + (o * pl * inner) * es;
    if (to_slice) std::memcpy(pp, fp, pl * inner * es);
    else std::memcpy(fp, pp, pl * inner * es);
  }
}

struct SliceOp {
  static constexpr const char* kName = "slice";
  struct Saved {
    Shape in_shape;
    int dim;
    int64_t begin;
  };
  static void backward(const Saved& sv, const Tensor& dy, std::vector<GradSlot>& g) {
    if (!g[0].needed()) return;
    const bool acc = g[0].accumulate;
    Tensor& dx = g[0].prepare(sv.in_shape, dy.dtype());
    if (!acc) dx.zero();
    slice_copy(dx, dy, sv.dim, sv.begin, false, true);
  }
};

struct ConcatOp {
  static constexpr const char* kName = "concat";
  struct Saved {
    int dim;
    std::vector<int64_t> offsets;  // start of each input along dim
    std::vector<Shape> shapes;
  };
  static void backward(const Saved& sv, const Tensor& dy, std::vector<GradSlot>& g) {
    for (size_t i = 0; i < g.size(); ++i) {
      if (!g[i].needed()) continue;
      Tensor part = Tensor::empty(sv.shapes[i], dy.dtype());
      slice_copy(dy, part, sv.dim, sv.offsets[i], true, false);
      g[i].add(part);
    }
  }
};

struct SumOp {
  static constexpr const char* kName = "sum";
  struct Saved {
    Shape in_shape;
    double factor;  // 1 for sum, 1/n for mean
  };
  static void backward(const Saved& sv, const Tensor& dy, std::vector<GradSlot>& g) {
    if (!g[0].needed()) return;
    Tensor& dx = g[0].prepare(sv.in_shape, dy.dtype());
    const double v = dy.item() * sv.factor;
    const bool acc = g[0].accumulate;
    const int64_t n = dx.numel();
    BERTRAIN_DISPATCH_FLOAT(dy.dtype(), kName, {
      T* o = dx.data<T>();
      const T tv = static_cast<T>(v);
_Pragma("omp parallel for simd if (n > 32768)")
      for (int64_t i = 0; i < n; ++i) o[i] = acc ? o[i] + tv : tv;
    });
  }
};

int norm_dim(const char* op, int dim, const Tensor& x) {
  int d = dim < 0 ? dim + x.dim() : dim;
  BERTRAIN_CHECK(d >= 0 && d < x.dim(), op, ": axis ", dim, " is out of range for shape ", x.shape().str());
  return d;
}

Variable reduce_all(const char* name, const Variable& x, bool is_mean) {
  const Tensor& xv = x.value();
  detail::check_float(name, xv);
  double s = 0;
  BERTRAIN_DISPATCH_FLOAT(xv.dtype(), name, s = kernels::sum_all<T>(xv.data<T>(), xv.numel()));
  const double factor = is_mean ? 1.0 / static_cast<double>(std::max<int64_t>(xv.numel(), 1)) : 1.0;
  Tensor y = Tensor::full({}, s * factor, xv.dtype());
  return detail::record<SumOp>(y, {x}, {xv.shape(), factor});
}

}  // namespace

Variable reshape(const Variable& x, const Shape& shape) {
  Tensor y = x.value().reshape(shape);
  return detail::record<ReshapeOp>(y, {x}, {x.shape()});
}

Variable permute(const Variable& x, const std::vector<int>& perm) {
  const Tensor& xv = x.value();
  BERTRAIN_CHECK(static_cast<int>(perm.size()) == xv.dim(), "permute: ", perm.size(), " axes given for shape ",
                 xv.shape().str());
  std::vector<int> inverse(perm.size(), -1);
  for (size_t i = 0; i < perm.size(); ++i) {
    BERTRAIN_CHECK(perm[i] >= 0 && perm[i] < xv.dim() && inverse[perm[i]] < 0, "permute: axes are not a ",
                   "permutation of 0..", xv.dim() - 1, " for shape ", xv.shape().str());
    inverse[perm[i]] = static_cast<int>(i);
  }
  return detail::record<PermuteOp>(permute_copy(xv, perm), {x}, {inverse});
}

Variable transpose(const Variable& x, int d0, int d1) {
  const Tensor& xv = x.value();
  int a = norm_dim("transpose", d0, xv), b = norm_dim("transpose", d1, xv);
  std::vector<int> perm(xv.dim());
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[a], perm[b]);
  return permute(x, perm);
}

Variable slice(const Variable& x, int dim, int64_t begin, int64_t end) {
  const Tensor& xv = x.value();
  int d = norm_dim("slice", dim, xv);
  BERTRAIN_CHECK(0 <= begin && begin <= end && end <= xv.size(d), "slice: [", begin, ", ", end, ") along axis ", dim,
                 " is out of range for shape ", xv.shape().str());
  Shape os = xv.shape();
  os[d] = end - begin;
  Tensor y = Tensor::empty(os, xv.dtype());
  slice_copy(xv, y, d, begin, true, false);
  return detail::record<SliceOp>(y, {x}, {xv.shape(), d, begin});
}

Variable concat(const std::vector<Variable>& xs, int dim) {
  BERTRAIN_CHECK(!xs.empty(), "concat: no inputs");
  const Tensor& first = xs[0].value();
  int d = norm_dim("concat", dim, first);
  Shape os = first.shape();
  os[d] = 0;
  ConcatOp::Saved sv{d, {}, {}};
  for (const Variable& v : xs) {
    const Tensor& t = v.value();
    bool ok = t.dim() == first.dim() && t.dtype() == first.dtype();
    for (int i = 0; ok && i < t.dim(); ++i) ok = i == d || t.size(i) == first.size(i);
    BERTRAIN_CHECK(ok, "concat: along axis ", dim, ", ", t.desc(), " does not fit ", first.desc());
    sv.offsets.push_back(os[d]);
    sv.shapes.push_back(t.shape());
    os[d] += t.size(d);
  }
  Tensor y = Tensor::empty(os, first.dtype());
  for (size_t i = 0; i < xs.size(); ++i) slice_copy(y, xs[i].value(), d, sv.offsets[i], false, false);
  return detail::record<ConcatOp>(y, xs, std::move(sv));
}

Variable sum(const Variable& x) { return reduce_all("sum", x, false); }
Variable mean(const Variable& x) { return reduce_all("mean", x, true); }

}  // namespace bertrain
