// resource_limits_test.cpp: files that claim more than they hold. A safetensors header claiming a 2^60-element
// tensor, an HDF5 shard whose datasets claim 2^60 values (stored nowhere), a shard whose dataset shapes disagree, and
// JSON nested 10^6 deep in every JSON file bertrain reads: each is refused with one bertrain::Error line naming the
// file, and the largest single allocation made while refusing stays small (operator new is counted here).
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bertrain/core/allocator.h"
#include "bertrain/core/rng.h"
#include "bertrain/data/hdf5_shard.h"
#include "bertrain/data/loader.h"
#include "bertrain/io/checkpoint.h"
#include "bertrain/io/config.h"
#include "bertrain/io/recipe.h"
#include "bertrain/io/safetensors.h"
#include "bertrain/io/tf_checkpoint.h"
#include "bertrain/models/bert.h"
#include "bertrain/tasks/glue/glue.h"
#include "bertrain/tasks/squad/evaluate.h"
#include "bertrain/tasks/squad/squad.h"
#include "bertrain/train/train_state.h"
#include "counting_new.h"
#include "test_util.h"

using namespace bertrain;
namespace fs = std::filesystem;

namespace {

constexpr size_t kSmall = 64 << 20;  // a refusal may read the file (these are tiny); it must not allocate 64 MiB

fs::path temp_dir() { return test::temp_dir("limits"); }

fs::path write(const std::string& name, const std::string& bytes) {
  const fs::path p = temp_dir() / name;
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}

// Runs `fn`, which must throw bertrain::Error naming `file` in one line while allocating less than kSmall at once.
void expect_refused(const std::string& file, const std::function<void()>& fn) {
  CachingAllocator::instance().reset_peak();
  const int64_t tensors_before = CachingAllocator::instance().stats().bytes_in_use;
  test::reset_largest_new();
  std::string what;
  try {
    fn();
  } catch (const Error& e) {
    what = e.what();
  } catch (const std::exception& e) {
    FAIL() << "not a bertrain::Error: " << typeid(e).name() << ": " << e.what();
  }
  ASSERT_FALSE(what.empty()) << file << " was accepted";
  EXPECT_NE(what.find(file), std::string::npos) << what;
  EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  EXPECT_LT(test::largest_new(), kSmall) << what;
  EXPECT_LT(CachingAllocator::instance().stats().peak_bytes_in_use - tensors_before, static_cast<int64_t>(kSmall)) << what;
  std::printf("refused: %s\n", what.substr(0, 300).c_str());
}

std::string deep_json(const std::string& prefix, const std::string& suffix) {
  constexpr size_t kDepth = 1000000;
  std::string s = prefix;
  s.append(kDepth, '[');
  s.append(kDepth, ']');
  return s + suffix;
}

std::string safetensors_bytes(const std::string& header, size_t data_bytes) {
  std::string h = header;
  h.append((8 - h.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((h.size() >> (8 * i)) & 0xff);
  return out + h + std::string(data_bytes, '\0');
}

// An HDF5 file with the six shard datasets of the given dims, chunked and never written (so nothing is stored).
fs::path write_unwritten_shard(const std::string& name, hsize_t n, hsize_t t, hsize_t p, hsize_t mask_t) {
  const fs::path path = temp_dir() / name;
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  auto add = [&](const char* ds_name, std::vector<hsize_t> dims) {
    hid_t sp = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    std::vector<hsize_t> chunk(dims.size(), 1);
    H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data());
    hid_t ds = H5Dcreate2(f, ds_name, H5T_STD_I32LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(sp);
  };
  add("input_ids", {n, t});
  add("input_mask", {n, mask_t});
  add("segment_ids", {n, t});
  add("masked_lm_positions", {n, p});
  add("masked_lm_ids", {n, p});
  add("next_sentence_labels", {n});
  H5Fclose(f);
  return path;
}

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

// A LevelDB table footer (doc/table_format.md): metaindex and index handles, zero padding to 40 bytes, the magic.
std::string leveldb_footer(uint64_t meta_offset, uint64_t meta_size, uint64_t index_offset, uint64_t index_size) {
  std::string f;
  put_varint(f, meta_offset);
  put_varint(f, meta_size);
  put_varint(f, index_offset);
  put_varint(f, index_size);
  f.resize(40, '\0');
  return f + std::string("\x57\xfb\x80\x8b\x24\x75\x47\xdb", 8);
}

// A TF bundle PREFIX.index with `table` and an empty PREFIX.data-00000-of-00001; returns the prefix.
std::string write_tf_bundle(const std::string& name, const std::string& table) {
  write(name + ".data-00000-of-00001", "");
  write(name + ".index", table);
  return (temp_dir() / name).string();
}

}  // namespace

// The counter behind every refusal below sees operator-new requests: a 5 MiB vector is counted as such.
TEST(ResourceLimits, LargestNewIsCounted) {
  test::reset_largest_new();
  auto v = std::make_unique<std::vector<char>>(5 << 20);
  EXPECT_GE(test::largest_new(), size_t{5} << 20);
  EXPECT_LT(test::largest_new(), kSmall);
}

TEST(ResourceLimits, SafetensorsClaimingTwoToTheSixtyElements) {
  const std::string header =
      R"({"huge":{"dtype":"F32","shape":[1073741824,1073741824],"data_offsets":[0,4611686018427387904]}})";
  const fs::path p = write("huge.safetensors", safetensors_bytes(header, 16));
  expect_refused(p.string(), [&] { (void)SafetensorsFile::open(p.string()); });
  expect_refused("huge-in-memory", [&] { (void)SafetensorsFile::from_memory(safetensors_bytes(header, 16), "huge-in-memory"); });
  // The header length itself claiming 2^60 bytes.
  std::string len_only(8, '\0');
  len_only[7] = 0x10;
  const fs::path q = write("huge_header.safetensors", len_only + "{}");
  expect_refused(q.string(), [&] { (void)SafetensorsFile::open(q.string()); });
  // Through --init_checkpoint's loader.
  const BertConfig c = test::tiny_bert_config(16, 4, 1, 2, 8, 512);
  Rng rng(1);
  BertForPreTraining model(c, rng);
  LoadReport report;
  expect_refused(p.string(), [&] { load_model(p.string(), model, report); });
}

TEST(ResourceLimits, ShardClaimingTwoToTheSixtyValues) {
  const fs::path p = write_unwritten_shard("huge-training.hdf5", hsize_t{1} << 30, hsize_t{1} << 30, 20, hsize_t{1} << 30);
  ASSERT_LT(fs::file_size(p), 1 << 20);
  expect_refused(p.string(), [&] { (void)data::read_pretraining_shard(p.string()); });
  expect_refused(p.string(), [&] { (void)data::inspect_pretraining_shard(p.string()); });
  std::ifstream in(p, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  expect_refused("huge-image", [&] { (void)data::read_pretraining_shard_image(bytes, "huge-image"); });
  // A modest claim (4096 x 4096) that fits in memory but is stored nowhere: refused too, not allocated.
  const fs::path m = write_unwritten_shard("unwritten-training.hdf5", 4096, 4096, 20, 4096);
  expect_refused(m.string(), [&] { (void)data::read_pretraining_shard(m.string()); });
}

TEST(ResourceLimits, ShardWhoseShapesDisagree) {
  const fs::path p = write_unwritten_shard("disagree-training.hdf5", 4, 8, 2, 9);
  expect_refused(p.string(), [&] { (void)data::read_pretraining_shard(p.string()); });
}

TEST(ResourceLimits, JsonNestedAMillionDeep) {
  // config.json, a recipe, trainer_state.json (and its data cursor), a safetensors header, SQuAD data /
  // predictions / null odds, a GLUE JSONL line: one nesting shape each, in a place the reader looks at.
  const std::string arr = deep_json("", "");
  const fs::path cfg = write("deep/config.json", deep_json("{\"hidden_act\": ", "}"));
  expect_refused(cfg.string(), [&] { (void)load_bert_config(cfg.string()); });
  const fs::path top = write("deep/top.json", arr);
  expect_refused(top.string(), [&] { (void)load_bert_config(top.string()); });
  const fs::path recipe = write("deep/recipe.json", deep_json("{\"output_dir\": ", "}"));
  expect_refused(recipe.string(), [&] { (void)load_pretrain_recipe(recipe.string(), {}); });
  expect_refused(top.string(), [&] { (void)load_pretrain_recipe(top.string(), {}); });
  expect_refused("recipe.json", [&] { (void)pretrain_recipe_from_json(arr, "recipe.json"); });
  // A flag value (at most 128 KiB per argument on Linux: 65536 deep) names the flag.
  const std::string deep_flag = std::string(65536, '[') + std::string(65536, ']');
  expect_refused("--optimizer.exclude_from_weight_decay", [&] {
    (void)load_pretrain_recipe("", {{"output_dir", "out"}, {"optimizer.exclude_from_weight_decay", deep_flag}});
  });
  const fs::path state = write("deep/checkpoint-1/trainer_state.json", deep_json("{\"global_step\": 1, \"recipe\": ", "}"));
  expect_refused(state.string(), [&] { (void)TrainState::read(state.parent_path().string()); });
  const fs::path cursor = write("deep/checkpoint-2/trainer_state.json", deep_json("{\"global_step\": 1, \"data_cursor\": ", "}"));
  expect_refused(cursor.string(), [&] { (void)TrainState::read(cursor.parent_path().string()); });
  const std::string st_header = deep_json("{\"__metadata__\": ", "}");
  const fs::path st = write("deep/model.safetensors", safetensors_bytes(st_header, 0));
  expect_refused(st.string(), [&] { (void)SafetensorsFile::open(st.string()); });
  const fs::path squad = write("deep/train-v1.1.json", deep_json("{\"version\": \"1.1\", \"data\": ", "}"));
  expect_refused(squad.string(), [&] { (void)squad::read_squad_examples(squad.string(), true, false); });
  expect_refused(squad.string(), [&] { (void)squad::read_squad_gold(squad.string()); });
  const fs::path preds = write("deep/predictions.json", deep_json("{\"q1\": ", "}"));
  expect_refused(preds.string(), [&] { (void)squad::read_squad_predictions(preds.string()); });
  const fs::path odds = write("deep/null_odds.json", deep_json("{\"q1\": ", "}"));
  expect_refused(odds.string(), [&] { (void)squad::read_squad_na_probs(odds.string()); });
  const fs::path jsonl = write("deep/glue/train.jsonl", "{\"text\": \"ok\", \"label\": \"1\"}\n" +
                                                          deep_json("{\"text\": \"x\", \"label\": ", "}") + "\n");
  glue::GlueOptions o;
  o.format = "jsonl";
  o.text_a_column = "text";
  o.labels = {"0", "1"};
  expect_refused(jsonl.string(), [&] { (void)glue::make_glue_processor("generic", o)->get_train_examples(jsonl.parent_path().string()); });
}

TEST(ResourceLimits, TfIndexBlockClaimingTwoToTheSixtyTwoBytes) {
  // The tiny BERT bundle's own index with its footer's index handle enlarged to 2^62 bytes, and one whose index
  // block is a snappy block claiming 4 GiB from 8 bytes: LevelDB would allocate the claim before reading (fuzz
  // finding L1), bertrain refuses first.
  const std::string tiny = test::read_file(BERTRAIN_TEST_DATA_DIR "/tf_checkpoints/keras_bert_tiny/bert_model.ckpt.index");
  ASSERT_GT(tiny.size(), 48u);
  const std::string body = tiny.substr(0, tiny.size() - 48);
  const std::string huge = write_tf_bundle("tf/huge", body + leveldb_footer(0, 0, 0, uint64_t{1} << 62));
  expect_refused(huge, [&] { (void)TfCheckpointReader::open(huge); });
  std::string snappy_block;
  put_varint(snappy_block, 0xffffffffu);   // the uncompressed length snappy's header claims
  snappy_block += std::string("\x0c" "abcd", 5);  // a literal of 4 bytes
  const std::string table = snappy_block + std::string("\x01\0\0\0\0", 5) +  // type 1: snappy, then a CRC
                            leveldb_footer(0, 0, 0, snappy_block.size());
  const std::string snappy = write_tf_bundle("tf/snappy", table);
  expect_refused(snappy, [&] { (void)TfCheckpointReader::open(snappy); });
  // The same prefix through --init_checkpoint's loader.
  Rng rng(1);
  BertForPreTraining model(test::tiny_bert_config(16, 4, 1, 2, 8, 512), rng);
  LoadReport report;
  expect_refused(huge, [&] { load_model(huge, model, report); });
}

TEST(ResourceLimits, NumbersBeyondTheIntegersTheyFill) {
  // A JSON number read into a C++ integer must fit it exactly (core/json_number.h). Fuzz finding in
  // trainer_state.json: a data cursor seed of 63260384360604714397 (beyond uint64, so a float to nlohmann) was
  // converted with a static_cast, undefined behaviour; 2.5 and 2^32 into an int were truncated and wrapped.
  const std::string cursor_ok = R"({"epoch": 0, "sample": 0, "micro": 0, "rng": {"seed": 1, "stream": 0, "counter": 0, "used": 4}})";
  const auto state = [&](const std::string& name, const std::string& body) {
    return write("numbers/" + name + "/trainer_state.json", body).parent_path();
  };
  for (const auto& [name, body] : std::vector<std::pair<std::string, std::string>>{
           {"seed", R"({"global_step": 1, "data_cursor": {"epoch": 0, "sample": 0, "micro": 0, "rng": {"seed": 63260384360604714397, "stream": 0, "counter": 0, "used": 4}}})"},
           {"used", R"({"global_step": 1, "data_cursor": {"epoch": 0, "sample": 0, "micro": 0, "rng": {"seed": 1, "stream": 0, "counter": 0, "used": 4294967296}}})"},
           {"epoch", R"({"global_step": 1, "data_cursor": {"epoch": 1e300, "sample": 0, "micro": 0, "rng": {"seed": 1, "stream": 0, "counter": 0, "used": 4}}})"},
           {"global_step", R"({"global_step": 1e30})"},
           {"global_step_null", R"({"global_step": null})"},
           {"phase", R"({"global_step": 1, "phase": 2.5})"},
           {"world_size", R"({"global_step": 1, "world_size": 4294967296})"},
           {"best_step", R"({"global_step": 1, "best_step": -9.3e18})"},
           {"seed_negative", R"({"global_step": 1, "seed": -1})"}}) {
    SCOPED_TRACE(name);
    const fs::path dir = state(name, body);
    expect_refused((dir / "trainer_state.json").string(), [&] { (void)TrainState::read(dir.string()); });
  }
  // Integral floats in range are what Python's json and int() accept: 7.0 is 7.
  const TrainState s = TrainState::from_json(R"({"global_step": 7.0, "phase": 2, "seed": 18446744073709551615, "data_cursor": )" +
                                             cursor_ok + "}", "state");
  EXPECT_EQ(s.global_step, 7);
  EXPECT_EQ(s.phase, 1);
  EXPECT_EQ(s.seed, 18446744073709551615ull);
  EXPECT_EQ(s.data_cursor.shuffle_rng.used, 4u);

  const std::string recipe = test::read_file(BERTRAIN_SOURCE_DIR "/fuzz/corpus/recipe/quickstart").substr(1);
  const auto with = [&](const std::string& from, const std::string& to) {
    const size_t at = recipe.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return std::string(recipe).replace(at, from.size(), to);
  };
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"\"train_batch_size\": 32", "\"train_batch_size\": 1e30"},
           {"\"train_batch_size\": 32", "\"train_batch_size\": 32.5"},
           {"\"seed\": 12345", "\"seed\": -1"},
           {"\"seed\": 12345", "\"seed\": 1.8446744073709552e19"},
           {"\"max_seq_length\": 128", "\"max_seq_length\": -9.3e18"}}) {
    SCOPED_TRACE(to);
    const fs::path p = write("numbers/recipe.json", with(from, to));
    expect_refused(p.string(), [&] { (void)load_pretrain_recipe(p.string(), {}); });
  }
  const PretrainRecipe r = pretrain_recipe_from_json(with("\"num_train_steps\": 100", "\"num_train_steps\": 1e2"), "r");
  EXPECT_EQ(r.phases.at(0).schedule.num_train_steps, 100);
}

TEST(ResourceLimits, CleanUp) { fs::remove_all(temp_dir()); }
