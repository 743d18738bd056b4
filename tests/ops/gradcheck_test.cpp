// gradcheck_test.cpp: one table-driven gradient check for every op, in f64 with central differences
// (as ggml's test-backend-ops and flashlight's jacobian tests). loss = sum(op(inputs) * R) for a fixed random
// R; each analytic input gradient must match (loss(x + e) - loss(x - e)) / 2e element by element.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "bertrain/core/rng.h"
#include "bertrain/ops/ops.h"

using namespace bertrain;

namespace {

/// One op: its input shape sets (several per op: small ones, and rows of 8, 16, 17 and 33 elements that fill and
/// overflow the 8 f64 lanes of an AVX-512 register, so `#pragma omp simd` bodies and their remainders both run),
/// the function, and its own tolerances: |analytic - numeric| <= atol + rtol * |numeric|.
struct OpCase {
  std::string name;
  std::vector<std::vector<Shape>> shape_sets;
  std::function<Variable(const std::vector<Variable>&)> f;
  double shift = 0.0;  // added to inputs, to keep relu away from its kink at 0
  double atol = 1e-7, rtol = 1e-6;
};

/// A test row: one op at one shape set.
struct GradCase {
  const OpCase* op;
  size_t set;
  std::string name() const { return op->name + "_" + std::to_string(set); }
};

Tensor ids(std::vector<double> v, Shape s) { return Tensor::from_vector(v, s, DType::i32); }

/// An additive attention mask (B, T) with some keys masked (-10000), never a whole row.
Tensor mask_for(int64_t b, int64_t t) {
  std::vector<double> m(static_cast<size_t>(b * t), 0.0);
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 1; j < t; ++j)
      if ((i * 7 + j * 3) % 4 == 0) m[static_cast<size_t>(i * t + j)] = -10000;
  return Tensor::from_vector(m, {b, t}, DType::f64);
}

/// Integer ids in [0, rows), deterministic, repeating some (scatter-add backward).
Tensor ids_for(int64_t n, int64_t rows) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<double>((i * 5 + 1) % rows);
  return ids(v, {n});
}

std::vector<OpCase> cases() {
  using V = std::vector<Variable>;
  using S = std::vector<std::vector<Shape>>;
  const int64_t kLast[] = {6, 8, 16, 17, 33};  // widths below, at and above the vector register
  auto unary_sets = [&](int64_t rows) {
    S sets;
    for (int64_t w : kLast) sets.push_back({{rows, w}});
    return sets;
  };
  auto norm_sets = [&](int n_inputs_like_x) {
    S sets;
    for (int64_t w : kLast) {
      std::vector<Shape> set;
      for (int k = 0; k < n_inputs_like_x; ++k) set.push_back({2, 3, w});
      set.push_back({w});
      set.push_back({w});
      sets.push_back(set);
    }
    return sets;
  };
  return {
      {"matmul", {{{3, 4}, {4, 5}}, {{2, 17}, {17, 9}}, {{9, 8}, {8, 16}}}, [](const V& x) { return matmul(x[0], x[1]); }},
      {"matmul_ta", {{{4, 3}, {4, 5}}, {{17, 2}, {17, 9}}}, [](const V& x) { return matmul(x[0], x[1], true, false); }},
      {"matmul_tb", {{{3, 4}, {5, 4}}, {{2, 17}, {9, 17}}}, [](const V& x) { return matmul(x[0], x[1], false, true); }},
      {"matmul_ta_tb", {{{4, 3}, {5, 4}}, {{17, 2}, {9, 17}}}, [](const V& x) { return matmul(x[0], x[1], true, true); }},
      {"bmm", {{{2, 3, 4}, {2, 4, 5}}, {{3, 2, 17}, {3, 17, 9}}}, [](const V& x) { return bmm(x[0], x[1]); }},
      {"bmm_ta", {{{2, 4, 3}, {2, 4, 5}}, {{3, 17, 2}, {3, 17, 9}}}, [](const V& x) { return bmm(x[0], x[1], true, false); }},
      {"bmm_tb_4d", {{{2, 2, 3, 4}, {2, 2, 5, 4}}, {{1, 3, 2, 17}, {1, 3, 9, 17}}},
       [](const V& x) { return bmm(x[0], x[1], false, true); }},
      {"bmm_ta_tb", {{{2, 4, 3}, {2, 5, 4}}, {{2, 17, 2}, {2, 9, 17}}}, [](const V& x) { return bmm(x[0], x[1], true, true); }},
      {"linear", {{{2, 3, 4}, {5, 4}, {5}}, {{2, 17}, {16, 17}, {16}}, {{3, 8}, {33, 8}, {33}}},
       [](const V& x) { return linear(x[0], x[1], x[2]); }},
      {"linear_nobias", {{{3, 4}, {5, 4}}, {{2, 17}, {9, 17}}}, [](const V& x) { return linear(x[0], x[1], Variable()); }},
      // The fused Q, K, V projection: x, three weights, three biases (blocks of unequal widths).
      {"linear_concat", {{{2, 3, 4}, {5, 4}, {3, 4}, {5, 4}, {5}, {3}, {5}}, {{2, 17}, {16, 17}, {8, 17}, {9, 17}, {16}, {8}, {9}}},
       [](const V& x) { return linear_concat(x[0], {x[1], x[2], x[3]}, {x[4], x[5], x[6]}); }},
      {"linear_concat_nobias", {{{3, 4}, {5, 4}, {2, 4}}, {{2, 33}, {8, 33}, {17, 33}}},
       [](const V& x) { return linear_concat(x[0], {x[1], x[2]}, {}); }},
      {"linear_concat_same_weight", {{{3, 4}, {5, 4}, {5}}},
       [](const V& x) { return linear_concat(x[0], {x[1], x[1]}, {x[2], x[2]}); }},
      {"add", {{{2, 3, 4}, {2, 3, 4}}, {{2, 17}, {2, 17}}, {{3, 33}, {3, 33}}}, [](const V& x) { return add(x[0], x[1]); }},
      {"add_broadcast", {{{2, 3, 4}, {4}}, {{3, 17}, {17}}, {{2, 33}, {33}}}, [](const V& x) { return add(x[0], x[1]); }},
      {"sub_broadcast", {{{2, 3, 4}, {3, 4}}, {{2, 3, 17}, {3, 17}}}, [](const V& x) { return sub(x[0], x[1]); }},
      {"mul", {{{2, 3, 4}, {2, 3, 4}}, {{2, 17}, {2, 17}}, {{3, 33}, {3, 33}}}, [](const V& x) { return mul(x[0], x[1]); }},
      {"mul_broadcast", {{{2, 3, 4}, {4}}, {{3, 17}, {17}}, {{2, 33}, {33}}}, [](const V& x) { return mul(x[0], x[1]); }},
      {"mul_same_input", {{{3, 4}}, {{2, 17}}}, [](const V& x) { return mul(x[0], x[0]); }},
      {"scale", {{{3, 4}}, {{2, 33}}}, [](const V& x) { return scale(x[0], -1.7); }},
      {"gelu_erf", unary_sets(3), [](const V& x) { return gelu(x[0], GeluForm::erf); }},
      {"gelu_tanh", unary_sets(3), [](const V& x) { return gelu(x[0], GeluForm::tanh); }},
      {"tanh", unary_sets(3), [](const V& x) { return bertrain::tanh(x[0]); }},
      // relu has a kink at 0: inputs are shifted to [0.05, 1.05) so no element sits within eps of it.
      {"relu", unary_sets(2), [](const V& x) { return relu(x[0]); }, 0.55},
      {"relu_negative", unary_sets(2), [](const V& x) { return relu(x[0]); }, -0.55},
      {"layer_norm", norm_sets(1), [](const V& x) { return layer_norm(x[0], x[1], x[2], 1e-5); }},
      {"softmax", {{{2, 3, 5}}, {{2, 8}}, {{2, 17}}, {{1, 33}}}, [](const V& x) { return softmax(x[0]); }},
      {"softmax_masked", {{{2, 2, 3, 5}}, {{2, 1, 2, 17}}, {{1, 1, 2, 33}}},
       [](const V& x) { return softmax(x[0], mask_for(x[0].shape()[0], x[0].shape()[3])); }},
      {"dropout", {{{4, 9}}, {{2, 17}}, {{2, 33}}}, [](const V& x) { return dropout(x[0], 0.3, true, DropoutKey{7, 1, 10, nullptr}); }},
      {"dropout_add_layer_norm", norm_sets(2),
       [](const V& x) { return dropout_add_layer_norm(x[0], x[1], x[2], x[3], 1e-5, 0.3, true, DropoutKey{2, 3, 4, nullptr}); }},
      {"layer_norm_dropout", norm_sets(1),
       [](const V& x) { return layer_norm_dropout(x[0], x[1], x[2], 1e-5, 0.3, true, DropoutKey{2, 3, 4, nullptr}); }},
      {"layer_norm_dropout_eval", {{{3, 5}, {5}, {5}}, {{2, 17}, {17}, {17}}},
       [](const V& x) { return layer_norm_dropout(x[0], x[1], x[2], 1e-5, 0.3, false, DropoutKey{}); }},
      {"layer_norm_dropout_packed_tokens", {{{5, 9}, {9}, {9}}, {{3, 33}, {33}, {33}}},
       [](const V& x) {
         auto t = std::make_shared<PackedTokens>();
         for (int64_t i = 0; i < x[0].shape()[0]; ++i) {
           t->sample.push_back(static_cast<int32_t>(i % 2));
           t->position.push_back(static_cast<int32_t>(i / 2 + 1));
         }
         return layer_norm_dropout(x[0], x[1], x[2], 1e-5, 0.4, true, DropoutKey{7, 1, 10, t});
       }},
      {"dropout_add_layer_norm_eval", {{{3, 5}, {3, 5}, {5}, {5}}, {{2, 17}, {2, 17}, {17}, {17}}},
       [](const V& x) { return dropout_add_layer_norm(x[0], x[1], x[2], x[3], 1e-5, 0.3, false, DropoutKey{}); }},
      {"dropout_add_layer_norm_same_input", {{{2, 4, 5}, {5}, {5}}, {{2, 2, 17}, {17}, {17}}},
       [](const V& x) { return dropout_add_layer_norm(x[0], x[0], x[1], x[2], 1e-5, 0.5, true, DropoutKey{}); }},
      // Fused attention: q (B, TQ, H), k, v (B, TK, H), mask (B, TK); dropout masks are keyed, so they are fixed.
      // TK 17 and head size 8/16 run the vectorised softmax rows and head loops with and without remainders.
      {"attention_masked_dropout", {{{2, 3, 4}, {2, 5, 4}, {2, 5, 4}}, {{1, 2, 16}, {1, 17, 16}, {1, 17, 16}}},
       [](const V& x) {
         return attention(x[0], x[1], x[2], 2, mask_for(x[1].shape()[0], x[1].shape()[1]), 0.7, 0.3, true, DropoutKey{3, 4, 5, nullptr});
       }},
      // Self-attention on the fused projection's (B, T, 3H) output (Q | K | V column blocks).
      {"attention_qkv_masked_dropout", {{{2, 5, 12}}, {{1, 17, 48}}},
       [](const V& x) {
         return attention_qkv(x[0], 2, mask_for(x[0].shape()[0], x[0].shape()[1]), 0.7, 0.3, true, DropoutKey{3, 4, 5, {}});
       }},
      {"attention_plain", {{{2, 4, 6}, {2, 4, 6}, {2, 4, 6}}, {{1, 3, 16}, {1, 9, 16}, {1, 9, 16}}},
       [](const V& x) { return attention(x[0], x[1], x[2], 2, Tensor(), 1.3, 0.0, true, DropoutKey{}); }},
      {"attention_same_input", {{{2, 5, 4}}, {{1, 17, 8}}},
       [](const V& x) {
         return attention(x[0], x[0], x[0], 1, mask_for(x[0].shape()[0], x[0].shape()[1]), 0.9, 0.2, true, DropoutKey{1, 1, 0, nullptr});
       }},
      // Variable-length attention on packed tokens: sequences of lengths 3, 0, 5 (and 1, 17, 2), keyed dropout.
      {"attention_varlen_dropout", {{{8, 4}, {8, 4}, {8, 4}}, {{20, 16}, {20, 16}, {20, 16}}},
       [](const V& x) {
         const std::vector<int64_t> cu = x[0].shape()[0] == 8 ? std::vector<int64_t>{0, 3, 3, 8}
                                                              : std::vector<int64_t>{0, 1, 18, 20};
         return attention_varlen(x[0], x[1], x[2], 2, cu, 0.7, 0.3, true, DropoutKey{3, 4, 5, nullptr});
       }},
      {"attention_varlen_qkv_dropout", {{{8, 12}}, {{20, 48}}},
       [](const V& x) {
         const std::vector<int64_t> cu = x[0].shape()[0] == 8 ? std::vector<int64_t>{0, 3, 3, 8}
                                                              : std::vector<int64_t>{0, 1, 18, 20};
         return attention_varlen_qkv(x[0], 2, cu, 0.7, 0.3, true, DropoutKey{3, 4, 5, {}});
       }},
      {"attention_varlen_same_input", {{{7, 6}}},
       [](const V& x) { return attention_varlen(x[0], x[0], x[0], 3, {0, 4, 7}, 0.9, 0.0, true, DropoutKey{}); }},
      // Packed tokens' dropout (rows keyed by sample and position) and the padded layout's gather with zero rows.
      {"dropout_packed_tokens", {{{5, 9}}, {{3, 33}}},
       [](const V& x) {
         auto t = std::make_shared<PackedTokens>();
         for (int64_t i = 0; i < x[0].shape()[0]; ++i) {
           t->sample.push_back(static_cast<int32_t>(i % 2));
           t->position.push_back(static_cast<int32_t>(i / 2 + 1));
         }
         return dropout(x[0], 0.3, true, DropoutKey{7, 1, 10, t});
       }},
      {"gather_rows_or_zero", {{{5, 3}}, {{5, 17}}},
       [](const V& x) {
         return gather_rows_or_zero(x[0], ids({1, -1, 4, 0, -1, 1}, {6}));
       }},
      {"embedding", {{{6, 4}}, {{7, 17}}}, [](const V& x) { return embedding(x[0], ids_for(6, x[0].shape()[0])); }},
      {"gather_rows", {{{5, 3}}, {{5, 17}}}, [](const V& x) { return gather_rows(x[0], ids_for(4, x[0].shape()[0])); }},
      {"cross_entropy",
       {{{4, 5}}},
       [](const V& x) {
         return cross_entropy(x[0], ids({1, 4, -100, 0}, {4}), Tensor::from_vector({1, 0.5, 1, 2}, {4}, DType::f64),
                              3.5 + 1e-5);
       }},
      // The logits feed two losses: the first backward writes the gradient over its saved probabilities, the
      // second accumulates into it.
      {"cross_entropy_twice",
       {{{3, 4}}, {{2, 17}}},
       [](const V& x) {
         Tensor lab = ids_for(x[0].shape()[0], x[0].shape()[1]);
         return add(cross_entropy(x[0], lab, Tensor(), 3.0), scale(cross_entropy(x[0], lab, Tensor(), 2.0), 0.5));
       }},
      {"cross_entropy_unweighted", {{{3, 4}}, {{2, 33}}},
       [](const V& x) { return cross_entropy(x[0], ids_for(x[0].shape()[0], x[0].shape()[1]), Tensor(), 3.0); }},
      {"reshape", {{{2, 3, 4}}}, [](const V& x) { return reshape(x[0], {6, -1}); }},
      {"transpose", {{{2, 3, 4}}, {{2, 17, 3}}}, [](const V& x) { return transpose(x[0], 1, 2); }},
      {"permute", {{{2, 3, 4, 5}}}, [](const V& x) { return permute(x[0], {0, 2, 1, 3}); }},
      {"permute_last_axis", {{{2, 3, 4}}, {{2, 3, 17}}}, [](const V& x) { return permute(x[0], {2, 0, 1}); }},
      {"slice_axis1", {{{2, 5, 3}}}, [](const V& x) { return slice(x[0], 1, 1, 4); }},
      {"slice_axis0", {{{4, 3}}}, [](const V& x) { return slice(x[0], 0, 1, 3); }},
      {"concat", {{{2, 2, 3}, {2, 4, 3}}}, [](const V& x) { return concat({x[0], x[1]}, 1); }},
      {"sum", {{{3, 4}}, {{2, 33}}}, [](const V& x) { return sum(x[0]); }},
      {"mean", {{{3, 4}}, {{2, 33}}}, [](const V& x) { return mean(x[0]); }},
  };
}

const std::vector<OpCase>& all_cases() {
  static const std::vector<OpCase> c = cases();
  return c;
}

std::vector<GradCase> grad_cases() {
  std::vector<GradCase> out;
  for (const OpCase& op : all_cases())
    for (size_t i = 0; i < op.shape_sets.size(); ++i) out.push_back({&op, i});
  return out;
}

double loss_of(const OpCase& c, const std::vector<Variable>& in, const Tensor& r) {
  NoGradGuard ng;
  Variable y = c.f(in);
  const Tensor& yv = y.value();
  double s = 0;
  for (int64_t i = 0; i < yv.numel(); ++i) s += yv.get(i) * r.get(i);
  return s;
}

class GradCheck : public ::testing::TestWithParam<GradCase> {};

TEST_P(GradCheck, MatchesCentralDifferencesInF64) {
  const OpCase& c = *GetParam().op;
  Rng rng(1234);
  std::vector<Variable> in;
  for (const Shape& s : c.shape_sets[GetParam().set]) {
    Tensor t = Tensor::uniform(s, -0.5 + c.shift, 0.5 + c.shift, rng, DType::f64);
    in.emplace_back(t, true);
  }
  Variable y = c.f(in);
  Tensor r = Tensor::uniform(y.shape(), -1, 1, rng, DType::f64);
  Variable loss = sum(mul(y, Variable(r)));
  loss.backward();
  const double eps = 1e-6;
  int checked = 0;
  for (size_t k = 0; k < in.size(); ++k) {
    ASSERT_TRUE(in[k].grad().defined()) << c.name << ": input " << k << " got no gradient";
    Tensor x = in[k].value();
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double orig = x.get(i);
      x.set(i, orig + eps);
      const double lp = loss_of(c, in, r);
      x.set(i, orig - eps);
      const double lm = loss_of(c, in, r);
      x.set(i, orig);
      const double num = (lp - lm) / (2 * eps);
      const double ana = in[k].grad().get(i);
      EXPECT_NEAR(ana, num, c.atol + c.rtol * std::fabs(num)) << GetParam().name() << ": input " << k << " element " << i;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

INSTANTIATE_TEST_SUITE_P(Ops, GradCheck, ::testing::ValuesIn(grad_cases()),
                         [](const ::testing::TestParamInfo<GradCase>& info) { return info.param.name(); });

// Every op keeps today's tolerances or tighter (per-op tolerances may never be looser than 1e-7 + 1e-6|x|).
TEST(GradCheckTable, TolerancesNeverLooserThanTheOriginal) {
  for (const OpCase& op : all_cases()) {
    EXPECT_LE(op.atol, 1e-7) << op.name;
    EXPECT_LE(op.rtol, 1e-6) << op.name;
    EXPECT_FALSE(op.shape_sets.empty()) << op.name;
  }
}

}  // namespace
