// attention.cpp: fused multi-head attention core: Q K^T, scale + additive mask + softmax + keyed dropout,
// and P V, forward and backward side by side. Q, K, V and the context stay in the (B, T, NH, HS) layout the
// linears produce (strided batched matmuls, kernels::gemm_strided), so no permute copies are made.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "bertrain/core/dtype.h"
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

// Shapes: q (B, TQ, NH*HS); k, v (B, TK, NH*HS); scores and probabilities (B, NH, TQ, TK). q, k and v (and their
// gradients) are rows of ld elements: ld = H for three separate tensors, 3H for the fused projection's (B, T, 3H)
// output (attention_qkv), where Q, K and V start at columns 0, H and 2H. The context is always (B, TQ, H).
struct AttnDims {
  int64_t b, tq, tk, nh, hs;
  int64_t ld;
  int64_t h() const { return nh * hs; }
  // Head h of sample b of q, k or v (rows of ld) as a (T, HS) matrix; transposed: (HS, T).
  GemmStrides heads(int64_t t, bool trans) const {
    return trans ? GemmStrides{t * ld, hs, 1, ld} : GemmStrides{t * ld, hs, ld, 1};
  }
  // The same for the context (B, TQ, NH, HS) and its gradient.
  GemmStrides ctx(int64_t t) const { return GemmStrides{t * h(), hs, h(), 1}; }
  // (B, NH, TQ, TK) as matrices (TQ, TK); transposed: (TK, TQ).
  GemmStrides probs(bool trans) const {
    return trans ? GemmStrides{nh * tq * tk, tq * tk, 1, tk} : GemmStrides{nh * tq * tk, tq * tk, tk, 1};
  }
};

// One row of attention probabilities, forward: z = x * scale + mask, y = softmax(z) (kept for backward) and, with
// keep, p = y * keep * ds with the keyed masks of (sample, head, query) (attention_dropout_offset). The max is a
// vector reduction (exact in any order); the sum's order is fixed by the build (not by the thread count), a
// rounding-level difference from the unfused softmax's sequential sum.
template <class T>
void softmax_dropout_row(const T* xr, const T* mr, int64_t n, T scale, T* yr, T* pr, uint8_t* kr,
                         const DropoutKey& key, int64_t sample, int64_t head, int64_t query, uint32_t thr, T ds) {
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
  if (kr) {
    kernels::dropout_keep(key.seed, key.stream, sample, attention_dropout_offset(head, query), n, thr, kr);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) pr[i] = kr[i] ? yr[i] * ds : T(0);
  }
}

// One row backward, in place over g (the gradient of P): g = g * keep * ds, then
// g = scale * y * (g - sum(g * y)) (the softmax Jacobian times the chain through dropout and the scale).
template <class T>
void softmax_dropout_row_bwd(T* g, const T* yr, const uint8_t* kr, int64_t n, T ds, T scale) {
  if (kr) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) g[i] = kr[i] ? g[i] * ds : T(0);
  }
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += g[i] * yr[i];
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) g[i] = scale * (yr[i] * (g[i] - s));
}

// Where q, k and v (and so their gradients) live: three tensors (the op's inputs 0, 1, 2), or one packed (B, T, 3H)
// tensor (input 0) with each at its own column offset; element offsets of row 0 within their tensors.
struct QkvLayout {
  bool packed = false;
  int64_t q_off = 0, k_off = 0, v_off = 0;
};

// The gradient destinations of q, k, v for a backward: base pointers (offset into a packed gradient) and whether
// each accumulates; null where no gradient is needed.
struct QkvGrads {
  char* q = nullptr;
  char* k = nullptr;
  char* v = nullptr;
  bool acc_q = false, acc_k = false, acc_v = false;
  static QkvGrads prepare(const QkvLayout& l, const Tensor& q, const Tensor& k, const Tensor& v, DType dt,
                          std::vector<GradSlot>& g) {
    QkvGrads r;
    const int64_t osz = static_cast<int64_t>(dtype_size(dt));
    if (l.packed) {
      if (!g[0].needed()) return r;
      char* base = static_cast<char*>(g[0].prepare(q.shape(), dt).raw_data());
      r.q = base + l.q_off * osz;
      r.k = base + l.k_off * osz;
      r.v = base + l.v_off * osz;
      r.acc_q = r.acc_k = r.acc_v = g[0].accumulate;
      return r;
    }
    if (g[0].needed()) r.q = static_cast<char*>(g[0].prepare(q.shape(), dt).raw_data()), r.acc_q = g[0].accumulate;
    if (g[1].needed()) r.k = static_cast<char*>(g[1].prepare(k.shape(), dt).raw_data()), r.acc_k = g[1].accumulate;
    if (g[2].needed()) r.v = static_cast<char*>(g[2].prepare(v.shape(), dt).raw_data()), r.acc_v = g[2].accumulate;
    return r;
  }
};

// bf16 (or as-is) operands of q, k, v for the products: a packed tensor is rounded once for all three.
struct QkvOperands {
  const QkvLayout& l;
  bool bf;
  Tensor packed;
  Tensor get(const Tensor& t) {
    if (!l.packed) return operand(t, bf);
    if (!packed.defined()) packed = operand(t, bf);
    return packed;
  }
};

inline const char* at(const Tensor& t, int64_t elems) {
  return static_cast<const char*>(t.raw_data()) + elems * static_cast<int64_t>(dtype_size(t.dtype()));
}

struct AttentionOp {
  static constexpr const char* kName = "attention";
  struct Saved {
    Tensor q, k, v;  // (B, TQ, H), (B, TK, H), (B, TK, H); or the same (B, T, 3H) tensor three times
    Tensor y;        // softmax before dropout (B, NH, TQ, TK)
    Tensor probs;    // after dropout (the P of P V); the same tensor as y without dropout
    Tensor keep;     // i8 (B, NH, TQ, TK), undefined without dropout
    AttnDims d;
    QkvLayout layout;
    double scale, drop_scale;
    bool bf16;  // the forward's products ran in bf16: so do the backward's
  };

  // One parallel region over the B*NH*TQ rows (softmax_dropout_row each).
  template <class T>
  static void softmax_dropout_fwd(const AttnDims& d, const T* x, const T* mask, T scale, T* y, T* p, uint8_t* keep,
                                  const DropoutKey& key, uint32_t thr, T ds) {
    const int64_t rows = d.b * d.nh * d.tq, n = d.tk, per_sample = d.nh * d.tq;
#pragma omp parallel for schedule(static) if (rows * n > 16384)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t sample = r / per_sample, head = (r % per_sample) / d.tq, query = (r % per_sample) % d.tq;
      softmax_dropout_row<T>(x + r * n, mask ? mask + sample * n : nullptr, n, scale, y + r * n,
                             keep ? p + r * n : nullptr, keep ? keep + r * n : nullptr, key, key.first_row + sample,
                             head, query, thr, ds);
    }
  }

  // In place over dp (B, NH, TQ, TK), one parallel region (softmax_dropout_row_bwd each).
  template <class T>
  static void softmax_dropout_bwd(const AttnDims& d, T* dp, const T* y, const uint8_t* keep, T ds, T scale) {
    const int64_t rows = d.b * d.nh * d.tq, n = d.tk;
#pragma omp parallel for schedule(static) if (rows * n > 16384)
    for (int64_t r = 0; r < rows; ++r)
      softmax_dropout_row_bwd<T>(dp + r * n, y + r * n, keep ? keep + r * n : nullptr, n, ds, scale);
  }

  template <class T>
  static void bwd(const Saved& sv, const Tensor& dctx, std::vector<GradSlot>& g) {
    const AttnDims& d = sv.d;
    const QkvLayout& l = sv.layout;
    const DType dt = dctx.dtype();
    const GemmStrides hq = d.heads(d.tq, false), hk = d.heads(d.tk, false), cq = d.ctx(d.tq);
    const bool bf = sv.bf16;
    const DType gdt = bf ? DType::bf16 : dt;  // operand dtype of the products (results stay dt)
    const Tensor dc = operand(dctx, bf);
    const QkvGrads gr = QkvGrads::prepare(l, sv.q, sv.k, sv.v, dt, g);
    QkvOperands ops{l, bf, Tensor()};
    // dV = P^T dctx: (TK, TQ) x (TQ, HS).
    if (gr.v) {
      const Tensor pb = operand(sv.probs, bf);
      kernels::gemm_strided(gdt, d.b, d.nh, d.tk, d.hs, d.tq, pb.raw_data(), d.probs(true), dc.raw_data(), cq, gr.v,
                            hk, gr.acc_v);
    }
    if (!gr.q && !gr.k) return;
    // dP = dctx V^T: (TQ, HS) x (HS, TK), then turned in place into the gradient of Q K^T.
    Tensor ds = Tensor::empty({d.b, d.nh, d.tq, d.tk}, dt);
    {
      const Tensor vb = ops.get(sv.v);
      kernels::gemm_strided(gdt, d.b, d.nh, d.tq, d.tk, d.hs, dc.raw_data(), cq, at(vb, l.v_off), d.heads(d.tk, true),
                            ds.raw_data(), d.probs(false), false);
    }
    softmax_dropout_bwd<T>(d, ds.data<T>(), sv.y.data<T>(),
                           sv.keep.defined() ? reinterpret_cast<const uint8_t*>(sv.keep.data<int8_t>()) : nullptr,
                           static_cast<T>(sv.drop_scale), static_cast<T>(sv.scale));
    const Tensor dsb = operand(ds, bf);
    // dQ = dS K: (TQ, TK) x (TK, HS); dK = dS^T Q: (TK, TQ) x (TQ, HS).
    if (gr.q) {
      const Tensor kb = ops.get(sv.k);
      kernels::gemm_strided(gdt, d.b, d.nh, d.tq, d.hs, d.tk, dsb.raw_data(), d.probs(false), at(kb, l.k_off), hk,
                            gr.q, hq, gr.acc_q);
    }
    if (gr.k) {
      const Tensor qb = ops.get(sv.q);
      kernels::gemm_strided(gdt, d.b, d.nh, d.tk, d.hs, d.tq, dsb.raw_data(), d.probs(true), at(qb, l.q_off), hq,
                            gr.k, hk, gr.acc_k);
    }
  }
  static void backward(const Saved& sv, const Tensor& dy, std::vector<GradSlot>& g) {
    BERTRAIN_DISPATCH_FLOAT(dy.dtype(), kName, bwd<T>(sv, dy, g));
  }
};

}  // namespace

namespace {

// The forward of attention() and attention_qkv(): q, k, v are the values of `inputs` in `layout`.
Variable attention_forward(const std::vector<Variable>& inputs, const Tensor& qv, const Tensor& kv, const Tensor& vv,
                           const QkvLayout& layout, AttnDims d, const Tensor& mask, double scale, double p,
                           bool training, const DropoutKey& key) {
  if (mask.defined()) {
    BERTRAIN_CHECK(mask.shape() == Shape({d.b, d.tk}), "attention: mask ", mask.shape().str(), " does not fit k ",
                   kv.shape().str(), ": expected (", d.b, ", ", d.tk, ")");
    BERTRAIN_CHECK(mask.dtype() == qv.dtype(), "attention: mask dtype ", dtype_name(mask.dtype()), " differs from ",
                   dtype_name(qv.dtype()));
  }
  BERTRAIN_CHECK(d.tq <= kAttnKeyStride && d.tk <= kAttnKeyStride && d.nh <= 2048, "attention: ", d.nh, " heads of ",
                 d.tq, " x ", d.tk, " exceed the dropout key space (at most 2048 heads and 4096 positions)");
  const DType dt = qv.dtype();
  const bool bf = detail::bf16_product(qv);
  const DType gdt = bf ? DType::bf16 : dt;  // operand dtype of the products (results stay dt)
  const bool drop = training && p > 0.0;
  QkvOperands ops{layout, bf, Tensor()};
  // scores = Q K^T per (sample, head): (TQ, HS) x (HS, TK), then scale, mask, softmax, dropout in one pass.
  Tensor y = Tensor::empty({d.b, d.nh, d.tq, d.tk}, dt);
  {
    const Tensor qb = ops.get(qv), kb = ops.get(kv);
    kernels::gemm_strided(gdt, d.b, d.nh, d.tq, d.tk, d.hs, at(qb, layout.q_off), d.heads(d.tq, false),
                          at(kb, layout.k_off), d.heads(d.tk, true), y.raw_data(), d.probs(false), false);
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
  Tensor ctx = Tensor::empty({d.b, d.tq, d.h()}, dt);
  {
    const Tensor pb = operand(probs, bf), vb = ops.get(vv);
    kernels::gemm_strided(gdt, d.b, d.nh, d.tq, d.hs, d.tk, pb.raw_data(), d.probs(false), at(vb, layout.v_off),
                          d.heads(d.tk, false), ctx.raw_data(), d.ctx(d.tq), false);
  }
  return detail::record<AttentionOp>(ctx, inputs, {qv, kv, vv, y, probs, keep, d, layout, scale, ds, bf});
}

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
  const AttnDims d{qv.size(0), qv.size(1), kv.size(1), num_heads, qv.size(2) / num_heads, qv.size(2)};
  return attention_forward({q, k, v}, qv, kv, vv, QkvLayout{}, d, mask, scale, p, training, key);
}

Variable attention_qkv(const Variable& qkv, int64_t num_heads, const Tensor& mask, double scale, double p,
                       bool training, const DropoutKey& key) {
  const Tensor& x = qkv.value();
  detail::check_float("attention_qkv", x);
  BERTRAIN_CHECK(x.dim() == 3 && x.size(2) % 3 == 0, "attention_qkv: qkv ", x.shape().str(),
                 ": expected (B, T, 3H)");
  const int64_t h = x.size(2) / 3;
  BERTRAIN_CHECK(num_heads > 0 && h % num_heads == 0, "attention_qkv: hidden size ", h,
                 " is not a multiple of num_heads ", num_heads);
  BERTRAIN_CHECK(p >= 0.0 && p < 1.0, "attention_qkv: dropout p must be in [0, 1), got ", p);
  const AttnDims d{x.size(0), x.size(1), x.size(1), num_heads, h / num_heads, 3 * h};
  return attention_forward({qkv}, x, x, x, QkvLayout{true, 0, h, 2 * h}, d, mask, scale, p, training, key);
}

}  // namespace bertrain

namespace bertrain {

namespace {

// Packed sequences: b sequences, sequence s in token rows [cu[s], cu[s + 1]) of q, k, v, ctx (N, H); its
// probabilities (NH, L, L) at element offset poff[s] of one flat buffer.
struct VarlenDims {
  int64_t nh, hs;
  std::vector<int64_t> cu, poff;
  int64_t ld;  // row stride of q, k, v and their gradients: H, or 3H packed (attention_varlen_qkv)
  int64_t h() const { return nh * hs; }
  int64_t len(size_t s) const { return cu[s + 1] - cu[s]; }
  size_t count() const { return cu.size() - 1; }
  // Head h of a sequence of length l as an (L, HS) matrix of q, k or v (rows of ld); transposed: (HS, L).
  GemmStrides heads(int64_t l, bool trans) const {
    return trans ? GemmStrides{l * ld, hs, 1, ld} : GemmStrides{l * ld, hs, ld, 1};
  }
  // The same for the context (N, H) and its gradient.
  GemmStrides ctx(int64_t l) const { return GemmStrides{l * h(), hs, h(), 1}; }
  // Its (NH, L, L) probabilities as matrices (L, L); transposed: the same matrices read by columns.
  GemmStrides probs(int64_t l, bool trans) const {
    return trans ? GemmStrides{nh * l * l, l * l, 1, l} : GemmStrides{nh * l * l, l * l, l, 1};
  }
};

// bf16 mixed precision on this path: an operand of a product is rounded to bf16 (bf16::from_float_bits, the rule
// of kernels/convert.h, so the same bits as the padded path's bf16 copies) and the product accumulates in f32.
template <class T>
inline T bf16_round(T x) {
  if constexpr (std::is_same_v<T, float>) {
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    return bf16::to_float(bf16::from_float_bits(u));
  } else {
    return x;  // f64 never runs in bf16 (detail::bf16_product)
  }
}

// One (L, HS) head of sequence s as a product operand: rows of `ld` elements at `base` (token row cu[s], column
// col), or, when `round`, its bf16-rounded copy in `scratch` (rows of HS). Returns the pointer and its row stride.
template <class T>
std::pair<const T*, int64_t> head_operand(const T* base, int64_t ld, int64_t col, int64_t l, int64_t hs, bool round,
                                          T* scratch) {
  if (!round) return {base + col, ld};
  for (int64_t i = 0; i < l; ++i)
    for (int64_t j = 0; j < hs; ++j) scratch[i * hs + j] = bf16_round(base[i * ld + col + j]);
  return {scratch, hs};
}

// An (L, L) block rounded to bf16 into `scratch` when `round`, else as it is.
template <class T>
const T* block_operand(const T* x, int64_t n, bool round, T* scratch) {
  if (!round) return x;
  for (int64_t i = 0; i < n; ++i) scratch[i] = bf16_round(x[i]);
  return scratch;
}

// Attention per sequence, as one op: every (sequence, head) is one work item of a single parallel region that
// runs its products on its thread (kernels::gemm_serial) between the fused softmax + dropout rows, forward and
// backward. Sequences are short and of many lengths: a oneDNN call (and a primitive) per sequence and product cost
// more than the products themselves on short text (768 calls per bert-mini step, 25% of its time).
struct AttentionVarlenOp {
  static constexpr const char* kName = "attention_varlen";
  struct Saved {
    Tensor q, k, v;  // (N, H); or the same (N, 3H) tensor three times
    Tensor y;        // softmax before dropout, flat (sum of NH L^2)
    Tensor probs;    // after dropout; the same tensor as y without dropout
    Tensor keep;     // i8, undefined without dropout
    VarlenDims d;
    QkvLayout layout;
    double scale, drop_scale;
    bool bf16;
  };

  // Items (sequence, head), longest sequences first so the dynamic schedule ends balanced.
  static std::vector<std::pair<int32_t, int32_t>> items(const VarlenDims& d) {
    std::vector<std::pair<int32_t, int32_t>> r;
    for (size_t s = 0; s < d.count(); ++s)
      if (d.len(s) > 0)
        for (int64_t h = 0; h < d.nh; ++h) r.emplace_back(static_cast<int32_t>(s), static_cast<int32_t>(h));
    std::stable_sort(r.begin(), r.end(), [&](const auto& a, const auto& b) {
      return d.len(static_cast<size_t>(a.first)) > d.len(static_cast<size_t>(b.first));
    });
    return r;
  }

  // Runs fn(s, h, scratch) for every item (sequence s, head h) in one parallel region (dynamic schedule), with
  // `scratch` at least scratch_elems(L) elements of T for the item's length L (one buffer per thread).
  template <class T, class Need, class Fn>
  static void for_each_item(const VarlenDims& d, Need&& scratch_elems, Fn&& fn) {
    const auto its = items(d);
    const int64_t n_items = static_cast<int64_t>(its.size());
#pragma omp parallel if (n_items > 1)
    {
      std::vector<T> buf;
#pragma omp for schedule(dynamic, 1)
      for (int64_t it = 0; it < n_items; ++it) {
        const size_t s = static_cast<size_t>(its[static_cast<size_t>(it)].first);
        const size_t need = static_cast<size_t>(scratch_elems(d.len(s)));
        if (buf.size() < need) buf.resize(need);
        fn(s, static_cast<int64_t>(its[static_cast<size_t>(it)].second), buf.data());
      }
    }
  }

  // Forward of every item: S = Q K^T (L, HS) x (HS, L) into y; per row scale, softmax (kept in y) and, with keep,
  // the dropped probabilities p keyed as sample key.first_row + s (attention()'s masks on its real rows); then
  // ctx = P V (L, L) x (L, HS) into the (N, NH, HS) layout. q, k, v: rows of d.ld at their layout offsets.
  template <class T>
  static void fwd(const VarlenDims& d, const QkvLayout& lay, const T* q, const T* k, const T* v, bool bf, T scale, T* y,
                  T* p, uint8_t* keep, const DropoutKey& key, uint32_t thr, T ds, T* ctx) {
    const int64_t hs = d.hs, h_all = d.h();
    for_each_item<T>(
        d, [&](int64_t l) { return bf ? 3 * l * hs + l * l : 0; },
        [&](size_t s, int64_t h, T* scratch) {
          const int64_t l = d.len(s), row0 = d.cu[s];
          T* const sq = scratch;  // bf16-rounded copies of the q, k, v heads and of P (under bf16 only)
          T* const sk = bf ? sq + l * hs : nullptr;
          T* const sv = bf ? sk + l * hs : nullptr;
          T* const sp = bf ? sv + l * hs : nullptr;
          const auto [qa, ldq] = head_operand(q + row0 * d.ld, d.ld, lay.q_off + h * hs, l, hs, bf, sq);
          const auto [ka, ldk] = head_operand(k + row0 * d.ld, d.ld, lay.k_off + h * hs, l, hs, bf, sk);
          T* const yb = y + d.poff[s] + h * l * l;
          kernels::gemm_serial<T>(l, l, hs, qa, ldq, false, ka, ldk, true, yb, l, false);
          T* const pb = keep ? p + d.poff[s] + h * l * l : nullptr;
          uint8_t* const kb = keep ? keep + d.poff[s] + h * l * l : nullptr;
          for (int64_t i = 0; i < l; ++i)
            softmax_dropout_row<T>(yb + i * l, nullptr, l, scale, yb + i * l, pb ? pb + i * l : nullptr,
                                   kb ? kb + i * l : nullptr, key, key.first_row + static_cast<int64_t>(s), h, i, thr,
                                   ds);
          const auto [va, ldv] = head_operand(v + row0 * d.ld, d.ld, lay.v_off + h * hs, l, hs, bf, sv);
          const T* pa = block_operand<T>(keep ? pb : yb, l * l, bf, sp);
          kernels::gemm_serial<T>(l, hs, l, pa, l, false, va, ldv, false, ctx + row0 * h_all + h * hs, h_all, false);
        });
  }

  // Backward of every item, the forward's products in reverse: dV = P^T dctx; dP = dctx V^T, turned in place
  // into the gradient of Q K^T (softmax_dropout_row_bwd); dQ = dS K; dK = dS^T Q. Gradients: rows of d.ld at gq,
  // gk, gv (null where not needed), each item writing its own rows and columns.
  template <class T>
  static void bwd_items(const Saved& sv, const T* dctx, T* gq, T* gk, T* gv, bool acc_q, bool acc_k, bool acc_v) {
    const VarlenDims& d = sv.d;
    const QkvLayout& lay = sv.layout;
    const bool bf = sv.bf16;
    const T* q = sv.q.data<T>();
    const T* k = sv.k.data<T>();
    const T* v = sv.v.data<T>();
    const T* y = sv.y.data<T>();
    const T* probs = sv.probs.data<T>();
    const uint8_t* keep = sv.keep.defined() ? reinterpret_cast<const uint8_t*>(sv.keep.data<int8_t>()) : nullptr;
    const T dsc = static_cast<T>(sv.drop_scale), sc = static_cast<T>(sv.scale);
    const int64_t hs = d.hs, h_all = d.h(), ld = d.ld;
    for_each_item<T>(
        d, [&](int64_t l) { return 4 * l * hs + 2 * l * l; },
        [&](size_t s, int64_t h, T* scratch) {
          const int64_t l = d.len(s), row0 = d.cu[s];
          T* const sdc = scratch;  // dctx head (bf16-rounded copy)
          T* const sq = sdc + l * hs;
          T* const sk = sq + l * hs;
          T* const sv_ = sk + l * hs;
          T* const sp = sv_ + l * hs;  // P rounded
          T* const dsb = sp + l * l;   // dP, then dS
          const int64_t off = d.poff[s] + h * l * l;
          const auto [dca, lddc] = head_operand(dctx + row0 * h_all, h_all, h * hs, l, hs, bf, sdc);
          if (gv) {
            const T* pa = block_operand<T>(probs + off, l * l, bf, sp);
            kernels::gemm_serial<T>(l, hs, l, pa, l, true, dca, lddc, false, gv + row0 * ld + h * hs, ld, acc_v);
          }
          if (!gq && !gk) return;
          const auto [va, ldv] = head_operand(v + row0 * ld, ld, lay.v_off + h * hs, l, hs, bf, sv_);
          kernels::gemm_serial<T>(l, l, hs, dca, lddc, false, va, ldv, true, dsb, l, false);
          for (int64_t i = 0; i < l; ++i)
            softmax_dropout_row_bwd<T>(dsb + i * l, y + off + i * l, keep ? keep + off + i * l : nullptr, l, dsc, sc);
          if (bf)
            for (int64_t i = 0; i < l * l; ++i) dsb[i] = bf16_round(dsb[i]);
          if (gq) {
            const auto [ka, ldk] = head_operand(k + row0 * ld, ld, lay.k_off + h * hs, l, hs, bf, sk);
            kernels::gemm_serial<T>(l, hs, l, dsb, l, false, ka, ldk, false, gq + row0 * ld + h * hs, ld, acc_q);
          }
          if (gk) {
            const auto [qa, ldq] = head_operand(q + row0 * ld, ld, lay.q_off + h * hs, l, hs, bf, sq);
            kernels::gemm_serial<T>(l, hs, l, dsb, l, true, qa, ldq, false, gk + row0 * ld + h * hs, ld, acc_k);
          }
        });
  }

  template <class T>
  static void bwd(const Saved& sv, const Tensor& dctx, std::vector<GradSlot>& g) {
    const QkvGrads gr = QkvGrads::prepare(sv.layout, sv.q, sv.k, sv.v, dctx.dtype(), g);
    bwd_items<T>(sv, dctx.data<T>(), reinterpret_cast<T*>(gr.q), reinterpret_cast<T*>(gr.k), reinterpret_cast<T*>(gr.v),
                 gr.acc_q, gr.acc_k, gr.acc_v);
  }
  static void backward(const Saved& sv, const Tensor& dy, std::vector<GradSlot>& g) {
    BERTRAIN_DISPATCH_FLOAT(dy.dtype(), kName, bwd<T>(sv, dy, g));
  }
};

}  // namespace

namespace {

// The forward of attention_varlen() and attention_varlen_qkv(): q, k, v are the values of `inputs` in `layout`,
// rows of ld elements (checked by the callers).
Variable attention_varlen_forward(const char* op, const std::vector<Variable>& inputs, const Tensor& qv,
                                  const Tensor& kv, const Tensor& vv, const QkvLayout& layout, int64_t num_heads,
                                  int64_t h, const std::vector<int64_t>& cu_seqlens, double scale, double p,
                                  bool training, const DropoutKey& key) {
  const int64_t n = qv.size(0);
  BERTRAIN_CHECK(num_heads > 0 && h % num_heads == 0, op, ": hidden size ", h, " is not a multiple of num_heads ",
                 num_heads);
  BERTRAIN_CHECK(p >= 0.0 && p < 1.0, op, ": dropout p must be in [0, 1), got ", p);
  BERTRAIN_CHECK(cu_seqlens.size() >= 2 && cu_seqlens.front() == 0 && cu_seqlens.back() == n, op,
                 ": cu_seqlens must run from 0 to the ", n, " tokens, got ", cu_seqlens.size(), " offsets ending at ",
                 cu_seqlens.empty() ? -1 : cu_seqlens.back());
  VarlenDims d{num_heads, h / num_heads, cu_seqlens, {}, qv.size(1)};
  BERTRAIN_CHECK(num_heads <= 2048, op, ": ", num_heads, " heads exceed the dropout key space (2048)");
  int64_t total = 0;
  for (size_t s = 0; s < d.count(); ++s) {
    const int64_t l = d.len(s);
    BERTRAIN_CHECK(l >= 0 && l <= kAttnKeyStride, op, ": sequence ", s, " has length ", l,
                   " (cu_seqlens must not decrease; at most 4096 positions)");
    d.poff.push_back(total);
    total += d.nh * l * l;
  }
  const DType dt = qv.dtype();
  const bool bf = detail::bf16_product(qv);
  const bool drop = training && p > 0.0;
  Tensor y = Tensor::empty({total}, dt);
  Tensor probs = y, keep;
  const double dsc = drop ? 1.0 / (1.0 - p) : 1.0;
  if (drop) {
    probs = Tensor::empty(y.shape(), dt);
    keep = Tensor::empty(y.shape(), DType::i8);
  }
  Tensor ctx = Tensor::empty({n, h}, dt);
  BERTRAIN_DISPATCH_FLOAT(dt, "attention_varlen",
                          AttentionVarlenOp::fwd<T>(
                              d, layout, qv.data<T>(), kv.data<T>(), vv.data<T>(), bf, static_cast<T>(scale),
                              y.data<T>(), drop ? probs.data<T>() : nullptr,
                              drop ? reinterpret_cast<uint8_t*>(keep.data<int8_t>()) : nullptr, key,
                              kernels::dropout_threshold16(p), static_cast<T>(dsc), ctx.data<T>()));
  return detail::record<AttentionVarlenOp>(ctx, inputs,
                                           {qv, kv, vv, y, probs, keep, std::move(d), layout, scale, dsc, bf});
}

}  // namespace

Variable attention_varlen(const Variable& q, const Variable& k, const Variable& v, int64_t num_heads,
                          const std::vector<int64_t>& cu_seqlens, double scale, double p, bool training,
                          const DropoutKey& key) {
  const Tensor& qv = q.value();
  const Tensor& kv = k.value();
  const Tensor& vv = v.value();
  detail::check_float("attention_varlen", qv);
  BERTRAIN_CHECK(qv.dim() == 2 && kv.shape() == qv.shape() && vv.shape() == qv.shape(), "attention_varlen: q ",
                 qv.shape().str(), ", k ", kv.shape().str(), ", v ", vv.shape().str(),
                 ": expected three (N, H) tensors of packed tokens");
  BERTRAIN_CHECK(kv.dtype() == qv.dtype() && vv.dtype() == qv.dtype(), "attention_varlen: dtypes differ: ",
                 qv.desc(), ", ", kv.desc(), ", ", vv.desc());
  return attention_varlen_forward("attention_varlen", {q, k, v}, qv, kv, vv, QkvLayout{}, num_heads, qv.size(1),
                                  cu_seqlens, scale, p, training, key);
}

Variable attention_varlen_qkv(const Variable& qkv, int64_t num_heads, const std::vector<int64_t>& cu_seqlens,
                              double scale, double p, bool training, const DropoutKey& key) {
  const Tensor& x = qkv.value();
  detail::check_float("attention_varlen_qkv", x);
  BERTRAIN_CHECK(x.dim() == 2 && x.size(1) % 3 == 0, "attention_varlen_qkv: qkv ", x.shape().str(),
                 ": expected (N, 3H) packed tokens");
  const int64_t h = x.size(1) / 3;
  return attention_varlen_forward("attention_varlen_qkv", {qkv}, x, x, x, QkvLayout{true, 0, h, 2 * h}, num_heads, h,
                                  cu_seqlens, scale, p, training, key);
}

}  // namespace bertrain
