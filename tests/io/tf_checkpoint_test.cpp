// tf_checkpoint_test.cpp: the TF tensor-bundle reader against the independent reader
// ../shared/data/tf_checkpoints/list_bundle.py, and the writer against the bytes
// TensorFlow itself wrote.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "bertrain/io/tf_checkpoint.h"
#include "test_util.h"

using namespace bertrain;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string kData = std::string(BERTRAIN_TEST_DATA_DIR) + "/tf_checkpoints";
const std::string kShared = BERTRAIN_SHARED_DATA_DIR "/tf_checkpoints";
const std::string kTiny = kData + "/keras_bert_tiny/bert_model.ckpt";

const std::vector<std::string> kServing = {"saved_model_counter", "saved_model_half_plus_two_cpu",
                                           "saved_model_half_plus_two_mkl", "saved_model_half_plus_two_tf2_cpu",
                                           "tf_text_regression"};

std::string run_capture(const std::string& cmd, int* status = nullptr) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = ::pclose(p);
  if (status) *status = st;
  return out;
}

// Python's bytes.decode("utf-8", "backslashreplace"), which list_bundle.py applies to DT_STRING values:
// well-formed UTF-8 sequences stay, every other byte becomes \xNN.
std::string utf8_backslashreplace(const std::string& s) {
  std::string out;
  size_t i = 0;
  auto cont = [&](size_t k) { return k < s.size() && (static_cast<uint8_t>(s[k]) & 0xC0) == 0x80; };
  while (i < s.size()) {
    const auto c = static_cast<uint8_t>(s[i]);
    size_t len = 0;
    if (c < 0x80) len = 1;
    else if (c >= 0xC2 && c <= 0xDF) len = cont(i + 1) ? 2 : 0;
    else if (c >= 0xE0 && c <= 0xEF) {
      const auto c1 = i + 1 < s.size() ? static_cast<uint8_t>(s[i + 1]) : 0;
      const bool ok1 = (c == 0xE0) ? (c1 >= 0xA0 && c1 <= 0xBF) : (c == 0xED) ? (c1 >= 0x80 && c1 <= 0x9F) : cont(i + 1);
      len = ok1 && cont(i + 2) ? 3 : 0;
    } else if (c >= 0xF0 && c <= 0xF4) {
      const auto c1 = i + 1 < s.size() ? static_cast<uint8_t>(s[i + 1]) : 0;
      const bool ok1 = (c == 0xF0) ? (c1 >= 0x90 && c1 <= 0xBF) : (c == 0xF4) ? (c1 >= 0x80 && c1 <= 0x8F) : cont(i + 1);
      len = ok1 && cont(i + 2) && cont(i + 3) ? 4 : 0;
    }
    if (len == 0) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
      ++i;
    } else {
      out.append(s, i, len);
      i += len;
    }
  }
  return out;
}

bool shared_available() {
  if (fs::exists(kShared + "/list_bundle.py") && fs::exists("/usr/bin/python3")) return true;
  return false;
}

// Every entry and every value of `prefix` as bertrain reads it equals what `reference` (list_bundle.py's JSON
// document) says. Returns the number of values compared.
int64_t compare_with_reference(const std::string& prefix, const json& reference) {
  TfCheckpointReader r = TfCheckpointReader::open(prefix);
  const auto& ents = reference.at("entries");
  EXPECT_EQ(r.entries().size(), ents.size()) << prefix;
  EXPECT_EQ(r.num_shards(), reference.at("header").at("num_shards").get<int>());
  int64_t values = 0;
  for (const auto& je : ents) {
    const std::string name = je.at("name");
    SCOPED_TRACE(prefix + " " + name);
    if (!r.contains(name)) {
      ADD_FAILURE() << "missing";
      continue;
    }
    const TfTensorInfo& e = r.info(name);
    EXPECT_EQ(e.dtype, je.at("dtype").get<int>());
    EXPECT_EQ(tf_dtype_name(e.dtype), je.at("dtype_name").get<std::string>());
    EXPECT_EQ(e.shape, je.at("shape").get<std::vector<int64_t>>());
    EXPECT_EQ(e.shard_id, je.at("shard_id").get<int>());
    EXPECT_EQ(e.offset, je.at("offset").get<int64_t>());
    EXPECT_EQ(e.size, je.at("size").get<int64_t>());
    EXPECT_EQ(e.crc32c, je.at("crc32c").get<uint32_t>());
    EXPECT_FALSE(e.sliced);
    const auto& jv = je.at("values");
    EXPECT_EQ(static_cast<int64_t>(jv.size()), e.numel());
    if (e.dtype == static_cast<int>(TfDType::string)) {
      // Not convertible to a tensor: load() says so, load_strings() reads (and CRC-checks) the elements.
      EXPECT_THROW(r.load(name), Error);
      const auto strs = r.load_strings(name);
      EXPECT_EQ(strs.size(), jv.size());
      for (size_t i = 0; i < strs.size() && i < jv.size(); ++i) EXPECT_EQ(utf8_backslashreplace(strs[i]), jv[i].get<std::string>());
      values += static_cast<int64_t>(strs.size());
      continue;
    }
    Tensor t = r.load(name);
    EXPECT_EQ(t.numel(), static_cast<int64_t>(jv.size()));
    for (int64_t i = 0; i < t.numel() && i < static_cast<int64_t>(jv.size()); ++i) {
      if (t.dtype() == DType::f32) {
        // list_bundle.py prints floats so that they parse back to the exact float32: compare the bits.
        const float want = static_cast<float>(jv[i].get<double>());
        uint32_t a, b;
        std::memcpy(&a, t.data<float>() + i, 4);
        std::memcpy(&b, &want, 4);
        EXPECT_EQ(a, b) << "value " << i;
      } else if (t.dtype() == DType::i64) {
        EXPECT_EQ(t.data<int64_t>()[i], jv[i].get<int64_t>());
      } else {
        ADD_FAILURE() << "unexpected dtype " << dtype_name(t.dtype());
      }
      ++values;
    }
  }
  return values;
}

}  // namespace

// ---- reading -------------------------------------------------------------------------------------------

TEST(TfCheckpoint, TinyBertEntries) {
  TfCheckpointReader r = TfCheckpointReader::open(kTiny);
  EXPECT_EQ(r.num_shards(), 1);
  EXPECT_EQ(r.version_producer(), 1);
  ASSERT_EQ(r.entries().size(), 139u);
  const TfTensorInfo& q = r.info("bert/encoder/layer_0/attention/self/query/kernel");
  EXPECT_EQ(q.dtype, 1);
  EXPECT_EQ(q.shape, (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(q.offset, 2304);
  EXPECT_EQ(q.size, 64);
  EXPECT_EQ(q.crc32c, 0xfa9ef8c2u);
  EXPECT_EQ(r.info("bert/encoder/layer_0/intermediate/dense/kernel").shape, (std::vector<int64_t>{4, 16}));
  EXPECT_EQ(r.info("cls/seq_relationship/output_weights").shape, (std::vector<int64_t>{2, 4}));
  Tensor gs = r.load("global_step");
  EXPECT_EQ(gs.dtype(), DType::i64);
  EXPECT_EQ(gs.dim(), 0);
  EXPECT_EQ(gs.data<int64_t>()[0], 20);
  // Names in key order, every byte of the data file used exactly once.
  int64_t total = 0;
  for (size_t i = 0; i < r.entries().size(); ++i) {
    if (i > 0) {
      EXPECT_LT(r.entries()[i - 1].name, r.entries()[i].name);
    }
    total += r.entries()[i].size;
  }
  EXPECT_EQ(total, 8420);
  // Accepted spellings of the same checkpoint.
  EXPECT_TRUE(is_tf_checkpoint(kTiny));
  EXPECT_TRUE(is_tf_checkpoint(kTiny + ".index"));
  EXPECT_TRUE(is_tf_checkpoint(kTiny + ".data-00000-of-00001"));
  EXPECT_FALSE(is_tf_checkpoint(kData + "/keras_bert_tiny"));
  EXPECT_EQ(TfCheckpointReader::open(kTiny + ".index").entries().size(), 139u);
}

TEST(TfCheckpoint, ServingBundles) {
  // Snappy-compressed index blocks (half_plus_two_cpu, tf2_cpu), DT_STRING, rank-0 and rank-4 tensors.
  TfCheckpointReader cpu = TfCheckpointReader::open(kData + "/tf_serving/saved_model_half_plus_two_cpu/variables");
  ASSERT_EQ(cpu.entries().size(), 5u);
  EXPECT_EQ(cpu.load("b").data<float>()[0], 2.0f);
  EXPECT_EQ(cpu.load("c2").data<float>()[0], 3.0f);
  TfCheckpointReader mkl = TfCheckpointReader::open(kData + "/tf_serving/saved_model_half_plus_two_mkl/variables");
  EXPECT_EQ(mkl.info("conv2d/kernel").shape, (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(mkl.load("conv2d/kernel").dim(), 4);
  TfCheckpointReader tf2 = TfCheckpointReader::open(kData + "/tf_serving/saved_model_half_plus_two_tf2_cpu/variables");
  const TfTensorInfo& g = tf2.info("_CHECKPOINTABLE_OBJECT_GRAPH");
  EXPECT_EQ(tf_dtype_name(g.dtype), "DT_STRING");
  EXPECT_FALSE(tf_dtype_to_bertrain(g.dtype).has_value());
  EXPECT_EQ(tf2.load_strings("_CHECKPOINTABLE_OBJECT_GRAPH").size(), 1u);
  try {
    tf2.load("_CHECKPOINTABLE_OBJECT_GRAPH");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("DT_STRING is not convertible"), std::string::npos) << e.what();
  }
  EXPECT_EQ(tf2.load("a/.ATTRIBUTES/VARIABLE_VALUE").data<float>()[0], 0.5f);  // the others still load
  TfCheckpointReader counter = TfCheckpointReader::open(kData + "/tf_serving/saved_model_counter/variables");
  EXPECT_EQ(counter.load("counter").data<float>()[0], 0.0f);
}

// Every tensor of every checkpoint equals the independent reader's values, bit for bit.
TEST(TfCheckpoint, EveryValueMatchesListBundle) {
  if (!shared_available()) GTEST_SKIP() << "../shared/data/tf_checkpoints/list_bundle.py or /usr/bin/python3 absent";
  int64_t values = 0, tensors = 0;
  std::vector<std::string> prefixes = {kTiny};
  for (const auto& m : kServing) prefixes.push_back(kData + "/tf_serving/" + m + "/variables");
  // The copies in tests/fixtures are every checkpoint of ../shared/data/tf_checkpoints, byte for byte.
  std::vector<std::string> shared_indexes;
  for (const auto& e : fs::recursive_directory_iterator(kShared))
    if (e.path().extension() == ".index") shared_indexes.push_back(fs::relative(e.path(), kShared).string());
  EXPECT_EQ(shared_indexes.size(), prefixes.size());
  for (const auto& rel : shared_indexes) {
    SCOPED_TRACE(rel);
    const std::string p = rel.substr(0, rel.size() - 6);
    EXPECT_EQ(test::read_file(kData + "/" + rel), test::read_file(kShared + "/" + rel));
    EXPECT_EQ(test::read_file(kData + "/" + p + ".data-00000-of-00001"),
              test::read_file(kShared + "/" + p + ".data-00000-of-00001"));
  }
  for (const auto& p : prefixes) {
    int status = -1;
    const std::string out =
        run_capture("/usr/bin/python3 '" + kShared + "/list_bundle.py' '" + p + "' --json --values -1", &status);
    ASSERT_EQ(status, 0) << p;
    const json ref = json::parse(out);
    values += compare_with_reference(p, ref);
    tensors += static_cast<int64_t>(ref.at("entries").size());
  }
  EXPECT_EQ(tensors, 139 + 5 + 4 + 9 + 1 + 1);  // the BERT checkpoint and the five serving bundles
  std::printf("compared %lld tensors, %lld values with list_bundle.py\n", static_cast<long long>(tensors),
              static_cast<long long>(values));
  // And the committed dump of the BERT checkpoint's values.
  const json entries = json::parse(test::read_file(kShared + "/keras_bert_tiny/bert_model.ckpt.entries.json"));
  EXPECT_GT(compare_with_reference(kTiny, entries), 0);
}

// ---- writing -------------------------------------------------------------------------------------------

// TensorFlow's own bytes: reading every tensor of the BERT checkpoint and writing them again gives the same
// index (blocks, restart points, footer) and data file, byte for byte.
TEST(TfCheckpoint, WriterReproducesTensorFlowBytes) {
  TfCheckpointReader r = TfCheckpointReader::open(kTiny);
  std::vector<std::pair<std::string, Tensor>> all;
  for (const auto& e : r.entries()) all.emplace_back(e.name, r.load(e.name));
  const fs::path dir = test::temp_dir("tf_writer");
  const std::string out = (dir / "bert_model.ckpt").string();
  save_tf_checkpoint(out, all);
  EXPECT_EQ(test::read_file(out + ".index"), test::read_file(kTiny + ".index"));
  EXPECT_EQ(test::read_file(out + ".data-00000-of-00001"), test::read_file(kTiny + ".data-00000-of-00001"));
  fs::remove_all(dir);
}
