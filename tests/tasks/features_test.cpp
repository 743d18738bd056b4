// features_test.cpp: `bertrain extract-features`: extract_features.py's reading, features
// and JSON keys, Python's number formatting, and the values against the model's own hidden states, per token and
// pooled (JSON lines and .npy), with batches sorted by length and outputs in input order.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bertrain/core/rng.h"
#include "bertrain/io/checkpoint.h"
#include "bertrain/io/config.h"
#include "bertrain/models/bert.h"
#include "bertrain/tasks/features/features.h"
#include "test_util.h"

using namespace bertrain;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string kTinyDir = std::string(BERTRAIN_TEST_DATA_DIR) + "/tf_checkpoints/keras_bert_tiny";
const std::string kTiny = kTinyDir + "/bert_model.ckpt";

// Lines of the tiny vocab: a pair, a single, an empty line, one longer than max_seq_length 10, and a pair whose
// separator appears twice (the reference splits at the last one).
const std::vector<std::string> kLines = {"all work and no play ||| makes jack a dull boy",
                                         "jack",
                                         "",
                                         "all work and no play makes jack a dull boy all work",
                                         "a ||| b ||| dull boy",
                                         "No PLAY makes Jack"};

// The model's own hidden states for one example, run alone (batch of 1, no padding).
std::vector<Tensor> reference_layers(const BertModel& m, const features::InputFeatures& f) {
  BertInputs in;
  const auto n = static_cast<int64_t>(f.input_ids.size());
  in.input_ids = Tensor::from_data(f.input_ids.data(), Shape{1, n});
  in.token_type_ids = Tensor::from_data(f.input_type_ids.data(), Shape{1, n});
  NoGradGuard ng;
  auto o = m.forward(in, true);
  std::vector<Tensor> out;
  for (const auto& v : o.all_encoder_layers) out.push_back(v.value().reshape({n, m.config().hidden_size}).clone());
  return out;
}

struct Fixture {
  BertConfig cfg = load_bert_config(kTinyDir + "/bert_config.json");
  Rng rng{0};
  BertModel model{cfg, rng};
  text::FullTokenizer tok = text::FullTokenizer::from_vocab_file(kTinyDir + "/vocab.txt", true);
  std::vector<features::InputFeatures> feats;
  Fixture() {
    LoadReport rep;
    load_model(kTiny, model, rep);
    model.eval();
    std::string text;
    for (const auto& l : kLines) text += l + "\n";
    std::istringstream in(text);
    feats = features::convert_examples_to_features(features::read_examples(in, "<test>"), 10, tok);
  }
};

std::string run(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *status = ::pclose(p);
  return out;
}

}  // namespace

TEST(Features, PythonNumberFormat) {
  // Expected strings printed by Python 3: repr(round(float(numpy.float32(x)), 6)).
  const std::vector<std::pair<float, std::string>> cases = {
      {0.0078125f, "0.007812"},  // an exact tie: half to even
      {1e-7f, "0.0"},           {-1e-7f, "-0.0"},          {123456.789f, "123456.789062"},
      {1e-5f, "1e-05"},         {1e-4f, "0.0001"},         {1.5e-5f, "1.5e-05"},
      {3.0f, "3.0"},            {1e20f, "1.0000000200408773e+20"},
      {1e16f, "1.0000000272564224e+16"},                   {1e15f, "999999986991104.0"},
      {-0.5f, "-0.5"},          {0.1f, "0.1"},             {2.5e-6f, "2e-06"},
      {0.9999995f, "1.0"},      {-1.71827f, "-1.71827"},   {7.5e-7f, "1e-06"},
      {33554432.0f, "33554432.0"}};
  for (const auto& [x, want] : cases) EXPECT_EQ(features::python_round6_repr(x), want) << x;
  EXPECT_EQ(features::python_round6_repr(std::nanf("")), "NaN");
  EXPECT_EQ(features::python_round6_repr(-INFINITY), "-Infinity");
}

TEST(Features, ReadingAndFeatures) {
  Fixture fx;
  ASSERT_EQ(fx.feats.size(), kLines.size());
  const auto& pair = fx.feats[0];
  // _truncate_seq_pair: 5 + 5 > 10 - 3: one token at a time from the longer, from b on a tie (5/5 -> 5/4 -> 4/4
  // -> 4/3).
  EXPECT_EQ(pair.tokens,
            (std::vector<std::string>{"[CLS]", "all", "work", "and", "no", "[SEP]", "makes", "jack", "a", "[SEP]"}));
  EXPECT_TRUE(pair.truncated);
  EXPECT_EQ(pair.input_type_ids, (std::vector<int32_t>{0, 0, 0, 0, 0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(fx.feats[2].tokens, (std::vector<std::string>{"[CLS]", "[SEP]"}));
  EXPECT_EQ(fx.feats[3].tokens.size(), 10u);
  EXPECT_TRUE(fx.feats[3].truncated);
  // Split at the last " ||| ": text_a "a ||| b" (the "|" are punctuation tokens, unknown to this vocab, as "b").
  EXPECT_EQ(fx.feats[4].tokens, (std::vector<std::string>{"[CLS]", "a", "[UNK]", "[UNK]", "[UNK]", "[UNK]", "[SEP]",
                                                          "dull", "boy", "[SEP]"}));
  EXPECT_EQ(fx.feats[5].tokens, (std::vector<std::string>{"[CLS]", "no", "play", "makes", "jack", "[SEP]"}));
  for (size_t i = 0; i < fx.feats.size(); ++i) EXPECT_EQ(fx.feats[i].unique_id, static_cast<int64_t>(i));
}

// The per-token output equals the model's own hidden states (each example run alone), in input order, with
// google-research/bert's keys; batches of 2 over examples of different lengths exercise the sorting and padding.
TEST(Features, JsonLinesEqualModelHiddenStates) {
  Fixture fx;
  const std::vector<int> layers = {-1, -2, 0};
  std::vector<std::string> lines;
  std::vector<size_t> order;
  features::compute_layers(fx.model, fx.feats, layers, 2, [&](size_t i, const std::vector<Tensor>& outs) {
    order.push_back(i);
    lines.push_back(features::features_json_line(fx.feats[i], layers, outs));
  });
  ASSERT_EQ(order.size(), fx.feats.size());
  for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], i);
  double worst = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const json j = json::parse(lines[i]);
    ASSERT_EQ(j.size(), 2u);
    EXPECT_EQ(j.at("linex_index"), static_cast<int64_t>(i));
    const auto ref = reference_layers(fx.model, fx.feats[i]);  // [layer 0, layer 1]
    const auto& toks = j.at("features");
    ASSERT_EQ(toks.size(), fx.feats[i].tokens.size());
    for (size_t t = 0; t < toks.size(); ++t) {
      EXPECT_EQ(toks[t].at("token"), fx.feats[i].tokens[t]);
      ASSERT_EQ(toks[t].at("layers").size(), layers.size());
      for (size_t k = 0; k < layers.size(); ++k) {
        const auto& l = toks[t].at("layers")[k];
        EXPECT_EQ(l.at("index"), layers[k]);
        const Tensor& r = ref[layers[k] < 0 ? 2 + layers[k] : layers[k]];
        ASSERT_EQ(l.at("values").size(), 4u);
        for (size_t h = 0; h < 4; ++h)
          worst = std::max(worst, std::fabs(l.at("values")[h].get<double>() - r.get(static_cast<int64_t>(t * 4 + h))));
      }
    }
  }
  EXPECT_LE(worst, 5e-7 + 1e-6);  // 6-decimal rounding plus GEMM rounding between batch shapes
  std::printf("max |extract-features value - own hidden state| = %.3g\n", worst);
  // The exact text of one value, as extract_features.py writes it: ", " and ": " separators.
  EXPECT_EQ(lines[2].rfind("{\"linex_index\": 2, \"features\": [{\"token\": \"[CLS]\", \"layers\": [{\"index\": -1, \"values\": [", 0), 0u)
      << lines[2];
}

// --pooling through the whole command: JSON lines and .npy, [CLS] and mean, against the hidden states.
TEST(Features, PoolingJsonAndNpy) {
  Fixture fx;
  const fs::path dir = test::temp_dir("features");
  std::string text;
  for (const auto& l : kLines) text += l + "\n";
  test::write_file(dir / "in.txt", text);
  features::Options o;
  o.input_file = (dir / "in.txt").string();
  o.vocab_file = kTinyDir + "/vocab.txt";
  o.init_checkpoint = kTiny;
  o.max_seq_length = 10;
  o.batch_size = 4;
  o.layers = {-1, -2};
  for (auto pooling : {features::Pooling::cls, features::Pooling::mean}) {
    o.pooling = pooling;
    o.output_file = (dir / "out.npy").string();
    const features::Summary s = features::extract_features(o);
    EXPECT_EQ(s.examples, static_cast<int64_t>(kLines.size()));
    EXPECT_EQ(s.truncated, 2);
    EXPECT_EQ(s.dim, 8);
    const std::string npy = test::read_file(o.output_file);
    ASSERT_EQ(npy.compare(0, 6, "\x93NUMPY"), 0);
    const size_t hlen = static_cast<uint8_t>(npy[8]) | static_cast<size_t>(static_cast<uint8_t>(npy[9])) << 8;
    EXPECT_EQ((10 + hlen) % 64, 0u);
    EXPECT_NE(npy.find("'shape': (6, 8)"), std::string::npos);
    ASSERT_EQ(npy.size(), 10 + hlen + 6 * 8 * 4);
    o.output_file = (dir / "out.jsonl").string();
    features::extract_features(o);
    const auto jl = test::split_lines(test::read_file(o.output_file));
    ASSERT_EQ(jl.size(), kLines.size());
    double worst = 0;
    for (size_t i = 0; i < kLines.size(); ++i) {
      const auto ref = reference_layers(fx.model, fx.feats[i]);
      const json j = json::parse(jl[i]);
      EXPECT_EQ(j.at("linex_index"), static_cast<int64_t>(i));
      const int64_t n = static_cast<int64_t>(fx.feats[i].tokens.size());
      for (int k = 0; k < 2; ++k) {
        const Tensor& r = ref[1 - k];  // layers -1, -2
        for (int64_t h = 0; h < 4; ++h) {
          double want = 0;
          if (pooling == features::Pooling::cls) want = r.get(h);
          else {
            for (int64_t t = 0; t < n; ++t) want += r.get(t * 4 + h);
            want /= static_cast<double>(n);
          }
          float got;
          std::memcpy(&got, npy.data() + 10 + hlen + (i * 8 + static_cast<size_t>(k * 4 + h)) * 4, 4);
          worst = std::max(worst, std::fabs(got - want));
          worst = std::max(worst, std::fabs(j.at("values")[k * 4 + h].get<double>() - want) - 5e-7);
        }
      }
    }
    EXPECT_LT(worst, 1e-6);
  }
  // A .npy needs pooling; a layer outside the model is named; nothing is written then.
  o.pooling = features::Pooling::none;
  o.output_file = (dir / "bad.npy").string();
  EXPECT_THROW(features::extract_features(o), Error);
  o.output_file = (dir / "bad.jsonl").string();
  o.layers = {-3};
  try {
    features::extract_features(o);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer index -3 is outside [-2, 1]"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir / "bad.npy"));
  EXPECT_FALSE(fs::exists(dir / "bad.jsonl"));
  fs::remove_all(dir);
}

// The command: google-research/bert's flags, JSON lines on stdout.
TEST(Features, Command) {
  const fs::path dir = test::temp_dir("features_cli");
  test::write_file(dir / "in.txt", "all work and no play\njack ||| boy\n");
  int st = -1;
  const std::string out = run(std::string(BERTRAIN_BINARY_DIR) + "/bertrain --log_level warn extract-features --input_file " +
                                  (dir / "in.txt").string() + " --vocab_file " + kTinyDir + "/vocab.txt --init_checkpoint " +
                                  kTiny + " --bert_config_file " + kTinyDir +
                                  "/bert_config.json --layers=-1 --max_seq_length 16 --batch_size 8 --do_lower_case true",
                              &st);
  EXPECT_EQ(st, 0) << out;
  const auto lines = test::split_lines(out);
  ASSERT_EQ(lines.size(), 2u) << out;
  const json j = json::parse(lines[1]);
  EXPECT_EQ(j.at("linex_index"), 1);
  EXPECT_EQ(j.at("features").size(), 5u);  // [CLS] jack [SEP] boy [SEP]
  EXPECT_EQ(j.at("features")[3].at("token"), "boy");
  fs::remove_all(dir);
}
