// gemm_test.cpp: the private gemm kernels: gemm_serial (attention_varlen's per-sequence products) against plain
// loops for every transpose, stride and accumulate combination in f32 and f64, and the bounded primitive cache.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <thread>
#include <vector>

#include "bertrain/core/rng.h"
#include "kernels/gemm.h"

using namespace bertrain;

namespace {

// C (m, n) (+)= op(A) op(B) in long double, A stored (m, k) or (k, m) with row stride lda, as gemm_serial documents.
template <class T>
void reference(int64_t m, int64_t n, int64_t k, const std::vector<T>& a, int64_t lda, bool ta, const std::vector<T>& b,
               int64_t ldb, bool tb, std::vector<T>& c, int64_t ldc, bool acc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      long double s = 0;
      for (int64_t p = 0; p < k; ++p) {
        const T x = ta ? a[p * lda + i] : a[i * lda + p];
        const T y = tb ? b[j * ldb + p] : b[p * ldb + j];
        s += static_cast<long double>(x) * y;
      }
      c[i * ldc + j] = static_cast<T>(acc ? c[i * ldc + j] + s : s);
    }
}

template <class T>
void check_serial(double tol) {
  Rng g(7);
  for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {7, 5, 3}, {33, 64, 17}, {50, 50, 64},
                                                                    {3, 0, 4}, {4, 3, 0}}) {
    for (int mode = 0; mode < 8; ++mode) {
      const bool ta = mode & 1, tb = mode & 2, acc = mode & 4;
      const int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 2;
      std::vector<T> a(static_cast<size_t>((ta ? k : m) * lda + 1)), b(static_cast<size_t>((tb ? n : k) * ldb + 1));
      std::vector<T> c(static_cast<size_t>(m * ldc + 1));
      for (auto& x : a) x = static_cast<T>(g.normal());
      for (auto& x : b) x = static_cast<T>(g.normal());
      for (auto& x : c) x = static_cast<T>(g.normal());
      std::vector<T> want = c;
      reference<T>(m, n, k, a, lda, ta, b, ldb, tb, want, ldc, acc);
      kernels::gemm_serial<T>(m, n, k, a.data(), lda, ta, b.data(), ldb, tb, c.data(), ldc, acc);
      for (size_t i = 0; i < c.size(); ++i)
        ASSERT_NEAR(c[i], want[i], tol * (1 + std::fabs(want[i])))
            << m << "x" << n << "x" << k << " trans_a " << ta << " trans_b " << tb << " acc " << acc << " at " << i;
    }
  }
}

}  // namespace

TEST(GemmSerial, MatchesLoopsForEveryTransposeStrideAndAccumulateF64) { check_serial<double>(1e-12); }
TEST(GemmSerial, MatchesLoopsForEveryTransposeStrideAndAccumulateF32) { check_serial<float>(2e-5); }

// Every distinct shape is a primitive; 2,100 of them (more than the cap) leave at most 2,048 cached, every product
// stays right, and the first shape, evicted on the way, is created again when it comes back.
TEST(GemmCache, StaysBoundedAndCorrectOverManyShapes) {
  auto run = [](int64_t m) {
    kernels::GemmShape s;
    s.m = m, s.n = 3, s.k = 2;
    std::vector<float> a(static_cast<size_t>(m * 2), 1.0f), b(6, 0.5f);
    Tensor c = Tensor::zeros({m, 3});
    kernels::gemm(s, Tensor::from_data(a.data(), {m * 2}), Tensor::from_data(b.data(), {6}), c, false);
    for (int64_t i = 0; i < c.numel(); ++i) ASSERT_EQ(c.get(i), 1.0) << "m " << m << " element " << i;
  };
  run(100001);
  for (int64_t m = 1; m <= 2100; ++m) {
    run(m);
    ASSERT_LE(kernels::gemm_primitives_cached(), 2 * 2048);
  }
  const int64_t before = kernels::gemm_primitives_created();
  run(100001);
  EXPECT_EQ(kernels::gemm_primitives_created(), before + 1);
  run(100001);
  EXPECT_EQ(kernels::gemm_primitives_created(), before + 1);
}

// One cached primitive run from 4 threads at once gives, in every thread, the bits it gives alone. Shapes with a long
// K and few rows are the ones oneDNN splits over K into a scratchpad; a scratchpad shared between threads mixes
// their partial sums (what the task pipelines hit when one model served several threads).
TEST(GemmCache, SamePrimitiveFromFourThreadsGivesTheSameBits) {
  Rng g(11);
  for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{{2, 4, 8192}, {8, 8, 4096}, {64, 64, 64}}) {
    kernels::GemmShape s;
    s.m = m, s.n = n, s.k = k;
    std::vector<std::vector<float>> a(4), b(4);
    std::vector<Tensor> alone;
    for (size_t t = 0; t < 4; ++t) {
      a[t].resize(static_cast<size_t>(m * k));
      b[t].resize(static_cast<size_t>(k * n));
      for (auto& x : a[t]) x = static_cast<float>(g.normal());
      for (auto& x : b[t]) x = static_cast<float>(g.normal());
      alone.push_back(Tensor::zeros({m, n}));
      kernels::gemm(s, Tensor::from_data(a[t].data(), {m * k}), Tensor::from_data(b[t].data(), {k * n}), alone[t],
                    false);
    }
    std::vector<int> mismatches(4, 0);
    std::vector<std::thread> threads;
    for (size_t t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        for (int r = 0; r < 200; ++r) {
          Tensor c = Tensor::zeros({m, n});
          kernels::gemm(s, Tensor::from_data(a[t].data(), {m * k}), Tensor::from_data(b[t].data(), {k * n}), c, false);
          for (int64_t i = 0; i < c.numel(); ++i)
            if (c.data<float>()[i] != alone[t].data<float>()[i]) ++mismatches[t];
        }
      });
    for (auto& th : threads) th.join();
    for (size_t t = 0; t < 4; ++t) EXPECT_EQ(mismatches[t], 0) << m << "x" << n << "x" << k << " thread " << t;
  }
}
