// data_create_shards_test.cpp: create-pretraining-data in windows of documents (data/create_shards.h): windows
// hold whole documents and read back exactly the documents of the whole-file reader (side lines travel with their
// lines), one window gives the whole-corpus algorithm's shards byte for byte, the output does not depend on the
// thread count, shards are bounded, and a rerun after a killed run skips complete windows and gives the same shards.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "bertrain/core/threads.h"
#include "bertrain/data/create_shards.h"
#include "bertrain/data/hdf5_shard.h"
#include "test_util.h"

using namespace bertrain;
using namespace bertrain::data;
namespace fs = std::filesystem;

namespace {

struct Corpus {
  fs::path dir = test::temp_dir("create_shards");
  std::vector<std::string> files;
  PretrainingVocab vocab = [] {
    std::vector<std::string> w = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    for (int i = 0; i < 400; ++i) w.push_back((i % 5 == 4 ? "##w" : "w") + std::to_string(i));
    return PretrainingVocab(w);
  }();
  // Two files of documents of 1-12 sentences of 3-20 words, blank lines (some with spaces) between documents;
  // the second file does not end with "\n" and has one document of 400 lines with no blank line in it.
  Corpus() {
    Rng rng(9);
    for (int f = 0; f < 2; ++f) {
      std::string text;
      for (int d = 0; d < (f == 0 ? 120 : 60); ++d) {
        const int sentences = f == 1 && d == 30 ? 400 : 1 + static_cast<int>(rng.randint(12));
        for (int s = 0; s < sentences; ++s) {
          const int words = 3 + static_cast<int>(rng.randint(18));
          for (int k = 0; k < words; ++k) {
            if (k) text += ' ';
            text += 'w';
            text += std::to_string(rng.randint(400));
          }
          text += "\n";
        }
        text += d % 7 == 3 ? " \t\n" : "\n";
      }
      if (f == 1) text += "w1 w2 w3";  // no final "\n"
      files.push_back((dir / ("corpus" + std::to_string(f) + ".txt")).string());
      test::write_file(files.back(), text);
    }
  }
  ~Corpus() { fs::remove_all(dir); }
  TokenizeFn tokenizer() const {
    return [this](std::string_view line) {
      std::vector<int32_t> out;
      std::istringstream ss{std::string(line)};
      std::string w;
      while (ss >> w) out.push_back(vocab.contains(w) ? vocab.id(w) : 1);
      return out;
    };
  }
  PretrainingOptions options() const {
    PretrainingOptions o;
    o.max_seq_length = 32;
    o.max_predictions_per_seq = 5;
    o.dupe_factor = 2;
    o.random_seed = 4;
    return o;
  }
  DatasetInfo create(const std::string& out, int64_t window_bytes, int64_t cap, int workers = 0) const {
    CreateShardsOptions c;
    c.output_dir = (dir / out).string();
    c.window_bytes = window_bytes;
    c.max_instances_per_shard = cap;
    c.workers = workers;
    return create_pretraining_shards(files, options(), c, vocab, tokenizer(), DatasetInfo{});
  }
};

Corpus& corpus() {
  static Corpus c;
  return c;
}

std::vector<std::string> hdf5_files(const fs::path& dir) {
  std::vector<std::string> v;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".hdf5" || e.path().extension() == ".tmp") v.push_back(e.path().filename().string());
  std::sort(v.begin(), v.end());
  return v;
}

void expect_same_shards(const fs::path& a, const fs::path& b) {
  const auto names = hdf5_files(a);
  ASSERT_EQ(names, hdf5_files(b));
  ASSERT_FALSE(names.empty());
  for (const auto& n : names) EXPECT_TRUE(test::read_file((a / n).string()) == test::read_file((b / n).string())) << n;
}

}  // namespace

TEST(CreateShards, WindowsHoldWholeDocumentsAndReadBackTheWholeFileDocuments) {
  const Corpus& c = corpus();
  PretrainingStats whole_stats;
  const std::vector<Document> whole = read_documents(c.files, c.tokenizer(), whole_stats);
  const InputPlan plan = plan_input_windows(c.files, 4000);
  ASSERT_GT(plan.windows.size(), 6u);
  std::vector<Document> windowed;
  PretrainingStats st;
  int cuts = 0;
  for (const InputWindow& w : plan.windows) {
    EXPECT_EQ(w.index, &w - plan.windows.data());
    cuts += w.cut_document;
    if (!w.cut_document) {
      EXPECT_LE(w.end - w.begin, 2 * 4000 + 400);  // a window ends at the first blank line
    }
    for (Document& d : read_window_documents(plan, w, c.tokenizer(), st)) windowed.push_back(std::move(d));
  }
  // The 400-line document is cut (once per 8000 bytes): the pieces are documents of their own, the rest is equal.
  EXPECT_GE(cuts, 1);
  EXPECT_EQ(plan.warnings.size(), static_cast<size_t>(cuts));
  EXPECT_EQ(windowed.size(), whole.size() + static_cast<size_t>(cuts));
  std::vector<Sentence> a, b;
  for (const auto& d : whole) a.insert(a.end(), d.begin(), d.end());
  for (const auto& d : windowed) b.insert(b.end(), d.begin(), d.end());
  EXPECT_EQ(a, b);
  EXPECT_EQ(st.lines, whole_stats.lines);
  EXPECT_EQ(st.bytes, whole_stats.bytes);
  EXPECT_EQ(plan.files[0].lines + plan.files[1].lines, whole_stats.lines);
  // Without the long document's cuts, windows of any size give the whole-file documents exactly.
  const InputPlan big = plan_input_windows(c.files, 1 << 20);
  ASSERT_EQ(big.windows.size(), 2u);  // one per file
  std::vector<Document> two;
  PretrainingStats st2;
  for (const InputWindow& w : big.windows)
    for (Document& d : read_window_documents(big, w, c.tokenizer(), st2)) two.push_back(std::move(d));
  EXPECT_EQ(two, whole);
}

TEST(CreateShards, SideLinesTravelWithTheirLines) {
  const Corpus& c = corpus();
  std::vector<std::string> side;
  for (const auto& f : c.files) {  // side line i = "i" (the line number), so each token can be checked
    std::ifstream in(f);
    std::string line, text;
    int64_t n = 0;
    while (std::getline(in, line)) text += std::to_string(n++) + "\n";
    side.push_back(f + ".ref");
    test::write_file(side.back(), text);
  }
  const InputPlan plan = plan_input_windows(c.files, 3000, side);
  std::mutex mu;
  int64_t checked = 0;
  SideTokenizeFn with_side = [&](std::string_view line, std::string_view ref, const std::string&, int64_t) {
    std::vector<int32_t> ids = c.tokenizer()(line);
    std::lock_guard<std::mutex> g(mu);
    ++checked;
    return std::vector<int32_t>{static_cast<int32_t>(std::stol(std::string(ref)) % 300 + 5)};
  };
  int64_t lines_seen = 0;
  for (const InputWindow& w : plan.windows) {
    PretrainingStats st;
    for (const Document& d : read_window_documents(plan, w, c.tokenizer(), st, with_side))
      for (const Sentence& s : d) EXPECT_EQ(s.size(), 1u);
    lines_seen += st.lines;
  }
  EXPECT_EQ(lines_seen, plan.files[0].lines + plan.files[1].lines);
  EXPECT_GT(checked, 1000);
  // The side line of line i is i: verify through one window in the middle.
  const InputWindow& mid = plan.windows[plan.windows.size() / 2];
  PretrainingStats st;
  std::vector<int64_t> firsts;
  SideTokenizeFn record = [&](std::string_view, std::string_view ref, const std::string&, int64_t) {
    std::lock_guard<std::mutex> g(mu);
    firsts.push_back(std::stol(std::string(ref)));
    return std::vector<int32_t>{5};
  };
  read_window_documents(plan, mid, c.tokenizer(), st, record);
  std::sort(firsts.begin(), firsts.end());
  ASSERT_FALSE(firsts.empty());
  EXPECT_GE(firsts.front(), mid.first_line);
  EXPECT_LT(firsts.back(), mid.first_line + st.lines);
  // A side file with a line too few is an error naming it.
  std::string shorter = test::read_file(side[0]);
  shorter.erase(shorter.rfind('\n', shorter.size() - 2) + 1);
  test::write_file(side[0], shorter);
  try {
    plan_input_windows(c.files, 3000, side);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(side[0]), std::string::npos) << e.what();
  }
}

TEST(CreateShards, OneWindowGivesTheWholeCorpusShards) {
  const Corpus& c = corpus();
  PretrainingOptions o = c.options();
  o.num_shards = 3;
  PretrainingStats st;
  std::vector<TrainingInstance> inst = create_training_instances(read_documents(c.files, c.tokenizer(), st), o, c.vocab, st);
  DatasetInfo ref;
  write_pretraining_shards(inst, o, (c.dir / "whole").string(), ref);
  // The same corpus as one file (each file starts a new document, so the two files are joined by a blank line).
  const fs::path joined = c.dir / "joined.txt";
  test::write_file(joined, test::read_file(c.files[0]) + test::read_file(c.files[1]));
  CreateShardsOptions co;
  co.output_dir = (c.dir / "one_window").string();
  co.window_bytes = 1 << 30;
  co.max_instances_per_shard = 1 << 30;
  DatasetInfo info = create_pretraining_shards({joined.string()}, o, co, c.vocab, c.tokenizer(), DatasetInfo{});
  EXPECT_EQ(info.windows, 1);
  EXPECT_EQ(info.shards, (std::vector<std::string>{"part-00000-training.hdf5", "part-00001-training.hdf5",
                                                   "part-00002-training.hdf5"}));
  expect_same_shards(c.dir / "whole", c.dir / "one_window");
  EXPECT_EQ(info.stats.instances, st.instances);
  EXPECT_EQ(info.stats.random_next, st.random_next);
}

TEST(CreateShards, BoundedShardsIndependentOfTheThreadCount) {
  const Corpus& c = corpus();
  const int saved = num_threads();
  set_num_threads(1);
  const DatasetInfo a = c.create("t1", 6000, 200, 1);
  set_num_threads(2);
  const DatasetInfo b = c.create("t2", 6000, 200, 2);
  set_num_threads(saved);
  EXPECT_GT(a.windows, 4);
  EXPECT_EQ(a.shards, b.shards);
  expect_same_shards(c.dir / "t1", c.dir / "t2");
  int64_t total = 0;
  for (size_t i = 0; i < a.shards.size(); ++i) {
    EXPECT_LE(a.shard_samples[i], 200) << a.shards[i];
    EXPECT_EQ(inspect_pretraining_shard((c.dir / "t1" / a.shards[i]).string()).num_samples, a.shard_samples[i]);
    total += a.shard_samples[i];
  }
  EXPECT_EQ(total, a.stats.instances);
  EXPECT_GT(a.shards.size(), static_cast<size_t>(a.windows));  // some windows needed more than one shard
  EXPECT_TRUE(fs::exists(c.dir / "t1" / "dataset_info.json"));
}

TEST(CreateShards, RerunAfterAKilledRunSkipsCompleteWindowsAndGivesTheSameShards) {
  const Corpus& c = corpus();
  const DatasetInfo full = c.create("straight", 6000, 200);
  // What a run killed in the middle leaves: some windows recorded, one window's shards without its record, a
  // half-written temporary file; window 3 recorded but one of its shards lost.
  const fs::path dir = c.dir / "killed";
  fs::copy(c.dir / "straight", dir, fs::copy_options::recursive);
  fs::remove(dir / "dataset_info.json");
  for (int w = 4; w < full.windows; ++w) {
    char rec[64];
    std::snprintf(rec, sizeof rec, "window-%05d.json", w);
    fs::remove(dir / ".progress" / rec);
    if (w > 5)
      for (const auto& n : hdf5_files(dir))
        if (n.rfind("part-" + std::string(rec).substr(7, 5), 0) == 0) fs::remove(dir / n);
  }
  fs::remove(dir / "part-00003-000-training.hdf5");
  test::write_file(dir / "part-00006-000-training.hdf5.tmp", "half a shard");
  const DatasetInfo again = c.create("killed", 6000, 200);
  EXPECT_EQ(again.resumed_windows, 3);  // windows 0-2; 3 lost a shard, 4 and 5 had no record
  EXPECT_EQ(again.shards, full.shards);
  EXPECT_EQ(again.stats.instances, full.stats.instances);
  expect_same_shards(c.dir / "straight", dir);  // and no .tmp left
  // Other settings in the same output_dir are refused, naming the setting.
  try {
    c.create("killed", 6000, 100);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_instances_per_shard"), std::string::npos) << e.what();
  }
}
