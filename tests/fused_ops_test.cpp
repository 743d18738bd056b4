// fused_ops_test.cpp: the vectorised Philox against core's scalar one, the documented dropout draw mapping, and
// thread-count independence of the dropout kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "bertrain/core/rng.h"
#include "bertrain/core/threads.h"
#include "bertrain/ops/ops.h"
#include "kernels/dropout_mask.h"

using namespace bertrain;

namespace {

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
  const DropoutKey key{5, 9, 1000};
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
    Tensor y = dropout(Variable(x), p, true, DropoutKey{1, 2, 3}).value();
    int64_t kept = 0;
    for (int64_t i = 0; i < y.numel(); ++i) kept += y.get(i) != 0;
    EXPECT_NEAR(static_cast<double>(kept) / y.numel(), 1 - p, 0.005) << p;
  }
}

// Fused ops reduce in a fixed order and key their masks by sample: 1 and 2 threads agree bit for bit.
TEST(Fused, ResultsDoNotDependOnThreadCount) {
  auto run = [](int threads) {
    set_num_threads(threads);
    Rng rng(5);
    Variable q(Tensor::uniform({8, 64, 32}, -1, 1, rng), true), k(Tensor::uniform({8, 64, 32}, -1, 1, rng), true),
        v(Tensor::uniform({8, 64, 32}, -1, 1, rng), true);
    Variable y = dropout(q, 0.2, true, DropoutKey{4, 5, 6});
    y = dropout(add(y, k), 0.3, true, DropoutKey{7, 8, 9});
    Variable loss = sum(mul(y, Variable(Tensor::uniform({8, 64, 32}, -1, 1, rng))));
    loss.backward();
    return std::vector<Tensor>{loss.value(), q.grad(), k.grad()};
  };
  const int saved = num_threads();
  auto one = run(1), two = run(2);
  set_num_threads(saved);
  for (size_t i = 0; i < one.size(); ++i)
    EXPECT_EQ(std::memcmp(one[i].raw_data(), two[i].raw_data(), one[i].nbytes()), 0) << "tensor " << i;
}
