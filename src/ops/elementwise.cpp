// elementwise.cpp: add, sub, mul (b broadcast over a's leading axes), scale, gelu (erf and tanh), tanh, relu.
#include <algorithm>
#include <cmath>

#include "bertrain/ops/ops.h"
#include "kernels/reduce.h"
#include "kernels/vmath.h"
#include "ops/op_util.h"

namespace bertrain {

namespace {

constexpr int64_t kParallelMin = 32768;

/// Checks that b's shape is a suffix of a's; returns the number of elements of b (the inner block).
int64_t broadcast_inner(const char* op, const Tensor& a, const Tensor& b) {
  detail::check_float(op, a);
  BERTRAIN_CHECK(a.dtype() == b.dtype(), op, ": dtypes differ: ", a.desc(), " and ", b.desc());
  bool ok = b.dim() <= a.dim();
  for (int i = 1; ok && i <= b.dim(); ++i) ok = a.size(-i) == b.size(-i);
  BERTRAIN_CHECK(ok, op, ": shapes ", a.shape().str(), " and ", b.shape().str(),
                 " do not broadcast (the second must match the trailing axes of the first)");
  return b.numel();
}

/// Calls f(i, j, len) for runs [i, i + len) of a flat index over n elements whose broadcast index
/// j = i % inner runs on contiguously (no division per element), in blocks of 8192 elements shared among the
/// threads when n > kParallelMin. Element-wise work only, so the split does not change results.
template <class F>
void for_runs(int64_t n, int64_t inner, F f) {
  constexpr int64_t kBlock = 8192;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t bi = 0; bi < blocks; ++bi) {
    const int64_t i1 = std::min(n, (bi + 1) * kBlock);
    int64_t i = bi * kBlock, j = i % inner;
    while (i < i1) {
      const int64_t len = std::min(i1 - i, inner - j);
      f(i, j, len);
      i += len;
      j = 0;
    }
  }
}

enum class Bin { add, sub, mul };

template <Bin K>
struct BinaryOp {
  static constexpr const char* kName = K == Bin::add ? "add" : K == Bin::sub ? "sub" : "mul";
  struct Saved {
    Tensor a, b;  // only kept for mul
    Shape a_shape, b_shape;
  };
  template <class T>
  static void fwd(const T* a, const T* b, T* y, int64_t n, int64_t inner) {
    for_runs(n, inner, [&](int64_t i, int64_t j, int64_t len) {
#pragma omp simd
      for (int64_t t = 0; t < len; ++t) {
        const T bv = b[j + t];
        if constexpr (K == Bin::add) y[i + t] = a[i + t] + bv;
        else if constexpr (K == Bin::sub) y[i + t] = a[i + t] - bv;
        else y[i + t] = a[i + t] * bv;
      }
    });
  }
  static Tensor forward(const Tensor& a, const Tensor& b) {
    int64_t inner = broadcast_inner(kName, a, b);
    Tensor y = Tensor::empty(a.shape(), a.dtype());
    if (a.numel() == 0) return y;
    BERTRAIN_DISPATCH_FLOAT(a.dtype(), kName, fwd<T>(a.data<T>(), b.data<T>(), y.data<T>(), a.numel(), inner));
    return y;
  }
  template <class T>
  static void bwd(const Saved& sv, const Tensor& dy, std::vector<GradSlot>& g) {
    const int64_t n = dy.numel(), inner = sv.b_shape.numel(), rows = inner ? n / inner : 0;
    const T* d = dy.data<T>();
    if (g[0].needed()) {
      Tensor& da = g[0].prepare(sv.a_shape, dy.dtype());
      T* o = da.data<T>();
      const bool acc = g[0].accumulate;
      const T* bv = K == Bin::mul ? sv.b.template data<T>() : nullptr;
      for_runs(n, inner, [&](int64_t i, int64_t j, int64_t len) {
#pragma omp simd
        for (int64_t t = 0; t < len; ++t) {
          T v = K == Bin::mul ? d[i + t] * bv[j + t] : d[i + t];
          o[i + t] = acc ? o[i + t] + v : v;
        }
      });
    }
    if (g[1].needed()) {
      Tensor& db = g[1].prepare(sv.b_shape, dy.dtype());
      if constexpr (K == Bin::mul) {
        kernels::sum_rows_prod<T>(d, sv.a.template data<T>(), rows, inner, db.data<T>(), g[1].accumulate, nullptr, false);
      } else if constexpr (K == Bin::sub) {
        Tensor tmp = Tensor::empty(sv.b_shape, dy.dtype());
        kernels::sum_rows<T>(d, rows, inner, tmp.data<T>(), false);
        T* o = db.data<T>();
        const T* t = tmp.data<T>();
        for (int64_t i = 0; i < inner; ++i) o[i] = g[1].accumulate ? o[i] - t[i] : -t[i];
      } else {
        kernels::sum_rows<T>(d, rows, inner, db.data<T>(), g[1].accumulate);
      }
    }
  }
  static void backward(const Saved& sv, const Tensor& dy, std::vector<GradSlot>& g) {
    BERTRAIN_DISPATCH_FLOAT(dy.dtype(), kName, bwd<T>(sv, dy, g));
  }
};

template <Bin K>
Variable binary(const Variable& a, const Variable& b) {
  Tensor y = BinaryOp<K>::forward(a.value(), b.value());
  typename BinaryOp<K>::Saved sv{K == Bin::mul ? a.value() : Tensor(), K == Bin::mul ? b.value() : Tensor(),
                                 a.shape(), b.shape()};
  return detail::record<BinaryOp<K>>(y, {a, b}, std::move(sv));
}

struct ScaleOp {
  static constexpr const char* kName = "scale";
  struct Saved {
    double s;
  };
  static void backward(const Saved& sv, const Tensor& dy, std::vector<GradSlot>& g) {
    if (!g[0].needed()) return;
    Tensor& dx = g[0].prepare(dy.shape(), dy.dtype());
    const int64_t n = dy.numel();
    const bool acc = g[0].accumulate;
    BERTRAIN_DISPATCH_FLOAT(dy.dtype(), kName, {
      const T* d = dy.data<T>();
      T* o = dx.data<T>();
      const T s = static_cast<T>(sv.s);
_Pragma("omp parallel for simd if (n > kParallelMin)")
      for (int64_t i = 0; i < n; ++i) o[i] = acc ? o[i] + d[i] * s : d[i] * s;
    });
  }
};

enum class Act { gelu_erf, gelu_tanh, tanh, relu };

template <class T>
inline T act_fwd(Act k, T x) {
  constexpr T kInvSqrt2 = static_cast<T>(0.70710678118654752440);
  constexpr T kSqrt2OverPi = static_cast<T>(0.79788456080286535588);
  switch (k) {
    // Written without 1 + erf(.) and 1 + tanh(.), which cancel for negative x: x * Phi(x) with
    // Phi(x) = erfc(-x / sqrt 2) / 2, and 0.5 (1 + tanh(u)) = sigmoid(2u). Same functions, full f32 accuracy.
    case Act::gelu_erf: return T(0.5) * x * std::erfc(-x * kInvSqrt2);
    case Act::gelu_tanh: return x / (T(1) + std::exp(T(-2) * kSqrt2OverPi * (x + T(0.044715) * x * x * x)));
    case Act::tanh: return std::tanh(x);
    case Act::relu: return x > T(0) ? x : T(0);
  }
  return x;
}

// Derivative in terms of the input x (tanh's uses the saved output instead, see ActOp::bwd).
template <class T>
inline T act_grad(Act k, T x) {
  constexpr T kInvSqrt2 = static_cast<T>(0.70710678118654752440);
  constexpr T kInvSqrt2Pi = static_cast<T>(0.39894228040143267794);
  constexpr T kSqrt2OverPi = static_cast<T>(0.79788456080286535588);
  switch (k) {
    case Act::gelu_erf:  // Phi(x) + x phi(x)
      return T(0.5) * std::erfc(-x * kInvSqrt2) + x * kInvSqrt2Pi * std::exp(T(-0.5) * x * x);
    case Act::gelu_tanh: {  // s = sigmoid(2u) = (1 + tanh u) / 2, 1 - tanh^2 u = 4 s (1 - s)
      T u = kSqrt2OverPi * (x + T(0.044715) * x * x * x);
      T s = T(1) / (T(1) + std::exp(T(-2) * u));
      T du = kSqrt2OverPi * (T(1) + T(3) * T(0.044715) * x * x);
      return s + T(2) * x * s * (T(1) - s) * du;
    }
    case Act::relu: return x > T(0) ? T(1) : T(0);  // subgradient 0 at the kink x = 0
    case Act::tanh: break;
  }
  return T(0);
}

struct ActOp {
  static constexpr const char* kName = "activation";
  struct Saved {
    Tensor x_or_y;  // y for tanh, x otherwise
    Act kind;
  };
  // GELU goes through libmvec's vector erfc / exp (kernels/vmath.h) in fixed chunks of kChunk elements,
  // so every element takes the same path for any thread count.
  static constexpr int64_t kChunk = 4096;
  template <class T>
  static void gelu_chunk(Act k, const T* x, T* y, int64_t n, T* t) {
    constexpr T kInvSqrt2 = static_cast<T>(0.70710678118654752440);
    constexpr T kSqrt2OverPi = static_cast<T>(0.79788456080286535588);
    if (k == Act::gelu_erf) {
      for (int64_t i = 0; i < n; ++i) t[i] = -x[i] * kInvSqrt2;
      kernels::verfc(t, t, n);
      for (int64_t i = 0; i < n; ++i) y[i] = T(0.5) * x[i] * t[i];
    } else {
      for (int64_t i = 0; i < n; ++i) t[i] = T(-2) * kSqrt2OverPi * (x[i] + T(0.044715) * x[i] * x[i] * x[i]);
      kernels::vexp(t, t, n);
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] / (T(1) + t[i]);
    }
  }
  template <class T>
  static void fwd(Act k, const T* x, T* y, int64_t n) {
    if (k == Act::gelu_erf || k == Act::gelu_tanh) {
      const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
      for (int64_t c = 0; c < chunks; ++c) {
        T t[kChunk];
        const int64_t b = c * kChunk, e = std::min(n, b + kChunk);
        gelu_chunk<T>(k, x + b, y + b, e - b, t);
      }
      return;
    }
#pragma omp parallel for simd if (n > 4096)
    for (int64_t i = 0; i < n; ++i) y[i] = act_fwd<T>(k, x[i]);
  }
  // d/dx gelu: erf form Phi(x) + x phi(x); tanh form s + 2 x s (1 - s) du/dx with s = sigmoid(2u).
  template <class T>
  static void gelu_grad_chunk(Act k, const T* x, T* g, int64_t n, T* t1, T* t2) {
    constexpr T kInvSqrt2 = static_cast<T>(0.70710678118654752440);
    constexpr T kInvSqrt2Pi = static_cast<T>(0.39894228040143267794);
    constexpr T kSqrt2OverPi = static_cast<T>(0.79788456080286535588);
    if (k == Act::gelu_erf) {
      for (int64_t i = 0; i < n; ++i) {
        t1[i] = -x[i] * kInvSqrt2;
        t2[i] = T(-0.5) * x[i] * x[i];
      }
      kernels::verfc(t1, t1, n);
      kernels::vexp(t2, t2, n);
      for (int64_t i = 0; i < n; ++i) g[i] = T(0.5) * t1[i] + x[i] * kInvSqrt2Pi * t2[i];
    } else {
      for (int64_t i = 0; i < n; ++i) t1[i] = T(-2) * kSqrt2OverPi * (x[i] + T(0.044715) * x[i] * x[i] * x[i]);
      kernels::vexp(t1, t1, n);
      for (int64_t i = 0; i < n; ++i) {
        const T s = T(1) / (T(1) + t1[i]);
        const T du = kSqrt2OverPi * (T(1) + T(3) * T(0.044715) * x[i] * x[i]);
        g[i] = s + T(2) * x[i] * s * (T(1) - s) * du;
      }
    }
  }
  template <class T>
  static void bwd(const Saved& sv, const Tensor& dy, GradSlot& g) {
    const int64_t n = dy.numel();
    Tensor& dx = g.prepare(dy.shape(), dy.dtype());
    const T* d = dy.data<T>();
    const T* s = sv.x_or_y.data<T>();
    T* o = dx.data<T>();
    const bool acc = g.accumulate;
    const Act k = sv.kind;
    if (k == Act::gelu_erf || k == Act::gelu_tanh) {
      const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
      for (int64_t c = 0; c < chunks; ++c) {
        T t1[kChunk], t2[kChunk], gr[kChunk];
        const int64_t b = c * kChunk, e = std::min(n, b + kChunk);
        gelu_grad_chunk<T>(k, s + b, gr, e - b, t1, t2);
        for (int64_t i = b; i < e; ++i) o[i] = acc ? o[i] + d[i] * gr[i - b] : d[i] * gr[i - b];
      }
      return;
    }
#pragma omp parallel for simd if (n > 4096)
    for (int64_t i = 0; i < n; ++i) {
      T gr = k == Act::tanh ? T(1) - s[i] * s[i] : act_grad<T>(k, s[i]);
      T v = d[i] * gr;
      o[i] = acc ? o[i] + v : v;
    }
  }
  static void backward(const Saved& sv, const Tensor& dy, std::vector<GradSlot>& g) {
    if (!g[0].needed()) return;
    BERTRAIN_DISPATCH_FLOAT(dy.dtype(), kName, bwd<T>(sv, dy, g[0]));
  }
};

template <Act K>
struct NamedAct : ActOp {
  static constexpr const char* kName = K == Act::gelu_erf    ? "gelu_erf"
                                       : K == Act::gelu_tanh ? "gelu_tanh"
                                       : K == Act::tanh      ? "tanh"
                                                             : "relu";
};

template <Act K>
Variable activation(const Variable& x) {
  const Tensor& xv = x.value();
  detail::check_float(NamedAct<K>::kName, xv);
  Tensor y = Tensor::empty(xv.shape(), xv.dtype());
  BERTRAIN_DISPATCH_FLOAT(xv.dtype(), NamedAct<K>::kName, ActOp::fwd<T>(K, xv.data<T>(), y.data<T>(), xv.numel()));
  return detail::record<NamedAct<K>>(y, {x}, {K == Act::tanh ? y : xv, K});
}

}  // namespace

Variable add(const Variable& a, const Variable& b) { return binary<Bin::add>(a, b); }
Variable sub(const Variable& a, const Variable& b) { return binary<Bin::sub>(a, b); }
Variable mul(const Variable& a, const Variable& b) { return binary<Bin::mul>(a, b); }

Variable scale(const Variable& a, double s) {
  const Tensor& av = a.value();
  detail::check_float("scale", av);
  Tensor y = Tensor::empty(av.shape(), av.dtype());
  const int64_t n = av.numel();
  BERTRAIN_DISPATCH_FLOAT(av.dtype(), "scale", {
    const T* x = av.data<T>();
    T* o = y.data<T>();
    const T sv = static_cast<T>(s);
_Pragma("omp parallel for simd if (n > kParallelMin)")
    for (int64_t i = 0; i < n; ++i) o[i] = x[i] * sv;
  });
  return detail::record<ScaleOp>(y, {a}, {s});
}

Variable gelu(const Variable& x, GeluForm form) {
  return form == GeluForm::erf ? activation<Act::gelu_erf>(x) : activation<Act::gelu_tanh>(x);
}
Variable tanh(const Variable& x) { return activation<Act::tanh>(x); }
Variable relu(const Variable& x) { return activation<Act::relu>(x); }

}  // namespace bertrain
