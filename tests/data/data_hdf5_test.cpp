// data_hdf5_test.cpp: NVIDIA-layout HDF5 shards: round trip, byte-identical output for 1 and 2 threads,
// NVIDIA's int64 files, and clear errors for broken files.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <omp.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "bertrain/data/hdf5_shard.h"

using namespace bertrain;
using namespace bertrain::data;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("bertrain_h5_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

PretrainingFeatures random_features(int64_t n, int64_t t, int64_t p, uint64_t seed) {
  PretrainingFeatures f(t, p);
  Rng rng(seed);
  for (int64_t i = 0; i < n; ++i) {
    TrainingInstance inst;
    const int64_t len = 5 + static_cast<int64_t>(rng.randint(static_cast<uint64_t>(t - 4)));
    for (int64_t k = 0; k < len; ++k) {
      inst.tokens.push_back(static_cast<int32_t>(rng.randint(30000)));
      inst.segment_ids.push_back(k < len / 2 ? 0 : 1);
    }
    const int64_t m = 1 + static_cast<int64_t>(rng.randint(static_cast<uint64_t>(p)));
    for (int64_t k = 0; k < m; ++k) {
      inst.masked_lm_positions.push_back(static_cast<int32_t>(1 + k));
      inst.masked_lm_labels.push_back(static_cast<int32_t>(rng.randint(30000)));
    }
    inst.is_random_next = rng.randint(2) == 1;
    f.append(inst);
  }
  return f;
}

// Writes an HDF5 file with the given datasets as int64 (as some NVIDIA files store them), shapes given.
void write_int64_file(const fs::path& path, const std::vector<std::pair<std::string, std::vector<hsize_t>>>& sets,
                      const std::function<int64_t(const std::string&, size_t)>& value) {
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  for (const auto& [name, dims] : sets) {
    hid_t sp = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
    hid_t ds = H5Dcreate2(f, name.c_str(), H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    size_t n = 1;
    for (auto d : dims) n *= d;
    std::vector<int64_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = value(name, i);
    H5Dwrite(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
    H5Dclose(ds);
    H5Sclose(sp);
  }
  H5Fclose(f);
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace

TEST(Hdf5Shard, RoundTripAndByteIdenticalRewrite) {
  fs::path dir = temp_dir("rt");
  PretrainingFeatures f = random_features(1500, 32, 6, 1);
  write_pretraining_shard((dir / "a-training.hdf5").string(), f);
  write_pretraining_shard((dir / "b-training.hdf5").string(), f);
  PretrainingFeatures g = read_pretraining_shard((dir / "a-training.hdf5").string());
  EXPECT_TRUE(g == f);
  EXPECT_EQ(g.size(), 1500);
  EXPECT_EQ(g.max_seq_length, 32);
  EXPECT_EQ(g.max_predictions_per_seq, 6);
  EXPECT_EQ(slurp(dir / "a-training.hdf5"), slurp(dir / "b-training.hdf5"));  // timestamps off
  ShardInfo info = inspect_pretraining_shard((dir / "a-training.hdf5").string());
  EXPECT_EQ(info.num_samples, 1500);
  // It is compressed: far below the 1500 * (32*6 + 6*8 + 1) raw bytes of mostly random ids... at least smaller.
  EXPECT_LT(fs::file_size(dir / "a-training.hdf5"), 1500u * (32 * 6 + 6 * 8 + 1));
  // An empty shard round-trips too.
  PretrainingFeatures empty(8, 2);
  write_pretraining_shard((dir / "c-training.hdf5").string(), empty);
  EXPECT_TRUE(read_pretraining_shard((dir / "c-training.hdf5").string()) == empty);
  fs::remove_all(dir);
}

TEST(Hdf5Shard, ReadsNvidiaInt64Files) {
  fs::path dir = temp_dir("nv");
  const hsize_t N = 7, T = 12, P = 3;
  auto value = [&](const std::string& name, size_t i) -> int64_t {
    if (name == "masked_lm_positions") return static_cast<int64_t>(i % T);
    if (name == "input_mask" || name == "segment_ids" || name == "next_sentence_labels") return static_cast<int64_t>(i % 2);
    return static_cast<int64_t>(1000 + i);
  };
  write_int64_file(dir / "nv_training_0.hdf5",
                   {{"input_ids", {N, T}},
                    {"input_mask", {N, T}},
                    {"segment_ids", {N, T}},
                    {"masked_lm_positions", {N, P}},
                    {"masked_lm_ids", {N, P}},
                    {"next_sentence_labels", {N}}},
                   value);
  PretrainingFeatures f = read_pretraining_shard((dir / "nv_training_0.hdf5").string());
  ASSERT_EQ(f.size(), 7);
  EXPECT_EQ(f.max_seq_length, 12);
  EXPECT_EQ(f.max_predictions_per_seq, 3);
  for (size_t i = 0; i < N * T; ++i) {
    EXPECT_EQ(f.input_ids[i], static_cast<int32_t>(1000 + i));
    EXPECT_EQ(f.input_mask[i], static_cast<int8_t>(i % 2));
  }
  for (size_t i = 0; i < N * P; ++i) EXPECT_EQ(f.masked_lm_positions[i], static_cast<int32_t>(i % T));
  EXPECT_EQ(f.next_sentence_labels[1], 1);
  fs::remove_all(dir);
}

TEST(Hdf5Shard, ClearErrorsForBrokenFiles) {
  fs::path dir = temp_dir("bad");
  const hsize_t N = 4, T = 8, P = 2;
  auto zero = [](const std::string&, size_t) -> int64_t { return 0; };
  // Missing dataset.
  write_int64_file(dir / "missing.hdf5",
                   {{"input_ids", {N, T}}, {"input_mask", {N, T}}, {"segment_ids", {N, T}},
                    {"masked_lm_positions", {N, P}}, {"next_sentence_labels", {N}}},
                   zero);
  std::string e = error_of([&] { read_pretraining_shard((dir / "missing.hdf5").string()); });
  EXPECT_NE(e.find("missing.hdf5"), std::string::npos) << e;
  EXPECT_NE(e.find("'masked_lm_ids'"), std::string::npos) << e;
  // Inconsistent shapes.
  write_int64_file(dir / "shape.hdf5",
                   {{"input_ids", {N, T}}, {"input_mask", {N, T}}, {"segment_ids", {N + 1, T}},
                    {"masked_lm_positions", {N, P}}, {"masked_lm_ids", {N, P}}, {"next_sentence_labels", {N}}},
                   zero);
  e = error_of([&] { read_pretraining_shard((dir / "shape.hdf5").string()); });
  EXPECT_NE(e.find("shape.hdf5"), std::string::npos) << e;
  EXPECT_NE(e.find("'segment_ids' has shape (5, 8), expected (4, 8)"), std::string::npos) << e;
  // Positions outside the sequence.
  write_int64_file(dir / "pos.hdf5",
                   {{"input_ids", {N, T}}, {"input_mask", {N, T}}, {"segment_ids", {N, T}},
                    {"masked_lm_positions", {N, P}}, {"masked_lm_ids", {N, P}}, {"next_sentence_labels", {N}}},
                   [](const std::string& n, size_t) -> int64_t { return n == "masked_lm_positions" ? 8 : 0; });
  e = error_of([&] { read_pretraining_shard((dir / "pos.hdf5").string()); });
  EXPECT_NE(e.find("masked_lm_positions[0, 0] = 8 is outside [0, 8)"), std::string::npos) << e;
  // Not HDF5 at all, and no file.
  std::ofstream(dir / "text-training.hdf5") << "this is not hdf5\n";
  e = error_of([&] { read_pretraining_shard((dir / "text-training.hdf5").string()); });
  EXPECT_NE(e.find("text-training.hdf5' is not an HDF5 file"), std::string::npos) << e;
  e = error_of([&] { read_pretraining_shard((dir / "nothing.hdf5").string()); });
  EXPECT_NE(e.find("nothing.hdf5' does not exist"), std::string::npos) << e;
  fs::remove_all(dir);
}

TEST(Hdf5Shard, ListsOnlyTrainingFiles) {
  fs::path dir = temp_dir("list");
  PretrainingFeatures f = random_features(3, 8, 2, 2);
  write_pretraining_shard((dir / "part-00001-training.hdf5").string(), f);
  write_pretraining_shard((dir / "part-00000-training.hdf5").string(), f);
  std::ofstream(dir / "dataset_info.json") << "{}";
  auto files = list_training_shards(dir.string());
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(fs::path(files[0]).filename(), "part-00000-training.hdf5");
  EXPECT_THROW(list_training_shards((dir / "none").string()), Error);
  fs::remove_all(dir);
}

TEST(Hdf5Shard, SelectsTrainingAndEvalShardsAsNvidiaLaysThemOut) {
  // NVIDIA's directory holds *_training_* and *_test_* files side by side: training takes the "training" ones,
  // evaluation every HDF5 file; a directory without "training" names trains on all its HDF5 files.
  fs::path dir = temp_dir("select");
  PretrainingFeatures f = random_features(3, 8, 2, 2);
  write_pretraining_shard((dir / "books_wiki_en_corpus_training_1.hdf5").string(), f);
  write_pretraining_shard((dir / "books_wiki_en_corpus_test_0.hdf5").string(), f);
  write_pretraining_shard((dir / "books_wiki_en_corpus_training_0.hdf5").string(), f);
  std::ofstream(dir / "notes-training.txt") << "not a shard";
  std::ofstream(dir / "part-00009-training.hdf5.tmp") << "half-written";
  auto train = list_training_shards(dir.string());
  ASSERT_EQ(train.size(), 2u);
  EXPECT_EQ(fs::path(train[0]).filename(), "books_wiki_en_corpus_training_0.hdf5");
  EXPECT_EQ(fs::path(train[1]).filename(), "books_wiki_en_corpus_training_1.hdf5");
  auto eval = list_eval_shards(dir.string());
  ASSERT_EQ(eval.size(), 3u);
  EXPECT_EQ(fs::path(eval[0]).filename(), "books_wiki_en_corpus_test_0.hdf5");

  fs::path test_only = temp_dir("select_test_only");
  write_pretraining_shard((test_only / "wiki_test_1.h5").string(), f);
  write_pretraining_shard((test_only / "wiki_test_0.hdf5").string(), f);
  auto fallback = list_training_shards(test_only.string());
  ASSERT_EQ(fallback.size(), 2u);
  EXPECT_EQ(fs::path(fallback[0]).filename(), "wiki_test_0.hdf5");
  EXPECT_EQ(fs::path(fallback[1]).filename(), "wiki_test_1.h5");

  fs::path empty = temp_dir("select_empty");
  std::ofstream(empty / "dataset_info.json") << "{}";
  std::string e = error_of([&] { list_eval_shards(empty.string()); });
  EXPECT_NE(e.find("eval_dir '" + empty.string() + "' holds no HDF5 shard"), std::string::npos) << e;
  e = error_of([&] { list_training_shards((empty / "missing").string()); });
  EXPECT_NE(e.find("missing' does not exist"), std::string::npos) << e;
  fs::remove_all(dir);
  fs::remove_all(test_only);
  fs::remove_all(empty);
}

TEST(Hdf5Shard, PipelineShardsByteIdenticalForOneAndTwoThreads) {
  // Whole pipeline on the shared sample corpus with a hashing word tokenizer (the real WordPiece tokenizer
  // is exercised by the CLI test): reading, instances, round-robin shards.
  const std::string corpus = std::string(BERTRAIN_SOURCE_DIR) + "/data/gutenberg/sample_small.txt";
  if (!fs::exists(corpus)) GTEST_SKIP() << corpus << " not present";
  std::vector<std::string> words = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  for (int i = 0; i < 995; ++i) words.push_back((i % 3 == 0 ? "##w" : "w") + std::to_string(i));
  PretrainingVocab vocab(words);
  TokenizeFn tok = [](std::string_view line) {
    std::vector<int32_t> out;
    std::istringstream ss{std::string(line)};
    std::string w;
    while (ss >> w) out.push_back(5 + static_cast<int32_t>(std::hash<std::string>{}(w) % 995));
    return out;
  };
  PretrainingOptions o;
  o.dupe_factor = 2;
  o.num_shards = 3;
  o.do_whole_word_mask = true;
  const int saved = omp_get_max_threads();
  std::vector<fs::path> dirs;
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    fs::path dir = temp_dir("pipe" + std::to_string(threads));
    PretrainingStats st;
    auto docs = read_documents({corpus}, tok, st);
    auto inst = create_training_instances(std::move(docs), o, vocab, st);
    DatasetInfo info;
    info.options = o;
    info.stats = st;
    write_pretraining_shards(inst, o, dir.string(), info);
    write_dataset_info((dir / "dataset_info.json").string(), info);
    ASSERT_EQ(info.shards.size(), 3u);
    EXPECT_GT(st.instances, 1000);
    EXPECT_EQ(info.shard_samples[0] + info.shard_samples[1] + info.shard_samples[2], st.instances);
    EXPECT_LE(info.shard_samples[0] - info.shard_samples[2], 1);
    dirs.push_back(dir);
  }
  omp_set_num_threads(saved);
  for (int s = 0; s < 3; ++s) {
    char name[64];
    std::snprintf(name, sizeof(name), "part-%05d-training.hdf5", s);
    EXPECT_EQ(slurp(dirs[0] / name), slurp(dirs[1] / name)) << name;
  }
  EXPECT_TRUE(fs::exists(dirs[0] / "dataset_info.json"));
  for (auto& d : dirs) fs::remove_all(d);
}

// Dependency findings H3 and H4 (README "Reliability"): corrupt files on which libhdf5 1.10.8 crashes with SIGSEGV. The
// crash cannot be prevented, but it must name the file: one line on stderr, then death by the signal as before.
// Skipped under the sanitizers, whose own report of the crash would count as a finding of the suite.
TEST(Hdf5ShardDeathTest, LibHdf5CrashNamesTheFile) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "the sanitizers report libhdf5's crash themselves";
#else
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const fs::path dir = temp_dir("h3");
  const fs::path shard = dir / "corrupt-h3.hdf5";
  fs::copy_file(fs::path(BERTRAIN_SOURCE_DIR) / "fuzz/dependency/H3-hdf5-accum-read-null-buffer/input", shard);
  EXPECT_EXIT(read_pretraining_shard(shard.string()), testing::KilledBySignal(SIGSEGV),
              "bertrain: fatal: SIGSEGV inside libhdf5 while reading '.*corrupt-h3\\.hdf5': the file is corrupt");
  EXPECT_EXIT(inspect_pretraining_shard(shard.string()), testing::KilledBySignal(SIGSEGV), "corrupt-h3\\.hdf5");
  // H4: the crash is in H5Dread, reading a dataset's values.
  const fs::path h4 = dir / "corrupt-h4.hdf5";
  fs::copy_file(fs::path(BERTRAIN_SOURCE_DIR) / "fuzz/dependency/H4-hdf5-memcpyvv-null-source/input", h4);
  EXPECT_EXIT(read_pretraining_shard(h4.string()), testing::KilledBySignal(SIGSEGV),
              "bertrain: fatal: SIGSEGV inside libhdf5 while reading '.*corrupt-h4\\.hdf5': the file is corrupt");
  fs::remove_all(dir);
#endif
}
