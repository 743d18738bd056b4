// matmul.cpp: matmul, bmm and linear, forward and backward side by side; all go through kernels::gemm.
// Under MatmulPrecision::bf16 the f32 operands are converted to bf16 here, for the forward gemm and again in
// backward (ops.h explains the contract and why the bf16 copies are not kept).
#include <array>
#include <atomic>
#include <cstring>

#include "bertrain/ops/ops.h"
#include "kernels/convert.h"
#include "kernels/gemm.h"
#include "kernels/reduce.h"
#include "ops/op_util.h"

namespace bertrain {

using kernels::GemmShape;

namespace {
std::atomic<MatmulPrecision> g_precision{MatmulPrecision::f32};
}  // namespace

namespace detail {

bool bf16_product(const Tensor& t) {
  return t.dtype() == DType::f32 && g_precision.load(std::memory_order_relaxed) == MatmulPrecision::bf16;
}

Tensor to_bf16(const Tensor& t) {
  Tensor r = Tensor::empty(t.shape(), DType::bf16);
  kernels::f32_to_bf16(t.data<float>(), static_cast<uint16_t*>(r.raw_data()), t.numel());
  return r;
}

}  // namespace detail

using detail::bf16_product;
using detail::operand;
using detail::to_bf16;

namespace {

/// Shapes of a (possibly batched) product; throws "<op>: (..) x (..) ..." on a mismatch.
GemmShape product_shape(const char* op, const Tensor& a, const Tensor& b, bool ta, bool tb, int batch_dims) {
  detail::check_float(op, a);
  BERTRAIN_CHECK(a.dtype() == b.dtype(), op, ": dtypes differ: ", a.desc(), " x ", b.desc());
  BERTRAIN_CHECK(a.dim() == batch_dims + 2 && b.dim() == batch_dims + 2, op, ": ", a.shape().str(), " x ",
                 b.shape().str(), ": expected ", batch_dims + 2, "-d operands");
  GemmShape s;
  for (int i = 0; i < batch_dims; ++i) {
    BERTRAIN_CHECK(a.size(i) == b.size(i), op, ": ", a.shape().str(), " x ", b.shape().str(),
                   ": batch dimensions differ");
    s.batch *= a.size(i);
  }
  s.m = ta ? a.size(-1) : a.size(-2);
  int64_t ka = ta ? a.size(-2) : a.size(-1);
  int64_t kb = tb ? b.size(-1) : b.size(-2);
  s.n = tb ? b.size(-2) : b.size(-1);
  BERTRAIN_CHECK(ka == kb, op, ": ", a.shape().str(), (ta ? "^T" : ""), " x ", b.shape().str(), (tb ? "^T" : ""),
                 ": inner dimensions ", ka, " and ", kb, " differ");
  s.k = ka;
  s.trans_a = ta;
  s.trans_b = tb;
  return s;
}

struct MatmulOp {
  static constexpr const char* kName = "matmul";
  struct Saved {
    Tensor a, b;
    GemmShape s;
    Shape a_shape, b_shape;
    bool bf16;  // the forward ran in bf16: so do both gradient gemms
  };
  static Tensor forward(const GemmShape& s, const Tensor& a, const Tensor& b, Shape out_shape) {
    Tensor c = Tensor::empty(out_shape, a.dtype() == DType::bf16 ? DType::f32 : a.dtype());
    kernels::gemm(s, a, b, c, false);
    return c;
  }
  // C = op(A) op(B). See the derivation: dA = dC op(B)^T, dB = op(A)^T dC, written for stored layouts.
  static void backward(const Saved& sv, const Tensor& dc_in, std::vector<GradSlot>& g) {
    const GemmShape& s = sv.s;
    const Tensor dc = operand(dc_in, sv.bf16);  // rounded once, used by both gradients
    if (g[0].needed()) {
      Tensor& da = g[0].prepare(sv.a_shape, dc_in.dtype());
      const Tensor b = operand(sv.b, sv.bf16);
      if (!s.trans_a) kernels::gemm({s.batch, s.m, s.k, s.n, false, !s.trans_b}, dc, b, da, g[0].accumulate);
      else kernels::gemm({s.batch, s.k, s.m, s.n, s.trans_b, true}, b, dc, da, g[0].accumulate);
    }
    if (g[1].needed()) {
      Tensor& db = g[1].prepare(sv.b_shape, dc_in.dtype());
      const Tensor a = operand(sv.a, sv.bf16);
      if (!s.trans_b) kernels::gemm({s.batch, s.k, s.n, s.m, !s.trans_a, false}, a, dc, db, g[1].accumulate);
      else kernels::gemm({s.batch, s.n, s.k, s.m, true, s.trans_a}, dc, a, db, g[1].accumulate);
    }
  }
};

Variable product(const char* op, const Variable& a, const Variable& b, bool ta, bool tb, int batch_dims) {
  const Tensor& av = a.value();
  const Tensor& bv = b.value();
  GemmShape s = product_shape(op, av, bv, ta, tb, batch_dims);
  Shape out;
  for (int i = 0; i < batch_dims; ++i) out.push_back(av.size(i));
  out.push_back(s.m);
  out.push_back(s.n);
  const bool bf16 = bf16_product(av);
  Tensor c;
  if (bf16) {
    Tensor ab = to_bf16(av);
    Tensor bb = &av == &bv ? ab : to_bf16(bv);
    c = MatmulOp::forward(s, ab, bb, out);
  } else {
    c = MatmulOp::forward(s, av, bv, out);
  }
  return detail::record<MatmulOp>(c, {a, b}, {av, bv, s, av.shape(), bv.shape(), bf16});
}

struct LinearOp {
  static constexpr const char* kName = "linear";
  struct Saved {
    Tensor x2, w;  // x2: (N, in)
    Shape x_shape;
    bool has_bias;
    bool bf16;  // the forward ran in bf16: so do both gradient gemms
  };
  static void backward(const Saved& sv, const Tensor& dy, std::vector<GradSlot>& g) {
    const int64_t n = sv.x2.size(0), in = sv.x2.size(1), out = sv.w.size(0);
    Tensor dy2 = dy.reshape({n, out});
    const bool gemms = g[0].needed() || g[1].needed();
    const bool bias = sv.has_bias && g[2].needed();
    Tensor dyg;  // dy as the gemms' operand: rounded to bf16 once for both under bf16
    if (sv.bf16 && gemms && bias) {
      // One pass over dy: its bf16 copy and the bias gradient (the f32 column sums, as sum_rows gives them).
      dyg = Tensor::empty({n, out}, DType::bf16);
      Tensor& db = g[2].prepare({out}, dy.dtype());
      kernels::sum_rows_to_bf16(dy2.data<float>(), n, out, static_cast<uint16_t*>(dyg.raw_data()), db.data<float>(),
                                g[2].accumulate);
    } else {
      dyg = operand(dy2, sv.bf16 && gemms);
      if (bias) {
        Tensor& db = g[2].prepare({out}, dy.dtype());
        BERTRAIN_DISPATCH_FLOAT(dy.dtype(), "linear",
                                kernels::sum_rows<T>(dy2.data<T>(), n, out, db.data<T>(), g[2].accumulate));
      }
    }
    if (g[0].needed()) {
      Tensor& dx = g[0].prepare(sv.x_shape, dy.dtype());
      Tensor dx2 = dx.reshape({n, in});
      kernels::gemm({1, n, in, out, false, false}, dyg, operand(sv.w, sv.bf16), dx2, g[0].accumulate);
    }
    if (g[1].needed()) {
      Tensor& dw = g[1].prepare(sv.w.shape(), dy.dtype());
      kernels::gemm({1, out, in, n, true, false}, dyg, operand(sv.x2, sv.bf16), dw, g[1].accumulate);
    }
  }
};

// y = x [W_0; ...; W_k-1]^T + [b_0; ...; b_k-1]: k linears of one input as one gemm (BERT's Q, K, V projections:
// "fused QKV", as NVIDIA's FasterTransformer and Megatron-LM run them). The weights stay separate parameters; the
// forward concatenates them into one (O, in) operand (under bf16 the rounding writes each into its rows of one
// bf16 buffer, which the per-linear conversions did anyway), kept for backward. Backward: dx = dy Wcat, one gemm
// over K = O; dWcat = dy^T x, one gemm (x rounded to bf16 once for all blocks), copied (or added) block by block
// into the weights' gradients; the bias gradients are the column sums of dy (fused with its rounding under bf16).
struct LinearConcatOp {
  static constexpr const char* kName = "linear_concat";
  struct Saved {
    Tensor x2, wcat;  // x2: (N, in) as given; wcat: (O, in), bf16 when the forward ran in bf16
    std::vector<int64_t> outs;
    Shape x_shape;
    bool has_bias;
    bool bf16;
  };
  static void backward(const Saved& sv, const Tensor& dy, std::vector<GradSlot>& g) {
    const size_t k = sv.outs.size();
    const int64_t n = sv.x2.size(0), in = sv.x2.size(1), o = sv.wcat.size(0);
    const DType dt = dy.dtype();
    Tensor dy2 = dy.reshape({n, o});
    bool gemms = g[0].needed(), bias = false;
    for (size_t i = 0; i < k; ++i) {
      gemms = gemms || g[1 + i].needed();
      bias = bias || (sv.has_bias && g[1 + k + i].needed());
    }
    Tensor dyg, db;  // dy as the gemms' operand; the bias gradients of all blocks (O)
    if (bias) db = Tensor::empty({o}, dt);
    if (sv.bf16 && gemms && bias) {
      dyg = Tensor::empty({n, o}, DType::bf16);
      kernels::sum_rows_to_bf16(dy2.data<float>(), n, o, static_cast<uint16_t*>(dyg.raw_data()), db.data<float>(),
                                false);
    } else {
      dyg = operand(dy2, sv.bf16 && gemms);
      if (bias) BERTRAIN_DISPATCH_FLOAT(dt, kName, kernels::sum_rows<T>(dy2.data<T>(), n, o, db.data<T>(), false));
    }
    if (g[0].needed()) {
      Tensor& dx = g[0].prepare(sv.x_shape, dt);
      Tensor dx2 = dx.reshape({n, in});
      kernels::gemm({1, n, in, o, false, false}, dyg, sv.wcat, dx2, g[0].accumulate);
    }
    bool weights = false;
    for (size_t i = 0; i < k; ++i) weights = weights || g[1 + i].needed();
    // dWcat = dy^T x (O, in) in one gemm (x rounded once for every block), then each block into its gradient.
    // (One strided gemm per block, reading dy's columns with a row stride of O, would write there directly, but
    // oneDNN 2.6 runs a transposed operand with such a stride on its reference kernel, 100x slower.)
    Tensor dwcat;
    if (weights) {
      dwcat = Tensor::empty({o, in}, dt);
      kernels::gemm({1, o, in, n, true, false}, dyg, operand(sv.x2, sv.bf16), dwcat, false);
    }
    const int64_t dsz = static_cast<int64_t>(dtype_size(dt));
    int64_t off = 0;
    for (size_t i = 0; i < k; ++i) {
      const int64_t oi = sv.outs[i];
      if (g[1 + i].needed()) {
        Tensor& dw = g[1 + i].prepare({oi, in}, dt);
        const char* src = static_cast<const char*>(dwcat.raw_data()) + off * in * dsz;
        if (!g[1 + i].accumulate) {
          std::memcpy(dw.raw_data(), src, static_cast<size_t>(oi * in * dsz));
        } else {
          BERTRAIN_DISPATCH_FLOAT(dt, kName, {
            const T* sp = reinterpret_cast<const T*>(src);
            T* d = dw.data<T>();
            for (int64_t j = 0; j < oi * in; ++j) d[j] += sp[j];
          });
        }
      }
      if (sv.has_bias && g[1 + k + i].needed()) {
        Tensor& dbi = g[1 + k + i].prepare({oi}, dt);
        const bool acc = g[1 + k + i].accumulate;
        BERTRAIN_DISPATCH_FLOAT(dt, kName, {
          const T* src = db.data<T>() + off;
          T* d = dbi.data<T>();
          for (int64_t j = 0; j < oi; ++j) d[j] = acc ? d[j] + src[j] : src[j];
        });
      }
      off += oi;
    }
  }
};

}  // namespace

Variable matmul(const Variable& a, const Variable& b, bool trans_a, bool trans_b) {
  return product("matmul", a, b, trans_a, trans_b, 0);
}

Variable bmm(const Variable& a, const Variable& b, bool trans_a, bool trans_b) {
  BERTRAIN_CHECK(a.value().dim() >= 3, "bmm: ", a.shape().str(), " x ", b.shape().str(),
                 ": expected operands with at least 3 dimensions");
  return product("bmm", a, b, trans_a, trans_b, a.value().dim() - 2);
}

namespace {

// linear()'s checks and product: y = x W^T + b, with `act` applied inside the product (kernels::gemm's epilogue).
struct LinearForward {
  Tensor y, x2;
  const Tensor* b;
  bool bf16;
};
LinearForward linear_forward(const Variable& x, const Variable& weight, const Variable& bias,
                             kernels::GemmEpilogue act = kernels::GemmEpilogue::none) {
  const Tensor& xv = x.value();
  const Tensor& w = weight.value();
  detail::check_float("linear", xv);
  BERTRAIN_CHECK(w.dim() == 2 && xv.dim() >= 1 && xv.size(-1) == w.size(1), "linear: input ", xv.shape().str(),
                 " x weight ", w.shape().str(), ": expected weight (out, ", xv.dim() ? xv.size(-1) : 0, ")");
  BERTRAIN_CHECK(xv.dtype() == w.dtype(), "linear: dtypes differ: ", xv.desc(), " and weight ", w.desc());
  const int64_t in = w.size(1), out = w.size(0), n = xv.numel() / in;
  const Tensor* b = nullptr;
  if (bias.defined()) {
    BERTRAIN_CHECK(bias.value().dim() == 1 && bias.value().size(0) == out && bias.dtype() == w.dtype(),
                   "linear: bias ", bias.value().desc(), " does not match weight ", w.desc());
    b = &bias.value();
  }
  Shape ys = xv.shape();
  ys[ys.size() - 1] = out;
  LinearForward r{Tensor::empty(ys, xv.dtype()), xv.reshape({n, in}), b, bf16_product(xv)};
  Tensor y2 = r.y.reshape({n, out});
  if (r.bf16) kernels::gemm({1, n, out, in, false, true}, to_bf16(r.x2), to_bf16(w), y2, false, b, act);
  else kernels::gemm({1, n, out, in, false, true}, r.x2, w, y2, false, b, act);
  return r;
}

}  // namespace

// The GELU of `form` as the product's epilogue.
static kernels::GemmEpilogue gelu_epilogue(GeluForm form) {
  return form == GeluForm::erf ? kernels::GemmEpilogue::gelu_erf : kernels::GemmEpilogue::gelu_tanh;
}

Variable linear(const Variable& x, const Variable& weight, const Variable& bias) {
  LinearForward r = linear_forward(x, weight, bias);
  return detail::record<LinearOp>(r.y, {x, weight, bias},
                                  {r.x2, weight.value(), x.value().shape(), r.b != nullptr, r.bf16});
}

Variable linear_gelu(const Variable& x, const Variable& weight, const Variable& bias, GeluForm form) {
  const bool records = grad_mode_enabled() && (x.requires_grad() || weight.requires_grad() ||
                                               (bias.defined() && bias.requires_grad()));
  // The product's epilogue where nothing is recorded, the operands are f32 and the product is not empty.
  const Tensor& xv = x.value();
  if (records || xv.dtype() != DType::f32 || bf16_product(xv) || xv.dim() == 0 || xv.size(-1) == 0) {
    return gelu(linear(x, weight, bias), form);
  }
  return Variable(linear_forward(x, weight, bias, gelu_epilogue(form)).y, false);
}

struct PackedLinear {
  kernels::PackedWeights w;
  const void* source = nullptr;           // the weight's data when packed
  std::array<float, 16> samples{};         // and 16 of its values, evenly spread
  static std::array<float, 16> sample(const Tensor& t) {
    std::array<float, 16> r{};
    const float* p = t.data<float>();
    const int64_t n = t.numel();
    for (int64_t i = 0; i < 16; ++i) r[static_cast<size_t>(i)] = p[i * (n - 1) / 15];
    return r;
  }
  bool matches(const Tensor& t) const {
    if (t.raw_data() != source || t.dtype() != DType::f32 || t.dim() != 2 || t.size(0) != w.n || t.size(1) != w.k)
      return false;
    const auto now = sample(t);
    return std::memcmp(now.data(), samples.data(), sizeof(float) * 16) == 0;
  }
};

std::shared_ptr<const PackedLinear> pack_linear(const Variable& weight) {
  const Tensor& w = weight.value();
  BERTRAIN_CHECK(w.dim() == 2 && w.dtype() == DType::f32 && w.numel() > 0, "pack_linear: expected a non-empty f32 ",
                 "(out, in) weight, got ", w.desc());
  auto p = std::make_shared<PackedLinear>();
  p->w = kernels::pack_weights(w);
  p->source = w.raw_data();
  p->samples = PackedLinear::sample(w);
  return p;
}

Variable linear_prepacked(const Variable& x, const Variable& weight, const Variable& bias, const PackedLinear& packed,
                          const GeluForm* gelu) {
  const bool records = grad_mode_enabled() && (x.requires_grad() || weight.requires_grad() ||
                                               (bias.defined() && bias.requires_grad()));
  const Tensor& xv = x.value();
  const Tensor& w = weight.value();
  auto plain = [&] { return gelu ? linear_gelu(x, weight, bias, *gelu) : linear(x, weight, bias); };
  if (records || xv.dtype() != DType::f32 || bf16_product(xv) || xv.dim() == 0 || xv.size(-1) != w.size(1) ||
      (bias.defined() && (bias.dtype() != DType::f32 || bias.value().dim() != 1 || bias.value().size(0) != w.size(0))) ||
      !packed.matches(w)) {
    return plain();
  }
  Shape ys = xv.shape();
  ys[ys.size() - 1] = w.size(0);
  Tensor y = Tensor::empty(ys, DType::f32);
  const auto act = gelu ? gelu_epilogue(*gelu) : kernels::GemmEpilogue::none;
  if (!kernels::gemm_packed(xv, packed.w, y, bias.defined() ? &bias.value() : nullptr, act)) return plain();
  return Variable(y, false);
}

Variable linear_concat(const Variable& x, const std::vector<Variable>& weights, const std::vector<Variable>& biases) {
  const char* op = "linear_concat";
  const Tensor& xv = x.value();
  detail::check_float(op, xv);
  BERTRAIN_CHECK(!weights.empty(), op, ": no weights");
  const bool has_bias = !biases.empty();
  BERTRAIN_CHECK(!has_bias || biases.size() == weights.size(), op, ": ", weights.size(), " weights but ",
                 biases.size(), " biases");
  BERTRAIN_CHECK(xv.dim() >= 1, op, ": input ", xv.shape().str(), " has no last axis");
  const int64_t in = xv.size(-1), n = in ? xv.numel() / in : 0;
  std::vector<int64_t> outs;
  int64_t o = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const Tensor& w = weights[i].value();
    BERTRAIN_CHECK(w.dim() == 2 && w.size(1) == in && w.dtype() == xv.dtype(), op, ": input ", xv.desc(),
                   " x weight ", i, " ", w.desc(), ": expected weight (out, ", in, ") of the input's dtype");
    if (has_bias) {
      const Tensor& b = biases[i].value();
      BERTRAIN_CHECK(biases[i].defined() && b.dim() == 1 && b.size(0) == w.size(0) && b.dtype() == w.dtype(), op,
                     ": bias ", i, " ", biases[i].defined() ? b.desc() : std::string("(undefined)"),
                     " does not match weight ", w.desc());
    }
    outs.push_back(w.size(0));
    o += w.size(0);
  }
  const bool bf16 = bf16_product(xv);
  const DType dt = xv.dtype();
  // The concatenated weight (O, in) and bias (O): built at every forward from the separate parameters.
  Tensor wcat = Tensor::empty({o, in}, bf16 ? DType::bf16 : dt);
  Tensor bcat = has_bias ? Tensor::empty({o}, dt) : Tensor();
  {
    const int64_t wsz = static_cast<int64_t>(dtype_size(wcat.dtype())), bsz = static_cast<int64_t>(dtype_size(dt));
    int64_t row = 0;
    for (size_t i = 0; i < weights.size(); ++i) {
      const Tensor& w = weights[i].value();
      char* dst = static_cast<char*>(wcat.raw_data()) + row * in * wsz;
      if (bf16) kernels::f32_to_bf16(w.data<float>(), reinterpret_cast<uint16_t*>(dst), w.numel());
      else std::memcpy(dst, w.raw_data(), w.nbytes());
      if (has_bias) std::memcpy(static_cast<char*>(bcat.raw_data()) + row * bsz, biases[i].value().raw_data(),
                                biases[i].value().nbytes());
      row += w.size(0);
    }
  }
  Shape ys = xv.shape();
  ys[ys.size() - 1] = o;
  Tensor y = Tensor::empty(ys, dt);
  Tensor x2 = xv.reshape({n, in});
  Tensor y2 = y.reshape({n, o});
  kernels::gemm({1, n, o, in, false, true}, operand(x2, bf16), wcat, y2, false, has_bias ? &bcat : nullptr);
  std::vector<Variable> inputs{x};
  inputs.insert(inputs.end(), weights.begin(), weights.end());
  inputs.insert(inputs.end(), biases.begin(), biases.end());
  return detail::record<LinearConcatOp>(y, std::move(inputs), {x2, wcat, outs, xv.shape(), has_bias, bf16});
}

void set_matmul_precision(MatmulPrecision p) {
  BERTRAIN_CHECK(p == MatmulPrecision::f32 || p == MatmulPrecision::bf16, "set_matmul_precision: unknown value ",
                 static_cast<int>(p));
  BERTRAIN_CHECK(p != MatmulPrecision::bf16 || kernels::gemm_bf16_supported(),
                 "bf16 matmuls need a CPU with AVX-512 (native with AVX512_BF16, emulated by oneDNN without it); "
                 "oneDNN finds none here (or DNNL_MAX_CPU_ISA is below AVX512_CORE): run without --bf16");
  g_precision.store(p, std::memory_order_relaxed);
}

MatmulPrecision matmul_precision() { return g_precision.load(std::memory_order_relaxed); }

const char* matmul_precision_name(MatmulPrecision p) { return p == MatmulPrecision::bf16 ? "bf16" : "f32"; }

bool matmul_bf16_native() { return kernels::gemm_bf16_native(); }

bool matmul_bf16_supported() { return kernels::gemm_bf16_supported(); }

}  // namespace bertrain
