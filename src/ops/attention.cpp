// attention.cpp: fused multi-head attention core: Q K^T, scale + additive mask + softmax + keyed dropout,
// and P V, forward and backward side by side. Q, K, V and the context stay in the (B, T, NH, HS) layout the
// linears produce (strided batched matmuls, kernels::gemm_strided), so no permute copies are made.
#include <algorithm>
#include <cmath>

#include "bertrain/ops/ops.h"
#include "kernels/dropout_mask.h"
#include "kernels/gemm.h"
#include "kernels/vmath.h"
#include "ops/op_util.h"

namespace bertrain {

namespace {

using kernels::GemmStrides;

// Attention dropout's draw index of probability (head, query, key 0) within its sample: ((head * 2^12) + query) *
// 2^12, independent of the padded length, so a token's masks are the same however far its batch is padded and
// on the unpadded path (ops.h, attention()).
constexpr int64_t kAttnKeyStride = int64_t{1} << 12;
inline int64_t attention_dropout_offset(int64_t head, int64_t query) {
  return (head * kAttnKeyStride + query) * kAttnKeyStride;
}

// Under MatmulPrecision::bf16 the four products run as the other matmuls do (matmul.cpp): both operands rounded
// to bf16 by detail::operand (same layout, so the same strides), f32 accumulation and result.
using detail::operand;

// Shapes: q (B, TQ, NH*HS); k, v (B, TK, NH*HS); scores and probabilities (B, NH, TQ, TK).
struct AttnDims {
  int64_t b, tq, tk, nh, hs;
  int64_t h() const { return nh * hs; }
  // Head h of sample b of a (B, T, NH, HS) tensor as a (T, HS) matrix; transposed: (HS, T).
  GemmStrides heads(int64_t t, bool trans) const {
    return trans ? GemmStrides{t * h(), hs, 1, h()} : GemmStrides{t * h(), hs, h(), 1};
  }
  // (B, NH, TQ, TK) as matrices (TQ, TK); transposed: (TK, TQ).
  GemmStrides probs(bool trans) const {
    return trans ? GemmStrides{nh * tq * tk, tq * tk, 1, tk} : GemmStrides{nh * tq * tk, tq * tk, tk, 1};
  }
};

struct AttentionOp {
  static constexpr const char* kName = "attention";
  struct Saved {
    Tensor q, k, v;  // (B, TQ, H), (B, TK, H), (B, TK, H)
    Tensor y;        // softmax before dropout (B, NH, TQ, TK)
    Tensor probs;    // after dropout (the P of P V); the same tensor as y without dropout
    Tensor keep;     // i8 (B, NH, TQ, TK), undefined without dropout
    AttnDims d;
    double scale, drop_scale;
    bool bf16;  // the forward's products ran in bf16: so do the backward's
  };

  // One parallel region over the B*NH*TQ rows: z = x * scale + mask, y = softmax(z) (kept for backward),
  // p = y * keep * drop_scale with the keyed masks dropout() would draw on (B, NH, TQ, TK).
  template <class T>
  static void softmax_dropout_fwd(const AttnDims& d, const T* x, const T* mask, T scale, T* y, T* p, uint8_t* keep,
                                  const DropoutKey& key, uint32_t thr, T ds) {
    const int64_t rows = d.b * d.nh * d.tq, n = d.tk, per_sample = d.nh * d.tq;
#pragma omp parallel for schedule(static) if (rows * n > 16384)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t sample = r / per_sample;
      const T* xr = x + r * n;
      const T* mr = mask ? mask + sample * n : nullptr;
      T* yr = y + r * n;
      // Vector reductions: the max is exact in any order; the sum's order is fixed by the build (not by
      // the thread count), a rounding-level difference from the unfused softmax's sequential sum.
      T mx = -INFINITY;
      if (mr) {
#pragma omp simd reduction(max : mx)
        for (int64_t i = 0; i < n; ++i) {
          const T z = xr[i] * scale + mr[i];
          yr[i] = z;
          mx = std::max(mx, z);
        }
      } else {
#pragma omp simd reduction(max : mx)
        for (int64_t i = 0; i < n; ++i) {
          const T z = xr[i] * scale;
          yr[i] = z;
          mx = std::max(mx, z);
        }
      }
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) yr[i] = yr[i] - mx;
      kernels::vexp(yr, yr, n);
      T s = 0;
#pragma omp simd reduction(+ : s)
      for (int64_t i = 0; i < n; ++i) s += yr[i];
      const T inv = T(1) / s;
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) yr[i] *= inv;
      if (keep) {
        uint8_t* kr = keep + r * n;
        const int64_t head = (r % per_sample) / d.tq, query = (r % per_sample) % d.tq;
        kernels::dropout_keep(key.seed, key.stream, key.first_row + sample, attention_dropout_offset(head, query), n,
                              thr, kr);
        T* pr = p + r * n;
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) pr[i] = kr[i] ? yr[i] * ds : T(0);
      }
    }
  }

  // In place over dp (B, NH, TQ, TK), one parallel region: dy = dp * keep * drop_scale,
  // dx = scale * y * (dy - sum(dy * y)) (the softmax Jacobian times the chain through dropout and the scale).
  template <class T>
  static void softmax_dropout_bwd(const AttnDims& d, T* dp, const T* y, const uint8_t* keep, T ds, T scale) {
    const int64_t rows = d.b * d.nh * d.tq, n = d.tk;
#pragma omp parallel for schedule(static) if (rows * n > 16384)
    for (int64_t r = 0; r < rows; ++r) {
      T* g = dp + r * n;
      const T* yr = y + r * n;
      if (keep) {
        const uint8_t* kr = keep + r * n;
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) g[i] = kr[i] ? g[i] * ds : T(0);
      }
      T s = 0;
#pragma omp simd reduction(+ : s)
      for (int64_t i = 0; i < n; ++i) s += g[i] * yr[i];
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) g[i] = scale * (yr[i] * (g[i] - s));
    }
  }

  template <class T>
  static void bwd(const Saved& sv, const Tensor& dctx, std::vector<GradSlot>& g) {
    const AttnDims& d = sv.d;
    const DType dt = dctx.dtype();
    const GemmStrides hq = d.heads(d.tq, false), hk = d.heads(d.tk, false);
    const bool bf = sv.bf16;
    const DType gdt = bf ? DType::bf16 : dt;  // operand dtype of the products (results stay dt)
    const Tensor dc = operand(dctx, bf);
    // dV = P^T dctx: (TK, TQ) x (TQ, HS).
    if (g[2].needed()) {
      Tensor& dv = g[2].prepare(sv.v.shape(), dt);
      const Tensor pb = operand(sv.probs, bf);
      kernels::gemm_strided(gdt, d.b, d.nh, d.tk, d.hs, d.tq, pb.raw_data(), d.probs(true), dc.raw_data(), hq,
                            dv.raw_data(), hk, g[2].accumulate);
    }
    if (!g[0].needed() && !g[1].needed()) return;
    // dP = dctx V^T: (TQ, HS) x (HS, TK), then turned in place into the gradient of Q K^T.
    Tensor ds = Tensor::empty({d.b, d.nh, d.tq, d.tk}, dt);
    {
      const Tensor vb = operand(sv.v, bf);
      kernels::gemm_strided(gdt, d.b, d.nh, d.tq, d.tk, d.hs, dc.raw_data(), hq, vb.raw_data(), d.heads(d.tk, true),
                            ds.raw_data(), d.probs(false), false);
    }
    softmax_dropout_bwd<T>(d, ds.data<T>(), sv.y.data<T>(),
                           sv.keep.defined() ? reinterpret_cast<const uint8_t*>(sv.keep.data<int8_t>()) : nullptr,
                           static_cast<T>(sv.drop_scale), static_cast<T>(sv.scale));
    const Tensor dsb = operand(ds, bf);
    // dQ = dS K: (TQ, TK) x (TK, HS); dK = dS^T Q: (TK, TQ) x (TQ, HS).
    if (g[0].needed()) {
      Tensor& dq = g[0].prepare(sv.q.shape(), dt);
      const Tensor kb = operand(sv.k, bf);
      kernels::gemm_strided(gdt, d.b, d.nh, d.tq, d.hs, d.tk, dsb.raw_data(), d.probs(false), kb.raw_data(), hk,
                            dq.raw_data(), hq, g[0].accumulate);
    }
    if (g[1].needed()) {
      Tensor& dk = g[1].prepare(sv.k.shape(), dt);
      const Tensor qb = operand(sv.q, bf);
      kernels::gemm_strided(gdt, d.b, d.nh, d.tk, d.hs, d.tq, dsb.raw_data(), d.probs(true), qb.raw_data(), hq,
                            dk.raw_data(), hk, g[1].accumulate);
    }
  }
  static void backward(const Saved& sv, const Tensor& dy, std::vector<GradSlot>& g) {
    BERTRAIN_DISPATCH_FLOAT(dy.dtype(), kName, bwd<T>(sv, dy, g));
  }
};

}  // namespace

Variable attention(const Variable& q, const Variable& k, const Variable& v, int64_t num_heads, const Tensor& mask,
                   double scale, double p, bool training, const DropoutKey& key) {
  const Tensor& qv = q.value();
  const Tensor& kv = k.value();
  const Tensor& vv = v.value();
  detail::check_float("attention", qv);
  BERTRAIN_CHECK(qv.dim() == 3 && kv.dim() == 3 && vv.dim() == 3 && kv.shape() == vv.shape() &&
                     qv.size(0) == kv.size(0) && qv.size(2) == kv.size(2),
                 "attention: q ", qv.shape().str(), ", k ", kv.shape().str(), ", v ", vv.shape().str(),
                 ": expected q (B, TQ, H) and k, v (B, TK, H)");
  BERTRAIN_CHECK(kv.dtype() == qv.dtype() && vv.dtype() == qv.dtype(), "attention: dtypes differ: ", qv.desc(), ", ",
                 kv.desc(), ", ", vv.desc());
  BERTRAIN_CHECK(num_heads > 0 && qv.size(2) % num_heads == 0, "attention: hidden size ", qv.size(2),
                 " is not a multiple of num_heads ", num_heads);
  BERTRAIN_CHECK(p >= 0.0 && p < 1.0, "attention: dropout p must be in [0, 1), got ", p);
  AttnDims d{qv.size(0), qv.size(1), kv.size(1), num_heads, qv.size(2) / num_heads};
  if (mask.defined()) {
    BERTRAIN_CHECK(mask.shape() == Shape({d.b, d.tk}), "attention: mask ", mask.shape().str(),
                   " does not fit k ", kv.shape().str(), ": expected (", d.b, ", ", d.tk, ")");
    BERTRAIN_CHECK(mask.dtype() == qv.dtype(), "attention: mask dtype ", dtype_name(mask.dtype()), " differs from ",
                   dtype_name(qv.dtype()));
  }
  BERTRAIN_CHECK(d.tq <= kAttnKeyStride && d.tk <= kAttnKeyStride && d.nh <= 2048, "attention: ", d.nh, " heads of ",
                 d.tq, " x ", d.tk, " exceed the dropout key space (at most 2048 heads and 4096 positions)");
  const DType dt = qv.dtype();
  const bool bf = detail::bf16_product(qv);
  const DType gdt = bf ? DType::bf16 : dt;  // operand dtype of the products (results stay dt)
  const bool drop = training && p > 0.0;
  // scores = Q K^T per (sample, head): (TQ, HS) x (HS, TK), then scale, mask, softmax, dropout in one pass.
  Tensor y = Tensor::empty({d.b, d.nh, d.tq, d.tk}, dt);
  {
    const Tensor qb = operand(qv, bf), kb = operand(kv, bf);
    kernels::gemm_strided(gdt, d.b, d.nh, d.tq, d.tk, d.hs, qb.raw_data(), d.heads(d.tq, false), kb.raw_data(),
                          d.heads(d.tk, true), y.raw_data(), d.probs(false), false);
  }
  Tensor probs = y, keep;
  const double ds = drop ? 1.0 / (1.0 - p) : 1.0;
  if (drop) {
    probs = Tensor::empty(y.shape(), dt);
    keep = Tensor::empty(y.shape(), DType::i8);
  }
  BERTRAIN_DISPATCH_FLOAT(dt, "attention",
                          AttentionOp::softmax_dropout_fwd<T>(
                              d, y.data<T>(), mask.defined() ? mask.data<T>() : nullptr, static_cast<T>(scale),
                              y.data<T>(), probs.data<T>(), drop ? reinterpret_cast<uint8_t*>(keep.data<int8_t>()) : nullptr,
                              key, kernels::dropout_threshold16(p), static_cast<T>(ds)));
  // ctx = P V: (TQ, TK) x (TK, HS), written straight into the (B, TQ, NH, HS) layout.
  Tensor ctx = Tensor::empty(qv.shape(), dt);
  {
    const Tensor pb = operand(probs, bf), vb = operand(vv, bf);
    kernels::gemm_strided(gdt, d.b, d.nh, d.tq, d.hs, d.tk, pb.raw_data(), d.probs(false), vb.raw_data(),
                          d.heads(d.tk, false), ctx.raw_data(), d.heads(d.tq, false), false);
  }
  return detail::record<AttentionOp>(ctx, {q, k, v}, {qv, kv, vv, y, probs, keep, d, scale, ds, bf});
}

}  // namespace bertrain
