// tf_bert_test.cpp: google-research/bert checkpoints in bertrain: CASES.md C33's name, transpose and head
// rules (a square kernel included), the independent PyTorch forward, round trips TF -> bertrain -> TF
// and bertrain -> TF -> bertrain, and the bad-input cases with nothing written.
#include <gtest/gtest.h>
#include <leveldb/options.h>
#include <leveldb/table_builder.h>
#include <leveldb/env.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "bertrain/core/rng.h"
#include "bertrain/io/checkpoint.h"
#include "bertrain/io/config.h"
#include "bertrain/io/safetensors.h"
#include "bertrain/io/tf_bert.h"
#include "bertrain/io/tf_checkpoint.h"
#include "bertrain/models/bert.h"
#include "io/tensor_bundle_codec.h"
#include "test_util.h"

using namespace bertrain;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string kData = std::string(BERTRAIN_TEST_DATA_DIR) + "/tf_checkpoints";
const std::string kTinyDir = kData + "/keras_bert_tiny";
const std::string kTiny = kTinyDir + "/bert_model.ckpt";
const std::string kShared = BERTRAIN_SHARED_DATA_DIR "/tf_checkpoints";

bool shared_available() { return fs::exists(kShared + "/list_bundle.py") && fs::exists("/usr/bin/python3"); }

std::string run_capture(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *status = ::pclose(p);
  return out;
}

// A fresh copy of the tiny checkpoint directory, removed at the end.
struct TinyCopy {
  fs::path dir;
  explicit TinyCopy(const std::string& name) {
    dir = test::temp_dir("tf_bert") / name;
    fs::remove_all(dir);
    fs::create_directories(dir);
    for (const auto& e : fs::directory_iterator(kTinyDir)) fs::copy_file(e.path(), dir / e.path().filename());
    for (const auto& e : fs::directory_iterator(dir)) fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
  }
  ~TinyCopy() { fs::remove_all(dir); }
  std::string prefix() const { return (dir / "bert_model.ckpt").string(); }
};

Tensor tensor2d(std::vector<float> v, int64_t r, int64_t c) { return Tensor::from_data(v.data(), Shape{r, c}); }

bool same(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

BertConfig tiny_config() { return load_bert_config(kTinyDir + "/bert_config.json"); }

// The error of `f`, which must throw bertrain::Error.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error thrown";
  return "";
}

}  // namespace

// ---- C33: names, transposes, heads ---------------------------------------------------------------------

TEST(TfBertNames, Cases33Table) {
  struct Row {
    const char* tf;
    const char* hf;
    bool transpose;
  };
  const Row rows[] = {
      {"bert/embeddings/word_embeddings", "bert.embeddings.word_embeddings.weight", false},
      {"bert/embeddings/position_embeddings", "bert.embeddings.position_embeddings.weight", false},
      {"bert/embeddings/token_type_embeddings", "bert.embeddings.token_type_embeddings.weight", false},
      {"bert/embeddings/LayerNorm/gamma", "bert.embeddings.LayerNorm.weight", false},
      {"bert/embeddings/LayerNorm/beta", "bert.embeddings.LayerNorm.bias", false},
      {"bert/encoder/layer_0/attention/self/query/kernel", "bert.encoder.layer.0.attention.self.query.weight", true},
      {"bert/encoder/layer_0/attention/self/query/bias", "bert.encoder.layer.0.attention.self.query.bias", false},
      {"bert/encoder/layer_0/attention/output/dense/kernel", "bert.encoder.layer.0.attention.output.dense.weight", true},
      {"bert/encoder/layer_0/intermediate/dense/kernel", "bert.encoder.layer.0.intermediate.dense.weight", true},
      {"bert/encoder/layer_0/output/dense/kernel", "bert.encoder.layer.0.output.dense.weight", true},
      {"bert/encoder/layer_11/output/LayerNorm/gamma", "bert.encoder.layer.11.output.LayerNorm.weight", false},
      {"bert/pooler/dense/kernel", "bert.pooler.dense.weight", true},
      {"cls/predictions/transform/dense/kernel", "cls.predictions.transform.dense.weight", true},
      {"cls/predictions/transform/LayerNorm/beta", "cls.predictions.transform.LayerNorm.bias", false},
      {"cls/predictions/output_bias", "cls.predictions.bias", false},
      {"cls/seq_relationship/output_weights", "cls.seq_relationship.weight", false},  // already [out, in]
      {"cls/seq_relationship/output_bias", "cls.seq_relationship.bias", false},
      {"output_weights", "classifier.weight", false},  // run_classifier.py: no scope, [num_labels, H]
      {"output_bias", "classifier.bias", false},
      {"cls/squad/output_weights", "qa_outputs.weight", false},  // run_squad.py: [2, H], row 0 start
      {"cls/squad/output_bias", "qa_outputs.bias", false},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.tf);
    auto m = tf_to_hf_name(r.tf);
    ASSERT_TRUE(m.has_value());
    EXPECT_EQ(m->name, r.hf);
    EXPECT_EQ(m->transpose, r.transpose);
    auto back = hf_to_tf_name(r.hf);
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(back->name, r.tf);
    EXPECT_EQ(back->transpose, r.transpose);
    EXPECT_FALSE(is_tf_optimizer_variable(r.tf));
  }
  // Hugging Face spellings without the "bert." prefix or with LayerNorm.gamma/beta map to the same variables.
  EXPECT_EQ(hf_to_tf_name("embeddings.LayerNorm.gamma")->name, "bert/embeddings/LayerNorm/gamma");
  EXPECT_EQ(hf_to_tf_name("encoder.layer.3.output.dense.weight")->name, "bert/encoder/layer_3/output/dense/kernel");
  EXPECT_FALSE(hf_to_tf_name(kTiedDecoderWeight).has_value());
  EXPECT_FALSE(hf_to_tf_name("bert.embeddings.position_ids").has_value());
  for (const char* opt : {"bert/embeddings/word_embeddings/adam_m", "bert/pooler/dense/kernel/adam_v", "global_step",
                          "bert/pooler/dense/kernel/Adam_1", "AdamWeightDecayOptimizer/beta1_power", "beta2_power"})
    EXPECT_TRUE(is_tf_optimizer_variable(opt)) << opt;
  EXPECT_FALSE(tf_to_hf_name("_CHECKPOINTABLE_OBJECT_GRAPH").has_value());
}

// C33's numeric check: TF computes x . K with K [in, out]; Hugging Face W . x with W = K^T (not a reshape).
// The square kernel is the case a shape check cannot catch.
TEST(TfBertNames, TransposeNumericAndSquareKernel) {
  TinyCopy t("transpose");
  const std::string prefix = (t.dir / "k.ckpt").string();
  save_tf_checkpoint(prefix, {{"bert/encoder/layer_0/intermediate/dense/kernel", tensor2d({1, 2, 3, 4, 5, 6}, 2, 3)},
                              {"bert/encoder/layer_0/attention/self/query/kernel", tensor2d({1, 2, 3, 4}, 2, 2)},
                              {"cls/seq_relationship/output_weights", tensor2d({1, 2, 3, 4}, 2, 2)}});
  TfMappingReport rep;
  auto w = read_tf_bert_weights(TfCheckpointReader::open(prefix), nullptr, "", rep);
  ASSERT_EQ(w.size(), 3u);
  auto find = [&](const std::string& hf) -> const Tensor& {
    for (const auto& x : w)
      if (x.hf_name == hf) return x.value;
    throw Error("missing " + hf);
  };
  auto matvec = [](const Tensor& W, std::vector<float> x) {  // W (out, in) . x
    std::vector<float> y(static_cast<size_t>(W.size(0)), 0.f);
    for (int64_t o = 0; o < W.size(0); ++o)
      for (int64_t i = 0; i < W.size(1); ++i) y[o] += W.data<float>()[o * W.size(1) + i] * x[i];
    return y;
  };
  const Tensor& inter = find("bert.encoder.layer.0.intermediate.dense.weight");
  EXPECT_EQ(inter.shape(), (Shape{3, 2}));
  EXPECT_EQ(matvec(inter, {1, 1}), (std::vector<float>{5, 7, 9}));  // reshape instead would give 3, 7, 11
  const Tensor& q = find("bert.encoder.layer.0.attention.self.query.weight");
  EXPECT_EQ(q.shape(), (Shape{2, 2}));
  EXPECT_EQ(matvec(q, {1, 0}), (std::vector<float>{1, 2}));  // TF [1, 0] . K; untransposed would be 1, 3
  // cls/seq_relationship/output_weights is [labels, hidden] already: no transpose, even when square.
  EXPECT_TRUE(same(find("cls.seq_relationship.weight"), tensor2d({1, 2, 3, 4}, 2, 2)));
}

// In the real checkpoint every attention, pooler and transform kernel is 4 x 4: the model's weights must be the
// transposes (the kernels are not symmetric, so an untransposed copy would differ).
TEST(TfBertLoad, TinyCheckpointIntoBertForPreTraining) {
  Rng rng(1);
  BertForPreTraining model(tiny_config(), rng);
  LoadReport rep;
  load_model(kTiny, model, rep);
  EXPECT_EQ(rep.loaded.size(), 46u);
  EXPECT_TRUE(rep.missing.empty());
  EXPECT_TRUE(rep.unexpected.empty());
  EXPECT_EQ(rep.optimizer_state.size(), 93u);  // 92 adam_m/adam_v slots + global_step, skipped and counted
  EXPECT_NE(rep.summary().find("93 optimizer variables skipped"), std::string::npos);
  TfCheckpointReader r = TfCheckpointReader::open(kTiny);
  int square = 0;
  for (const auto& e : r.entries()) {
    auto m = tf_to_hf_name(e.name);
    if (!m || is_tf_optimizer_variable(e.name)) continue;
    const Tensor tf = r.load(e.name);
    const Tensor p = model.parameter(m->name).value();
    if (!m->transpose) {
      EXPECT_TRUE(same(p, tf)) << e.name;
      continue;
    }
    for (int64_t i = 0; i < tf.size(0); ++i)
      for (int64_t j = 0; j < tf.size(1); ++j)
        ASSERT_EQ(p.data<float>()[j * tf.size(0) + i], tf.data<float>()[i * tf.size(1) + j]) << e.name;
    if (tf.size(0) == tf.size(1)) {
      ++square;
      EXPECT_FALSE(same(p, tf)) << e.name << " is symmetric: the check would not see a missing transpose";
    }
  }
  EXPECT_EQ(square, 10);  // Q, K, V, attention output x 2 layers, pooler, MLM transform
  // The same through a prefix's .index and through a directory that holds one index.
  LoadReport rep2;
  BertForPreTraining m2(tiny_config(), rng);
  load_model(kTinyDir, m2, rep2);
  EXPECT_EQ(rep2.loaded.size(), 46u);
  EXPECT_EQ(default_config_file(kTiny), kTinyDir + "/bert_config.json");
}

// run_classifier.py's unscoped output_weights [num_labels, H] and run_squad.py's cls/squad/* go to the heads,
// untransposed (row 0 of qa_outputs is the start logit).
TEST(TfBertLoad, ClassifierAndSquadHeads) {
  TinyCopy t("heads");
  TfCheckpointReader r = TfCheckpointReader::open(kTiny);
  std::vector<std::pair<std::string, Tensor>> base;
  for (const auto& e : r.entries())
    if (!is_tf_optimizer_variable(e.name) && e.name.rfind("cls/", 0) != 0) base.emplace_back(e.name, r.load(e.name));
  auto cls = base;
  const Tensor w3 = tensor2d({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 3, 4);
  cls.emplace_back("output_weights", w3);
  cls.emplace_back("output_bias", Tensor::from_vector({0.5, -0.5, 0.25}, Shape{3}));
  save_tf_checkpoint((t.dir / "cls.ckpt").string(), cls);
  BertConfig c = tiny_config();
  c.num_labels = 3;
  Rng rng(2);
  BertForSequenceClassification clf(c, rng);
  LoadReport rep;
  load_model((t.dir / "cls.ckpt").string(), clf, rep, LoadOptions{.strict = true});
  EXPECT_TRUE(same(clf.parameter("classifier.weight").value(), w3));
  EXPECT_EQ(clf.parameter("classifier.bias").value().get(2), 0.25);

  auto squad = base;
  const Tensor w2 = tensor2d({1, 0, 0, 0, 0, 1, 0, 0}, 2, 4);
  squad.emplace_back("cls/squad/output_weights", w2);
  squad.emplace_back("cls/squad/output_bias", Tensor::from_vector({0.0, 1.0}, Shape{2}));
  save_tf_checkpoint((t.dir / "squad.ckpt").string(), squad);
  BertForQuestionAnswering qa(tiny_config(), rng);
  LoadReport rep2;
  load_model((t.dir / "squad.ckpt").string(), qa, rep2);
  EXPECT_TRUE(rep2.missing.empty());
  EXPECT_EQ(rep2.unexpected.size(), 2u);  // the pooler, which BertForQuestionAnswering has not
  EXPECT_TRUE(same(qa.parameter("qa_outputs.weight").value(), w2));
  // Start logits = hidden[:, 0] (row 0 picks unit 0), end logits = hidden[:, 1] + 1.
  BertInputs in;
  std::vector<int32_t> ids = {2, 5, 6, 3};
  in.input_ids = Tensor::from_data(ids.data(), Shape{1, 4});
  qa.eval();
  NoGradGuard ng;
  auto out = qa.forward(in);
  auto seq = qa.bert().forward(in).sequence_output.value();
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(out.start_logits.value().get(i), seq.get(i * 4 + 0), 1e-6);
    EXPECT_NEAR(out.end_logits.value().get(i), seq.get(i * 4 + 1) + 1.0, 1e-6);
  }
}

// CASES.md C33 input B: one masked-LM bias, added once; a decoder that is not the word embeddings is reported.
TEST(TfBertLoad, DecoderBiasAndWeightTies) {
  TinyCopy t("tie");
  Rng rng(3);
  BertForPreTraining model(tiny_config(), rng);
  const std::string dir = (t.dir / "hf").string();
  save_model(dir, model, tiny_config());
  SafetensorsFile f = SafetensorsFile::open(dir + "/model.safetensors");
  auto tensors = f.load_all();
  const Tensor bias = f.load("cls.predictions.bias");
  auto with = [&](std::vector<std::pair<std::string, Tensor>> extra) {
    auto all = tensors;
    for (auto& e : extra) all.push_back(std::move(e));
    save_safetensors(dir + "/model.safetensors", all);
  };
  with({{"cls.predictions.decoder.bias", bias.clone()}});
  BertForPreTraining m2(tiny_config(), rng);
  LoadReport rep;
  load_model(dir, m2, rep);  // equal: accepted
  Tensor other = bias.clone();
  other.data<float>()[0] += 1.0f;
  with({{"cls.predictions.decoder.bias", other}});
  const std::string err = error_of([&] { load_model(dir, m2, rep); });
  EXPECT_NE(err.find("'cls.predictions.bias' and 'cls.predictions.decoder.bias' differ"), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), std::string::npos);
  Tensor dec = f.load("bert.embeddings.word_embeddings.weight").clone();
  dec.data<float>()[3] += 1.0f;
  with({{kTiedDecoderWeight, dec}});
  load_model(dir, m2, rep);
  ASSERT_EQ(rep.warnings.size(), 1u);
  EXPECT_NE(rep.warnings[0].find("differs from bert.embeddings.word_embeddings.weight"), std::string::npos);
  // Converting that checkpoint to TF is refused: google-research/bert's decoder is the word embeddings.
  const std::string e2 = error_of([&] { convert_checkpoint(dir, (t.dir / "tf").string()); });
  EXPECT_NE(e2.find("differs from bert.embeddings.word_embeddings.weight"), std::string::npos) << e2;
  EXPECT_FALSE(fs::exists(t.dir / "tf"));
}

// ---- the independent PyTorch forward ------------------------------------------------------

TEST(TfGolden, LogitsMatchIndependentPyTorch) {
  const json g = json::parse(test::read_file(kData + "/golden_tiny_bert.json"));
  const auto& in = g.at("inputs");
  auto i32 = [&](const char* k) {
    std::vector<int32_t> v;
    int64_t rows = 0, cols = 0;
    for (const auto& row : in.at(k)) {
      ++rows;
      cols = static_cast<int64_t>(row.size());
      for (const auto& x : row) v.push_back(x.get<int32_t>());
    }
    return Tensor::from_data(v.data(), Shape{rows, cols});
  };
  BertInputs bi;
  bi.input_ids = i32("input_ids");
  bi.token_type_ids = i32("token_type_ids");
  bi.attention_mask = i32("attention_mask");
  PretrainingTargets tg;
  tg.masked_lm_positions = i32("masked_lm_positions");
  tg.masked_lm_ids = i32("masked_lm_ids");
  std::vector<double> w;
  for (const auto& row : in.at("masked_lm_weights"))
    for (const auto& x : row) w.push_back(x.get<double>());
  tg.masked_lm_weights = Tensor::from_vector(w, tg.masked_lm_positions.shape());
  std::vector<int32_t> nsp;
  for (const auto& x : in.at("next_sentence_labels")) nsp.push_back(x.get<int32_t>());
  tg.next_sentence_labels = Tensor::from_data(nsp.data(), Shape{static_cast<int64_t>(nsp.size())});

  // From the TF checkpoint, and from its conversion: the same logits.
  TinyCopy t("golden");
  convert_checkpoint(kTiny, (t.dir / "hf").string());
  for (const std::string& ckpt : {kTiny, (t.dir / "hf").string()}) {
    SCOPED_TRACE(ckpt);
    Rng rng(4);
    BertForPreTraining model(tiny_config(), rng);
    LoadReport rep;
    load_model(ckpt, model, rep);
    model.eval();
    NoGradGuard ng;
    PretrainingOutput o = model.forward(bi, tg);
    double worst = 0;
    auto check = [&](const Tensor& got, const json& want) {
      int64_t k = 0;
      for (const auto& row : want)
        for (const auto& x : row) worst = std::max(worst, std::fabs(got.get(k++) - x.get<double>()));
      EXPECT_EQ(k, got.numel());
    };
    check(o.mlm_logits, g.at("mlm_logits"));
    check(o.nsp_logits, g.at("nsp_logits"));
    EXPECT_LT(worst, 1e-5);
    // Every encoder layer's output at the real tokens (what extract-features prints).
    BertModel::Output enc = model.bert().forward(bi, /*all_encoder_layers=*/true);
    ASSERT_EQ(enc.all_encoder_layers.size(), 2u);
    double worst_layer = 0;
    const int64_t tlen = bi.input_ids.size(1);
    for (size_t l = 0; l < 2; ++l) {
      const Tensor& h = enc.all_encoder_layers[l].value();
      const auto& wl = g.at("all_encoder_layers")[l];
      for (int64_t b = 0; b < bi.input_ids.size(0); ++b)
        for (int64_t tt = 0; tt < tlen; ++tt) {
          if (bi.attention_mask.data<int32_t>()[b * tlen + tt] == 0) continue;
          for (int64_t j = 0; j < 4; ++j)
            worst_layer = std::max(worst_layer, std::fabs(h.get((b * tlen + tt) * 4 + j) - wl[b][tt][j].get<double>()));
        }
    }
    EXPECT_LT(worst_layer, 1e-5);
    EXPECT_TRUE(same(enc.all_encoder_layers.back().value(), enc.sequence_output.value()));
    std::printf("%s: max |logit - PyTorch| %.3g, max |hidden - PyTorch| %.3g\n", ckpt.c_str(), worst, worst_layer);
  }
}

// ---- round trips -----------------------------------------------------------------------------

// TF -> bertrain -> TF keeps every model variable's name, dtype, shape and bytes and drops the 93 optimizer
// variables; checked with our reader and, independently, with list_bundle.py.
TEST(TfRoundTrip, TfToBertrainToTf) {
  TinyCopy t("rt1");
  const std::string hf = (t.dir / "hf").string(), tf = (t.dir / "tf").string();
  ConvertResult a = convert_checkpoint(kTiny, hf);
  EXPECT_FALSE(a.to_tf);
  EXPECT_EQ(a.tensors, 46u);
  EXPECT_EQ(a.report.optimizer.size(), 93u);
  ConvertResult b = convert_checkpoint(hf, tf);
  EXPECT_TRUE(b.to_tf);
  EXPECT_EQ(b.tensors, 46u);
  TfCheckpointReader orig = TfCheckpointReader::open(kTiny), back = TfCheckpointReader::open(tf + "/bert_model.ckpt");
  ASSERT_EQ(back.entries().size(), 46u);
  for (const auto& e : back.entries()) {
    ASSERT_TRUE(orig.contains(e.name)) << e.name;
    const TfTensorInfo& o = orig.info(e.name);
    EXPECT_EQ(e.dtype, o.dtype) << e.name;
    EXPECT_EQ(e.shape, o.shape) << e.name;
    EXPECT_EQ(e.crc32c, o.crc32c) << e.name;
    EXPECT_EQ(back.read_bytes(e.name), orig.read_bytes(e.name)) << e.name;
  }
  EXPECT_FALSE(back.contains("global_step"));
  // google's bert_config.json comes back byte for byte (its directionality and pooler_* keys kept).
  EXPECT_EQ(test::read_file(tf + "/bert_config.json"), test::read_file(kTinyDir + "/bert_config.json"));
  EXPECT_EQ(test::read_file(tf + "/vocab.txt"), test::read_file(kTinyDir + "/vocab.txt"));
  if (!shared_available()) GTEST_SKIP() << "../shared/data/tf_checkpoints absent: list_bundle.py check skipped";
  int st = -1;
  const std::string listing =
      run_capture("/usr/bin/python3 '" + kShared + "/list_bundle.py' '" + tf + "/bert_model.ckpt' --json --values -1", &st);
  ASSERT_EQ(st, 0);
  const json got = json::parse(listing);
  const json want = json::parse(test::read_file(kShared + "/keras_bert_tiny/bert_model.ckpt.entries.json"));
  std::map<std::string, json> want_by_name;
  for (const auto& e : want.at("entries")) want_by_name[e.at("name")] = e;
  int compared = 0;
  for (const auto& e : got.at("entries")) {
    const auto& w = want_by_name.at(e.at("name").get<std::string>());
    EXPECT_EQ(e.at("dtype"), w.at("dtype"));
    EXPECT_EQ(e.at("shape"), w.at("shape"));
    EXPECT_EQ(e.at("crc32c"), w.at("crc32c"));
    EXPECT_EQ(e.at("values"), w.at("values"));
    ++compared;
  }
  EXPECT_EQ(compared, 46);
  // --verify also checks every index block's CRC (the table list_bundle.py parses on its own).
  const std::string verify = run_capture("/usr/bin/python3 '" + kShared + "/list_bundle.py' '" + tf +
                                             "/bert_model.ckpt' --verify", &st);
  EXPECT_EQ(st, 0);
  EXPECT_NE(verify.find("46 of 46 tensors match their crc32c"), std::string::npos) << verify;
}

// bertrain -> TF -> bertrain gives the same safetensors tensors, heads included (a 3-label classifier).
TEST(TfRoundTrip, BertrainToTfToBertrain) {
  TinyCopy t("rt2");
  BertConfig c = tiny_config();
  c.num_labels = 3;
  c.id2label = {"entailment", "neutral", "contradiction"};  // CASES.md C43: the names come back too
  for (int which = 0; which < 2; ++which) {
    Rng rng(5 + which);
    std::unique_ptr<Module> m;
    if (which == 0) m = std::make_unique<BertForPreTraining>(c, rng);
    else m = std::make_unique<BertForSequenceClassification>(c, rng);
    const std::string src = (t.dir / ("src" + std::to_string(which))).string();
    const std::string tf = (t.dir / ("tf" + std::to_string(which))).string();
    const std::string back = (t.dir / ("back" + std::to_string(which))).string();
    save_model(src, *m, c);
    convert_checkpoint(src, tf);
    convert_checkpoint(tf + "/bert_model.ckpt", back);
    SafetensorsFile a = SafetensorsFile::open(src + "/model.safetensors"), b = SafetensorsFile::open(back + "/model.safetensors");
    auto an = a.names(), bn = b.names();
    std::sort(an.begin(), an.end());
    std::sort(bn.begin(), bn.end());
    EXPECT_EQ(an, bn);
    for (const auto& n : an) {
      EXPECT_EQ(a.info(n).dtype, b.info(n).dtype) << n;
      EXPECT_TRUE(same(a.load(n), b.load(n))) << n;
    }
    const BertConfig bc = load_bert_config(back + "/config.json");
    EXPECT_EQ(bc.num_labels, 3);
    EXPECT_EQ(bc.id2label, c.id2label);
  }
}

// Label names in bert_config.json (written by bertrain -> TF) must agree with the classifier head's rows: a
// config naming 2 labels beside a 3-row output_weights stops TF -> bertrain with one line, nothing written.
TEST(TfRoundTrip, LabelNamesMustMatchClassifierRows) {
  TinyCopy t("labels");
  BertConfig c = tiny_config();
  c.num_labels = 3;
  c.id2label = {"entailment", "neutral", "contradiction"};
  Rng rng(3);
  BertForSequenceClassification m(c, rng);
  const std::string src = (t.dir / "src").string(), tf = (t.dir / "tf").string(), back = (t.dir / "back").string();
  save_model(src, m, c);
  convert_checkpoint(src, tf);
  const std::string google = test::read_file(tf + "/bert_config.json");
  EXPECT_NE(google.find("\"id2label\": {\n    \"0\": \"entailment\""), std::string::npos) << google;
  EXPECT_EQ(google.find("model_type"), std::string::npos) << google;
  BertConfig two = c;
  two.num_labels = 2;
  two.id2label = {"yes", "no"};
  test::write_file(fs::path(tf) / "bert_config.json", bert_config_to_google_json(two));
  const std::string e = error_of([&] { convert_checkpoint(tf + "/bert_model.ckpt", back); });
  EXPECT_EQ(e, "TF checkpoint '" + tf + "/bert_model.ckpt': output_weights has 3 rows but config '" + tf +
                   "/bert_config.json' names 2 labels");
  EXPECT_FALSE(fs::exists(back));
}

// ---- bad input, one line each, nothing written ----------------------------------------------

TEST(TfErrors, OneLineNamingFileAndTensorNothingWritten) {
  struct Case {
    const char* name;
    std::function<void(TinyCopy&)> damage;
    std::vector<std::string> expect;  // substrings of the message (besides the file)
    std::string file;                 // file name that must appear
  };
  const std::string data = "bert_model.ckpt.data-00000-of-00001";
  std::vector<Case> cases = {
      {"truncated data file", [&](TinyCopy& t) { fs::resize_file(t.dir / data, 8000); },
       {"is truncated", "tensor '"}, data},
      {"wrong CRC",
       [&](TinyCopy& t) {
         std::string b = test::read_file((t.dir / data).string());
         b[2304 + 5] ^= 0x40;  // inside bert/encoder/layer_0/attention/self/query/kernel (offset 2304, 64 bytes)
         test::write_file(t.dir / data, b);
       },
       {"CRC-32C mismatch", "tensor 'bert/encoder/layer_0/attention/self/query/kernel'"}, data},
      {"missing shard", [&](TinyCopy& t) { fs::remove(t.dir / data); }, {"cannot be opened"}, data},
      {"index not a table", [&](TinyCopy& t) { test::write_file(t.dir / "bert_model.ckpt.index", "not a table\n"); },
       {"is not a LevelDB table"}, "bert_model.ckpt.index"},
      {"shape disagrees with bert_config.json",
       [&](TinyCopy& t) {
         std::string c = test::read_file((t.dir / "bert_config.json").string());
         c.replace(c.find("\"intermediate_size\": 16"), 23, "\"intermediate_size\": 8");
         test::write_file(t.dir / "bert_config.json", c);
       },
       {"tensor 'bert/encoder/layer_0/intermediate/dense/bias'", "bert_config.json", "[16]", "[8]"}, "bert_model.ckpt"},
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.name);
    TinyCopy t(std::string("err_") + std::to_string(&c - cases.data()));
    c.damage(t);
    const fs::path out = t.dir / "out";
    // convert: the library call ...
    const std::string e = error_of([&] { convert_checkpoint(t.prefix(), out.string()); });
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    EXPECT_NE(e.find(c.file), std::string::npos) << e;
    for (const auto& s : c.expect) EXPECT_NE(e.find(s), std::string::npos) << e << "\n  missing: " << s;
    EXPECT_FALSE(fs::exists(out)) << "output written despite the error";
    // ... and the command: non-zero exit, one line, nothing written.
    int st = -1;
    const std::string log = run_capture(std::string(BERTRAIN_BINARY_DIR) + "/bertrain convert --input '" + t.prefix() +
                                            "' --output '" + out.string() + "' 2>&1", &st);
    EXPECT_NE(st, 0);
    EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
    EXPECT_NE(log.find(c.file), std::string::npos) << log;
    EXPECT_FALSE(fs::exists(out));
    // load_model (--init_checkpoint of pretrain, run-classifier, run-squad): the same error, the model untouched.
    Rng rng(9);
    BertConfig cfg = load_bert_config((t.dir / "bert_config.json").string());
    BertForPreTraining model(cfg, rng);
    const Tensor before = model.parameter("bert.embeddings.word_embeddings.weight").value().clone();
    LoadReport rep;
    const std::string e2 = error_of([&] { load_model(t.prefix(), model, rep); });
    EXPECT_NE(e2.find(c.file), std::string::npos) << e2;
    EXPECT_EQ(e2.find('\n'), std::string::npos) << e2;
    EXPECT_TRUE(same(before, model.parameter("bert.embeddings.word_embeddings.weight").value()));
  }
}

// A bert_config.json whose num_hidden_layers disagrees with the checkpoint's layers: every tensor shape
// matches, so only the layer count tells. convert must stop (both directions) rather than write a config of L
// layers beside the weights of another number: one layer too few dropped layer_1 with a warning, one too many
// wrote a model whose layer 2 would be randomly initialised when loaded.
TEST(TfErrors, LayerCountDisagreesWithConfig) {
  auto set_layers = [](const fs::path& cfg, int n) {
    std::string c = test::read_file(cfg.string());
    const size_t at = c.find("\"num_hidden_layers\": 2");
    ASSERT_NE(at, std::string::npos) << c;
    c.replace(at, 22, "\"num_hidden_layers\": " + std::to_string(n));
    test::write_file(cfg, c);
  };
  for (int layers : {1, 3}) {
    SCOPED_TRACE("num_hidden_layers " + std::to_string(layers));
    // TF -> bertrain
    TinyCopy t("layers_" + std::to_string(layers));
    set_layers(t.dir / "bert_config.json", layers);
    const fs::path out = t.dir / "out";
    const std::string e = error_of([&] { convert_checkpoint(t.prefix(), out.string()); });
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    EXPECT_NE(e.find("bert_config.json"), std::string::npos) << e;
    EXPECT_NE(e.find("num_hidden_layers " + std::to_string(layers)), std::string::npos) << e;
    EXPECT_NE(e.find(layers == 1 ? "tensor 'bert/encoder/layer_1/" : "no tensor 'bert/encoder/layer_2/"),
              std::string::npos) << e;
    EXPECT_FALSE(fs::exists(out)) << "output written despite the error";
    // bertrain -> TF: a Hugging Face directory whose config.json disagrees the same way.
    const fs::path hf = t.dir / "hf", tf = t.dir / "tf";
    TinyCopy good("layers_good_" + std::to_string(layers));
    convert_checkpoint(good.prefix(), hf.string());
    set_layers(hf / "config.json", layers);
    const std::string e2 = error_of([&] { convert_checkpoint(hf.string(), tf.string()); });
    EXPECT_EQ(e2.find('\n'), std::string::npos) << e2;
    EXPECT_NE(e2.find("config.json"), std::string::npos) << e2;
    EXPECT_NE(e2.find(layers == 1 ? "tensor 'bert.encoder.layer.1." : "no tensor 'bert.encoder.layer.2."),
              std::string::npos) << e2;
    EXPECT_FALSE(fs::exists(tf)) << "output written despite the error";
  }
}

// A training run's output directory holds several checkpoints (model.ckpt-N): a directory is accepted when it
// holds one, and with several the error lists them instead of saying the directory has no model.safetensors.
TEST(TfErrors, DirectoryWithSeveralCheckpoints) {
  TinyCopy t("several");
  const std::string data = "bert_model.ckpt.data-00000-of-00001";
  fs::copy_file(t.dir / "bert_model.ckpt.index", t.dir / "model.ckpt-100.index");
  fs::copy_file(t.dir / data, t.dir / "model.ckpt-100.data-00000-of-00001");
  const fs::path out = t.dir / "out";
  const std::string e = error_of([&] { convert_checkpoint(t.dir.string(), out.string()); });
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  EXPECT_NE(e.find("holds 2 TF checkpoints (bert_model.ckpt, model.ckpt-100)"), std::string::npos) << e;
  EXPECT_NE(e.find(t.dir.string()), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(out));
  Rng rng(9);
  BertForPreTraining model(tiny_config(), rng);
  LoadReport rep;
  EXPECT_NE(error_of([&] { load_model(t.dir.string(), model, rep); }).find("holds 2 TF checkpoints"), std::string::npos);
  // Google's zips ship bert_model.ckpt.meta (the graph) beside the bundle: naming it names the prefix, rather than
  // being read as a safetensors file ("header length 4182223206490177290 exceeds the limit").
  // ("\x05" "Const": written as one literal, \x05C would be a single hex escape, 0x5C, and 17 bytes would read past
  // the literal's end; AddressSanitizer found it.)
  const std::string meta_head("\x0a\xd2\x9e\x02\x0a\x0c\x0a\x05" "Const", 13);
  test::write_file(t.dir / "bert_model.ckpt.meta", meta_head);
  EXPECT_TRUE(is_tf_checkpoint((t.dir / "bert_model.ckpt.meta").string()));
  EXPECT_EQ(find_tf_checkpoint((t.dir / "bert_model.ckpt.meta").string()), (t.dir / "bert_model.ckpt").string());
  // One checkpoint in the directory: it is the one.
  fs::remove(t.dir / "model.ckpt-100.index");
  EXPECT_EQ(find_tf_checkpoint(t.dir.string()), (t.dir / "bert_model.ckpt").string());
}

// A training run's directory with a `checkpoint` file (TF's CheckpointState, text format): the checkpoint it names
// is the one, as tf.train.latest_checkpoint; one it names that is gone stops the load with one line naming the file.
TEST(TfErrors, DirectoryWithCheckpointFile) {
  TinyCopy t("state");
  const std::string data = "bert_model.ckpt.data-00000-of-00001";
  fs::copy_file(t.dir / "bert_model.ckpt.index", t.dir / "model.ckpt-100.index");
  fs::copy_file(t.dir / data, t.dir / "model.ckpt-100.data-00000-of-00001");
  const std::string state_file = (t.dir / "checkpoint").string();
  auto state = [&](const std::string& path) {  // as TF writes it: the path quoted, with C escapes
    std::string q;
    for (char c : path) q += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
    test::write_file(state_file, "model_checkpoint_path: \"" + q + "\"\nall_model_checkpoint_paths: \"" + q +
                                     "\"\nall_model_checkpoint_timestamps: 1700000000.5\n");
  };
  state("model.ckpt-100");
  EXPECT_EQ(find_tf_checkpoint(t.dir.string()), (t.dir / "model.ckpt-100").string());
  Rng rng(9);
  BertForPreTraining model(tiny_config(), rng);
  LoadReport rep;
  load_model(t.dir.string(), model, rep);
  EXPECT_GT(rep.loaded.size(), 0u);
  state((t.dir / "bert_model.ckpt").string());  // absolute, as TF1's Saver writes it
  EXPECT_EQ(find_tf_checkpoint(t.dir.string()), (t.dir / "bert_model.ckpt").string());
  // Named but gone: the error names the `checkpoint` file and the missing prefix, and lists what is there.
  state("model.ckpt-200");
  std::string e = error_of([&] { load_model(t.dir.string(), model, rep); });
  EXPECT_NE(e.find(state_file + ": model_checkpoint_path names '" + (t.dir / "model.ckpt-200").string() + "', and '" +
                   (t.dir / "model.ckpt-200").string() + ".index' does not exist (the directory holds bert_model.ckpt, "
                   "model.ckpt-100: give one prefix)"), std::string::npos) << e;
  // A directory copied elsewhere keeps TF1's absolute paths (or Windows ones): the error points at the copy's own.
  for (const char* elsewhere : {"/gone/elsewhere/model.ckpt-100", "C:\\runs\\bert\\model.ckpt-100"}) {
    state(elsewhere);
    e = error_of([&] { find_tf_checkpoint(t.dir.string()); });
    EXPECT_NE(e.find("was the directory moved? '" + (t.dir / "model.ckpt-100").string() + "' exists"),
              std::string::npos) << e;
  }
  // The `checkpoint` file takes precedence over a lone *.index, as in TF: a stale one is refused, not passed over.
  fs::remove(t.dir / "model.ckpt-100.index");
  state("model.ckpt-300");
  e = error_of([&] { find_tf_checkpoint(t.dir.string()); });
  EXPECT_NE(e.find("model.ckpt-300.index' does not exist (the directory holds bert_model.ckpt: give one prefix)"),
            std::string::npos) << e;
  // A `checkpoint` file that is not CheckpointState text: the file and line, and nothing written.
  test::write_file(state_file, "model_checkpoint_path: \"bert_model.ckpt\"\nall_model_checkpoint_paths \"x\"\n");
  e = error_of([&] { convert_checkpoint(t.dir.string(), (t.dir / "out").string()); });
  EXPECT_NE(e.find(state_file + ": line 2: field 'all_model_checkpoint_paths' has no ':'"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(t.dir / "out"));
}

// Partitioned variables (entries with slices) are refused with one line; a bad header too.
TEST(TfErrors, SlicedEntryAndBadHeader) {
  TinyCopy t("sliced");
  auto build = [&](const std::string& path, const std::string& header, const std::string& entry) {
    leveldb::WritableFile* f = nullptr;
    ASSERT_TRUE(leveldb::Env::Default()->NewWritableFile(path, &f).ok());
    leveldb::Options o;
    o.compression = leveldb::kNoCompression;
    {
      leveldb::TableBuilder b(o, f);
      b.Add("", header);
      b.Add("bert/embeddings/word_embeddings", entry);
      ASSERT_TRUE(b.Finish().ok());
    }
    f->Close();
    delete f;
  };
  tfbundle::Header h;
  h.num_shards = 1;
  h.has_version = true;
  h.producer = 1;
  tfbundle::Entry e;
  e.dtype = 1;
  e.has_shape = true;
  e.shape = {15, 4};
  e.size = 240;
  const std::string sliced = tfbundle::serialize_entry(e) + std::string("\x3a\x00", 2);  // slices: one empty slice
  test::write_file(t.dir / "s.ckpt.data-00000-of-00001", std::string(240, '\0'));
  build((t.dir / "s.ckpt.index").string(), tfbundle::serialize_header(h), sliced);
  TfCheckpointReader r = TfCheckpointReader::open((t.dir / "s.ckpt").string());
  EXPECT_TRUE(r.info("bert/embeddings/word_embeddings").sliced);
  const std::string err = error_of([&] { r.load("bert/embeddings/word_embeddings"); });
  EXPECT_NE(err.find("partitioned"), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), std::string::npos);
  h.endianness = 1;
  build((t.dir / "b.ckpt.index").string(), tfbundle::serialize_header(h), tfbundle::serialize_entry(e));
  EXPECT_NE(error_of([&] { TfCheckpointReader::open((t.dir / "b.ckpt").string()); }).find("big-endian"),
            std::string::npos);
  build((t.dir / "g.ckpt.index").string(), std::string("\x0a\xff", 2), tfbundle::serialize_entry(e));
  EXPECT_NE(error_of([&] { TfCheckpointReader::open((t.dir / "g.ckpt").string()); }).find("not a BundleHeaderProto"),
            std::string::npos);
}

// ---- config ----------------------------------------------------------------------------------------------

TEST(TfConfig, GoogleExtrasKept) {
  const BertConfig c = tiny_config();
  EXPECT_EQ(c.extra.at("directionality"), "\"bidi\"");
  EXPECT_EQ(c.extra.at("pooler_type"), "\"first_token_transform\"");
  EXPECT_EQ(c.extra.size(), 6u);
  const std::string hf = bert_config_to_json(c);
  EXPECT_NE(hf.find("\"pooler_num_fc_layers\": 3"), std::string::npos);
  EXPECT_EQ(parse_bert_config(hf).extra, c.extra);  // and back, no bookkeeping key became an extra
  EXPECT_EQ(bert_config_to_google_json(c), test::read_file(kTinyDir + "/bert_config.json"));
}

// ---- bertrain inspect ------------------------------------------------------------------------------------

TEST(TfInspect, ListsTensorsAndWhatBecomesOfThem) {
  int st = -1;
  const std::string out = run_capture(std::string(BERTRAIN_BINARY_DIR) + "/bertrain inspect " + kTiny, &st);
  EXPECT_EQ(st, 0) << out;
  EXPECT_NE(out.find("(TensorFlow, 1 data shard, bundle version 1)"), std::string::npos) << out;
  EXPECT_NE(out.find("tensors: 139 (46 model variables, 93 optimizer variables, 0 other)"), std::string::npos) << out;
  EXPECT_NE(out.find("directionality: \"bidi\" (kept, not used)"), std::string::npos) << out;
  EXPECT_NE(out.find("bert/pooler/dense/kernel"), std::string::npos);
  EXPECT_NE(out.find("-> bert.pooler.dense.weight (transposed)"), std::string::npos) << out;
  EXPECT_NE(out.find("global_step"), std::string::npos);
  const std::string s = run_capture(std::string(BERTRAIN_BINARY_DIR) + "/bertrain inspect " + kData +
                                        "/tf_serving/saved_model_half_plus_two_tf2_cpu/variables.index", &st);
  EXPECT_EQ(st, 0) << s;
  EXPECT_NE(s.find("_CHECKPOINTABLE_OBJECT_GRAPH"), std::string::npos) << s;
  EXPECT_NE(s.find("DT_STRING   []  (not convertible)"), std::string::npos) << s;
}

// Damaged index bytes never crash the reader: it opens (a byte LevelDB's CRCs do not cover) or throws one Error.
TEST(TfErrors, CorruptedIndexBytes) {
  TinyCopy t("fuzz");
  const std::string orig = test::read_file(t.prefix() + ".index");
  std::mt19937 rng(11);
  int opened = 0, refused = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::string b = orig;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < flips; ++k) b[rng() % b.size()] ^= static_cast<char>(1 + rng() % 255);
    if (trial % 10 == 0) b.resize(rng() % b.size());
    test::write_file(t.prefix() + ".index", b);
    try {
      TfCheckpointReader r = TfCheckpointReader::open(t.prefix());
      for (const auto& e : r.entries())
        if (tf_dtype_to_bertrain(e.dtype) && !e.sliced) r.load(e.name);
      ++opened;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
      ++refused;
    }
  }
  EXPECT_GT(refused, 350);
  std::printf("corrupted index: %d refused with one line, %d still readable\n", refused, opened);
}
