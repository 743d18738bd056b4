// bf16_test.cpp: mixed precision (MatmulPrecision::bf16, `--bf16`): the f32 -> bf16 conversion (ties, NaN,
// Inf, subnormals, vector path == scalar path), bf16 gemms against an f64 reference within the bf16 error
// bound and exact where the inputs allow it, the ops (forward, both gradients, guard, f64 untouched,
// checkpointing), and a short BERT training run in bf16 against f32.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "bertrain/core/allocator.h"
#include "bertrain/core/rng.h"
#include "bertrain/core/threads.h"
#include "bertrain/models/bert.h"
#include "bertrain/nn/layers.h"
#include "bertrain/optim/clip.h"
#include "bertrain/optim/lamb.h"
#include "bertrain/ops/ops.h"
#include "kernels/convert.h"
#include "kernels/gemm.h"
#include "kernels/reduce.h"
#include "test_util.h"

using namespace bertrain;

namespace {

uint16_t cvt(uint32_t u) { return kernels::f32_to_bf16_bits(u); }
uint16_t cvtf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return cvt(u);
}
float bf(uint16_t b) { return bf16::to_float(b); }
/// f rounded to bf16 and back, as the matmul path does.
float round_bf16(float f) { return bf(cvtf(f)); }

}  // namespace

// ---- conversion ----

TEST(Bf16Convert, RoundsToNearestEvenOnTies) {
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to the even one (1.0, mantissa ...0).
  EXPECT_EQ(cvtf(1.0f + 1.0f / 256), 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): up.
  EXPECT_EQ(cvtf(1.0f + 3.0f / 256), 0x3f82);
  EXPECT_EQ(cvt(0x3f808001u), 0x3f81);  // just above the tie: up
  EXPECT_EQ(cvt(0x3f807fffu), 0x3f80);  // just below: down
  EXPECT_EQ(cvt(0xbf808000u), 0xbf80);  // negative tie to even
  EXPECT_EQ(cvt(0xbf818000u), 0xbf82);
  // Values already in bf16 are unchanged.
  for (float f : {0.5f, -2.0f, 3.0f, 1.0f / 64, -1.0f - 1.0f / 128}) EXPECT_EQ(round_bf16(f), f) << f;
}

TEST(Bf16Convert, InfinityNanOverflowAndSubnormals) {
  EXPECT_EQ(cvtf(INFINITY), 0x7f80);
  EXPECT_EQ(cvtf(-INFINITY), 0xff80);
  EXPECT_EQ(cvt(0x7f7fffffu), 0x7f80);  // FLT_MAX rounds up to +Inf
  EXPECT_EQ(cvt(0x7f7f7fffu), 0x7f7f);  // largest value that rounds down to the largest bf16
  // NaN stays NaN and becomes quiet, keeping the sign and upper payload; a payload only in the low 16 bits
  // must not turn into Inf.
  EXPECT_EQ(cvt(0x7fc00000u), 0x7fc0);
  EXPECT_EQ(cvt(0x7f800001u), 0x7fc0);
  EXPECT_EQ(cvt(0xff812345u), 0xffc1);
  EXPECT_TRUE(std::isnan(bf(cvtf(NAN))));
  // Zero and subnormals -> signed zero (VCVTNE2PS2BF16 semantics); the smallest normal is kept.
  EXPECT_EQ(cvt(0x00000000u), 0x0000);
  EXPECT_EQ(cvt(0x80000000u), 0x8000);
  EXPECT_EQ(cvt(0x00000001u), 0x0000);
  EXPECT_EQ(cvt(0x807fffffu), 0x8000);
  EXPECT_EQ(cvt(0x00800000u), 0x0080);
}

TEST(Bf16Convert, AgreesWithDtypeConversionOnNormalNumbers) {
  Rng rng(4);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t u = static_cast<uint32_t>(rng.randint(uint64_t{1} << 32));
    if ((u & 0x7f800000u) == 0 || (u & 0x7f800000u) == 0x7f800000u) continue;  // subnormal, Inf, NaN
    float f;
    std::memcpy(&f, &u, 4);
    ASSERT_EQ(cvt(u), bf16::from_float(f)) << std::hex << u;
  }
}

// Every upper half (all signs, exponents and bf16 mantissas: zeros, subnormals, normals, Inf, NaN) with low
// halves around the tie point and random ones, at odd lengths and offsets so the masked tail runs too.
TEST(Bf16Convert, VectorPathEqualsScalarPathBitForBit) {
  if (!kernels::cpu_has_avx512_bf16()) GTEST_SKIP() << "this CPU has no AVX512_BF16: only the scalar path runs";
  Rng rng(9);
  std::vector<float> src;
  for (uint32_t hi = 0; hi < 0x10000u; ++hi)
    for (uint32_t lo : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu,
                        static_cast<uint32_t>(rng.randint(0x10000))}) {
      const uint32_t u = hi << 16 | lo;
      float f;
      std::memcpy(&f, &u, 4);
      src.push_back(f);
    }
  for (int64_t off : {0, 1, 7}) {
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{15}, int64_t{17}, int64_t{31}, int64_t{33},
                      static_cast<int64_t>(src.size()) - off}) {
      std::vector<uint16_t> v(n + 1, 0xabcd), s(n + 1, 0xabcd);
      ASSERT_TRUE(kernels::f32_to_bf16_vector(src.data() + off, v.data(), n));
      kernels::f32_to_bf16_scalar(src.data() + off, s.data(), n);
      ASSERT_EQ(v, s) << "offset " << off << " n " << n;
      EXPECT_EQ(v[n], 0xabcd) << "wrote past the end";
    }
  }
  // The parallel, chunked entry point gives the same bits.
  std::vector<uint16_t> p(src.size()), s(src.size());
  kernels::f32_to_bf16(src.data(), p.data(), static_cast<int64_t>(src.size()));
  kernels::f32_to_bf16_scalar(src.data(), s.data(), static_cast<int64_t>(src.size()));
  EXPECT_EQ(p, s);
}

// ---- gemm ----

namespace {

struct GemmCase {
  const char* name;
  kernels::GemmShape s;
  bool bias, accumulate;
};

/// Row-major element (i, j) of matrix `b` of a batch x (rows, cols) operand stored transposed when `trans`.
double at(const std::vector<float>& v, int64_t b, int64_t rows, int64_t cols, bool trans, int64_t i, int64_t j) {
  return trans ? v[b * rows * cols + j * rows + i] : v[b * rows * cols + i * cols + j];
}

Tensor bf16_tensor(const std::vector<float>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::bf16);
  kernels::f32_to_bf16_scalar(v.data(), static_cast<uint16_t*>(t.raw_data()), static_cast<int64_t>(v.size()));
  return t;
}

/// Runs one bf16 gemm on (a, b, bias, c0) and checks every element against two f64 references:
///   exact operands:   |c - ref| <= 2^-8 (1 + 2^-8) sum|a b| + k 2^-23 sum|a b| + |c0 + bias| 2^-23
///                     (each operand rounded by at most 2^-9 relative, f32 accumulation over k terms);
///   rounded operands: |c - ref_bf16| <= k 2^-23 sum|a b| + ...  (what is left is only f32 accumulation),
/// and sets `worst` to the largest |c - ref| / sum|a b| seen (to show the bf16 rounding really happened).
void check_gemm(const GemmCase& gc, const std::vector<float>& a, const std::vector<float>& b,
                const std::vector<float>& bias, const std::vector<float>& c0, double& worst) {
  const kernels::GemmShape& s = gc.s;
  Tensor ta = bf16_tensor(a), tb = bf16_tensor(b);
  Tensor tc = Tensor::from_data(c0.data(), {static_cast<int64_t>(c0.size())});
  Tensor tbias = Tensor::from_data(bias.data(), {s.n});
  kernels::gemm(s, ta, tb, tc, gc.accumulate, gc.bias ? &tbias : nullptr);
  std::vector<float> ar(a.size()), br(b.size());
  for (size_t i = 0; i < a.size(); ++i) ar[i] = round_bf16(a[i]);
  for (size_t i = 0; i < b.size(); ++i) br[i] = round_bf16(b[i]);
  worst = 0;
  for (int64_t q = 0; q < s.batch; ++q)
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        double ref = 0, ref_r = 0, mag = 0;
        for (int64_t k = 0; k < s.k; ++k) {
          const double x = at(a, q, s.m, s.k, s.trans_a, i, k), y = at(b, q, s.k, s.n, s.trans_b, k, j);
          ref += x * y;
          mag += std::fabs(x * y);
          ref_r += at(ar, q, s.m, s.k, s.trans_a, i, k) * at(br, q, s.k, s.n, s.trans_b, k, j);
        }
        double add = 0;
        if (gc.bias) add += bias[j];
        if (gc.accumulate) add += c0[(q * s.m + i) * s.n + j];
        const double got = tc.get((q * s.m + i) * s.n + j);
        const double acc = static_cast<double>(s.k + 2) * std::ldexp(1.0, -23) * (mag + std::fabs(add));
        const double bound = std::ldexp(1.0, -8) * (1 + std::ldexp(1.0, -8)) * mag + acc;
        ASSERT_LE(std::fabs(got - (ref + add)), bound) << gc.name << " (" << q << ", " << i << ", " << j << ")";
        ASSERT_LE(std::fabs(got - (ref_r + add)), acc) << gc.name << " rounded-operand reference";
        worst = std::max(worst, std::fabs(got - (ref + add)) / mag);
      }
}

}  // namespace

TEST(Bf16Gemm, MatchesF64ReferenceWithinTheBf16Bound) {
  const std::vector<GemmCase> cases = {
      {"plain", {1, 37, 29, 61, false, false}, false, false},
      {"a transposed", {1, 37, 29, 61, true, false}, false, false},
      {"b transposed (linear forward)", {1, 37, 29, 61, false, true}, true, false},
      {"both transposed", {1, 37, 29, 61, true, true}, false, false},
      {"batched (attention)", {6, 17, 19, 16, false, true}, false, false},
      {"batched, a transposed", {6, 17, 19, 16, true, false}, false, false},
      {"bias", {1, 33, 40, 50, false, false}, true, false},
      {"accumulate (weight gradient)", {1, 24, 20, 300, true, false}, false, true},
      {"bias and accumulate", {2, 9, 12, 70, false, true}, true, true},
  };
  Rng rng(21);
  for (const GemmCase& gc : cases) {
    const kernels::GemmShape& s = gc.s;
    std::vector<float> a(s.batch * s.m * s.k), b(s.batch * s.k * s.n), bias(s.n), c0(s.batch * s.m * s.n);
    for (float& x : a) x = static_cast<float>(rng.normal());
    for (float& x : b) x = static_cast<float>(rng.normal() * 0.1);
    for (float& x : bias) x = static_cast<float>(rng.normal());
    for (float& x : c0) x = static_cast<float>(rng.normal());
    double worst = 0;
    check_gemm(gc, a, b, bias, c0, worst);
    if (HasFatalFailure()) return;
    // The operands really were rounded: f32 alone would be within ~1e-6 of the exact sum.
    EXPECT_GT(worst, 1e-4) << gc.name;
  }
}

// bf16-representable inputs (small multiples of 1/8) with k <= 32: every product and partial sum is exact in
// f32, so the result equals the f64 reference exactly.
TEST(Bf16Gemm, ExactForBf16RepresentableInputsAndSmallK) {
  Rng rng(5);
  for (const kernels::GemmShape& s : {kernels::GemmShape{1, 13, 11, 32, false, true},
                                      kernels::GemmShape{3, 8, 5, 7, true, false},
                                      kernels::GemmShape{1, 16, 16, 16, true, true}}) {
    std::vector<float> a(s.batch * s.m * s.k), b(s.batch * s.k * s.n), bias(s.n, 0.25f), c0(s.batch * s.m * s.n);
    for (float& x : a) x = static_cast<float>(static_cast<int>(rng.randint(33)) - 16) / 8;
    for (float& x : b) x = static_cast<float>(static_cast<int>(rng.randint(33)) - 16) / 8;
    for (float& x : c0) x = static_cast<float>(static_cast<int>(rng.randint(9)) - 4);
    for (bool acc : {false, true}) {
      Tensor ta = bf16_tensor(a), tb = bf16_tensor(b), tbias = Tensor::from_data(bias.data(), {s.n});
      Tensor tc = Tensor::from_data(c0.data(), {static_cast<int64_t>(c0.size())});
      kernels::gemm(s, ta, tb, tc, acc, &tbias);
      for (int64_t q = 0; q < s.batch; ++q)
        for (int64_t i = 0; i < s.m; ++i)
          for (int64_t j = 0; j < s.n; ++j) {
            double ref = 0.25 + (acc ? c0[(q * s.m + i) * s.n + j] : 0.0);
            for (int64_t k = 0; k < s.k; ++k)
              ref += at(a, q, s.m, s.k, s.trans_a, i, k) * at(b, q, s.k, s.n, s.trans_b, k, j);
            ASSERT_EQ(tc.get((q * s.m + i) * s.n + j), ref) << q << " " << i << " " << j;
          }
    }
  }
}

TEST(Bf16Gemm, PrimitiveCacheKeyIncludesTheDtype) {
  const kernels::GemmShape s{1, 7, 9, 11, false, false};
  std::vector<float> a(77, 0.5f), b(99, 0.25f);
  Tensor c = Tensor::zeros({63});
  kernels::gemm(s, Tensor::from_data(a.data(), {77}), Tensor::from_data(b.data(), {99}), c, false);
  const int64_t before = kernels::gemm_primitives_created();
  kernels::gemm(s, bf16_tensor(a), bf16_tensor(b), c, false);  // same shape, other dtype: a new primitive
  EXPECT_EQ(kernels::gemm_primitives_created(), before + 1);
  EXPECT_EQ(c.get(0), 11 * 0.125);
  kernels::gemm(s, bf16_tensor(a), bf16_tensor(b), c, false);  // cached
  EXPECT_EQ(kernels::gemm_primitives_created(), before + 1);
}

// ---- ops ----

namespace {

/// Relative max-norm distance between two tensors of the same size.
double max_abs(const Tensor& x) {
  double m = 0;
  for (int64_t i = 0; i < x.numel(); ++i) m = std::max(m, std::fabs(x.get(i)));
  return m;
}

double rel_diff(const Tensor& x, const Tensor& ref) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    num = std::max(num, std::fabs(x.get(i) - ref.get(i)));
    den = std::max(den, std::fabs(ref.get(i)));
  }
  return num / den;
}

}  // namespace

TEST(Bf16Ops, DefaultIsF32AndTheGuardRestores) {
  EXPECT_EQ(matmul_precision(), MatmulPrecision::f32);
  {
    MatmulPrecisionGuard g(MatmulPrecision::bf16);
    EXPECT_EQ(matmul_precision(), MatmulPrecision::bf16);
    {
      MatmulPrecisionGuard g2(MatmulPrecision::f32);
      EXPECT_EQ(matmul_precision(), MatmulPrecision::f32);
    }
    EXPECT_EQ(matmul_precision(), MatmulPrecision::bf16);
  }
  EXPECT_EQ(matmul_precision(), MatmulPrecision::f32);
  EXPECT_STREQ(matmul_precision_name(MatmulPrecision::bf16), "bf16");
  EXPECT_THROW(set_matmul_precision(static_cast<MatmulPrecision>(7)), Error);
}

// linear, matmul and bmm in bf16: values and both gradients against the f64 computation, within a
// tolerance set by the bf16 bound (2^-8 relative per term; the errors of random terms partly cancel, so the
// max-norm error is well below 2^-8 of the largest value, but far above f32's 1e-6).
TEST(Bf16Ops, LinearMatmulBmmForwardAndGradientsWithinBf16Tolerance) {
  Rng rng(12);
  Tensor x = Tensor::uniform({3, 5, 48}, -1, 1, rng), w = Tensor::uniform({40, 48}, -0.5, 0.5, rng);
  Tensor bias = Tensor::uniform({40}, -1, 1, rng), dy = Tensor::uniform({3, 5, 40}, -1, 1, rng);
  Tensor qa = Tensor::uniform({2, 3, 16, 24}, -1, 1, rng), qb = Tensor::uniform({2, 3, 20, 24}, -1, 1, rng);
  Tensor dq = Tensor::uniform({2, 3, 16, 20}, -1, 1, rng);
  Tensor ma = Tensor::uniform({30, 20}, -1, 1, rng), mb = Tensor::uniform({30, 26}, -1, 1, rng);
  Tensor dm = Tensor::uniform({20, 26}, -1, 1, rng);
  auto run = [&](DType dt) {
    std::vector<Tensor> out;
    Variable vx(x.to(dt), true), vw(w.to(dt), true), vb(bias.to(dt), true);
    Variable y = linear(vx, vw, vb);
    y.backward(dy.to(dt));
    Variable va(qa.to(dt), true), vbb(qb.to(dt), true);
    Variable z = bmm(va, vbb, false, true);
    z.backward(dq.to(dt));
    Variable m1(ma.to(dt), true), m2(mb.to(dt), true);
    Variable mm = matmul(m1, m2, true, false);
    mm.backward(dm.to(dt));
    for (const Tensor& t : {y.value(), vx.grad(), vw.grad(), vb.grad(), z.value(), va.grad(), vbb.grad(),
                            mm.value(), m1.grad(), m2.grad()})
      out.push_back(t.to(DType::f64));
    return out;
  };
  const std::vector<Tensor> ref = run(DType::f64);
  const std::vector<Tensor> f32 = run(DType::f32);
  std::vector<Tensor> b16, f64_in_bf16_mode;
  {
    MatmulPrecisionGuard g(MatmulPrecision::bf16);
    b16 = run(DType::f32);
    f64_in_bf16_mode = run(DType::f64);
  }
  const char* names[] = {"linear y", "linear dx", "linear dw", "linear db", "bmm z", "bmm da", "bmm db",
                         "matmul y", "matmul da", "matmul db"};
  for (size_t i = 0; i < ref.size(); ++i) {
    EXPECT_LT(rel_diff(f32[i], ref[i]), 1e-5) << names[i];
    EXPECT_EQ(std::memcmp(f64_in_bf16_mode[i].raw_data(), ref[i].raw_data(), ref[i].nbytes()), 0)
        << names[i] << ": f64 must ignore the bf16 setting";
    const double d = rel_diff(b16[i], ref[i]);
    EXPECT_LT(d, std::ldexp(1.0, -7)) << names[i];
    // The bias gradient is a plain f32 row sum, not a product: untouched by bf16.
    if (i == 3) EXPECT_LT(d, 1e-5) << names[i];
    else EXPECT_GT(d, 1e-5) << names[i] << ": expected bf16 rounding to show";
  }
}

// The fused attention's four products (Q K^T, P V and their gradients) follow the same precision: in bf16 the
// output and the q, k, v gradients are within the bf16 tolerance of f64 and visibly rounded; f64 ignores the
// setting. Masked and with dropout (the keyed masks are the same in every run).
TEST(Bf16Ops, AttentionForwardAndGradientsWithinBf16Tolerance) {
  Rng rng(21);
  const int64_t b = 2, t = 12, h = 32, nh = 4;
  Tensor q = Tensor::uniform({b, t, h}, -1, 1, rng), k = Tensor::uniform({b, t, h}, -1, 1, rng);
  Tensor v = Tensor::uniform({b, t, h}, -1, 1, rng), dy = Tensor::uniform({b, t, h}, -1, 1, rng);
  Tensor mask = Tensor::zeros({b, t}, DType::f64);
  for (int64_t j = 9; j < t; ++j) mask.set(1 * t + j, -10000.0);  // sample 1: 3 padded keys
  const DropoutKey key{7, 3, 0, nullptr};
  auto run = [&](DType dt) {
    Variable vq(q.to(dt), true), vk(k.to(dt), true), vv(v.to(dt), true);
    Variable y = attention(vq, vk, vv, nh, mask.to(dt), 1.0 / std::sqrt(8.0), 0.1, true, key);
    y.backward(dy.to(dt));
    std::vector<Tensor> out;
    for (const Tensor& x : {y.value(), vq.grad(), vk.grad(), vv.grad()}) out.push_back(x.to(DType::f64));
    return out;
  };
  const std::vector<Tensor> ref = run(DType::f64);
  std::vector<Tensor> b16, f64_in_bf16_mode;
  {
    MatmulPrecisionGuard g(MatmulPrecision::bf16);
    b16 = run(DType::f32);
    f64_in_bf16_mode = run(DType::f64);
  }
  const std::vector<Tensor> f32 = run(DType::f32);
  const char* names[] = {"attention y", "dq", "dk", "dv"};
  for (size_t i = 0; i < ref.size(); ++i) {
    EXPECT_LT(rel_diff(f32[i], ref[i]), 1e-5) << names[i];
    EXPECT_EQ(std::memcmp(f64_in_bf16_mode[i].raw_data(), ref[i].raw_data(), ref[i].nbytes()), 0)
        << names[i] << ": f64 must ignore the bf16 setting";
    const double d = rel_diff(b16[i], ref[i]);
    EXPECT_LT(d, std::ldexp(1.0, -6)) << names[i];
    EXPECT_GT(d, 1e-5) << names[i] << ": expected bf16 rounding to show";
  }
}

// The precision is captured when the forward runs: a backward after the guard has ended gives the same
// gradients as one inside it (the saved operands are the bf16 copies).
TEST(Bf16Ops, BackwardUsesThePrecisionOfTheForward) {
  Rng rng(3);
  Tensor x = Tensor::uniform({16, 32}, -1, 1, rng), w = Tensor::uniform({24, 32}, -1, 1, rng);
  Tensor dy = Tensor::uniform({16, 24}, -1, 1, rng);
  auto grads = [&](bool backward_inside) {
    Variable vx(x.clone(), true), vw(w.clone(), true);
    Variable y;
    {
      MatmulPrecisionGuard g(MatmulPrecision::bf16);
      y = linear(vx, vw, Variable());
      if (backward_inside) y.backward(dy);
    }
    if (!backward_inside) y.backward(dy);
    return std::vector<Tensor>{vx.grad().clone(), vw.grad().clone()};
  };
  auto in = grads(true), out = grads(false);
  for (size_t i = 0; i < in.size(); ++i)
    EXPECT_EQ(std::memcmp(in[i].raw_data(), out[i].raw_data(), in[i].nbytes()), 0) << i;
}

// ---- BERT ----

namespace {

// bert-tiny's shape (L2/H128/A2/I512) with a smaller vocabulary to stay fast.
BertConfig small_bert() { return test::tiny_bert_config(512, 128, 2, 2, 512, 64); }

struct Batch {
  BertInputs in;
  PretrainingTargets tg;
};

/// Learnable synthetic data: each row counts upwards from a random start (id 5 + (start + j) mod 24), so a
/// masked token follows from its neighbours; 4 masked slots per row; B follows A when the start is even.
Batch counting_batch(int64_t b, int64_t t, int64_t p, Rng& r) {
  Batch x;
  x.in.input_ids = Tensor::empty({b, t}, DType::i32);
  x.in.token_type_ids = Tensor::zeros({b, t}, DType::i32);
  x.in.attention_mask = Tensor::full({b, t}, 1, DType::i32);
  x.tg.masked_lm_positions = Tensor::empty({b, p}, DType::i32);
  x.tg.masked_lm_ids = Tensor::empty({b, p}, DType::i32);
  x.tg.masked_lm_weights = Tensor::full({b, p}, 1, DType::f32);
  x.tg.next_sentence_labels = Tensor::empty({b}, DType::i32);
  for (int64_t i = 0; i < b; ++i) {
    const int64_t start = static_cast<int64_t>(r.randint(24));
    for (int64_t j = 0; j < t; ++j) {
      x.in.input_ids.set(i * t + j, 5 + static_cast<double>((start + j) % 24));
      x.in.token_type_ids.set(i * t + j, j >= t / 2);
    }
    for (int64_t k = 0; k < p; ++k) {
      const int64_t pos = 1 + k * (t - 2) / p + static_cast<int64_t>(r.randint(static_cast<uint64_t>((t - 2) / p)));
      x.tg.masked_lm_positions.set(i * p + k, static_cast<double>(pos));
      x.tg.masked_lm_ids.set(i * p + k, x.in.input_ids.get(i * t + pos));
      x.in.input_ids.set(i * t + pos, 4);  // [MASK]
    }
    x.tg.next_sentence_labels.set(i, static_cast<double>(start % 2));
  }
  return x;
}

/// Losses of `steps` LAMB steps (lr 2e-2, clipping 1.0, dropout on) from the same initialisation and data.
std::vector<double> train_losses(MatmulPrecision prec, int steps, bool checkpointing = false) {
  MatmulPrecisionGuard g(prec);
  Rng init(7);
  BertForPreTraining m(small_bert(), init);
  m.train();
  m.bert().set_activation_checkpointing(checkpointing);
  Lamb opt(m.named_parameters());
  Rng data(8);
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    Batch x = counting_batch(8, 32, 4, data);
    x.in.first_sample = s * 8;
    x.in.dropout_seed = 99;
    opt.zero_grad();
    PretrainingOutput o = m.forward(x.in, x.tg);
    o.loss.backward();
    clip_grad_norm(m.named_parameters(), 1.0);
    opt.step(2e-2);
    losses.push_back(o.loss.item());
  }
  return losses;
}

}  // namespace

// 30 steps of a bert-tiny-shaped model, f32 and bf16 from the same seed and data. Tolerance: bf16 matmuls
// perturb every product by up to ~2^-8 relative, mostly cancelling over the sums, so a loss (a mean over 32
// predictions) moves by far less; over 30 steps the weights drift apart slowly. Measured: the largest step
// difference 0.025%, the last-10 means 0.002% apart (2026-11-30). Asserted with margin for other CPUs and
// thread counts: finite, each step within 1%, and the mean of the last 10 steps within 0.5% (the 1%
// criterion for bert-mini, on a small scale). The run must also learn (the f32 loss falls by more than 20%:
// 6.98 to 3.71 here), so "close" is not two flat curves.
TEST(Bf16Bert, ThirtyTrainingStepsTrackF32) {
  const int steps = 30;
  const std::vector<double> f32 = train_losses(MatmulPrecision::f32, steps);
  const std::vector<double> b16 = train_losses(MatmulPrecision::bf16, steps);
  double tail32 = 0, tail16 = 0, worst = 0;
  bool differs = false;
  for (int s = 0; s < steps; ++s) {
    ASSERT_TRUE(std::isfinite(b16[s])) << "step " << s;
    EXPECT_NEAR(b16[s], f32[s], 0.01 * f32[s]) << "step " << s;
    worst = std::max(worst, std::fabs(b16[s] - f32[s]) / f32[s]);
    if (b16[s] != f32[s]) differs = true;
    if (s >= steps - 10) tail32 += f32[s] / 10, tail16 += b16[s] / 10;
  }
  EXPECT_TRUE(differs) << "bf16 run identical to f32: the precision was not applied";
  EXPECT_LT(tail32, 0.8 * f32[0]) << "the model did not learn";
  EXPECT_NEAR(tail16, tail32, 0.005 * tail32);
  std::printf("first loss f32 %.4f bf16 %.4f; mean of the last 10: f32 %.4f bf16 %.4f (%.3f%%); largest step "
              "difference %.3f%%\n", f32[0], b16[0], tail32, tail16, 100 * (tail16 - tail32) / tail32, 100 * worst);
}

// Activation checkpointing recomputes in the precision the forward ran in: bit-identical losses in bf16.
TEST(Bf16Bert, CheckpointingRecomputesInBf16) {
  const std::vector<double> plain = train_losses(MatmulPrecision::bf16, 3, false);
  const std::vector<double> ckpt = train_losses(MatmulPrecision::bf16, 3, true);
  EXPECT_EQ(plain, ckpt);
}

// Conversion buffers come from the caching allocator: a steady-state bf16 step does not call malloc.
TEST(Bf16Bert, SteadyStateStepDoesNotCallMalloc) {
  MatmulPrecisionGuard g(MatmulPrecision::bf16);
  Rng init(2), data(3);
  BertForPreTraining m(small_bert(), init);
  Batch x = counting_batch(4, 16, 2, data);
  auto step = [&] {
    m.zero_grad();
    PretrainingOutput o = m.forward(x.in, x.tg);
    o.loss.backward();
    sgd_step(m.parameters(), 1e-3);
  };
  step();
  step();
  const AllocatorStats before = CachingAllocator::instance().stats();
  for (int i = 0; i < 3; ++i) step();
  EXPECT_EQ(CachingAllocator::instance().stats().system_allocs, before.system_allocs);
}

// ---- the bf16 fusions ----

// The linear backward's fused pass (kernels::sum_rows_to_bf16) gives the bits f32_to_bf16 gives and the column sums
// sum_rows gives, bit for bit, for row counts around the 256-row chunk, with and without accumulation, on 1 and 2
// threads.
TEST(Bf16Kernels, SumRowsToBf16EqualsRoundingThenSumRows) {
  Rng rng(17);
  const int saved = num_threads();
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (int64_t rows : {0, 1, 255, 256, 257, 1000}) {
      for (int64_t cols : {1, 17, 96}) {
        Tensor x = Tensor::uniform({std::max<int64_t>(rows, 1), cols}, -3, 3, rng);
        std::vector<uint16_t> got(static_cast<size_t>(rows * cols)), want(got.size());
        for (bool acc : {false, true}) {
          std::vector<float> s1(static_cast<size_t>(cols), 0.25f), s2(s1);
          kernels::sum_rows_to_bf16(x.data<float>(), rows, cols, got.data(), s1.data(), acc);
          kernels::f32_to_bf16(x.data<float>(), want.data(), rows * cols);
          kernels::sum_rows<float>(x.data<float>(), rows, cols, s2.data(), acc);
          EXPECT_EQ(got, want) << rows << " x " << cols;
          EXPECT_EQ(std::memcmp(s1.data(), s2.data(), s1.size() * 4), 0) << rows << " x " << cols << " acc " << acc;
        }
      }
    }
  }
  set_num_threads(saved);
}

// Under bf16 the bias gradient comes out of the pass that rounds dy for the gemms: it is still the f32 column sum of
// dy, bit-identical to the f32 linear's (and to linear_concat's, block by block).
TEST(Bf16Ops, BiasGradientInTheGemmBackwardIsTheF32ColumnSum) {
  Rng rng(23);
  Tensor x = Tensor::uniform({600, 48}, -1, 1, rng), w = Tensor::uniform({40, 48}, -0.5, 0.5, rng);
  Tensor w2 = Tensor::uniform({24, 48}, -0.5, 0.5, rng);
  Tensor bias = Tensor::uniform({40}, -1, 1, rng), bias2 = Tensor::uniform({24}, -1, 1, rng);
  Tensor dy = Tensor::uniform({600, 40}, -1, 1, rng), dy2 = Tensor::uniform({600, 64}, -1, 1, rng);
  auto db_linear = [&](MatmulPrecision prec) {
    MatmulPrecisionGuard g(prec);
    Variable vx(x, true), vw(w, true), vb(bias, true);
    linear(vx, vw, vb).backward(dy);
    return vb.grad().clone();
  };
  const Tensor d32 = db_linear(MatmulPrecision::f32), d16 = db_linear(MatmulPrecision::bf16);
  EXPECT_EQ(std::memcmp(d32.raw_data(), d16.raw_data(), d32.nbytes()), 0);
  auto db_concat = [&](MatmulPrecision prec) {
    MatmulPrecisionGuard g(prec);
    Variable vx(x, true), vw(w, true), vw2(w2, true), vb(bias, true), vb2(bias2, true);
    linear_concat(vx, {vw, vw2}, {vb, vb2}).backward(dy2);
    return std::vector<Tensor>{vb.grad().clone(), vb2.grad().clone()};
  };
  const auto c32 = db_concat(MatmulPrecision::f32), c16 = db_concat(MatmulPrecision::bf16);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(std::memcmp(c32[i].raw_data(), c16[i].raw_data(), c32[i].nbytes()), 0) << i;
    // ... and the column sums of dy2's block, accumulated in f64, to f32 rounding
    const int64_t off = i == 0 ? 0 : 40, n = c32[i].numel();
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t r = 0; r < 600; ++r) s += dy2.get(r * 64 + off + j);
      EXPECT_NEAR(c16[i].get(j), s, 1e-5 * 600) << i << " " << j;
    }
  }
}

// The fused Q, K, V projection in bf16 equals the three projections in bf16: linear_concat + attention_qkv (padded,
// masked) and + attention_varlen_qkv (packed) against three linears + attention / attention_varlen, outputs and the
// gradients of x, the three weights and the three biases. Both round the same operands to bf16 (x once instead of
// three times, to the same bits), so what differs is f32 accumulation order only: 1e-4 of each tensor's largest
// element, far below the bf16 rounding itself (also checked: both within 2^-6 of the f64 result).
TEST(Bf16Ops, FusedQkvEqualsThreeProjections) {
  const int64_t h = 32, nh = 4;
  Rng rng(29);
  std::vector<Tensor> wt, bt;
  for (int i = 0; i < 3; ++i) {
    wt.push_back(Tensor::uniform({h, h}, -0.3, 0.3, rng));
    bt.push_back(Tensor::uniform({h}, -0.2, 0.2, rng));
  }
  Tensor xp = Tensor::uniform({3, 10, h}, -1, 1, rng), rp = Tensor::uniform({3, 10, h}, -1, 1, rng);
  Tensor xv = Tensor::uniform({17, h}, -1, 1, rng), rv = Tensor::uniform({17, h}, -1, 1, rng);
  Tensor mask = Tensor::zeros({3, 10});
  for (int64_t j = 6; j < 10; ++j) mask.set(10 + j, -10000.0);
  const std::vector<int64_t> cu = {0, 5, 5, 16, 17};
  const DropoutKey key{3, 9, 0, {}};
  auto run = [&](bool packed, bool fused, DType dt) {
    Variable x(packed ? xv.to(dt) : xp.to(dt), true);
    std::vector<Variable> w, b;
    for (int i = 0; i < 3; ++i) w.emplace_back(wt[i].to(dt), true), b.emplace_back(bt[i].to(dt), true);
    const double sc = 1.0 / std::sqrt(8.0);
    Variable ctx;
    if (fused) {
      Variable qkv = linear_concat(x, w, b);
      ctx = packed ? attention_varlen_qkv(qkv, nh, cu, sc, 0.1, true, key)
                   : attention_qkv(qkv, nh, mask.to(dt), sc, 0.1, true, key);
    } else {
      Variable q = linear(x, w[0], b[0]), k = linear(x, w[1], b[1]), v = linear(x, w[2], b[2]);
      ctx = packed ? attention_varlen(q, k, v, nh, cu, sc, 0.1, true, key)
                   : attention(q, k, v, nh, mask.to(dt), sc, 0.1, true, key);
    }
    ctx.backward((packed ? rv : rp).to(dt));
    std::vector<Tensor> out{ctx.value().to(DType::f64), x.grad().to(DType::f64)};
    for (auto& v : w) out.push_back(v.grad().to(DType::f64));
    for (auto& v : b) out.push_back(v.grad().to(DType::f64));
    return out;
  };
  for (bool packed : {false, true}) {
    const auto ref = run(packed, false, DType::f64);
    std::vector<Tensor> fused, sep;
    {
      MatmulPrecisionGuard g(MatmulPrecision::bf16);
      fused = run(packed, true, DType::f32);
      sep = run(packed, false, DType::f32);
    }
    for (size_t i = 0; i < ref.size(); ++i) {
      if (i == 6) {  // the key bias: 0 in exact arithmetic (softmax ignores a per-row constant); here the noise of
                     // dS rounded to bf16, the same noise in both: held to the scale of the query bias's gradient
        EXPECT_LT(rel_diff(fused[i], sep[i]) * max_abs(sep[i]), 1e-4 * max_abs(ref[5])) << "packed " << packed;
        EXPECT_LT(max_abs(fused[i]), std::ldexp(1.0, -6) * max_abs(ref[5])) << "packed " << packed;
        continue;
      }
      EXPECT_LT(rel_diff(fused[i], sep[i]), 1e-4) << "tensor " << i << " packed " << packed;
      EXPECT_LT(rel_diff(fused[i], ref[i]), std::ldexp(1.0, -6)) << "tensor " << i << " packed " << packed;
      EXPECT_GT(rel_diff(fused[i], ref[i]), 1e-6) << "tensor " << i << ": expected bf16 rounding to show";
    }
  }
}
