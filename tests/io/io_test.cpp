// io_test.cpp: safetensors (format bytes, all dtypes, F16/BF16 reading, every kind of bad file), config.json
// reading and writing, model save/load with Hugging Face conventions, and the `bertrain inspect` command.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bertrain/core/rng.h"
#include "bertrain/io/atomic_file.h"
#include "bertrain/io/checkpoint.h"
#include "bertrain/io/config.h"
#include "bertrain/io/recipe.h"
#include "bertrain/io/safetensors.h"
#include "bertrain/io/tokenizer_files.h"
#include "bertrain/models/bert.h"
#include "bertrain/nn/layers.h"

#include "test_util.h"

using namespace bertrain;
namespace fs = std::filesystem;

namespace {

// A fresh directory per test, removed at the end.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = fs::temp_directory_path() /
            ("bertrain_io_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string le64(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

// A safetensors file from a header text and a data buffer (no padding: readers must not require it).
std::string make_file(const std::string& header, const std::string& data) { return le64(header.size()) + header + data; }

// The message of the bertrain::Error that `f` throws ("" when it throws none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_HAS(haystack, needle) EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

struct NamedModule : Module {
  template <class M>
  std::shared_ptr<M> add(const std::string& name, std::shared_ptr<M> m) {
    return register_module(name, m);
  }
  Variable param(const std::string& name, Tensor t) { return register_parameter(name, std::move(t)); }
  void replace(const std::string& name, Variable v) { replace_parameter(name, std::move(v)); }
};

// A miniature BertForPreTraining with Hugging Face names, including the tied decoder:
// bert.embeddings.{word_embeddings,position_embeddings,token_type_embeddings,LayerNorm},
// bert.encoder.layer.{0,1}.{attention.self.query,intermediate.dense,output.LayerNorm}, bert.pooler.dense,
// cls.predictions.{bias,transform.dense,transform.LayerNorm,decoder(tied)}, cls.seq_relationship.
struct MiniBert : NamedModule {
  static constexpr int64_t V = 11, H = 8, I = 12, P = 16;
  explicit MiniBert(uint64_t seed, bool with_heads = true, bool prefixed = true) {
    Rng rng(seed);
    NamedModule* root = this;
    std::shared_ptr<NamedModule> bert;
    if (prefixed) {
      bert = add("bert", std::make_shared<NamedModule>());
      root = bert.get();
    }
    auto emb = root->add("embeddings", std::make_shared<NamedModule>());
    word = emb->add("word_embeddings", std::make_shared<Embedding>(V, H, 0.02, rng));
    emb->add("position_embeddings", std::make_shared<Embedding>(P, H, 0.02, rng));
    emb->add("token_type_embeddings", std::make_shared<Embedding>(2, H, 0.02, rng));
    emb->add("LayerNorm", std::make_shared<LayerNorm>(H, 1e-12));
    auto enc = root->add("encoder", std::make_shared<NamedModule>());
    auto layers = enc->add("layer", std::make_shared<NamedModule>());
    for (int l = 0; l < 2; ++l) {
      auto layer = layers->add(std::to_string(l), std::make_shared<NamedModule>());
      auto att = layer->add("attention", std::make_shared<NamedModule>());
      auto self = att->add("self", std::make_shared<NamedModule>());
      self->add("query", std::make_shared<Linear>(H, H, true, 0.02, rng));
      layer->add("intermediate", std::make_shared<NamedModule>())->add("dense", std::make_shared<Linear>(H, I, true, 0.02, rng));
      layer->add("output", std::make_shared<NamedModule>())->add("LayerNorm", std::make_shared<LayerNorm>(H, 1e-12));
    }
    auto pooler = root->add("pooler", std::make_shared<NamedModule>());
    pooler->add("dense", std::make_shared<Linear>(H, H, true, 0.02, rng));
    if (with_heads) {
      auto cls = add("cls", std::make_shared<NamedModule>());
      auto pred = cls->add("predictions", std::make_shared<NamedModule>());
      pred->param("bias", Tensor::uniform({V}, -1, 1, rng));
      auto tr = pred->add("transform", std::make_shared<NamedModule>());
      tr->add("dense", std::make_shared<Linear>(H, H, true, 0.02, rng));
      tr->add("LayerNorm", std::make_shared<LayerNorm>(H, 1e-12));
      auto dec = pred->add("decoder", std::make_shared<NamedModule>());
      dec->param("weight", Tensor::zeros({V, H}));
      dec->replace("weight", word->weight());  // tied, as BertForPreTraining
      cls->add("seq_relationship", std::make_shared<Linear>(H, 2, true, 0.02, rng));
    }
    // Non-trivial LayerNorm values so that loading them is visible.
    for (auto& [n, v] : named_parameters())
      if (n.find("LayerNorm") != std::string::npos) {
        Tensor t = v.value();
        for (int64_t k = 0; k < t.numel(); ++k) t.set(k, rng.uniform());
      }
  }
  std::shared_ptr<Embedding> word;
};

bool bit_equal(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

nlohmann::json header_of(const std::string& path) {
  std::string bytes = read_bytes(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  return nlohmann::json::parse(bytes.substr(8, n));
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// safetensors format

TEST(Safetensors, BytesMatchReferenceSerializer) {
  // The reference's test_serialization: "attn.0", F32, shape [1, 2, 3], values 0..5, no metadata.
  TempDir d;
  std::vector<float> v = {0, 1, 2, 3, 4, 5};
  save_safetensors(d.file("a.safetensors"), {{"attn.0", Tensor::from_data(v.data(), {1, 2, 3})}}, {});
  const unsigned char expected[] = {
      64, 0, 0, 0, 0, 0, 0, 0, 123, 34, 97, 116, 116, 110, 46, 48, 34, 58, 123, 34, 100, 116, 121, 112, 101, 34, 58,
      34, 70, 51, 50, 34, 44, 34, 115, 104, 97, 112, 101, 34, 58, 91, 49, 44, 50, 44, 51, 93, 44, 34, 100, 97, 116,
      97, 95, 111, 102, 102, 115, 101, 116, 115, 34, 58, 91, 48, 44, 50, 52, 93, 125, 125, 0, 0, 0, 0, 0, 0, 128, 63,
      0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 64, 0, 0, 160, 64};
  EXPECT_EQ(read_bytes(d.file("a.safetensors")), std::string(reinterpret_cast<const char*>(expected), sizeof expected));
  // test_empty with metadata {"framework": "pt"}: header padded with spaces to 40 bytes.
  save_safetensors(d.file("e.safetensors"), {}, {{"framework", "pt"}});
  EXPECT_EQ(read_bytes(d.file("e.safetensors")), le64(40) + "{\"__metadata__\":{\"framework\":\"pt\"}}     ");
}

TEST(Safetensors, AllWritableDtypesRoundTripAndAreSortedLikeTheReference) {
  TempDir d;
  Rng rng(3);
  std::vector<std::pair<std::string, Tensor>> ts = {
      {"z_f32", Tensor::uniform({3, 5}, -1, 1, rng)},
      {"a_f32", Tensor::uniform({7}, -1, 1, rng)},
      {"f64", Tensor::uniform({2, 3}, -1, 1, rng, DType::f64)},
      {"bf16", Tensor::uniform({5}, -1, 1, rng).to(DType::bf16)},
      {"i32", Tensor::from_vector({1, -2, 3}, {3}, DType::i32)},
      {"i64", Tensor::from_vector({-5, 1LL << 40}, {2}, DType::i64)},
      {"i8", Tensor::from_vector({-128, 0, 127}, {3}, DType::i8)},
      {"scalar", Tensor::from_vector({2.5}, {}, DType::f32)},
      {"empty", Tensor::zeros({0, 4}, DType::f32)},
  };
  save_safetensors(d.file("t.safetensors"), ts);
  auto f = SafetensorsFile::open(d.file("t.safetensors"));
  // Descending dtype alignment (I64, F64, F32, I32, BF16, I8), then by name.
  std::vector<std::string> order = {"i64", "f64", "a_f32", "empty", "scalar", "z_f32", "i32", "bf16", "i8"};
  EXPECT_EQ(f.names(), order);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  for (auto& [n, t] : ts) {
    Tensor r = f.load(n);
    EXPECT_TRUE(bit_equal(r, t)) << n;
    EXPECT_EQ(f.info(n).dtype, safetensors_dtype_name(t.dtype()));
  }
  // Header padded with spaces to a multiple of 8, so every tensor starts 8-byte aligned.
  std::string bytes = read_bytes(d.file("t.safetensors"));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes.substr(8, 31), "{\"__metadata__\":{\"format\":\"pt\"}");
  EXPECT_EQ(bytes[8 + n - 1] == ' ' || bytes[8 + n - 1] == '}', true);
}

TEST(Safetensors, WriteIsAtomicAndRejectsDuplicateNames) {
  TempDir d;
  const std::string p = d.file("w.safetensors");
  save_safetensors(p, {{"x", Tensor::full({2}, 1.0)}});
  const std::string before = read_bytes(p);
  std::string msg = error_of([&] { save_safetensors(p, {{"x", Tensor::full({2}, 2.0)}, {"x", Tensor::full({2}, 3.0)}}); });
  EXPECT_HAS(msg, "'x'");
  EXPECT_HAS(msg, "twice");
  EXPECT_EQ(read_bytes(p), before);  // the failed save left the previous file whole
  for (auto& e : fs::directory_iterator(d.str())) EXPECT_EQ(e.path().filename(), "w.safetensors");  // no temp left
  EXPECT_HAS(error_of([&] { save_safetensors(d.file("no/such/dir.safetensors"), {}); }), "no/such/dir.safetensors");
}

TEST(Safetensors, ReadsF16AndBF16WithConversion) {
  TempDir d;
  // F16: 1, -2, 65504 (max), 2^-24 (smallest subnormal), 48*2^-24 (subnormal), -0, inf, NaN, 0.333 (0x3555).
  const uint16_t h[] = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x0030, 0x8000, 0x7c00, 0x7e00, 0x3555};
  const float want[] = {1.0f, -2.0f, 65504.0f, std::ldexp(1.0f, -24), 3 * std::ldexp(1.0f, -20), -0.0f,
                        INFINITY, NAN, 0.333251953125f};
  // BF16: 1.0 (0x3f80), -3.5 (0xc060), 0.0078125 (0x3c00).
  const uint16_t b[] = {0x3f80, 0xc060, 0x3c00};
  std::string data(reinterpret_cast<const char*>(h), sizeof h);
  data += std::string(reinterpret_cast<const char*>(b), sizeof b);
  std::string header = R"({"h":{"dtype":"F16","shape":[9],"data_offsets":[0,18]},"b":{"dtype":"BF16","shape":[3],"data_offsets":[18,24]},"u":{"dtype":"U8","shape":[2],"data_offsets":[24,26]}})";
  data += std::string("\xff\x07", 2);
  write_bytes(d.file("h.safetensors"), make_file(header, data));
  auto f = SafetensorsFile::open(d.file("h.safetensors"));
  EXPECT_TRUE(f.metadata().empty());
  Tensor th = f.load("h");
  ASSERT_EQ(th.dtype(), DType::f32);
  for (int i = 0; i < 9; ++i) {
    float got = th.data<float>()[i];
    if (std::isnan(want[i])) EXPECT_TRUE(std::isnan(got));
    else {
      EXPECT_EQ(got, want[i]) << i;
      EXPECT_EQ(std::signbit(got), std::signbit(want[i])) << i;
    }
  }
  for (uint32_t x = 0; x < 0x10000; ++x) {  // every finite half is exactly representable: check by re-deriving
    float v = f16_to_f32(static_cast<uint16_t>(x));
    uint32_t e = (x >> 10) & 0x1f, m = x & 0x3ff;
    if (e == 0x1f) continue;
    double ref = (e == 0 ? std::ldexp(static_cast<double>(m), -24) : std::ldexp(1.0 + m / 1024.0, static_cast<int>(e) - 15));
    if (x & 0x8000) ref = -ref;
    ASSERT_EQ(static_cast<double>(v), ref) << x;
  }
  Tensor tb = f.load("b");
  EXPECT_EQ(tb.dtype(), DType::bf16);
  Tensor tb32 = f.load("b", DType::f32);
  EXPECT_EQ(tb32.to_vector(), (std::vector<double>{1.0, -3.5, 0.0078125}));
  Tensor th64 = f.load("h", DType::f64);
  EXPECT_EQ(th64.dtype(), DType::f64);
  EXPECT_EQ(th64.get(2), 65504.0);
  Tensor tu = f.load("u");
  EXPECT_EQ(tu.dtype(), DType::i32);
  EXPECT_EQ(tu.to_vector(), (std::vector<double>{255, 7}));
}

// ---------------------------------------------------------------------------------------------------------
// bad files: each gives one clear bertrain::Error naming the file (and tensor)

struct BadFile {
  const char* label;
  std::string bytes;
  std::vector<std::string> expect;  // substrings of the message
};

std::vector<BadFile> bad_files() {
  const std::string ok_entry = R"("x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string data8(8, '\0');
  return {
      {"truncated", std::string("\x10\x00\x00", 3), {"truncated", "3 bytes", "shorter than the 8-byte"}},
      {"empty", "", {"truncated", "0 bytes"}},
      {"header_past_end", le64(1000) + "{}", {"header length 1000", "past the end of the file", "10 bytes"}},
      {"header_huge", le64(~0ULL) + "{}", {"header length", "exceeds the limit"}},
      {"invalid_json", make_file("{\"x\": [1, 2", ""), {"not valid JSON"}},
      {"not_object", make_file("[1,2]", ""), {"not an object"}},
      {"unknown_dtype", make_file(R"({"x":{"dtype":"F42","shape":[2],"data_offsets":[0,8]}})", data8),
       {"tensor 'x'", "unknown dtype 'F42'"}},
      {"shape_mismatch", make_file(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data8),
       {"tensor 'x'", "span 8 bytes", "needs 12 bytes", "(3)"}},
      {"offset_past_end", make_file(R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", data8),
       {"tensor 'x'", "past the end of the data buffer"}},
      {"overlap", make_file("{" + ok_entry + R"(,"y":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", data8),
       {"tensor 'y'", "overlap"}},
      {"gap", make_file(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", data8), {"tensor 'x'", "gap"}},
      {"trailing", make_file("{" + ok_entry + "}", data8 + "junk"), {"cover 8 bytes of a 12-byte"}},
      {"duplicate", make_file("{" + ok_entry + "," + ok_entry + "}", data8), {"tensor 'x'", "more than once"}},
      {"end_before_begin", make_file(R"({"x":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", data8),
       {"tensor 'x'", "end before they begin"}},
      {"negative_dim", make_file(R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data8),
       {"tensor 'x'", "non-negative"}},
      {"overflow", make_file(R"({"x":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", data8),
       {"tensor 'x'", "overflows"}},
      {"missing_key", make_file(R"({"x":{"dtype":"F32","data_offsets":[0,8]}})", data8), {"tensor 'x'", "\"shape\""}},
      {"bad_metadata", make_file(R"({"__metadata__":{"format":1}})", ""), {"__metadata__", "not a string"}},
  };
}

TEST(SafetensorsBadFile, EachGivesOneClearError) {
  TempDir d;
  for (const BadFile& b : bad_files()) {
    const std::string p = d.file(std::string(b.label) + ".safetensors");
    write_bytes(p, b.bytes);
    std::string msg = error_of([&] { SafetensorsFile::open(p); });
    ASSERT_FALSE(msg.empty()) << b.label << ": no error";
    EXPECT_HAS(msg, p);
    for (const auto& e : b.expect) EXPECT_HAS(msg, e) << " [" << b.label << "]";
    EXPECT_EQ(msg.find("internal error"), std::string::npos) << msg;
  }
  EXPECT_HAS(error_of([&] { SafetensorsFile::open(d.file("absent.safetensors")); }), "cannot open");
}

TEST(SafetensorsBadFile, UnreadableDtypeAndUnknownNameOnLoad) {
  TempDir d;
  const std::string p = d.file("bool.safetensors");
  write_bytes(p, make_file(R"({"m":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", std::string(2, '\1')));
  auto f = SafetensorsFile::open(p);
  EXPECT_HAS(error_of([&] { f.load("m"); }), "dtype BOOL cannot be read");
  EXPECT_HAS(error_of([&] { f.load("nope"); }), "tensor 'nope': no such tensor");
}

// ---------------------------------------------------------------------------------------------------------
// config.json

TEST(Config, ReadsHuggingFaceConfig) {
  TempDir d;
  write_bytes(d.file("config.json"), R"({
  "architectures": ["BertForMaskedLM"], "attention_probs_dropout_prob": 0.1, "gradient_checkpointing": false,
  "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": 768, "initializer_range": 0.02,
  "intermediate_size": 3072, "layer_norm_eps": 1e-12, "max_position_embeddings": 512, "model_type": "bert",
  "num_attention_heads": 12, "num_hidden_layers": 12, "pad_token_id": 0, "position_embedding_type": "absolute",
  "transformers_version": "4.6.0.dev0", "type_vocab_size": 2, "use_cache": true, "vocab_size": 30522,
  "id2label": {"0": "A", "1": "B", "2": "C"}})");
  BertConfig c = load_bert_config(d.file("config.json"));
  EXPECT_EQ(c.vocab_size, 30522);
  EXPECT_EQ(c.hidden_size, 768);
  EXPECT_EQ(c.num_hidden_layers, 12);
  EXPECT_EQ(c.hidden_act, "gelu");
  EXPECT_EQ(c.layer_norm_eps, 1e-12);
  EXPECT_EQ(c.num_labels, 3);
}

TEST(Config, ReadsGoogleBertConfig) {
  TempDir d;
  // google-research/bert's uncased_L-2_H-128_A-2/bert_config.json form: no layer_norm_eps.
  write_bytes(d.file("bert_config.json"), R"({
  "hidden_size": 128, "hidden_act": "gelu", "initializer_range": 0.02, "vocab_size": 30522,
  "hidden_dropout_prob": 0.1, "num_attention_heads": 2, "type_vocab_size": 2, "max_position_embeddings": 512,
  "num_hidden_layers": 2, "intermediate_size": 512, "attention_probs_dropout_prob": 0.1})");
  write_bytes(d.file("eps.json"), R"({"layer_norm_eps": 1e-5, "hidden_act": "gelu_new"})");
  BertConfig c = load_bert_config(d.file("bert_config.json"));
  EXPECT_EQ(c.hidden_size, 128);
  EXPECT_EQ(c.num_attention_heads, 2);
  EXPECT_EQ(c.intermediate_size, 512);
  EXPECT_EQ(c.layer_norm_eps, 1e-12);
  EXPECT_EQ(c.hidden_act, "gelu");
  EXPECT_EQ(c.head_size(), 64);
  BertConfig e = load_bert_config(d.file("eps.json"));
  EXPECT_EQ(e.layer_norm_eps, 1e-5);
  EXPECT_EQ(e.hidden_act, "gelu_new");
}

TEST(Config, ErrorsNameFileAndKey) {
  TempDir d;
  auto msg_for = [&](const std::string& text) {
    write_bytes(d.file("c.json"), text);
    return error_of([&] { load_bert_config(d.file("c.json")); });
  };
  std::string m = msg_for(R"({"hidden_size": 30, "num_attention_heads": 4})");
  EXPECT_HAS(m, d.file("c.json"));
  EXPECT_HAS(m, "hidden_size (30)");
  EXPECT_HAS(m, "num_attention_heads (4)");
  m = msg_for(R"({"hidden_size": "768"})");
  EXPECT_HAS(m, d.file("c.json"));
  EXPECT_HAS(m, "\"hidden_size\" must be an integer, got string \"768\"");
  m = msg_for(R"({"hidden_dropout_prob": "0.1"})");
  EXPECT_HAS(m, "\"hidden_dropout_prob\" must be a number");
  m = msg_for(R"({"hidden_act": 3})");
  EXPECT_HAS(m, "\"hidden_act\" must be a string");
  m = msg_for(R"({"hidden_act": "swish"})");
  EXPECT_HAS(m, "unknown hidden_act 'swish'");
  m = msg_for(R"({"num_hidden_layers": 2.5})");
  EXPECT_HAS(m, "\"num_hidden_layers\" must be an integer");
  m = msg_for(R"({"vocab_size": 0})");
  EXPECT_HAS(m, "vocab_size must be positive");
  m = msg_for(R"({"hidden_size": 768,)");
  EXPECT_HAS(m, "not valid JSON");
  m = msg_for(R"([1])");
  EXPECT_HAS(m, "expected a JSON object");
  EXPECT_HAS(error_of([&] { load_bert_config(d.file("none.json")); }), "does not exist");
  BertConfig ok = parse_bert_config(R"({"hidden_size": 768.0})", "x");
  EXPECT_EQ(ok.hidden_size, 768);
}

TEST(Config, WritesTransformersFormAndRoundTrips) {
  TempDir d;
  BertConfig c;
  c.vocab_size = 99;
  c.hidden_size = 32;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.intermediate_size = 37;
  c.hidden_act = "gelu_new";
  c.max_position_embeddings = 64;
  c.layer_norm_eps = 1e-12;
  save_bert_config(d.file("config.json"), c);
  auto j = nlohmann::json::parse(read_bytes(d.file("config.json")));
  EXPECT_EQ(j["architectures"], nlohmann::json::array({"BertForPreTraining"}));
  EXPECT_EQ(j["model_type"], "bert");
  EXPECT_EQ(j["pad_token_id"], 0);
  EXPECT_EQ(j["position_embedding_type"], "absolute");
  EXPECT_EQ(j["torch_dtype"], "float32");
  EXPECT_EQ(j["vocab_size"], 99);
  EXPECT_EQ(j["hidden_act"], "gelu_new");
  EXPECT_FALSE(j.contains("id2label"));
  EXPECT_HAS(read_bytes(d.file("config.json")), "\"layer_norm_eps\": 1e-12,\n");
  BertConfig r = load_bert_config(d.file("config.json"));
  EXPECT_EQ(r.vocab_size, 99);
  EXPECT_EQ(r.intermediate_size, 37);
  EXPECT_EQ(r.hidden_act, "gelu_new");
  EXPECT_EQ(r.hidden_dropout_prob, c.hidden_dropout_prob);
  EXPECT_EQ(r.initializer_range, c.initializer_range);
  EXPECT_EQ(r.num_labels, 2);
  c.num_labels = 3;
  save_bert_config(d.file("c3.json"), c);
  EXPECT_EQ(load_bert_config(d.file("c3.json")).num_labels, 3);
  c.hidden_size = 30;
  EXPECT_HAS(error_of([&] { save_bert_config(d.file("bad.json"), c); }), "num_attention_heads (4)");
  EXPECT_FALSE(fs::exists(d.file("bad.json")));
}

// CASES.md C43: a finetuned classifier's config names its outputs; the keys as transformers writes them.
TEST(Config, LabelsAsTransformersWritesThem) {
  TempDir d;
  const std::string mnli =
      R"({"id2label": {"0": "CONTRADICTION", "1": "NEUTRAL", "2": "ENTAILMENT"},
          "label2id": {"CONTRADICTION": 0, "ENTAILMENT": 2, "NEUTRAL": 1}})";
  BertConfig c = parse_bert_config(mnli, "x");
  EXPECT_EQ(c.num_labels, 3);
  EXPECT_EQ(c.id2label, (std::vector<std::string>{"CONTRADICTION", "NEUTRAL", "ENTAILMENT"}));
  EXPECT_TRUE(c.has_label_names());
  // Either key alone is enough; num_labels may repeat their size.
  EXPECT_EQ(parse_bert_config(R"({"label2id": {"b": 1, "a": 0}})", "x").id2label, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(parse_bert_config(R"({"num_labels": 2, "id2label": {"1": "y", "0": "x"}})", "x").label_name(1), "y");
  save_bert_config(d.file("config.json"), c);
  const std::string text = read_bytes(d.file("config.json"));
  EXPECT_HAS(text, "\"id2label\": {\n    \"0\": \"CONTRADICTION\",\n    \"1\": \"NEUTRAL\",\n    \"2\": \"ENTAILMENT\"\n  },");
  EXPECT_HAS(text, "\"label2id\": {\n    \"CONTRADICTION\": 0,\n    \"ENTAILMENT\": 2,\n    \"NEUTRAL\": 1\n  },");
  EXPECT_EQ(load_bert_config(d.file("config.json")).id2label, c.id2label);
  // Default names: three labels are written as LABEL_i (as before), two are left out (transformers' default).
  BertConfig plain;
  plain.num_labels = 3;
  EXPECT_FALSE(plain.has_label_names());
  EXPECT_HAS(bert_config_to_json(plain), "\"id2label\": {\n    \"0\": \"LABEL_0\",");
  EXPECT_HAS(bert_config_to_json(plain), "\"label2id\": {\n    \"LABEL_0\": 0,");
  EXPECT_FALSE(parse_bert_config(bert_config_to_json(plain), "x").has_label_names());
  plain.num_labels = 2;
  EXPECT_FALSE(nlohmann::json::parse(bert_config_to_json(plain)).contains("id2label"));
  plain.id2label = {"negative", "positive"};
  EXPECT_HAS(bert_config_to_json(plain), "\"1\": \"positive\"");
  // Bad label maps: one error naming the file and what is wrong.
  EXPECT_HAS(error_of([&] { parse_bert_config(R"({"id2label": {"0": "a", "2": "b"}})", "f.json"); }),
             "f.json: \"id2label\" key \"2\" is not one of the output indexes 0..1");
  EXPECT_HAS(error_of([&] { parse_bert_config(R"({"id2label": {"0": "a", "1": "b"}, "label2id": {"a": 1, "b": 0}})", "f.json"); }),
             "\"label2id\" {\"a\":1,\"b\":0} is not the inverse of \"id2label\" {\"0\":\"a\",\"1\":\"b\"}");
  EXPECT_HAS(error_of([&] { parse_bert_config(R"({"num_labels": 3, "id2label": {"0": "a", "1": "b"}})", "f.json"); }),
             "\"num_labels\" is 3 but \"id2label\"/\"label2id\" name 2 labels");
  EXPECT_HAS(error_of([&] { parse_bert_config(R"({"id2label": {"0": "a", "1": "a"}})", "f.json"); }),
             "id2label names 'a' twice");
}

// One grammar for the flag overrides of `pretrain` and `estimate`.
TEST(Recipe, FlagOverridesGrammar) {
  using Pairs = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(parse_flag_overrides({"--bf16", "--learning_rate", "1e-3", "--phases.2.input_dir=D", "--x=", "--do_eval"},
                                 "pretrain"),
            (Pairs{{"bf16", "true"}, {"learning_rate", "1e-3"}, {"phases.2.input_dir", "D"}, {"x", ""}, {"do_eval", "true"}}));
  EXPECT_EQ(parse_flag_overrides({"--seed", "-3", "--a=b=c"}, "estimate"), (Pairs{{"seed", "-3"}, {"a", "b=c"}}));
  EXPECT_TRUE(parse_flag_overrides({}, "estimate").empty());
  for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{{"lr=1"}, {"--"}, {"--=1"}, {"-x"}})
    EXPECT_HAS(error_of([&] { parse_flag_overrides(bad, "estimate"); }),
               "estimate: unexpected argument '" + bad[0] + "' (flags look like --key=value, --key value or --flag)");
}

// ---------------------------------------------------------------------------------------------------------
// the atomic text writer and the tokenizer files

TEST(AtomicFile, ReplacesWholeAndLeavesNoTemporaryOrHalfFile) {
  TempDir d;
  write_text_atomic(d.file("a.txt"), "first");
  write_text_atomic(d.file("a.txt"), "second\n");
  EXPECT_EQ(read_bytes(d.file("a.txt")), "second\n");
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(d.str())) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"a.txt"});
  // A directory that does not exist: one error naming the path, nothing written.
  EXPECT_HAS(error_of([&] { write_text_atomic(d.file("no/such/dir/b.txt"), "x"); }), "no/such/dir/b.txt");
}

// The files transformers' BertTokenizer.save_pretrained writes, with its keys; vocab.txt is a byte copy.
TEST(TokenizerFiles, AsBertTokenizerSavesThem) {
  TempDir d;
  write_bytes(d.file("v.txt"), "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n");
  fs::create_directories(d.file("ck"));
  BertTokenizerFiles t;
  t.vocab_file = d.file("v.txt");
  t.do_lower_case = false;
  t.model_max_length = 128;
  save_tokenizer_files(d.file("ck"), t);
  EXPECT_EQ(read_bytes(d.file("ck/vocab.txt")), read_bytes(d.file("v.txt")));
  EXPECT_EQ(read_bytes(d.file("ck/tokenizer_config.json")),
            "{\n  \"clean_up_tokenization_spaces\": true,\n  \"cls_token\": \"[CLS]\",\n  \"do_basic_tokenize\": true,\n"
            "  \"do_lower_case\": false,\n  \"mask_token\": \"[MASK]\",\n  \"model_max_length\": 128,\n"
            "  \"never_split\": null,\n  \"pad_token\": \"[PAD]\",\n  \"sep_token\": \"[SEP]\",\n"
            "  \"strip_accents\": null,\n  \"tokenize_chinese_chars\": true,\n  \"tokenizer_class\": \"BertTokenizer\",\n"
            "  \"unk_token\": \"[UNK]\"\n}\n");
  EXPECT_EQ(read_bytes(d.file("ck/special_tokens_map.json")),
            "{\n  \"cls_token\": \"[CLS]\",\n  \"mask_token\": \"[MASK]\",\n  \"pad_token\": \"[PAD]\",\n"
            "  \"sep_token\": \"[SEP]\",\n  \"unk_token\": \"[UNK]\"\n}\n");
  t.strip_accents = true;
  EXPECT_HAS(tokenizer_config_json(t), "\"strip_accents\": true,");
  t.vocab_file = d.file("missing.txt");
  EXPECT_HAS(error_of([&] { save_tokenizer_files(d.file("ck"), t); }), "missing.txt");
}

// ---------------------------------------------------------------------------------------------------------
// model weights

TEST(Checkpoint, RoundTripIsBitExactAndKeepsTheTie) {
  TempDir d;
  MiniBert a(1), b(2);
  ASSERT_FALSE(bit_equal(a.parameter("bert.embeddings.word_embeddings.weight").value(),
                         b.parameter("bert.embeddings.word_embeddings.weight").value()));
  save_model(d.str() + "/ckpt", a);
  LoadReport r;
  load_model(d.str() + "/ckpt", b, r);
  EXPECT_TRUE(r.missing.empty());
  EXPECT_TRUE(r.unexpected.empty());
  EXPECT_TRUE(r.converted.empty());
  for (auto& [n, v] : a.named_parameters()) EXPECT_TRUE(bit_equal(v.value(), b.parameter(n).value())) << n;
  EXPECT_EQ(b.parameter(kTiedDecoderWeight).impl(), b.parameter("bert.embeddings.word_embeddings.weight").impl());
  EXPECT_EQ(r.loaded.size(), a.named_parameters().size() - 1);
}

TEST(Checkpoint, HeaderHasHuggingFaceNamesDtypesAndShapes) {
  TempDir d;
  MiniBert m(1);
  BertConfig c = test::tiny_bert_config(MiniBert::V, MiniBert::H, 2, 2, MiniBert::I, MiniBert::P);
  save_model(d.str(), m, c);
  ASSERT_TRUE(fs::exists(d.file("config.json")));
  nlohmann::json h = header_of(d.file("model.safetensors"));
  EXPECT_EQ(h["__metadata__"], nlohmann::json({{"format", "pt"}}));
  EXPECT_FALSE(h.contains(kTiedDecoderWeight));
  const std::pair<const char*, std::vector<int64_t>> want[] = {
      {"bert.embeddings.word_embeddings.weight", {11, 8}},
      {"bert.embeddings.position_embeddings.weight", {16, 8}},
      {"bert.embeddings.token_type_embeddings.weight", {2, 8}},
      {"bert.embeddings.LayerNorm.weight", {8}},
      {"bert.embeddings.LayerNorm.bias", {8}},
      {"bert.encoder.layer.0.attention.self.query.weight", {8, 8}},
      {"bert.encoder.layer.1.intermediate.dense.weight", {12, 8}},  // (out, in)
      {"bert.encoder.layer.1.intermediate.dense.bias", {12}},
      {"bert.encoder.layer.1.output.LayerNorm.bias", {8}},
      {"bert.pooler.dense.weight", {8, 8}},
      {"cls.predictions.bias", {11}},
      {"cls.predictions.transform.dense.weight", {8, 8}},
      {"cls.predictions.transform.LayerNorm.weight", {8}},
      {"cls.seq_relationship.weight", {2, 8}},
      {"cls.seq_relationship.bias", {2}},
  };
  for (auto& [name, shape] : want) {
    ASSERT_TRUE(h.contains(name)) << name;
    EXPECT_EQ(h[name]["dtype"], "F32") << name;
    EXPECT_EQ(h[name]["shape"].get<std::vector<int64_t>>(), shape) << name;
  }
  EXPECT_EQ(h.size(), 1 + m.named_parameters().size() - 1);  // metadata + every parameter but the tied one
}

TEST(Checkpoint, OldLayerNormNamesPositionIdsAndDecoderWeightAreAccepted) {
  TempDir d;
  MiniBert a(1), b(2);
  std::vector<std::pair<std::string, Tensor>> ts;
  for (auto& [n, v] : a.named_parameters()) {
    if (n == kTiedDecoderWeight) continue;
    std::string f = n;
    if (f.size() > 16 && f.substr(f.size() - 16) == "LayerNorm.weight") f = f.substr(0, f.size() - 6) + "gamma";
    else if (f.size() > 14 && f.substr(f.size() - 14) == "LayerNorm.bias") f = f.substr(0, f.size() - 4) + "beta";
    ts.emplace_back(f, v.value());
  }
  ts.emplace_back("bert.embeddings.position_ids", Tensor::from_vector({0, 1, 2, 3}, {1, 4}, DType::i64));
  ts.emplace_back(kTiedDecoderWeight, a.word->weight().value());
  save_safetensors(d.file("old.safetensors"), ts);
  LoadReport r;
  load_model(d.file("old.safetensors"), b, r, LoadOptions{.strict = true});
  for (auto& [n, v] : a.named_parameters()) EXPECT_TRUE(bit_equal(v.value(), b.parameter(n).value())) << n;
  EXPECT_EQ(r.renamed.size(), 8u);  // 4 LayerNorms x (gamma, beta)
  EXPECT_HAS(r.summary(), "bert.embeddings.LayerNorm.gamma -> bert.embeddings.LayerNorm.weight");
  EXPECT_EQ(r.ignored, (std::vector<std::string>{"bert.embeddings.position_ids", kTiedDecoderWeight}));

  // A decoder weight of another shape is an error naming both shapes.
  ts.back().second = Tensor::zeros({11, 9});
  save_safetensors(d.file("bad_dec.safetensors"), ts);
  std::string msg = error_of([&] { load_model(d.file("bad_dec.safetensors"), b, r); });
  EXPECT_HAS(msg, "cls.predictions.decoder.weight");
  EXPECT_HAS(msg, "(11, 9)");
  EXPECT_HAS(msg, "(11, 8)");
}

TEST(Checkpoint, MissingPoolerAndHeadsAreReportedAndKeepTheirValues) {
  TempDir d;
  MiniBert base(1, /*with_heads=*/false, /*prefixed=*/false);  // a BertModel: embeddings.*, encoder.*, pooler.*
  std::vector<std::pair<std::string, Tensor>> ts;
  for (auto& [n, v] : base.named_parameters())
    if (n.rfind("pooler.", 0) != 0) ts.emplace_back(n, v.value());
  ts.emplace_back("extra.thing", Tensor::zeros({3}));
  save_safetensors(d.file("base.safetensors"), ts);
  MiniBert b(2);
  const Tensor pooler_before = b.parameter("bert.pooler.dense.weight").value().clone();
  LoadReport r;
  load_model(d.file("base.safetensors"), b, r);
  EXPECT_TRUE(r.only_heads_missing());
  std::vector<std::string> missing = {"bert.pooler.dense.weight", "bert.pooler.dense.bias", "cls.predictions.bias",
                                      "cls.predictions.transform.dense.weight", "cls.predictions.transform.dense.bias",
                                      "cls.predictions.transform.LayerNorm.weight",
                                      "cls.predictions.transform.LayerNorm.bias", "cls.seq_relationship.weight",
                                      "cls.seq_relationship.bias"};
  EXPECT_EQ(r.missing, missing);
  EXPECT_EQ(r.unexpected, std::vector<std::string>{"extra.thing"});
  EXPECT_TRUE(bit_equal(b.parameter("bert.pooler.dense.weight").value(), pooler_before));
  EXPECT_TRUE(bit_equal(b.parameter("bert.encoder.layer.1.intermediate.dense.weight").value(),
                        base.parameter("encoder.layer.1.intermediate.dense.weight").value()));
  EXPECT_HAS(r.summary(), "encoder.layer.0.attention.self.query.weight -> bert.encoder.layer.0.attention.self.query.weight");
  // strict turns the report into an error
  EXPECT_HAS(error_of([&] { load_model(d.file("base.safetensors"), b, r, LoadOptions{.strict = true}); }),
             "bert.pooler.dense.weight");

  // The reverse: a BertForPreTraining file into a BertModel drops the prefix; the heads are unexpected.
  save_model(d.file("full.safetensors"), b);
  MiniBert c(3, false, false);
  load_model(d.file("full.safetensors"), c, r);
  EXPECT_TRUE(r.missing.empty());
  EXPECT_EQ(r.unexpected.size(), 7u);
  EXPECT_TRUE(bit_equal(c.parameter("pooler.dense.weight").value(), b.parameter("bert.pooler.dense.weight").value()));
}

TEST(Checkpoint, MissingBackboneAndShapeMismatchFailWithoutTouchingTheModel) {
  TempDir d;
  MiniBert a(1), b(2);
  auto params = a.named_parameters();
  std::vector<std::pair<std::string, Tensor>> ts;
  for (auto& [n, v] : params)
    if (n != kTiedDecoderWeight && n != "bert.encoder.layer.1.intermediate.dense.bias") ts.emplace_back(n, v.value());
  save_safetensors(d.file("nobias.safetensors"), ts);
  LoadReport r;
  std::string msg = error_of([&] { load_model(d.file("nobias.safetensors"), b, r); });
  EXPECT_HAS(msg, "lacks parameter 'bert.encoder.layer.1.intermediate.dense.bias'");
  load_model(d.file("nobias.safetensors"), b, r, LoadOptions{.require_backbone = false});
  EXPECT_EQ(r.missing, std::vector<std::string>{"bert.encoder.layer.1.intermediate.dense.bias"});

  MiniBert c(3);
  const Tensor before = c.parameter("bert.embeddings.word_embeddings.weight").value().clone();
  for (auto& [n, t] : ts)
    if (n == "bert.encoder.layer.0.attention.self.query.weight") t = Tensor::zeros({8, 7});
  save_safetensors(d.file("shape.safetensors"), ts);
  msg = error_of([&] { load_model(d.file("shape.safetensors"), c, r); });
  EXPECT_HAS(msg, d.file("shape.safetensors"));
  EXPECT_HAS(msg, "tensor 'bert.encoder.layer.0.attention.self.query.weight': shape mismatch: the file has (8, 7)");
  EXPECT_HAS(msg, "is (8, 8)");
  EXPECT_TRUE(bit_equal(c.parameter("bert.embeddings.word_embeddings.weight").value(), before));

  for (auto& [n, t] : ts)
    if (n == "bert.encoder.layer.0.attention.self.query.weight") t = Tensor::zeros({8, 8}, DType::i32);
  save_safetensors(d.file("int.safetensors"), ts);
  EXPECT_HAS(error_of([&] { load_model(d.file("int.safetensors"), c, r); }), "dtype I32 cannot be loaded");
  EXPECT_HAS(error_of([&] { load_model(d.file("nowhere"), c, r); }), "does not exist");
  fs::create_directories(d.file("pt"));
  write_bytes(d.file("pt/pytorch_model.bin"), "x");
  // A directory's pytorch_model.bin is read as a PyTorch checkpoint (tests/io/torch_checkpoint_test.cpp): this one
  // is no zip.
  msg = error_of([&] { load_model(d.file("pt"), c, r); });
  EXPECT_HAS(msg, "PyTorch checkpoint '" + d.file("pt/pytorch_model.bin") + "': not a readable zip archive");
}

TEST(Checkpoint, HalfPrecisionFilesLoadConvertedToTheParameterDtype) {
  TempDir d;
  MiniBert a(1), b(2);
  std::vector<std::pair<std::string, Tensor>> ts;
  for (auto& [n, v] : a.named_parameters())
    if (n != kTiedDecoderWeight) ts.emplace_back(n, v.value().to(DType::bf16));
  save_safetensors(d.file("bf16.safetensors"), ts);
  LoadReport r;
  load_model(d.file("bf16.safetensors"), b, r);
  EXPECT_EQ(r.converted.size(), ts.size());
  EXPECT_HAS(r.converted[0], "BF16 -> f32");
  for (auto& [n, t] : ts) EXPECT_TRUE(bit_equal(b.parameter(n).value(), t.to(DType::f32))) << n;

  // F16, hand-written: word embeddings all 0.5 (0x3800).
  std::vector<std::pair<std::string, Tensor>> rest;
  for (auto& [n, t] : ts)
    if (n != "bert.embeddings.word_embeddings.weight") rest.emplace_back(n, t);
  save_safetensors(d.file("rest.safetensors"), rest, {});
  std::string bytes = read_bytes(d.file("rest.safetensors"));
  uint64_t hn = 0;
  for (int i = 7; i >= 0; --i) hn = (hn << 8) | static_cast<unsigned char>(bytes[i]);
  nlohmann::ordered_json h = nlohmann::ordered_json::parse(bytes.substr(8, hn));
  const uint64_t data_end = bytes.size() - 8 - hn;
  h["bert.embeddings.word_embeddings.weight"] = {{"dtype", "F16"}, {"shape", {11, 8}}, {"data_offsets", {data_end, data_end + 176}}};
  std::string f16;
  for (int i = 0; i < 88; ++i) f16 += std::string("\x00\x38", 2);
  write_bytes(d.file("f16.safetensors"), make_file(h.dump(), bytes.substr(8 + hn) + f16));
  load_model(d.file("f16.safetensors"), b, r);
  EXPECT_EQ(b.parameter("bert.embeddings.word_embeddings.weight").value().to_vector(), std::vector<double>(88, 0.5));
}

// ---------------------------------------------------------------------------------------------------------
// `bertrain inspect`

namespace {
struct RunResult {
  int exit_code = -1;
  bool signaled = false;
  std::string out, err;  // stdout (the listing), stderr (logs and errors)
};
RunResult run_cli(const std::string& args, const std::string& out_file) {
  std::string cmd = std::string(BERTRAIN_BINARY_DIR) + "/bertrain " + args + " > " + out_file + " 2> " + out_file + ".err";
  int st = std::system(cmd.c_str());
  RunResult r;
  r.signaled = WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) >= 128);
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.out = read_bytes(out_file);
  r.err = read_bytes(out_file + ".err");
  return r;
}
}  // namespace

TEST(InspectCli, PrintsConfigParameterCountAndTensors) {
  TempDir d;
  MiniBert m(1);
  BertConfig c = test::tiny_bert_config(MiniBert::V, MiniBert::H, 2, 2, MiniBert::I, MiniBert::P);
  c.hidden_act = "gelu_new";
  c.id2label = {"negative", "positive"};
  save_model(d.file("ckpt"), m, c);
  RunResult r = run_cli("inspect " + d.file("ckpt"), d.file("out.txt"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_HAS(r.out, "id2label: 0=negative 1=positive");
  EXPECT_HAS(r.out, "hidden_act: gelu_new");
  EXPECT_HAS(r.out, "vocab_size: 11");
  EXPECT_HAS(r.out, "metadata: format=pt");
  EXPECT_HAS(r.out, "parameters: " + std::to_string(m.num_parameters() - MiniBert::V * MiniBert::H));
  EXPECT_HAS(r.out, "tensors: " + std::to_string(m.named_parameters().size() - 1));
  EXPECT_HAS(r.out, "bert.encoder.layer.1.intermediate.dense.weight");
  EXPECT_HAS(r.out, "F32   (12, 8)");
  EXPECT_HAS(r.out, "cls.predictions.bias");
  RunResult f = run_cli("inspect " + d.file("ckpt/model.safetensors"), d.file("out2.txt"));
  ASSERT_EQ(f.exit_code, 0) << f.out;
  EXPECT_HAS(f.out, "bert.pooler.dense.bias");
}

TEST(InspectCli, BadFilesExitNonZeroWithOneClearError) {
  TempDir d;
  for (const BadFile& b : bad_files()) {
    const std::string p = d.file(std::string(b.label) + ".safetensors");
    write_bytes(p, b.bytes);
    RunResult r = run_cli("inspect " + p, d.file("out.txt"));
    EXPECT_EQ(r.exit_code, 1) << b.label << ": " << r.err;
    EXPECT_FALSE(r.signaled) << b.label;
    EXPECT_HAS(r.err, "[error]");
    EXPECT_HAS(r.err, b.expect.front());
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << b.label << ": " << r.err;  // the error alone
    EXPECT_EQ(r.out, "") << b.label;  // nothing of the listing on stdout
  }
  // An invalid config in a checkpoint directory.
  fs::create_directories(d.file("ckpt"));
  write_bytes(d.file("ckpt/config.json"), R"({"hidden_size": 30, "num_attention_heads": 4})");
  save_safetensors(d.file("ckpt/model.safetensors"), {{"x", Tensor::zeros({2})}});
  RunResult r = run_cli("inspect " + d.file("ckpt"), d.file("out.txt"));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_HAS(r.err, "hidden_size (30)");
  EXPECT_HAS(r.err, "num_attention_heads (4)");
  r = run_cli("inspect " + d.file("nothing_here"), d.file("out.txt"));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_HAS(r.err, "does not exist");
}

// ---------------------------------------------------------------------------------------------------------
// the golden reference files (tests/models/gen_golden.py) are readable and consistent

TEST(GoldenFiles, ReadableWithConfigsInputsWeightsAndExpectations) {
  const std::string g = std::string(BERTRAIN_TEST_DATA_DIR) + "/golden/";
  for (const std::string act : {"gelu", "gelu_new"}) {
    BertConfig c = load_bert_config(g + "config_" + act + ".json");
    EXPECT_EQ(c.hidden_act, act);
    EXPECT_EQ(c.vocab_size, 99);
    EXPECT_EQ(c.hidden_size, 32);
    EXPECT_EQ(c.intermediate_size, 37);
    auto model = SafetensorsFile::open(g + "model_" + act + ".safetensors");
    auto expected = SafetensorsFile::open(g + "expected_" + act + ".safetensors");
    EXPECT_EQ(model.metadata().at("format"), "pt");
    EXPECT_FALSE(model.contains(kTiedDecoderWeight));
    EXPECT_EQ(model.names().size(), 5u + 16u * 2 + 2 + 5 + 2);
    for (const auto& n : model.names()) {
      EXPECT_EQ(model.info(n).dtype, "F32") << n;
      ASSERT_TRUE(expected.contains("grad." + n)) << n;
      EXPECT_EQ(expected.info("grad." + n).dtype, "F64");
      EXPECT_EQ(expected.info("grad." + n).shape, model.info(n).shape) << n;
    }
    EXPECT_EQ(expected.info("sequence_output").shape, Shape({3, 12, 32}));
    EXPECT_EQ(expected.info("pooled_output").shape, Shape({3, 32}));
    EXPECT_EQ(expected.info("mlm_logits").shape, Shape({15, 99}));
    EXPECT_EQ(expected.info("nsp_logits").shape, Shape({3, 2}));
    const double mlm = expected.load("mlm_loss").item(), nsp = expected.load("nsp_loss").item();
    EXPECT_NEAR(expected.load("total_loss").item(), mlm + nsp, 1e-12);
    EXPECT_GT(mlm, 0.0);
  }
  auto in = SafetensorsFile::open(g + "inputs.safetensors");
  for (const char* n : {"input_ids", "token_type_ids", "attention_mask", "masked_lm_positions", "masked_lm_ids",
                        "next_sentence_labels"})
    EXPECT_EQ(in.info(n).dtype, "I32") << n;
  EXPECT_EQ(in.info("masked_lm_weights").dtype, "F32");
  EXPECT_EQ(in.info("input_ids").shape, Shape({3, 12}));
  EXPECT_EQ(in.info("masked_lm_positions").shape, Shape({3, 5}));
}

// ---------------------------------------------------------------------------------------------------------
// bertrain's own BertForPreTraining

TEST(BertCheckpoint, BertForPreTrainingRoundTripIsBitExact) {
  TempDir d;
  BertConfig c = load_bert_config(std::string(BERTRAIN_TEST_DATA_DIR) + "/golden/config_gelu.json");
  Rng r1(1), r2(2);
  BertForPreTraining a(c, r1), b(c, r2);
  save_model(d.file("ckpt"), a, c);
  LoadReport rep;
  load_model(d.file("ckpt"), b, rep, LoadOptions{.strict = true});
  EXPECT_EQ(rep.loaded.size(), a.named_parameters().size());
  EXPECT_TRUE(rep.ignored.empty() && rep.renamed.empty() && rep.converted.empty()) << rep.summary();
  for (auto& [n, v] : a.named_parameters()) EXPECT_TRUE(bit_equal(v.value(), b.parameter(n).value())) << n;
  EXPECT_EQ(load_bert_config(d.file("ckpt/config.json")).hidden_act, "gelu");
}

TEST(BertCheckpoint, GoldenWeightsMatchTheModelsNamesExactly) {
  for (const std::string act : {"gelu", "gelu_new"}) {
    const std::string g = std::string(BERTRAIN_TEST_DATA_DIR) + "/golden/";
    BertConfig c = load_bert_config(g + "config_" + act + ".json");
    Rng rng(3);
    BertForPreTraining m(c, rng);
    LoadReport rep;
    load_model(g + "model_" + act + ".safetensors", m, rep, LoadOptions{.strict = true});
    auto f = SafetensorsFile::open(g + "model_" + act + ".safetensors");
    EXPECT_EQ(rep.loaded.size(), f.names().size());
    EXPECT_TRUE(bit_equal(m.parameter("cls.predictions.bias").value(), f.load("cls.predictions.bias")));
  }
}
