// parity_test.cpp: BertForPreTraining against an independent PyTorch reference (tests/models/gen_golden.py, float64)
// on a padded batch: outputs, losses and every parameter gradient, for both GELU forms, computed by bertrain in
// f64 and in f32 (the real compute path, oneDNN GEMMs).
#include <gtest/gtest.h>

#include <cmath>

#include "bertrain/io/checkpoint.h"
#include "bertrain/io/config.h"
#include "bertrain/io/safetensors.h"
#include "bertrain/models/bert.h"

using namespace bertrain;

namespace {

const std::string kDir = std::string(BERTRAIN_TEST_DATA_DIR) + "/golden/";

double norm2(const Tensor& t) {
  double s = 0;
  for (int64_t i = 0; i < t.numel(); ++i) s += t.get(i) * t.get(i);
  return std::sqrt(s);
}

/// Norm-wise relative error ||got - want|| / max(||want||, floor) <= rtol. `floor` matters only for tensors whose
/// reference is zero up to rounding: the key biases' gradients (softmax is invariant to a per-row shift).
void expect_close(const Tensor& got, const Tensor& want, double rtol, const std::string& what, double floor = 0) {
  ASSERT_EQ(got.numel(), want.numel()) << what;
  double d = 0;
  for (int64_t i = 0; i < want.numel(); ++i) d += (got.get(i) - want.get(i)) * (got.get(i) - want.get(i));
  const double rel = std::sqrt(d) / std::max(norm2(want), floor);
  EXPECT_LE(rel, rtol) << what << ": relative error " << rel << " (reference norm " << norm2(want) << ")";
}

struct Golden {
  BertConfig cfg;
  BertInputs in;
  PretrainingTargets tg;
  SafetensorsFile expected;
};

Golden load(const std::string& act) {
  SafetensorsFile inputs = SafetensorsFile::open(kDir + "inputs.safetensors");
  Golden g{load_bert_config(kDir + "config_" + act + ".json"), {}, {},
           SafetensorsFile::open(kDir + "expected_" + act + ".safetensors")};
  g.in.input_ids = inputs.load("input_ids");
  g.in.token_type_ids = inputs.load("token_type_ids");
  g.in.attention_mask = inputs.load("attention_mask");
  g.tg.masked_lm_positions = inputs.load("masked_lm_positions");
  g.tg.masked_lm_ids = inputs.load("masked_lm_ids");
  g.tg.masked_lm_weights = inputs.load("masked_lm_weights");
  g.tg.next_sentence_labels = inputs.load("next_sentence_labels");
  return g;
}

struct Case {
  std::string act;
  DType dtype;
  Unpad unpad = Unpad::never;  // the padded computation, or the unpadded encoder forced
};

class Parity : public ::testing::TestWithParam<Case> {};

TEST_P(Parity, MatchesPyTorchReference) {
  const Case c = GetParam();
  Golden g = load(c.act);
  EXPECT_EQ(g.cfg.hidden_act, c.act);
  Rng rng(0);
  BertForPreTraining model(g.cfg, rng, c.dtype);
  LoadReport rep;
  LoadOptions lo;
  lo.strict = true;
  load_model(kDir + "model_" + c.act + ".safetensors", model, rep, lo);
  model.eval();  // the reference runs without dropout
  model.bert().set_unpad(c.unpad);
  PretrainingOutput o = model.forward(g.in, g.tg);
  o.loss.backward();
  // Tolerances of the issue (relative, norm-wise) for the f32 path; f64 must agree to rounding.
  const double out_tol = c.dtype == DType::f64 ? 1e-10 : 1e-5;
  const double grad_tol = c.dtype == DType::f64 ? 1e-9 : 1e-4;
  expect_close(o.mlm_logits, g.expected.load("mlm_logits"), out_tol, "mlm_logits");
  expect_close(o.nsp_logits, g.expected.load("nsp_logits"), out_tol, "nsp_logits");
  expect_close(o.mlm_loss.value(), g.expected.load("mlm_loss"), out_tol, "mlm_loss");
  expect_close(o.nsp_loss.value(), g.expected.load("nsp_loss"), out_tol, "nsp_loss");
  expect_close(o.loss.value(), g.expected.load("total_loss"), out_tol, "total_loss");
  {
    NoGradGuard ng;
    BertModel::Output enc = model.bert().forward(g.in);
    EXPECT_EQ(enc.unpadded, c.unpad == Unpad::always);
    Tensor want = g.expected.load("sequence_output");
    if (enc.unpadded) {  // the unpadded path computes real tokens only (zeros at padding): compare those
      const int64_t t = g.in.attention_mask.size(1), h = want.size(2);
      want = want.to(DType::f64);
      for (int64_t i = 0; i < g.in.attention_mask.numel(); ++i)
        if (g.in.attention_mask.data<int32_t>()[i] == 0)
          for (int64_t k = 0; k < h; ++k) want.set(i * h + k, 0.0);
      (void)t;
      want = want.to(enc.sequence_output.value().dtype());
    }
    expect_close(enc.sequence_output.value(), want, out_tol, "sequence_output");
    expect_close(enc.pooled_output.value(), g.expected.load("pooled_output"), out_tol, "pooled_output");
  }
  double scale = 0;  // the largest reference gradient norm
  for (auto& [name, v] : model.named_parameters()) scale = std::max(scale, norm2(g.expected.load("grad." + name)));
  const double floor = (c.dtype == DType::f64 ? 1e-6 : 1e-3) * scale;
  int checked = 0;
  for (auto& [name, v] : model.named_parameters()) {
    ASSERT_TRUE(g.expected.contains("grad." + name)) << name;
    ASSERT_TRUE(v.grad().defined()) << name;
    expect_close(v.grad(), g.expected.load("grad." + name), grad_tol, "grad." + name, floor);
    ++checked;
  }
  EXPECT_EQ(checked, 46);  // every parameter of the 2-layer reference model
}

INSTANTIATE_TEST_SUITE_P(Golden, Parity,
                         ::testing::Values(Case{"gelu", DType::f64}, Case{"gelu", DType::f32},
                                           Case{"gelu_new", DType::f64}, Case{"gelu_new", DType::f32},
                                           Case{"gelu", DType::f64, Unpad::always},
                                           Case{"gelu", DType::f32, Unpad::always},
                                           Case{"gelu_new", DType::f32, Unpad::always}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return i.param.act + "_" + dtype_name(i.param.dtype) +
                                  (i.param.unpad == Unpad::always ? "_unpadded" : "");
                         });

}  // namespace
