// fused_ops_test.cpp: the fused kernels against the plain ops they replace (values and gradients, f64 and f32),
// the vectorised Philox against core's scalar one, the documented dropout draw mapping, and thread-count
// independence of the fused ops.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>

#include "bertrain/core/rng.h"
#include "bertrain/core/threads.h"
#include "bertrain/ops/ops.h"
#include "kernels/dropout_mask.h"

using namespace bertrain;

namespace {

double max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::fabs(a.get(i) - b.get(i)));
  return m;
}

Tensor padding_mask(int64_t b, int64_t t, DType dt) {
  Tensor m = Tensor::zeros({b, t}, dt);
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = t - i; j < t; ++j) m.set(i * t + j, -10000.0);  // sample i has i padded positions
  return m;
}

// The attention dropout's keep mask times 1 / (1 - p) on (B, NH, TQ, TK), from the mapping documented at
// attention(): probability (h, i, j) of sample b is element (h * 2^12 + i) * 2^12 + j of DropoutKey row b.
Tensor attention_keep_scale(int64_t b, int64_t nh, int64_t tq, int64_t tk, double p, const DropoutKey& key, DType dt) {
  Tensor m = Tensor::empty({b, nh, tq, tk}, dt);
  const uint32_t thr = static_cast<uint32_t>(std::floor(p * 65536 + 0.5));
  for (int64_t s = 0; s < b; ++s)
    for (int64_t h = 0; h < nh; ++h)
      for (int64_t i = 0; i < tq; ++i)
        for (int64_t j = 0; j < tk; ++j) {
          const int64_t e = (h * 4096 + i) * 4096 + j;
          auto w = philox_keyed(key.seed, key.stream, (static_cast<uint64_t>(key.first_row + s) << 32) + e / 8);
          const uint32_t half = (w[(e / 2) % 4] >> (16 * (e % 2))) & 0xffffu;
          m.set(((s * nh + h) * tq + i) * tk + j, half >= thr ? 1.0 / (1.0 - p) : 0.0);
        }
  return m;
}

// The composition BertLayer used before the fused op: permute to (B, NH, T, HS), bmm, scale, softmax, dropout,
// bmm, permute back.
Variable attention_unfused(const Variable& q, const Variable& k, const Variable& v, int64_t nh, const Tensor& mask,
                           double sc, double p, const DropoutKey& key) {
  auto heads = [&](const Variable& y) {
    return permute(reshape(y, {y.size(0), y.size(1), nh, y.size(2) / nh}), {0, 2, 1, 3});
  };
  Variable s = scale(bmm(heads(q), heads(k), false, true), sc);
  Variable pr = softmax(s, mask);
  if (p > 0) pr = mul(pr, Variable(attention_keep_scale(q.size(0), nh, q.size(1), k.size(1), p, key, q.dtype())));
  Variable ctx = permute(bmm(pr, heads(v)), {0, 2, 1, 3});
  return reshape(ctx, {q.size(0), q.size(1), q.size(2)});
}

}  // namespace

TEST(Philox, SixteenLaneBatchMatchesScalarGenerator) {
  const uint64_t seed = 0x0123456789abcdefULL, stream = 0xfedcba9876543210ULL;
  for (uint64_t index0 : {uint64_t{0}, uint64_t{0xfffffff8}, (uint64_t{77} << 32) + 5}) {
    uint32_t out[64];
    kernels::philox_keyed_16(seed, stream, index0, out);
    for (int l = 0; l < 16; ++l) {
      auto w = philox_keyed(seed, stream, index0 + l);
      for (int q = 0; q < 4; ++q) EXPECT_EQ(out[4 * l + q], w[q]) << "lane " << l << " word " << q;
    }
  }
}

// Pins the draw mapping documented at DropoutKey: element j of sample s uses 16 bits of block s * 2^32 + j / 8.
TEST(Dropout, DrawMappingIsTheDocumentedOne) {
  const int64_t rows = 3, per_row = 300;
  const double p = 0.4;
  const DropoutKey key{5, 9, 1000, nullptr};
  Tensor x = Tensor::full({rows, per_row}, 1.0, DType::f64);
  Tensor y = dropout(Variable(x), p, true, key).value();
  const uint32_t thr = static_cast<uint32_t>(std::floor(p * 65536 + 0.5));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < per_row; ++j) {
      auto w = philox_keyed(key.seed, key.stream, (static_cast<uint64_t>(key.first_row + r) << 32) + j / 8);
      const uint32_t half = (w[(j / 2) % 4] >> (16 * (j % 2))) & 0xffffu;
      const double want = half >= thr ? 1.0 / (1.0 - p) : 0.0;
      ASSERT_EQ(y.get(r * per_row + j), want) << "row " << r << " element " << j;
    }
}

TEST(Dropout, KeepRateIsOneMinusP) {
  Tensor x = Tensor::full({8, 20000}, 1.0);
  for (double p : {0.1, 0.5}) {
    Tensor y = dropout(Variable(x), p, true, DropoutKey{1, 2, 3, nullptr}).value();
    int64_t kept = 0;
    for (int64_t i = 0; i < y.numel(); ++i) kept += y.get(i) != 0;
    EXPECT_NEAR(static_cast<double>(kept) / y.numel(), 1 - p, 0.005) << p;
  }
}

// The fused attention gives the unfused chain's values and gradients: f64 to rounding, f32 within 1e-5, with the
// same dropout masks, with and without a padding mask, and for TQ != TK.
TEST(Attention, MatchesUnfusedCompositionWithDropout) {
  struct Case {
    int64_t b, tq, tk, nh, hs;
    bool mask;
    double p;
  };
  for (DType dt : {DType::f64, DType::f32}) {
    for (const Case& c : {Case{2, 5, 5, 2, 3, true, 0.3}, Case{3, 4, 7, 3, 2, false, 0.0},
                          Case{2, 16, 16, 4, 8, true, 0.1}, Case{1, 3, 9, 1, 4, false, 0.5}}) {
      Rng rng(42);
      const int64_t h = c.nh * c.hs;
      Tensor qt = Tensor::uniform({c.b, c.tq, h}, -1, 1, rng, dt), kt = Tensor::uniform({c.b, c.tk, h}, -1, 1, rng, dt),
             vt = Tensor::uniform({c.b, c.tk, h}, -1, 1, rng, dt), r = Tensor::uniform({c.b, c.tq, h}, -1, 1, rng, dt);
      Tensor mask = c.mask ? padding_mask(c.b, c.tk, dt) : Tensor();
      const DropoutKey key{11, 1000, 40, nullptr};
      const double sc = 1.0 / std::sqrt(static_cast<double>(c.hs));
      auto run = [&](bool fused) {
        Variable q(qt, true), k(kt, true), v(vt, true);
        Variable y = fused ? attention(q, k, v, c.nh, mask, sc, c.p, true, key)
                           : attention_unfused(q, k, v, c.nh, mask, sc, c.p, key);
        sum(mul(y, Variable(r))).backward();
        return std::vector<Tensor>{y.value(), q.grad(), k.grad(), v.grad()};
      };
      auto f = run(true), u = run(false);
      const double tol = dt == DType::f64 ? 1e-12 : 1e-5;
      for (size_t i = 0; i < f.size(); ++i)
        EXPECT_LE(max_abs_diff(f[i], u[i]), tol) << "tensor " << i << " dtype " << dtype_name(dt) << " b " << c.b;
    }
  }
}

TEST(Attention, EvalModeAndPZeroAreDropoutFree) {
  Rng rng(3);
  Tensor qt = Tensor::uniform({2, 6, 8}, -1, 1, rng);
  Variable q(qt), k(Tensor::uniform({2, 6, 8}, -1, 1, rng)), v(Tensor::uniform({2, 6, 8}, -1, 1, rng));
  Tensor a = attention(q, k, v, 2, Tensor(), 0.5, 0.3, false, DropoutKey{}).value();
  Tensor b = attention(q, k, v, 2, Tensor(), 0.5, 0.0, true, DropoutKey{}).value();
  EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()), 0);
}

TEST(Attention, MisuseNamesTheShapes) {
  Variable q(Tensor::zeros({2, 4, 6})), k(Tensor::zeros({2, 5, 6})), bad(Tensor::zeros({2, 5, 4}));
  try {
    attention(q, k, bad, 2, Tensor(), 1.0, 0.0, false, DropoutKey{});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(2, 5, 4)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(attention(q, k, k, 4, Tensor(), 1.0, 0.0, false, DropoutKey{}), Error);  // 6 % 4 != 0
  EXPECT_THROW(attention(q, k, k, 2, Tensor::zeros({2, 4}), 1.0, 0.0, false, DropoutKey{}), Error);
}

// The fused residual block end gives the unfused chain's values and gradients: bit for bit in f32 (the same
// arithmetic in the same order) and in f64.
TEST(DropoutAddLayerNorm, MatchesUnfusedChainBitForBit) {
  for (DType dt : {DType::f64, DType::f32}) {
    for (double p : {0.0, 0.1, 0.6}) {
      Rng rng(8);
      Tensor xt = Tensor::uniform({3, 7, 40}, -1, 1, rng, dt), rt = Tensor::uniform({3, 7, 40}, -1, 1, rng, dt);
      Tensor gt = Tensor::uniform({40}, 0.5, 1.5, rng, dt), bt = Tensor::uniform({40}, -0.5, 0.5, rng, dt);
      Tensor w = Tensor::uniform({3, 7, 40}, -1, 1, rng, dt);
      const DropoutKey key{21, 1001, 17, nullptr};
      auto run = [&](bool fused) {
        Variable x(xt, true), r(rt, true), g(gt, true), b(bt, true);
        Variable y = fused ? dropout_add_layer_norm(x, r, g, b, 1e-12, p, true, key)
                           : layer_norm(add(dropout(x, p, true, key), r), g, b, 1e-12);
        sum(mul(y, Variable(w))).backward();
        return std::vector<Tensor>{y.value(), x.grad(), r.grad(), g.grad(), b.grad()};
      };
      auto f = run(true), u = run(false);
      for (size_t i = 0; i < f.size(); ++i)
        EXPECT_EQ(std::memcmp(f[i].raw_data(), u[i].raw_data(), f[i].nbytes()), 0)
            << "tensor " << i << " p " << p << " dtype " << dtype_name(dt);
    }
  }
}

// Fused ops reduce in a fixed order and key their masks by sample: 1 and 2 threads agree bit for bit.
TEST(Fused, ResultsDoNotDependOnThreadCount) {
  auto run = [](int threads) {
    set_num_threads(threads);
    Rng rng(5);
    Variable q(Tensor::uniform({8, 64, 32}, -1, 1, rng), true), k(Tensor::uniform({8, 64, 32}, -1, 1, rng), true),
        v(Tensor::uniform({8, 64, 32}, -1, 1, rng), true);
    Variable y = attention(q, k, v, 4, padding_mask(8, 64, DType::f32), 0.35, 0.1, true, DropoutKey{1, 2, 3, nullptr});
    y = dropout(y, 0.2, true, DropoutKey{4, 5, 6, nullptr});
    y = dropout_add_layer_norm(y, q, Variable(Tensor::full({32}, 1.1)), Variable(Tensor::zeros({32})), 1e-12, 0.1,
                               true, DropoutKey{7, 8, 9, nullptr});
    Variable loss = sum(mul(y, Variable(Tensor::uniform({8, 64, 32}, -1, 1, rng))));
    loss.backward();
    return std::vector<Tensor>{loss.value(), q.grad(), k.grad(), v.grad()};
  };
  const int saved = num_threads();
  auto one = run(1), two = run(2);
  set_num_threads(saved);
  for (size_t i = 0; i < one.size(); ++i)
    EXPECT_EQ(std::memcmp(one[i].raw_data(), two[i].raw_data(), one[i].nbytes()), 0) << "tensor " << i;
}

// add / sub / mul walk the broadcast operand in runs (no division per element), in 8192-element blocks that
// start mid-run: values and gradients equal the element-by-element definition.
TEST(Elementwise, BroadcastRunsMatchTheDefinition) {
  Rng rng(6);
  for (auto [as, bs] : std::vector<std::pair<Shape, Shape>>{
           {{9, 5000}, {5000}}, {{7, 3, 4097}, {3, 4097}}, {{7, 3, 4097}, {7, 3, 4097}}}) {
    Tensor at = Tensor::uniform(as, -1, 1, rng), bt = Tensor::uniform(bs, -1, 1, rng);
    const int64_t na = at.numel(), inner = bt.numel();
    Variable a(at, true), b(bt, true);
    Tensor y = add(a, b).value(), z = sub(a, b).value();
    Variable m = mul(a, b);
    sum(m).backward();
    for (int64_t i = 0; i < na; ++i) {
      const float av = at.data<float>()[i], bv = bt.data<float>()[i % inner];
      ASSERT_EQ(y.data<float>()[i], av + bv) << i;
      ASSERT_EQ(z.data<float>()[i], av - bv) << i;
      ASSERT_EQ(m.value().data<float>()[i], av * bv) << i;
      ASSERT_EQ(a.grad().data<float>()[i], bv) << i;
    }
  }
}

// ---- the fusions: fused Q, K, V projection, attention on its packed output, layer norm + dropout ----

namespace {

// max |a - b| over max |b| (0 when both are all zeros).
double rel_to(const Tensor& a, const Tensor& b) {
  double m = 0;
  for (int64_t i = 0; i < b.numel(); ++i) m = std::max(m, std::fabs(b.get(i)));
  const double d = max_abs_diff(a, b);
  return m > 0 ? d / m : d;
}

}  // namespace

// linear_concat equals the separate linears concatenated: outputs and the gradients of x, every weight and every
// bias (the latter bit for bit: the same column sums), in f64 to rounding and in f32 to f32 rounding (dx sums the
// blocks in one gemm instead of three).
TEST(LinearConcat, EqualsSeparateLinears) {
  for (DType dt : {DType::f64, DType::f32}) {
    for (bool with_bias : {true, false}) {
      Rng rng(31);
      const std::vector<int64_t> outs = {48, 16, 40};
      Tensor xt = Tensor::uniform({3, 7, 32}, -1, 1, rng, dt);
      std::vector<Tensor> wt, bt;
      for (int64_t o : outs) {
        wt.push_back(Tensor::uniform({o, 32}, -0.5, 0.5, rng, dt));
        bt.push_back(Tensor::uniform({o}, -0.5, 0.5, rng, dt));
      }
      Tensor r = Tensor::uniform({3, 7, 104}, -1, 1, rng, dt);
      auto run = [&](bool fused) {
        Variable x(xt, true);
        std::vector<Variable> w, b;
        for (size_t i = 0; i < outs.size(); ++i) {
          w.emplace_back(wt[i], true);
          if (with_bias) b.emplace_back(bt[i], true);
        }
        Variable y;
        if (fused) {
          y = linear_concat(x, w, b);
        } else {
          std::vector<Variable> parts;
          for (size_t i = 0; i < outs.size(); ++i) parts.push_back(linear(x, w[i], with_bias ? b[i] : Variable()));
          y = concat(parts, 2);
        }
        sum(mul(y, Variable(r))).backward();
        std::vector<Tensor> out{y.value(), x.grad()};
        for (auto& v : w) out.push_back(v.grad());
        for (auto& v : b) out.push_back(v.grad());
        return out;
      };
      auto f = run(true), u = run(false);
      ASSERT_EQ(f.size(), u.size());
      const double tol = dt == DType::f64 ? 1e-13 : 2e-6;
      for (size_t i = 0; i < f.size(); ++i) {
        EXPECT_LE(rel_to(f[i], u[i]), tol) << "tensor " << i << " " << dtype_name(dt) << " bias " << with_bias;
        if (i >= 2 + outs.size()) {  // bias gradients: the same column sums, bit for bit
          EXPECT_EQ(std::memcmp(f[i].raw_data(), u[i].raw_data(), f[i].nbytes()), 0) << "bias " << i;
        }
      }
    }
  }
}

TEST(LinearConcat, MisuseNamesTheShapes) {
  Variable x(Tensor::zeros({2, 8})), w1(Tensor::zeros({4, 8})), w2(Tensor::zeros({4, 7})), b1(Tensor::zeros({4}));
  try {
    linear_concat(x, {w1, w2}, {});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("weight 1 f32(4, 7)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(linear_concat(x, {w1, w1}, {b1}), Error);                                   // one bias for two
  EXPECT_THROW(linear_concat(x, {w1}, {Variable(Tensor::zeros({5}))}), Error);             // bias size
  EXPECT_THROW(linear_concat(x, {}, {}), Error);                                           // no weights
  EXPECT_THROW(attention_qkv(Variable(Tensor::zeros({2, 3, 8})), 2, Tensor(), 1.0, 0.0, false, DropoutKey{}), Error);
}

// attention_qkv / attention_varlen_qkv on a (.., 3H) tensor equal attention / attention_varlen on its three column
// blocks (slices), with a padding mask and dropout: the context and the gradient of the packed tensor, f64 to
// rounding, f32 to f32 rounding (the same products read with another row stride).
TEST(AttentionQkv, EqualsAttentionOnTheColumnBlocks) {
  const int64_t b = 3, t = 9, h = 16, nh = 4;
  for (DType dt : {DType::f64, DType::f32}) {
    Rng rng(41);
    Tensor xt = Tensor::uniform({b, t, 3 * h}, -1, 1, rng, dt), r = Tensor::uniform({b, t, h}, -1, 1, rng, dt);
    const DropoutKey key{5, 6, 7, {}};
    const Tensor mask = padding_mask(b, t, dt);
    auto run = [&](bool fused) {
      Variable x(xt, true);
      Variable ctx = fused ? attention_qkv(x, nh, mask, 0.5, 0.2, true, key)
                           : attention(slice(x, 2, 0, h), slice(x, 2, h, 2 * h), slice(x, 2, 2 * h, 3 * h), nh, mask,
                                       0.5, 0.2, true, key);
      sum(mul(ctx, Variable(r))).backward();
      return std::vector<Tensor>{ctx.value(), x.grad()};
    };
    auto f = run(true), u = run(false);
    for (size_t i = 0; i < f.size(); ++i)
      EXPECT_LE(rel_to(f[i], u[i]), dt == DType::f64 ? 1e-13 : 1e-6) << "padded tensor " << i << dtype_name(dt);
    // Packed: sequences of 4, 0, 9 and 1 tokens.
    const std::vector<int64_t> cu = {0, 4, 4, 13, 14};
    Tensor pt = Tensor::uniform({14, 3 * h}, -1, 1, rng, dt), pr = Tensor::uniform({14, h}, -1, 1, rng, dt);
    auto run_varlen = [&](bool fused) {
      Variable x(pt, true);
      Variable ctx = fused ? attention_varlen_qkv(x, nh, cu, 0.5, 0.2, true, key)
                           : attention_varlen(slice(x, 1, 0, h), slice(x, 1, h, 2 * h), slice(x, 1, 2 * h, 3 * h), nh,
                                              cu, 0.5, 0.2, true, key);
      sum(mul(ctx, Variable(pr))).backward();
      return std::vector<Tensor>{ctx.value(), x.grad()};
    };
    auto fv = run_varlen(true), uv = run_varlen(false);
    for (size_t i = 0; i < fv.size(); ++i)
      EXPECT_LE(rel_to(fv[i], uv[i]), dt == DType::f64 ? 1e-13 : 1e-6) << "packed tensor " << i << dtype_name(dt);
  }
}

// The embeddings' layer norm + dropout fused equals layer_norm then dropout with the same key bit for bit (values
// and every gradient, so the same masks), in f64 and f32, padded (B, T, C) and packed tokens (N, C).
TEST(LayerNormDropout, MatchesUnfusedChainBitForBit) {
  auto tokens = std::make_shared<PackedTokens>();
  for (int32_t s = 0; s < 3; ++s)
    for (int32_t pos = 0; pos < 2 + 2 * s; ++pos) tokens->sample.push_back(s), tokens->position.push_back(pos);
  for (DType dt : {DType::f64, DType::f32}) {
    for (bool packed : {false, true}) {
      for (double p : {0.0, 0.1, 0.6}) {
        Rng rng(9);
        const Shape shape = packed ? Shape{12, 40} : Shape{3, 7, 40};
        Tensor xt = Tensor::uniform(shape, -1, 1, rng, dt), w = Tensor::uniform(shape, -1, 1, rng, dt);
        Tensor gt = Tensor::uniform({40}, 0.5, 1.5, rng, dt), bt = Tensor::uniform({40}, -0.5, 0.5, rng, dt);
        const DropoutKey key{21, 1, 17, packed ? tokens : nullptr};
        auto run = [&](bool fused) {
          Variable x(xt, true), g(gt, true), b(bt, true);
          Variable y = fused ? layer_norm_dropout(x, g, b, 1e-12, p, true, key)
                             : dropout(layer_norm(x, g, b, 1e-12), p, true, key);
          sum(mul(y, Variable(w))).backward();
          return std::vector<Tensor>{y.value(), x.grad(), g.grad(), b.grad()};
        };
        auto f = run(true), u = run(false);
        for (size_t i = 0; i < f.size(); ++i)
          EXPECT_EQ(std::memcmp(f[i].raw_data(), u[i].raw_data(), f[i].nbytes()), 0)
              << "tensor " << i << " p " << p << " packed " << packed << " " << dtype_name(dt);
        if (p > 0) {  // dropped elements are exactly 0 in both
          int64_t zeros = 0;
          for (int64_t i = 0; i < f[0].numel(); ++i) zeros += f[0].get(i) == 0.0;
          EXPECT_GT(zeros, 0);
        }
      }
    }
  }
}

// linear_gelu: without gradients one oneDNN product with the GELU as a post-op; its values against the f64 ops and
// against the f32 ops it replaces (max difference relative to the largest output).
TEST(LinearGelu, FusedPredictionEqualsTheTwoOps) {
  for (GeluForm form : {GeluForm::erf, GeluForm::tanh}) {
    for (const auto& dims : std::vector<std::array<int64_t, 3>>{{21, 32, 48}, {130, 256, 1024}, {1, 64, 16}}) {
      const int64_t n = dims[0], in = dims[1], out = dims[2];
      Rng rng(41);
      // Pre-activations spread over [-8, 8] and beyond: GELU's tails and its bend around 0.
      Tensor xt = Tensor::uniform({n, in}, -1, 1, rng), wt = Tensor::uniform({out, in}, -1, 1, rng);
      Tensor bt = Tensor::uniform({out}, -2, 2, rng);
      Tensor fused;
      {
        NoGradGuard ng;
        fused = linear_gelu(Variable(xt), Variable(wt), Variable(bt), form).value();
      }
      const Tensor plain = gelu(linear(Variable(xt), Variable(wt), Variable(bt)), form).value();
      const Tensor ref = gelu(linear(Variable(xt.to(DType::f64)), Variable(wt.to(DType::f64)),
                                     Variable(bt.to(DType::f64))), form).value();
      ASSERT_EQ(fused.shape(), Shape({n, out}));
      EXPECT_LE(rel_to(fused, plain), 1e-6) << "form " << static_cast<int>(form) << " n " << n;
      // Both f32 results against f64: the fused one no further off than rounding makes the plain one.
      EXPECT_LE(rel_to(fused, ref), 1e-6) << "form " << static_cast<int>(form) << " n " << n;
      EXPECT_LE(rel_to(plain, ref), 1e-6) << "form " << static_cast<int>(form) << " n " << n;
      // With gradients it is the two ops: the same values bit for bit, and a node to differentiate.
      Variable x(xt, true);
      const Variable y = linear_gelu(x, Variable(wt), Variable(bt), form);
      EXPECT_TRUE(y.requires_grad());
      EXPECT_EQ(std::memcmp(y.value().raw_data(), plain.raw_data(), plain.nbytes()), 0);
    }
  }
}

namespace {
bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}
}  // namespace

// Packed weights run the same oneDNN kernel with the packing done ahead: the same values bit for bit as linear() and
// linear_gelu(), for every M (one packed weight serves all), with and without bias.
TEST(PackedLinear, EqualsTheLinearBitForBit) {
  for (const auto& dims : std::vector<std::array<int64_t, 2>>{{256, 256}, {256, 1024}, {1024, 256}, {48, 20}}) {
    const int64_t in = dims[0], out = dims[1];
    Rng rng(43);
    const Variable w(Tensor::uniform({out, in}, -1, 1, rng)), b(Tensor::uniform({out}, -1, 1, rng));
    const auto packed = pack_linear(w);
    NoGradGuard ng;
    for (int64_t m : {1, 7, 51, 130}) {
      const Variable x(Tensor::uniform({1, m, in}, -1, 1, rng));
      EXPECT_TRUE(same_bits(linear_prepacked(x, w, b, *packed).value(), linear(x, w, b).value())) << in << "x" << out
                                                                                                  << " m " << m;
      EXPECT_TRUE(same_bits(linear_prepacked(x, w, Variable(), *packed).value(), linear(x, w, Variable()).value()));
      for (GeluForm form : {GeluForm::erf, GeluForm::tanh}) {
        EXPECT_TRUE(same_bits(linear_prepacked(x, w, b, *packed, &form).value(), linear_gelu(x, w, b, form).value()))
            << in << "x" << out << " m " << m << " form " << static_cast<int>(form);
      }
    }
  }
}

// A packed weight never gives stale values: rewritten in place (an optimizer step) or replaced (set_value), the
// weight's current values are used; with gradients it records the linear's node; bad shapes throw as linear() does.
TEST(PackedLinear, FollowsTheCurrentWeight) {
  Rng rng(44);
  Variable w(Tensor::uniform({64, 32}, -1, 1, rng), true);
  const Variable b(Tensor::uniform({64}, -1, 1, rng));
  const Variable x(Tensor::uniform({5, 32}, -1, 1, rng));
  const auto packed = pack_linear(w);
  {
    NoGradGuard ng;
    float* p = w.value().data<float>();
    for (int64_t i = 0; i < w.numel(); ++i) p[i] *= 0.5f;  // in place, as an optimizer step
    EXPECT_TRUE(same_bits(linear_prepacked(x, w, b, *packed).value(), linear(x, w, b).value()));
    w.set_value(Tensor::uniform({64, 32}, -1, 1, rng));  // another tensor
    EXPECT_TRUE(same_bits(linear_prepacked(x, w, b, *packed).value(), linear(x, w, b).value()));
    const Variable bad(Tensor::uniform({5, 31}, -1, 1, rng));
    EXPECT_THROW(linear_prepacked(bad, w, b, *packed), Error);
  }
  const Variable y = linear_prepacked(x, w, b, *pack_linear(w));
  EXPECT_TRUE(y.requires_grad());
  EXPECT_THROW(pack_linear(Variable(Tensor::zeros({4, 4}, DType::f64))), Error);
}
