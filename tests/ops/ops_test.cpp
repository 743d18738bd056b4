// ops_test.cpp: exact values (CASES.md C14 GELU, C16 masked softmax), the f32 oneDNN path against the f64
// reference, autograd engine behaviour, thread-count determinism, and misuse errors.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>

#include "bertrain/core/allocator.h"
#include "bertrain/core/rng.h"
#include "bertrain/core/threads.h"
#include "bertrain/nn/layers.h"
#include "bertrain/ops/ops.h"

using namespace bertrain;

namespace {

void expect_rel(double got, double want, double rel, const std::string& what) {
  EXPECT_LE(std::fabs(got - want), rel * std::max(1e-30, std::fabs(want))) << what << ": got " << got << " want " << want;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// CASES.md C14: the erf and tanh forms differ by up to 4.7e-4, so a 1e-6 test tells them apart.
TEST(Cases, C14_GeluErfAndTanhValues) {
  const std::vector<double> x = {-3, -1, 0.5, 1, 2};
  const std::vector<double> erf_want = {-0.0040496941, -0.1586552539, 0.3457312306, 0.8413447461, 1.9544997361};
  const std::vector<double> tanh_want = {-0.0036373921, -0.1588080094, 0.3457140098, 0.8411919906, 1.9545976941};
  for (DType dt : {DType::f64, DType::f32}) {
    Variable v(Tensor::from_vector(x, {5}, dt));
    Tensor e = gelu(v, GeluForm::erf).value(), t = gelu(v, GeluForm::tanh).value();
    for (int i = 0; i < 5; ++i) {
      expect_rel(e.get(i), erf_want[i], 1e-6, std::string("gelu erf ") + dtype_name(dt));
      expect_rel(t.get(i), tanh_want[i], 1e-6, std::string("gelu tanh ") + dtype_name(dt));
    }
  }
}

// CASES.md C16: google-research/bert's additive -10000 mask; masked probabilities are exactly 0 in f32 and a
// fully masked row stays finite (adding -10000 everywhere leaves softmax unchanged).
TEST(Cases, C16_MaskedSoftmax) {
  for (DType dt : {DType::f32, DType::f64}) {
    Variable s(Tensor::from_vector({1, 2, 3, 4, 1, 2, 3, 4}, {2, 1, 4}, dt));
    Tensor mask = Tensor::from_vector({0, 0, -10000, -10000, -10000, -10000, -10000, -10000}, {2, 4}, dt);
    Tensor p = softmax(s, mask).value();
    const std::vector<double> want0 = {0.2689414, 0.7310586, 0, 0};
    const std::vector<double> want1 = {0.0320586, 0.0871443, 0.2368828, 0.6439143};
    for (int i = 0; i < 4; ++i) {
      if (want0[i] == 0) EXPECT_EQ(p.get(i), 0.0);
      else expect_rel(p.get(i), want0[i], 1e-6, "masked row");
      expect_rel(p.get(4 + i), want1[i], 1e-6, "fully masked row");
      EXPECT_TRUE(std::isfinite(p.get(4 + i)));
    }
  }
  // Scores stored in bf16 (mixed precision) and computed in f32: still finite, no NaN.
  Tensor sb = Tensor::from_vector({1, 2, 3, 4}, {1, 1, 4}, DType::bf16);
  Tensor mb = Tensor::from_vector({-10000, -10000, -10000, -10000}, {1, 4}, DType::bf16);
  Tensor p = softmax(Variable(sb.to(DType::f32)), mb.to(DType::f32)).value();
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(std::isfinite(p.get(i)));
}

// The f32 path (oneDNN matmul with strides for transposes, bias and sum post-op) against the f64 path (Eigen).
TEST(Ops, F32OneDnnMatchesF64Reference) {
  Rng rng(5);
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      Tensor a64 = Tensor::uniform(ta ? Shape{2, 37, 19} : Shape{2, 19, 37}, -1, 1, rng, DType::f64);
      Tensor b64 = Tensor::uniform(tb ? Shape{2, 23, 37} : Shape{2, 37, 23}, -1, 1, rng, DType::f64);
      Variable a(a64, true), b(b64, true), a32(a64.to(DType::f32), true), b32(b64.to(DType::f32), true);
      Variable y = bmm(a, b, ta, tb), y32 = bmm(a32, b32, ta, tb);
      ASSERT_EQ(y.shape(), y32.shape());
      for (int64_t i = 0; i < y.numel(); ++i) EXPECT_NEAR(y.value().get(i), y32.value().get(i), 1e-4);
      sum(y).backward();
      sum(y32).backward();
      // Run backward twice more on the f32 side to exercise accumulation (+=) through the sum post-op.
      sum(bmm(a32, b32, ta, tb)).backward();
      for (int64_t i = 0; i < a64.numel(); ++i) EXPECT_NEAR(2 * a.grad().get(i), a32.grad().get(i), 1e-3);
      for (int64_t i = 0; i < b64.numel(); ++i) EXPECT_NEAR(2 * b.grad().get(i), b32.grad().get(i), 1e-3);
    }
  Tensor x = Tensor::uniform({5, 7}, -1, 1, rng, DType::f64), w = Tensor::uniform({3, 7}, -1, 1, rng, DType::f64);
  Tensor bias = Tensor::uniform({3}, -1, 1, rng, DType::f64);
  Tensor y64 = linear(Variable(x), Variable(w), Variable(bias)).value();
  Tensor y32 = linear(Variable(x.to(DType::f32)), Variable(w.to(DType::f32)), Variable(bias.to(DType::f32))).value();
  for (int64_t i = 0; i < y64.numel(); ++i) EXPECT_NEAR(y64.get(i), y32.get(i), 1e-5);
}

TEST(Autograd, LeafGradientsAccumulateAcrossBackwardCalls) {
  Variable w(Tensor::from_vector({1, 2}, {2}, DType::f64), true);
  Variable x(Tensor::from_vector({3, 4}, {2}, DType::f64));
  sum(mul(w, x)).backward();
  sum(mul(w, x)).backward();
  EXPECT_EQ(w.grad().get(0), 6.0);
  EXPECT_EQ(w.grad().get(1), 8.0);
  w.zero_grad();
  EXPECT_EQ(w.grad().get(0), 0.0);
}

TEST(Autograd, NoGradRecordsNothingAndInputsWithoutGradGetNone) {
  Variable w(Tensor::from_vector({1, 2}, {2}), true);
  {
    NoGradGuard g;
    Variable y = scale(w, 2.0);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_TRUE(y.is_leaf());
  }
  Variable c(Tensor::from_vector({1, 1}, {2}));
  Variable y = add(w, c);
  EXPECT_TRUE(y.requires_grad());
  sum(y).backward();
  EXPECT_FALSE(c.grad().defined());
  EXPECT_THROW(sum(c).backward(), Error);
}

TEST(Autograd, GradReadyHookFiresOncePerLeafAfterLastContribution) {
  Variable w(Tensor::from_vector({1, 2, 3}, {3}, DType::f64), true);
  int calls = 0;
  double seen = 0;
  w.set_grad_ready_hook([&](Variable& v) {
    ++calls;
    seen = v.grad().get(0);
  });
  // w feeds three consumers; the hook must see the sum of all three contributions.
  Variable y = add(add(scale(w, 2.0), scale(w, 3.0)), mul(w, w));
  sum(y).backward();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, 2.0 + 3.0 + 2.0 * 1.0);
}

TEST(Autograd, BackwardFreesTheGraph) {
  Variable w(Tensor::zeros({256, 256}), true);
  auto& alloc = CachingAllocator::instance();
  int64_t before = alloc.stats().bytes_in_use;
  {
    Variable y = sum(gelu(scale(w, 2.0)));
    EXPECT_GT(alloc.stats().bytes_in_use, before);
    y.backward();
    EXPECT_EQ(y.grad_fn(), nullptr);
  }
  // Only w's gradient remains.
  EXPECT_EQ(alloc.stats().bytes_in_use, before + static_cast<int64_t>(CachingAllocator::size_class(256 * 256 * 4)));
}

TEST(Ops, DropoutIsKeyedBySampleNotBySplit) {
  Rng rng(9);
  Tensor x = Tensor::uniform({6, 50}, -1, 1, rng);
  Tensor whole = dropout(Variable(x), 0.25, true, DropoutKey{3, 8, 100, nullptr}).value();
  Tensor part = dropout(Variable(x.slice(2, 6)), 0.25, true, DropoutKey{3, 8, 102, nullptr}).value();
  EXPECT_EQ(std::memcmp(whole.slice(2, 6).raw_data(), part.raw_data(), part.nbytes()), 0);
  int kept = 0;
  for (int64_t i = 0; i < whole.numel(); ++i) kept += whole.get(i) != 0;
  EXPECT_NEAR(kept / 300.0, 0.75, 0.08);
  for (int64_t i = 0; i < whole.numel(); ++i) {
    if (whole.get(i) != 0) {
      EXPECT_FLOAT_EQ(whole.get(i), x.get(i) / 0.75f);
    }
  }
  Tensor evalmode = dropout(Variable(x), 0.25, false, DropoutKey{}).value();
  EXPECT_EQ(std::memcmp(evalmode.raw_data(), x.raw_data(), x.nbytes()), 0);
}

// Our own kernels reduce in a fixed order: 1 and 2 threads give bit-identical values and gradients.
TEST(Ops, ResultsDoNotDependOnThreadCount) {
  auto run = [](int threads) {
    set_num_threads(threads);
    Rng rng(11);
    Tensor xt = Tensor::uniform({64, 40, 96}, -1, 1, rng);
    Variable x(xt, true), g(Tensor::uniform({96}, 0.5, 1.5, rng), true), b(Tensor::zeros({96}), true);
    Variable table(Tensor::uniform({50, 96}, -1, 1, rng), true);
    Tensor id = Tensor::empty({64 * 40}, DType::i32);
    for (int64_t i = 0; i < id.numel(); ++i) id.set(i, static_cast<double>(rng.randint(50)));
    Variable e = add(x, reshape(embedding(table, id), {64, 40, 96}));
    Variable y = softmax(gelu(layer_norm(e, g, b, 1e-12)));
    Variable loss = sum(mul(y, Variable(Tensor::uniform({64, 40, 96}, -1, 1, rng))));
    loss.backward();
    std::vector<Tensor> out{loss.value(), x.grad(), g.grad(), b.grad(), table.grad()};
    return out;
  };
  int saved = num_threads();
  auto one = run(1), two = run(2);
  set_num_threads(saved);
  for (size_t i = 0; i < one.size(); ++i)
    EXPECT_EQ(std::memcmp(one[i].raw_data(), two[i].raw_data(), one[i].nbytes()), 0) << "tensor " << i;
}

TEST(Errors, MisuseNamesTheOpAndBothShapes) {
  Variable a(Tensor::zeros({2, 3})), b(Tensor::zeros({4, 5}));
  std::string m = error_of([&] { matmul(a, b); });
  EXPECT_NE(m.find("matmul"), std::string::npos) << m;
  EXPECT_NE(m.find("(2, 3)"), std::string::npos) << m;
  EXPECT_NE(m.find("(4, 5)"), std::string::npos) << m;
  m = error_of([&] { add(Variable(Tensor::zeros({2, 3})), Variable(Tensor::zeros({2}))); });
  EXPECT_NE(m.find("add"), std::string::npos);
  EXPECT_NE(m.find("(2, 3)"), std::string::npos);
  EXPECT_NE(m.find("(2)"), std::string::npos);
  m = error_of([&] { linear(Variable(Tensor::zeros({2, 3})), Variable(Tensor::zeros({4, 5})), Variable()); });
  EXPECT_NE(m.find("linear"), std::string::npos);
  EXPECT_NE(m.find("(4, 5)"), std::string::npos);
  m = error_of([&] { bmm(Variable(Tensor::zeros({2, 3, 4})), Variable(Tensor::zeros({3, 4, 5}))); });
  EXPECT_NE(m.find("bmm"), std::string::npos);
  EXPECT_NE(m.find("(3, 4, 5)"), std::string::npos);
  m = error_of([&] {
    layer_norm(Variable(Tensor::zeros({2, 3})), Variable(Tensor::zeros({4})), Variable(Tensor::zeros({4})), 1e-5);
  });
  EXPECT_NE(m.find("layer_norm"), std::string::npos);
  EXPECT_NE(m.find("(4)"), std::string::npos);
  m = error_of([&] { embedding(Variable(Tensor::zeros({3, 2})), Tensor::from_vector({0, 3}, {2}, DType::i32)); });
  EXPECT_NE(m.find("embedding"), std::string::npos);
  EXPECT_NE(m.find("id 3"), std::string::npos);
  m = error_of([&] {
    cross_entropy(Variable(Tensor::zeros({2, 3})), Tensor::from_vector({0, 5}, {2}, DType::i32), Tensor(), 1.0);
  });
  EXPECT_NE(m.find("label 5"), std::string::npos);
  m = error_of([&] { softmax(Variable(Tensor::zeros({2, 3, 4})), Tensor::zeros({2, 5})); });
  EXPECT_NE(m.find("softmax"), std::string::npos);
  EXPECT_NE(m.find("(2, 5)"), std::string::npos);
  EXPECT_NE(error_of([&] { concat({Variable(Tensor::zeros({2, 3})), Variable(Tensor::zeros({3, 3}))}, 1); }), "");
  EXPECT_NE(error_of([&] { permute(Variable(Tensor::zeros({2, 3})), {0, 0}); }), "");
  EXPECT_NE(error_of([&] { slice(Variable(Tensor::zeros({2, 3})), 1, 2, 5); }), "");
  EXPECT_NE(error_of([&] { dropout(Variable(Tensor::zeros({2, 3})), 1.0, true, DropoutKey{}); }), "");
}

TEST(Nn, ModuleNamesParametersWithDots) {
  struct Block : Module {
    Block(Rng& r) {
      dense = register_module("dense", std::make_shared<Linear>(4, 3, true, 0.02, r));
      norm = register_module("LayerNorm", std::make_shared<LayerNorm>(3, 1e-12));
    }
    std::shared_ptr<Linear> dense;
    std::shared_ptr<LayerNorm> norm;
  };
  struct Net : Module {
    Net(Rng& r) { block = register_module("output", std::make_shared<Block>(r)); }
    std::shared_ptr<Block> block;
  };
  Rng r(1);
  Net net(r);
  auto np = net.named_parameters();
  ASSERT_EQ(np.size(), 4u);
  EXPECT_EQ(np[0].first, "output.dense.weight");
  EXPECT_EQ(np[1].first, "output.dense.bias");
  EXPECT_EQ(np[2].first, "output.LayerNorm.weight");
  EXPECT_EQ(np[3].first, "output.LayerNorm.bias");
  EXPECT_EQ(net.num_parameters(), 12 + 3 + 3 + 3);
  EXPECT_EQ(np[2].second.value().get(0), 1.0);
  net.eval();
  EXPECT_FALSE(net.block->norm->is_training());
  EXPECT_THROW(net.parameter("nope"), Error);
}
