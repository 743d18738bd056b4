// torch_checkpoint_test.cpp: PyTorch checkpoints written by torch.save (tests/io/gen_torch_checkpoints.py, run by
// the torch_checkpoints_gen fixture into the build directory) read by TorchCheckpoint and load_model: tensors
// bit-identical to the safetensors ones (f32, f16, bf16, tied storages, non-contiguous views at offsets), and the
// hostile and broken files refused with one line naming what is wrong, without running anything.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <set>

#include "bertrain/core/rng.h"
#include "bertrain/io/checkpoint.h"
#include "bertrain/io/config.h"
#include "bertrain/io/safetensors.h"
#include "bertrain/io/torch_checkpoint.h"
#include "bertrain/io/weights_file.h"
#include "bertrain/models/bert.h"

using namespace bertrain;
namespace fs = std::filesystem;

namespace {

const std::string kGen = std::string(BERTRAIN_BINARY_DIR) + "/torch_checkpoints";
const std::string kGolden = std::string(BERTRAIN_TEST_DATA_DIR) + "/golden/model_gelu.safetensors";
const std::string kGoldenConfig = std::string(BERTRAIN_TEST_DATA_DIR) + "/golden/config_gelu.json";

#define REQUIRE_GENERATED()                                                                                        \
  if (!fs::exists(kGen + "/golden/pytorch_model.bin"))                                                             \
  GTEST_SKIP() << kGen << " was not generated (tests/io/gen_torch_checkpoints.py needs /usr/bin/python3 with torch)"

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Every tensor of the golden safetensors file, read from `dir`/pytorch_model.bin, bit for bit.
void expect_golden_tensors(const std::string& dir) {
  const SafetensorsFile st = SafetensorsFile::open(kGolden);
  const TorchCheckpoint pt = TorchCheckpoint::open(dir + "/pytorch_model.bin");
  for (const auto& n : st.names()) {
    ASSERT_TRUE(pt.contains(n)) << n;
    EXPECT_TRUE(same_bits(pt.load(n), st.load(n))) << dir << ": " << n;
  }
}

TEST(TorchCheckpoint, GoldenTensorsEqualSafetensors) {
  REQUIRE_GENERATED();
  expect_golden_tensors(kGen + "/golden");
  const TorchCheckpoint pt = TorchCheckpoint::open(kGen + "/golden/pytorch_model.bin");
  EXPECT_EQ(pt.archive_name(), "pytorch_model");  // PyTorch 1.13 names the records after the file's stem
  EXPECT_EQ(pt.version(), 3);
  // position_ids: an expanded (stride 0) int64 view.
  const TorchTensorInfo& pos = pt.info("bert.embeddings.position_ids");
  EXPECT_EQ(pos.dtype, "I64");
  EXPECT_EQ(pos.shape, Shape({1, 64}));
  const Tensor p = pt.load("bert.embeddings.position_ids");
  for (int64_t i = 0; i < 64; ++i) EXPECT_EQ(p.data<int64_t>()[i], i);
}

TEST(TorchCheckpoint, TiedStoragesAreSharedAndEqual) {
  REQUIRE_GENERATED();
  const TorchCheckpoint pt = TorchCheckpoint::open(kGen + "/golden/pytorch_model.bin");
  const auto& w = pt.info("bert.embeddings.word_embeddings.weight");
  const auto& d = pt.info("cls.predictions.decoder.weight");
  EXPECT_EQ(w.storage_key, d.storage_key);
  EXPECT_EQ(pt.sharing_storage("bert.embeddings.word_embeddings.weight"),
            std::vector<std::string>{"cls.predictions.decoder.weight"});
  EXPECT_TRUE(same_bits(pt.load("cls.predictions.decoder.weight"), pt.load("bert.embeddings.word_embeddings.weight")));
  EXPECT_EQ(pt.info("cls.predictions.decoder.bias").storage_key, pt.info("cls.predictions.bias").storage_key);
}

TEST(TorchCheckpoint, NonContiguousViewsAtOffsets) {
  REQUIRE_GENERATED();
  const std::string dir = kGen + "/golden_views";
  const TorchCheckpoint pt = TorchCheckpoint::open(dir + "/pytorch_model.bin");
  const auto& q = pt.info("bert.encoder.layer.1.attention.self.query.weight");
  EXPECT_FALSE(q.contiguous());
  EXPECT_GT(q.storage_offset, 0);
  std::set<std::string> keys;
  for (const auto& n : pt.names())
    if (pt.info(n).dtype == "F32") keys.insert(pt.info(n).storage_key);
  EXPECT_EQ(keys.size(), 1u) << "every float tensor is a view of one storage";
  expect_golden_tensors(dir);
}

TEST(TorchCheckpoint, F16ConvertsAsTheSafetensorsPath) {
  REQUIRE_GENERATED();
  const std::string dir = kGen + "/golden_f16";
  const SafetensorsFile st = SafetensorsFile::open(dir + "/expected_f16.safetensors");
  const TorchCheckpoint pt = TorchCheckpoint::open(dir + "/pytorch_model.bin");
  for (const auto& n : st.names()) {
    EXPECT_EQ(pt.info(n).dtype, "F16");
    EXPECT_TRUE(same_bits(pt.load(n), st.load(n))) << n;                        // F16 -> f32, exactly
    EXPECT_TRUE(same_bits(pt.load(n, DType::bf16), st.load(n, DType::bf16))) << n;
  }
}

TEST(TorchCheckpoint, BF16KeepsItsBits) {
  REQUIRE_GENERATED();
  const std::string dir = kGen + "/golden_bf16";
  const SafetensorsFile st = SafetensorsFile::open(dir + "/expected.safetensors");
  const TorchCheckpoint pt = TorchCheckpoint::open(dir + "/pytorch_model.bin");
  for (const auto& n : st.names()) {
    EXPECT_TRUE(same_bits(pt.load(n), st.load(n))) << n;
    if (st.info(n).dtype == "BF16") {
      EXPECT_EQ(pt.load(n).dtype(), DType::bf16);
    }
    EXPECT_TRUE(same_bits(pt.load(n, DType::f32), st.load(n, DType::f32))) << n;
  }
}

// --init_checkpoint's path: a directory with pytorch_model.bin and config.json, and the file itself.
TEST(TorchCheckpoint, LoadModelMatchesSafetensors) {
  REQUIRE_GENERATED();
  const BertConfig cfg = load_bert_config(kGoldenConfig);
  Rng r1(1), r2(2);
  BertForPreTraining from_st(cfg, r1), from_pt(cfg, r2);
  LoadReport st_report, pt_report;
  load_model(kGolden, from_st, st_report, {.strict = true});
  EXPECT_EQ(resolve_weights_file(kGen + "/golden"), kGen + "/golden/pytorch_model.bin");
  for (const std::string& path : {kGen + "/golden", kGen + "/golden/pytorch_model.bin", kGen + "/golden_views"}) {
    load_model(path, from_pt, pt_report, {.strict = true});
    EXPECT_TRUE(pt_report.warnings.empty()) << pt_report.summary();
    EXPECT_EQ(pt_report.loaded.size(), st_report.loaded.size());
    std::set<std::string> ignored(pt_report.ignored.begin(), pt_report.ignored.end());
    EXPECT_EQ(ignored, (std::set<std::string>{"bert.embeddings.position_ids", "cls.predictions.decoder.weight",
                                              "cls.predictions.decoder.bias"}));
    const auto a = from_st.named_parameters(), b = from_pt.named_parameters();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(same_bits(a[i].second.value(), b[i].second.value())) << a[i].first;
  }
  // f16: the same values as the F16 safetensors file gives.
  BertForPreTraining from_st16(cfg, r1), from_pt16(cfg, r2);
  load_model(kGen + "/golden_f16/expected_f16.safetensors", from_st16, st_report);
  load_model(kGen + "/golden_f16", from_pt16, pt_report);
  EXPECT_FALSE(pt_report.converted.empty());
  const auto a = from_st16.named_parameters(), b = from_pt16.named_parameters();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(same_bits(a[i].second.value(), b[i].second.value())) << a[i].first;
}

TEST(TorchCheckpoint, WeightsFileDispatchesOnContent) {
  REQUIRE_GENERATED();
  EXPECT_TRUE(is_torch_checkpoint_file(kGen + "/golden/pytorch_model.bin"));
  EXPECT_FALSE(is_torch_checkpoint_file(kGolden));
  EXPECT_FALSE(is_torch_checkpoint_file(kGen + "/does_not_exist.bin"));
  EXPECT_EQ(WeightsFile::open(kGen + "/golden/pytorch_model.bin").format(), WeightsFile::Format::torch);
  EXPECT_EQ(WeightsFile::open(kGolden).format(), WeightsFile::Format::safetensors);
}

struct Refusal {
  const char* file;
  const char* expected;  // part of the one-line message
};

void PrintTo(const Refusal& r, std::ostream* os) { *os << r.file; }

class TorchCheckpointRefuses : public ::testing::TestWithParam<Refusal> {};

TEST_P(TorchCheckpointRefuses, WithOneLine) {
  REQUIRE_GENERATED();
  const std::string path = kGen + "/hostile/" + GetParam().file;
  ASSERT_TRUE(fs::exists(path)) << path;
  const std::string msg = error_of([&] { (void)TorchCheckpoint::open(path); });
  EXPECT_NE(msg.find(GetParam().expected), std::string::npos) << msg;
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  // Nothing ran: the calls would have created their markers.
  for (const char* m : {"MARKER_os_system", "MARKER_builtins_eval", "MARKER_subprocess_popen"})
    EXPECT_FALSE(fs::exists(kGen + "/hostile/" + m)) << m;
}

INSTANTIATE_TEST_SUITE_P(
    Hostile, TorchCheckpointRefuses,
    ::testing::Values(
        Refusal{"os_system.bin", "refused global 'posix.system' (only torch tensor rebuilders"},
        Refusal{"builtins_eval.bin", "refused global 'builtins.eval'"},
        Refusal{"subprocess_popen.bin", "refused global 'subprocess.Popen'"},
        Refusal{"whole_module.bin", "refused global 'torch.nn.modules.linear.Linear'"},
        Refusal{"forged_size.bin", "tensor 'w': size (400), stride and offset 0 address element 399 of a storage of 4"},
        Refusal{"forged_stride.bin", "address element 4 of a storage of 4"},
        Refusal{"forged_offset.bin", "address element 4 of a storage of 4"},
        Refusal{"forged_numel.bin", "storage '0' of 1000 FloatStorage elements needs 4000 bytes, its record has 16"},
        Refusal{"truncated.bin", "not a readable zip archive"},
        Refusal{"bomb_declared.bin", "more than deflate can produce (a zip bomb)"},
        Refusal{"bomb_inflates.bin", "holds more than its declared"}),
    [](const ::testing::TestParamInfo<Refusal>& i) {
      std::string n = i.param.file;
      return n.substr(0, n.find('.'));
    });

TEST(TorchCheckpoint, ForgingPicklerWithHonestSizesIsAccepted) {
  REQUIRE_GENERATED();
  // The hostile files' pickler with sizes that fit: the refusals above are about the sizes, not the writer.
  const TorchCheckpoint pt = TorchCheckpoint::open(kGen + "/hostile/valid_forged_pickler.bin");
  EXPECT_EQ(pt.load("w").shape(), Shape({2, 2}));
}

TEST(TorchCheckpoint, LimitsAreEnforced) {
  REQUIRE_GENERATED();
  const std::string path = kGen + "/golden/pytorch_model.bin";
  TorchCheckpointLimits small;
  small.max_pickle_bytes = 100;
  EXPECT_NE(error_of([&] { (void)TorchCheckpoint::open(path, small); }).find("over the limit of 100 for data.pkl"),
            std::string::npos);
  TorchCheckpointLimits shallow;
  shallow.max_depth = 2;
  EXPECT_NE(error_of([&] { (void)TorchCheckpoint::open(path, shallow); }).find("nested deeper than 2"),
            std::string::npos);
  TorchCheckpointLimits few;
  few.max_objects = 50;
  EXPECT_NE(error_of([&] { (void)TorchCheckpoint::open(path, few); }).find("more than 50"), std::string::npos);
}

}  // namespace
