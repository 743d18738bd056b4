// norm.cpp: layer_norm, dropout + residual add + layer_norm fused, softmax with an additive mask, and keyed
// dropout.
#include <algorithm>
#include <cmath>

#include "bertrain/core/rng.h"
#include "bertrain/ops/ops.h"
#include "kernels/dropout_mask.h"
#include "kernels/reduce.h"
#include "kernels/vmath.h"
#include "ops/op_util.h"

namespace bertrain {

namespace {

// One row of layer norm: statistics of s (C values), x_hat and y = x_hat * gamma + beta; returns rstd. y may be s
// (the fused op normalises its sum in place). Shared by layer_norm and dropout_add_layer_norm, so both add in
// the same order and the fused op stays bit-identical to the unfused chain.
template <class T>
inline T layer_norm_row(const T* s, const T* gamma, const T* beta, T* y, T* x_hat, int64_t c, double eps) {
  T m = 0;
#pragma omp simd reduction(+ : m)
  for (int64_t i = 0; i < c; ++i) m += s[i];
  m /= static_cast<T>(c);
  T v = 0;
#pragma omp simd reduction(+ : v)
  for (int64_t i = 0; i < c; ++i) v += (s[i] - m) * (s[i] - m);
  v /= static_cast<T>(c);
  const T rs = T(1) / std::sqrt(v + static_cast<T>(eps));
#pragma omp simd
  for (int64_t i = 0; i < c; ++i) {
    T h = (s[i] - m) * rs;
    x_hat[i] = h;
    y[i] = h * gamma[i] + beta[i];
  }
  return rs;
}

// Layer norm backward's two row means: s1 = mean(dy * gamma), s2 = mean(dy * gamma * x_hat).
template <class T>
inline void layer_norm_row_means(const T* dy, const T* gamma, const T* x_hat, int64_t c, T& s1, T& s2) {
  T a = 0, b = 0;
#pragma omp simd reduction(+ : a, b)
  for (int64_t i = 0; i < c; ++i) {
    T dh = dy[i] * gamma[i];
    a += dh;
    b += dh * x_hat[i];
  }
  s1 = a / static_cast<T>(c);
  s2 = b / static_cast<T>(c);
}

// One row of layer norm's input gradient: dx = rstd * (dy * gamma - mean(dy * gamma) - x_hat * mean(dy * gamma *
// x_hat)), written or (acc) added to dx.
template <class T>
inline void layer_norm_row_input_grad(const T* dy, const T* gamma, const T* x_hat, T rstd, int64_t c, T* dx,
                                      bool acc) {
  T s1, s2;
  layer_norm_row_means(dy, gamma, x_hat, c, s1, s2);
#pragma omp simd
  for (int64_t i = 0; i < c; ++i) {
    T v = rstd * (dy[i] * gamma[i] - s1 - x_hat[i] * s2);
    dx[i] = acc ? dx[i] + v : v;
  }
}

// The gradients of gamma (slot 1: sum of dy * x_hat over rows) and beta (slot 2: sum of dy), where needed.
template <class T>
void layer_norm_param_grads(const T* dy, const T* x_hat, int64_t rows, int64_t c, DType dt, std::vector<GradSlot>& g) {
  T* dg = g[1].needed() ? g[1].prepare({c}, dt).template data<T>() : nullptr;
  T* db = g[2].needed() ? g[2].prepare({c}, dt).template data<T>() : nullptr;
  if (dg || db) kernels::sum_rows_prod<T>(dy, x_hat, rows, c, dg, g[1].accumulate, db, g[2].accumulate);
}

// ---------------------------------------------------------------- layer_norm
// y = x_hat * gamma + beta, x_hat = (x - mean) * rstd, rstd = 1 / sqrt(var + eps) (biased variance).
// Backward (per row, C = row length): dx_hat = dy * gamma;
// dx = rstd * (dx_hat - mean(dx_hat) - x_hat * mean(dx_hat * x_hat)); dgamma = sum_rows dy * x_hat;
// dbeta = sum_rows dy. As llm.c's layernorm_backward and torch.nn.LayerNorm.
struct LayerNormOp {
  static constexpr const char* kName = "layer_norm";
  struct Saved {
    Tensor x_hat, rstd, gamma;  // x_hat: (N, C), rstd: (N), gamma: (C)
    Shape x_shape;
  };
  template <class T>
  static void fwd(const T* x, const T* gamma, const T* beta, T* y, T* x_hat, T* rstd, int64_t rows, int64_t c,
                  double eps) {
#pragma omp parallel for schedule(static) if (rows * c > 16384)
    for (int64_t r = 0; r < rows; ++r)
      rstd[r] = layer_norm_row(x + r * c, gamma, beta, y + r * c, x_hat + r * c, c, eps);
  }
  template <class T>
  static void bwd(const Saved& sv, const Tensor& dy, std::vector<GradSlot>& g) {
    const int64_t c = sv.gamma.numel(), rows = dy.numel() / c;
    const T* d = dy.data<T>();
    const T* h = sv.x_hat.data<T>();
    if (g[0].needed()) {
      Tensor& dx = g[0].prepare(sv.x_shape, dy.dtype());
      T* o = dx.data<T>();
      const T* gm = sv.gamma.data<T>();
      const T* rs = sv.rstd.data<T>();
      const bool acc = g[0].accumulate;
#pragma omp parallel for schedule(static) if (rows * c > 16384)
      for (int64_t r = 0; r < rows; ++r) {
        const T* dr = d + r * c;
        const T* hr = h + r * c;
        layer_norm_row_input_grad(dr, gm, hr, rs[r], c, o + r * c, acc);
      }
    }
    layer_norm_param_grads<T>(d, h, rows, c, dy.dtype(), g);
  }
  static void backward(const Saved& sv, const Tensor& dy, std::vector<GradSlot>& g) {
    BERTRAIN_DISPATCH_FLOAT(dy.dtype(), kName, bwd<T>(sv, dy, g));
  }
};

// ---------------------------------------------------------------- dropout + residual add + layer_norm
// y = layer_norm(s), s = dropout(x) + residual, in one pass per row: the keep-mask, s, its statistics, x_hat and
// y are computed while the row is in cache, and s is never stored. Backward: ds is layer_norm's dx (above);
// d_residual = ds, dx = ds * keep * drop_scale. Same arithmetic, in the same order, as the unfused ops.
struct DropoutAddLayerNormOp {
  static constexpr const char* kName = "dropout_add_layer_norm";
  struct Saved {
    Tensor x_hat, rstd, gamma, keep;  // x_hat: (N, C), rstd: (N), gamma: (C), keep: i8 like x or undefined
    Shape x_shape;
    double drop_scale;
  };
  template <class T>
  static void fwd(const T* x, const T* res, const T* gamma, const T* beta, T* y, T* x_hat, T* rstd, uint8_t* keep,
                  int64_t rows, int64_t c, int64_t rows_per_sample, double eps, const DropoutKey& key, uint32_t thr,
                  T ds) {
    // The sum goes through the output row (same alignment as layer_norm's input row, so the vectorised
    // reductions add in the same order as the unfused ops).
#pragma omp parallel for schedule(static) if (rows * c > 16384)
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = x + r * c;
      const T* rr = res + r * c;
      T* sr = y + r * c;
      if (keep) {
        uint8_t* kr = keep + r * c;
        if (key.tokens)
          kernels::dropout_keep(key.seed, key.stream, key.first_row + key.tokens->sample[r],
                                int64_t{key.tokens->position[r]} * c, c, thr, kr);
        else
          kernels::dropout_keep(key.seed, key.stream, key.first_row + r / rows_per_sample, (r % rows_per_sample) * c,
                                c, thr, kr);
        // Two loops, so the product is rounded before the add (no FMA contraction), as in dropout() then add().
#pragma omp simd
        for (int64_t i = 0; i < c; ++i) sr[i] = kr[i] ? xr[i] * ds : T(0);
#pragma omp simd
        for (int64_t i = 0; i < c; ++i) sr[i] += rr[i];
      } else {
#pragma omp simd
        for (int64_t i = 0; i < c; ++i) sr[i] = xr[i] + rr[i];
      }
      rstd[r] = layer_norm_row(sr, gamma, beta, sr, x_hat + r * c, c, eps);
    }
  }
  template <class T>
  static void bwd(const Saved& sv, const Tensor& dy, std::vector<GradSlot>& g) {
    const int64_t c = sv.gamma.numel(), rows = dy.numel() / c;
    const T* d = dy.data<T>();
    const T* h = sv.x_hat.data<T>();
    if (g[0].needed() || g[1].needed()) {
      T* dx = g[0].needed() ? g[0].prepare(sv.x_shape, dy.dtype()).template data<T>() : nullptr;
      T* dr = g[1].needed() ? g[1].prepare(sv.x_shape, dy.dtype()).template data<T>() : nullptr;
      const bool acc_x = g[0].accumulate, acc_r = g[1].accumulate;
      const T* gm = sv.gamma.data<T>();
      const T* rs = sv.rstd.data<T>();
      const uint8_t* keep = sv.keep.defined() ? reinterpret_cast<const uint8_t*>(sv.keep.data<int8_t>()) : nullptr;
      const T ds = static_cast<T>(sv.drop_scale);
#pragma omp parallel for schedule(static) if (rows * c > 16384)
      for (int64_t r = 0; r < rows; ++r) {
        const T* dyr = d + r * c;
        const T* hr = h + r * c;
        T s1, s2;
        layer_norm_row_means(dyr, gm, hr, c, s1, s2);
        const T rr = rs[r];
        T* xo = dx ? dx + r * c : nullptr;
        T* ro = dr ? dr + r * c : nullptr;
        const uint8_t* kr = keep ? keep + r * c : nullptr;
#pragma omp simd
        for (int64_t i = 0; i < c; ++i) {
          const T v = rr * (dyr[i] * gm[i] - s1 - hr[i] * s2);
          if (ro) ro[i] = acc_r ? ro[i] + v : v;
          if (xo) {
            const T vx = kr ? (kr[i] ? v * ds : T(0)) : v;
            xo[i] = acc_x ? xo[i] + vx : vx;
          }
        }
      }
    }
    T* dg = nullptr;
    T* db = nullptr;
    if (g[2].needed()) dg = g[2].prepare({c}, dy.dtype()).template data<T>();
    if (g[3].needed()) db = g[3].prepare({c}, dy.dtype()).template data<T>();
    if (dg || db) kernels::sum_rows_prod<T>(d, h, rows, c, dg, g[2].accumulate, db, g[3].accumulate);
  }
  static void backward(const Saved& sv, const Tensor& dy, std::vector<GradSlot>& g) {
    BERTRAIN_DISPATCH_FLOAT(dy.dtype(), kName, bwd<T>(sv, dy, g));
  }
};

// ---------------------------------------------------------------- layer_norm + dropout
// y = dropout(layer_norm(x)) in one pass per row (BERT's embeddings: LayerNorm, then dropout): the row is
// normalised, and its keyed mask drawn and applied, while it is in cache. Backward: g = dy * keep * drop_scale
// (dropout's backward), then layer_norm's backward on g. Same arithmetic, in the same order, as the two ops.
struct LayerNormDropoutOp {
  static constexpr const char* kName = "layer_norm_dropout";
  struct Saved {
    Tensor x_hat, rstd, gamma, keep;  // x_hat: (N, C), rstd: (N), gamma: (C), keep: i8 like x or undefined
    Shape x_shape;
    double drop_scale;
  };
  template <class T>
  static void fwd(const T* x, const T* gamma, const T* beta, T* y, T* x_hat, T* rstd, uint8_t* keep, int64_t rows,
                  int64_t c, int64_t rows_per_sample, double eps, const DropoutKey& key, uint32_t thr, T ds) {
#pragma omp parallel for schedule(static) if (rows * c > 16384)
    for (int64_t r = 0; r < rows; ++r) {
      T* yr = y + r * c;
      rstd[r] = layer_norm_row(x + r * c, gamma, beta, yr, x_hat + r * c, c, eps);
      if (!keep) continue;
      uint8_t* kr = keep + r * c;
      if (key.tokens)
        kernels::dropout_keep(key.seed, key.stream, key.first_row + key.tokens->sample[r],
                              int64_t{key.tokens->position[r]} * c, c, thr, kr);
      else
        kernels::dropout_keep(key.seed, key.stream, key.first_row + r / rows_per_sample, (r % rows_per_sample) * c, c,
                              thr, kr);
#pragma omp simd
      for (int64_t i = 0; i < c; ++i) yr[i] = kr[i] ? yr[i] * ds : T(0);
    }
  }
  template <class T>
  static void bwd(const Saved& sv, const Tensor& dy, std::vector<GradSlot>& g) {
    const int64_t c = sv.gamma.numel(), rows = dy.numel() / c;
    const T* h = sv.x_hat.data<T>();
    // The gradient at the layer norm's output: dy itself without dropout, else dy * keep * drop_scale.
    Tensor masked;
    const T* d = dy.data<T>();
    const uint8_t* keep = sv.keep.defined() ? reinterpret_cast<const uint8_t*>(sv.keep.data<int8_t>()) : nullptr;
    if (keep) masked = Tensor::empty({rows, c}, dy.dtype());
    T* m = keep ? masked.data<T>() : nullptr;
    const T ds = static_cast<T>(sv.drop_scale);
    T* dx = g[0].needed() ? g[0].prepare(sv.x_shape, dy.dtype()).template data<T>() : nullptr;
    const bool acc = g[0].accumulate;
    const T* gm = sv.gamma.data<T>();
    const T* rs = sv.rstd.data<T>();
#pragma omp parallel for schedule(static) if (rows * c > 16384)
    for (int64_t r = 0; r < rows; ++r) {
      const T* dr = d + r * c;
      if (m) {
        const uint8_t* kr = keep + r * c;
        T* mr = m + r * c;
#pragma omp simd
        for (int64_t i = 0; i < c; ++i) mr[i] = kr[i] ? dr[i] * ds : T(0);
        dr = mr;
      }
      if (!dx) continue;
      const T* hr = h + r * c;
      layer_norm_row_input_grad(dr, gm, hr, rs[r], c, dx + r * c, acc);
    }
    layer_norm_param_grads<T>(m ? m : d, h, rows, c, dy.dtype(), g);
  }
  static void backward(const Saved& sv, const Tensor& dy, std::vector<GradSlot>& g) {
    BERTRAIN_DISPATCH_FLOAT(dy.dtype(), kName, bwd<T>(sv, dy, g));
  }
};

// ---------------------------------------------------------------- softmax
// y = softmax(x + mask) over the last axis; dx = y * (dy - sum(dy * y)).
struct SoftmaxOp {
  static constexpr const char* kName = "softmax";
  struct Saved {
    Tensor y;
  };
  template <class T>
  static void fwd(const T* x, const T* mask, T* y, int64_t rows, int64_t n, int64_t rows_per_sample) {
#pragma omp parallel for schedule(static) if (rows * n > 16384)
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = x + r * n;
      const T* mr = mask ? mask + (r / rows_per_sample) * n : nullptr;
      T* yr = y + r * n;
      T mx = -INFINITY;
      for (int64_t i = 0; i < n; ++i) mx = std::max(mx, mr ? xr[i] + mr[i] : xr[i]);
      for (int64_t i = 0; i < n; ++i) yr[i] = (mr ? xr[i] + mr[i] : xr[i]) - mx;
      kernels::vexp(yr, yr, n);
      T s = 0;
      for (int64_t i = 0; i < n; ++i) s += yr[i];
      const T inv = T(1) / s;
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) yr[i] *= inv;
    }
  }
  template <class T>
  static void bwd(const Saved& sv, const Tensor& dy, GradSlot& g) {
    const int64_t n = sv.y.size(-1), rows = n ? sv.y.numel() / n : 0;
    Tensor& dx = g.prepare(dy.shape(), dy.dtype());
    const T* d = dy.data<T>();
    const T* y = sv.y.data<T>();
    T* o = dx.data<T>();
    const bool acc = g.accumulate;
#pragma omp parallel for schedule(static) if (rows * n > 16384)
    for (int64_t r = 0; r < rows; ++r) {
      const T* dr = d + r * n;
      const T* yr = y + r * n;
      T* orow = o + r * n;
      T s = 0;
#pragma omp simd reduction(+ : s)
      for (int64_t i = 0; i < n; ++i) s += dr[i] * yr[i];
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) {
        T v = yr[i] * (dr[i] - s);
        orow[i] = acc ? orow[i] + v : v;
      }
    }
  }
  static void backward(const Saved& sv, const Tensor& dy, std::vector<GradSlot>& g) {
    if (!g[0].needed()) return;
    BERTRAIN_DISPATCH_FLOAT(dy.dtype(), kName, bwd<T>(sv, dy, g[0]));
  }
};

// ---------------------------------------------------------------- dropout
struct DropoutOp {
  static constexpr const char* kName = "dropout";
  struct Saved {
    Tensor keep;  // i8, 1 = kept
    double scale;
  };
  static void backward(const Saved& sv, const Tensor& dy, std::vector<GradSlot>& g) {
    if (!g[0].needed()) return;
    Tensor& dx = g[0].prepare(dy.shape(), dy.dtype());
    const int64_t n = dy.numel();
    const int8_t* k = sv.keep.data<int8_t>();
    const bool acc = g[0].accumulate;
    BERTRAIN_DISPATCH_FLOAT(dy.dtype(), kName, {
      const T* d = dy.data<T>();
      T* o = dx.data<T>();
      const T s = static_cast<T>(sv.scale);
_Pragma("omp parallel for simd if (n > 32768)")
      for (int64_t i = 0; i < n; ++i) {
        T v = k[i] ? d[i] * s : T(0);
        o[i] = acc ? o[i] + v : v;
      }
    });
  }
};

// The checks and buffers the two fused layer-norm + dropout ops share: x (.., C) with gamma and beta (C); rows =
// numel / C, rows_per_sample for the dropout key; y, x_hat (rows, C), rstd (rows), keep (x's shape, i8) when dropping.
struct NormDropoutSetup {
  int64_t c, rows, rows_per_sample;
  bool drop;
  double ds;  // 1 / (1 - p) when dropping, else 1
  Tensor y, x_hat, rstd, keep;
};

NormDropoutSetup norm_dropout_setup(const char* op, const Tensor& xv, const Variable& gamma, const Variable& beta,
                                    double eps, double p, bool training, const DropoutKey& key) {
  const int64_t c = xv.size(-1);
  BERTRAIN_CHECK(gamma.value().shape() == Shape({c}) && beta.value().shape() == Shape({c}), op, ": input ",
                 xv.shape().str(), " needs gamma and beta of shape (", c, "), got ", gamma.value().shape().str(),
                 " and ", beta.value().shape().str());
  BERTRAIN_CHECK(gamma.dtype() == xv.dtype() && beta.dtype() == xv.dtype(), op, ": dtypes differ: ", xv.desc(),
                 ", ", gamma.value().desc(), ", ", beta.value().desc());
  BERTRAIN_CHECK(eps >= 0, op, ": eps must be >= 0, got ", eps);
  BERTRAIN_CHECK(p >= 0.0 && p < 1.0, op, ": dropout p must be in [0, 1), got ", p);
  const int64_t rows = c ? xv.numel() / c : 0;
  const int64_t rows_per_sample = xv.dim() >= 2 && xv.size(0) ? rows / xv.size(0) : 1;
  BERTRAIN_CHECK(rows_per_sample * c < (int64_t{1} << 35), op, ": ", rows_per_sample * c,
                 " elements per sample exceed the dropout key space");
  const bool drop = training && p > 0.0;
  BERTRAIN_CHECK(!drop || !key.tokens || (xv.dim() == 2 && static_cast<int64_t>(key.tokens->sample.size()) == rows),
                 op, ": packed tokens' dropout key has ", key.tokens ? key.tokens->sample.size() : 0,
                 " rows, input ", xv.shape().str());
  Tensor y = Tensor::empty(xv.shape(), xv.dtype());
  Tensor x_hat = Tensor::empty({rows, c}, xv.dtype());
  Tensor rstd = Tensor::empty({rows}, xv.dtype());
  Tensor keep = drop ? Tensor::empty(xv.shape(), DType::i8) : Tensor();
  const double ds = drop ? 1.0 / (1.0 - p) : 1.0;
  return {c, rows, rows_per_sample, drop, ds, y, x_hat, rstd, keep};
}

}  // namespace

Variable layer_norm(const Variable& x, const Variable& gamma, const Variable& beta, double eps) {
  const Tensor& xv = x.value();
  detail::check_float("layer_norm", xv);
  BERTRAIN_CHECK(xv.dim() >= 1, "layer_norm: input ", xv.shape().str(), " has no last axis");
  const int64_t c = xv.size(-1);
  BERTRAIN_CHECK(gamma.value().shape() == Shape({c}) && beta.value().shape() == Shape({c}),
                 "layer_norm: input ", xv.shape().str(), " needs gamma and beta of shape (", c, "), got ",
                 gamma.value().shape().str(), " and ", beta.value().shape().str());
  BERTRAIN_CHECK(gamma.dtype() == xv.dtype() && beta.dtype() == xv.dtype(), "layer_norm: dtypes differ: ",
                 xv.desc(), ", ", gamma.value().desc(), ", ", beta.value().desc());
  BERTRAIN_CHECK(eps >= 0, "layer_norm: eps must be >= 0, got ", eps);
  const int64_t rows = c ? xv.numel() / c : 0;
  Tensor y = Tensor::empty(xv.shape(), xv.dtype());
  Tensor x_hat = Tensor::empty({rows, c}, xv.dtype());
  Tensor rstd = Tensor::empty({rows}, xv.dtype());
  BERTRAIN_DISPATCH_FLOAT(xv.dtype(), "layer_norm",
                          LayerNormOp::fwd<T>(xv.data<T>(), gamma.value().data<T>(), beta.value().data<T>(),
                                              y.data<T>(), x_hat.data<T>(), rstd.data<T>(), rows, c, eps));
  return detail::record<LayerNormOp>(y, {x, gamma, beta}, {x_hat, rstd, gamma.value(), xv.shape()});
}

Variable dropout_add_layer_norm(const Variable& x, const Variable& residual, const Variable& gamma,
                                const Variable& beta, double eps, double p, bool training, const DropoutKey& key) {
  const char* op = "dropout_add_layer_norm";
  const Tensor& xv = x.value();
  const Tensor& rv = residual.value();
  detail::check_float(op, xv);
  BERTRAIN_CHECK(xv.dim() >= 1 && rv.shape() == xv.shape() && rv.dtype() == xv.dtype(), op, ": input ",
                 xv.desc(), " and residual ", rv.desc(), " must have the same shape and dtype");
  auto [c, rows, rows_per_sample, drop, ds, y, x_hat, rstd, keep] =
      norm_dropout_setup(op, xv, gamma, beta, eps, p, training, key);
  BERTRAIN_DISPATCH_FLOAT(
      xv.dtype(), op,
      DropoutAddLayerNormOp::fwd<T>(xv.data<T>(), rv.data<T>(), gamma.value().data<T>(), beta.value().data<T>(),
                                    y.data<T>(), x_hat.data<T>(), rstd.data<T>(),
                                    drop ? reinterpret_cast<uint8_t*>(keep.data<int8_t>()) : nullptr, rows, c,
                                    rows_per_sample, eps, key, kernels::dropout_threshold16(p), static_cast<T>(ds)));
  return detail::record<DropoutAddLayerNormOp>(y, {x, residual, gamma, beta},
                                               {x_hat, rstd, gamma.value(), keep, xv.shape(), ds});
}

Variable layer_norm_dropout(const Variable& x, const Variable& gamma, const Variable& beta, double eps, double p,
                            bool training, const DropoutKey& key) {
  const char* op = "layer_norm_dropout";
  const Tensor& xv = x.value();
  detail::check_float(op, xv);
  BERTRAIN_CHECK(xv.dim() >= 1, op, ": input ", xv.shape().str(), " has no last axis");
  auto [c, rows, rows_per_sample, drop, ds, y, x_hat, rstd, keep] =
      norm_dropout_setup(op, xv, gamma, beta, eps, p, training, key);
  BERTRAIN_DISPATCH_FLOAT(
      xv.dtype(), op,
      LayerNormDropoutOp::fwd<T>(xv.data<T>(), gamma.value().data<T>(), beta.value().data<T>(), y.data<T>(),
                                 x_hat.data<T>(), rstd.data<T>(),
                                 drop ? reinterpret_cast<uint8_t*>(keep.data<int8_t>()) : nullptr, rows, c,
                                 rows_per_sample, eps, key, kernels::dropout_threshold16(p), static_cast<T>(ds)));
  return detail::record<LayerNormDropoutOp>(y, {x, gamma, beta}, {x_hat, rstd, gamma.value(), keep, xv.shape(), ds});
}

Variable softmax(const Variable& x, const Tensor& mask) {
  const Tensor& xv = x.value();
  detail::check_float("softmax", xv);
  BERTRAIN_CHECK(xv.dim() >= 1, "softmax: input ", xv.shape().str(), " has no last axis");
  const int64_t n = xv.size(-1), rows = n ? xv.numel() / n : 0;
  int64_t rows_per_sample = 1;
  if (mask.defined()) {
    BERTRAIN_CHECK(mask.dim() == 2 && xv.dim() >= 2 && mask.size(0) == xv.size(0) && mask.size(1) == n,
                   "softmax: mask ", mask.shape().str(), " does not fit input ", xv.shape().str(),
                   ": expected (", xv.dim() >= 2 ? xv.size(0) : 0, ", ", n, ")");
    BERTRAIN_CHECK(mask.dtype() == xv.dtype(), "softmax: mask dtype ", dtype_name(mask.dtype()), " differs from ",
                   dtype_name(xv.dtype()));
    rows_per_sample = rows / xv.size(0);
  }
  Tensor y = Tensor::empty(xv.shape(), xv.dtype());
  BERTRAIN_DISPATCH_FLOAT(xv.dtype(), "softmax",
                          SoftmaxOp::fwd<T>(xv.data<T>(), mask.defined() ? mask.data<T>() : nullptr, y.data<T>(),
                                            rows, n, rows_per_sample));
  return detail::record<SoftmaxOp>(y, {x}, {y});
}

Variable dropout(const Variable& x, double p, bool training, const DropoutKey& key) {
  BERTRAIN_CHECK(p >= 0.0 && p < 1.0, "dropout: p must be in [0, 1), got ", p);
  if (!training || p == 0.0) return x;
  const Tensor& xv = x.value();
  detail::check_float("dropout", xv);
  BERTRAIN_CHECK(xv.dim() >= 1, "dropout: input ", xv.shape().str(), " needs a sample axis");
  const int64_t n = xv.numel(), rows = xv.size(0), per_row = rows ? n / rows : 0;
  BERTRAIN_CHECK(per_row < (int64_t{1} << 35), "dropout: ", per_row, " elements per sample exceed the key space");
  BERTRAIN_CHECK(!key.tokens || (xv.dim() == 2 && static_cast<int64_t>(key.tokens->sample.size()) == rows),
                 "dropout: packed tokens' key has ", key.tokens ? key.tokens->sample.size() : 0, " rows, input ",
                 xv.shape().str());
  Tensor keep = Tensor::empty(xv.shape(), DType::i8);
  Tensor y = Tensor::empty(xv.shape(), xv.dtype());
  uint8_t* k = reinterpret_cast<uint8_t*>(keep.data<int8_t>());
  const double sc = 1.0 / (1.0 - p);
  const uint32_t thr = kernels::dropout_threshold16(p);
  BERTRAIN_DISPATCH_FLOAT(xv.dtype(), "dropout",
                          kernels::dropout_forward<T>(xv.data<T>(), y.data<T>(), k, rows, per_row, key.seed, key.stream,
                                                      key.first_row, thr, static_cast<T>(sc),
                                                      key.tokens ? key.tokens->sample.data() : nullptr,
                                                      key.tokens ? key.tokens->position.data() : nullptr));
  return detail::record<DropoutOp>(y, {x}, {keep, sc});
}

}  // namespace bertrain
