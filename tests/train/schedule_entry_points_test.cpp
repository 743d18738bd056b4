// schedule_entry_points_test.cpp: one learning-rate rule everywhere. The same settings (15 updates,
// peak 1e-3, warmup_proportion 0.1 = 1.5 updates, linear decay) through `bertrain pretrain`, `run-classifier` and
// `run-squad` give, update for update, the learning rates LrSchedule gives, for each convention: 1 warmup update
// under google-research/bert's int(), 2 under Hugging Face's ceil, and NVIDIA's (k + 1) / total indexing.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bertrain/schedule/schedule.h"
#include "test_util.h"

using namespace bertrain;
namespace fs = std::filesystem;

namespace {

const std::string kBin = std::string(BERTRAIN_BINARY_DIR) + "/bertrain";
const std::string kVocab = std::string(BERTRAIN_SOURCE_DIR) + "/data/vocab/bert-base-uncased-vocab.txt";

int sh(const std::string& cmd) {
  const int rc = std::system((cmd + " > /dev/null 2>&1").c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/// The "lr" of every training record of a metrics.jsonl, in order.
std::vector<double> lrs(const fs::path& metrics) {
  std::vector<double> out;
  for (const std::string& line : test::split_lines(test::read_file(metrics.string()))) {
    auto j = nlohmann::json::parse(line);
    if (!j.value("eval", false)) out.push_back(j.at("lr").get<double>());
  }
  return out;
}

class ScheduleEntryPoints : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = test::temp_dir("schedule_entry_points");
    test::write_file(dir_ / "tiny.json",
                     R"({"vocab_size": 30522, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
                         "intermediate_size": 16, "max_position_embeddings": 128, "type_vocab_size": 2})");
    // 40 short sentences: pretraining text (blank lines between documents) and a two-class TSV task.
    const std::vector<std::string> lines = test::split_lines(
        test::read_file(std::string(BERTRAIN_SOURCE_DIR) + "/data/gutenberg/sample_small.txt"));
    std::string text, tsv = "sentence\tlabel\n";
    int n = 0;
    for (const std::string& l : lines) {
      if (l.empty() || l.size() > 200 || l.find('\t') != std::string::npos) continue;
      text += l + "\n" + (n % 5 == 4 ? "\n" : "");
      tsv += l + "\t" + std::to_string(n % 2) + "\n";
      if (++n == 40) break;
    }
    test::write_file(dir_ / "corpus.txt", text);
    fs::create_directories(dir_ / "glue");
    test::write_file(dir_ / "glue" / "train.tsv", tsv);
    test::write_file(dir_ / "glue" / "dev.tsv", tsv);
    // SQuAD training wants one answer per question: the sample dev file with each question's first answer.
    auto squad = nlohmann::json::parse(test::read_file(std::string(BERTRAIN_TEST_DATA_DIR) + "/squad/sample-v1.1.json"));
    for (auto& article : squad.at("data"))
      for (auto& para : article.at("paragraphs"))
        for (auto& qa : para.at("qas")) qa["answers"] = nlohmann::json::array({qa.at("answers").at(0)});
    test::write_file(dir_ / "squad_train.json", squad.dump());
    ASSERT_EQ(sh(kBin + " create-pretraining-data --input_file " + (dir_ / "corpus.txt").string() + " --output_dir " +
                 (dir_ / "shards").string() + " --vocab_file " + kVocab +
                 " --do_lower_case=true --max_seq_length 32 --max_predictions_per_seq 5 --dupe_factor 4"),
              0);
  }

  static LrSchedule reference(LrConvention c) {
    LrScheduleOptions o;
    o.learning_rate = 1e-3;
    o.num_train_steps = 15;
    o.warmup_proportion = 0.1;
    o.decay = LrDecay::linear;
    o.convention = c;
    return LrSchedule(o);
  }

  static void expect_same(const std::vector<double>& got, const LrSchedule& s, const std::string& what) {
    ASSERT_EQ(got.size(), 15u) << what;
    for (int64_t k = 0; k < 15; ++k) EXPECT_EQ(got[static_cast<size_t>(k)], s.lr(k)) << what << " update " << k;
  }

  static fs::path dir_;
};
fs::path ScheduleEntryPoints::dir_;

const std::pair<LrConvention, const char*> kConventions[] = {
    {LrConvention::google_bert, "google_bert"}, {LrConvention::nvidia, "nvidia"}, {LrConvention::hugging_face, "hugging_face"}};

TEST_F(ScheduleEntryPoints, WarmupCountsPerConvention) {
  EXPECT_EQ(reference(LrConvention::google_bert).warmup_steps(), 1);   // int(1.5)
  EXPECT_EQ(reference(LrConvention::hugging_face).warmup_steps(), 2);  // ceil(1.5)
  EXPECT_EQ(reference(LrConvention::nvidia).warmup_steps(), 1);        // (k + 1) / 15 < 0.1 only for k = 0
}

TEST_F(ScheduleEntryPoints, PretrainRecipe) {
  for (auto [c, name] : kConventions) {
    const fs::path out = dir_ / (std::string("pretrain_") + name);
    ASSERT_EQ(sh(kBin + " --num_threads 1 pretrain --no_progress --bert_config_file=" + (dir_ / "tiny.json").string() +
                 " --vocab_file=" + kVocab + " --input_file=" + (dir_ / "shards").string() +
                 " --max_seq_length=32 --max_predictions_per_seq=5 --train_batch_size=4 --num_train_steps=15"
                 " --learning_rate=1e-3 --warmup_proportion=0.1 --decay=linear --lr_convention=" + name +
                 " --output_dir=" + out.string()),
              0)
        << name;
    expect_same(lrs(out / "metrics.jsonl"), reference(c), std::string("pretrain ") + name);
  }
}

TEST_F(ScheduleEntryPoints, RunClassifier) {
  for (auto [c, name] : kConventions) {
    const fs::path out = dir_ / (std::string("classifier_") + name);
    ASSERT_EQ(sh(kBin + " --num_threads 1 run-classifier --task_name generic --format tsv --labels 0,1 --data_dir " +
                 (dir_ / "glue").string() + " --bert_config_file " + (dir_ / "tiny.json").string() + " --vocab_file " +
                 kVocab + " --max_seq_length 32 --train_batch_size 4 --num_train_epochs 100 --max_steps 15"
                 " --learning_rate 1e-3 --warmup_proportion 0.1 --lr_convention " + name + " --do_train --output_dir " +
                 out.string()),
              0)
        << name;
    expect_same(lrs(out / "metrics.jsonl"), reference(c), std::string("run-classifier ") + name);
  }
}

TEST_F(ScheduleEntryPoints, RunSquad) {
  const std::string squad = (dir_ / "squad_train.json").string();
  for (auto [c, name] : kConventions) {
    const fs::path out = dir_ / (std::string("squad_") + name);
    ASSERT_EQ(sh(kBin + " --num_threads 1 run-squad --train_file " + squad + " --bert_config_file " +
                 (dir_ / "tiny.json").string() + " --vocab_file " + kVocab +
                 " --max_seq_length 64 --doc_stride 32 --max_query_length 16 --train_batch_size 2"
                 " --num_train_epochs 100 --max_steps 15 --learning_rate 1e-3 --warmup_proportion 0.1 --lr_convention " +
                 name + " --do_train --output_dir " + out.string()),
              0)
        << name;
    expect_same(lrs(out / "metrics.jsonl"), reference(c), std::string("run-squad ") + name);
  }
}

}  // namespace
