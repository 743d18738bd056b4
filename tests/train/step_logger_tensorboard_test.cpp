// step_logger_tensorboard_test.cpp: StepLogger's TensorBoard side: the tag table of metrics.jsonl keys, one event
// record per metrics.jsonl record with the same numbers, resume truncation of both, a new run, and no file when off.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "bertrain/io/tensorboard.h"
#include "bertrain/train/step_logger.h"
#include "test_util.h"

namespace tb = bertrain::tensorboard;
namespace fs = std::filesystem;
using bertrain::MetricsRecord;
using bertrain::StepLogger;

namespace {

std::string temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("bertrain_steplog_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

// (step, tag, value) of every scalar over the event files of `dir`, in file order.
std::vector<std::tuple<int64_t, std::string, float>> scalars_in(const std::string& dir) {
  std::vector<std::tuple<int64_t, std::string, float>> out;
  for (const std::string& f : tb::list_event_files(dir)) {
    std::ifstream in(f, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    const tb::RecordScan scan = tb::scan_records(bytes);
    EXPECT_EQ(scan.error, "") << f;
    for (std::string_view r : scan.records) {
      tb::Event e;
      EXPECT_TRUE(tb::parse_event(r, e));
      for (const tb::Scalar& s : e.scalars) out.emplace_back(e.step, s.tag, s.value);
    }
  }
  return out;
}

MetricsRecord train_record(int64_t step) {
  return {{"step", step},          {"phase", int64_t{1}},       {"phase_step", step},
          {"loss", 7.25 - 0.1 * step}, {"mlm_loss", 6.5},        {"nsp_loss", 0.75},
          {"lr", 1e-4 * step},     {"grad_norm", 1.0 / 3},      {"sequences_per_second", 123.456},
          {"tokens_per_second", 1e4}, {"real_tokens_per_second", 8765.4321}, {"skipped", false},
          {"skipped_steps", int64_t{2}}, {"data_wait_seconds", 0.01}, {"data_wait_fraction", 0.125},
          {"epoch", 0.5}};
}

}  // namespace

TEST(StepLoggerTensorBoard, TagTable) {
  const std::vector<tb::Scalar> s = bertrain::tensorboard_scalars(train_record(3));
  std::map<std::string, float> m;
  for (const tb::Scalar& x : s) m[x.tag] = x.value;
  const std::map<std::string, float> want = {
      {"train/phase", 1.0f},           {"train/loss", static_cast<float>(7.25 - 0.3)},
      {"train/mlm_loss", 6.5f},        {"train/nsp_loss", 0.75f},
      {"train/learning_rate", static_cast<float>(3e-4)}, {"train/grad_norm", static_cast<float>(1.0 / 3)},
      {"train/sequences_per_second", static_cast<float>(123.456)},
      {"train/tokens_per_second", static_cast<float>(8765.4321)}, {"train/skipped_steps", 2.0f},
      {"train/data_wait", 0.125f},     {"train/epoch", 0.5f}};
  EXPECT_EQ(m, want);
  EXPECT_EQ(s.size(), want.size());
  // Evaluation records: eval/<key> for numbers, not step / global_step / flags / null / non-finite.
  const MetricsRecord ev = {{"step", int64_t{10}},       {"eval", true},   {"global_step", int64_t{10}},
                            {"accuracy", 0.75},          {"eval_examples", int64_t{40}}, {"f1", std::monostate{}},
                            {"loss", std::nan("")},      {"name", std::string("x")}};
  std::vector<std::pair<std::string, float>> got;
  for (const tb::Scalar& x : bertrain::tensorboard_scalars(ev)) got.emplace_back(x.tag, x.value);
  EXPECT_EQ(got, (std::vector<std::pair<std::string, float>>{{"eval/accuracy", 0.75f}, {"eval/eval_examples", 40.0f}}));
  EXPECT_TRUE(bertrain::tensorboard_scalars({{"loss", 1.0}}).empty());  // no step
}

TEST(StepLoggerTensorBoard, RecordsResumeAndNewRun) {
  const std::string dir = temp_dir("run");
  const std::string metrics = dir + "/metrics.jsonl";
  {
    StepLogger log(metrics, true, false, 1, dir);
    log.start_new();
    EXPECT_EQ(log.tensorboard_file(), "");  // opened at the first record
    for (int64_t s = 1; s <= 5; ++s) log.record(train_record(s));
    log.record({{"step", int64_t{5}}, {"eval", true}, {"accuracy", 0.5}});
    log.sync();
    EXPECT_TRUE(tb::is_event_file_name(fs::path(log.tensorboard_file()).filename().string()));
  }
  auto sc = scalars_in(dir);
  ASSERT_EQ(sc.size(), 5 * 11 + 1u);
  EXPECT_EQ(sc.back(), std::make_tuple(int64_t{5}, std::string("eval/accuracy"), 0.5f));
  {
    StepLogger log(metrics, true, false, 1, dir);  // resumed from the checkpoint of step 3
    log.truncate_after(3);
    for (int64_t s = 4; s <= 6; ++s) log.record(train_record(s));
  }
  EXPECT_EQ(tb::list_event_files(dir).size(), 2u);
  sc = scalars_in(dir);
  std::vector<int64_t> steps;
  for (const auto& [step, tag, v] : sc)
    if (tag == "train/loss") steps.push_back(step);
  EXPECT_EQ(steps, (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(sc.size(), 6 * 11u);  // the eval at step 5 went with the steps after the checkpoint
  EXPECT_EQ(bertrain::test::split_lines(bertrain::test::read_file(metrics)).size(), 6u);
  {
    StepLogger log(metrics, true, false, 1, dir);  // a new run in the same directory
    log.start_new();
  }
  EXPECT_TRUE(tb::list_event_files(dir).empty());
  {
    StepLogger off(metrics, true, false, 1);  // switched off; rank != 0 writes nothing either
    off.record(train_record(1));
    StepLogger other_rank(metrics, false, false, 1, dir);
    other_rank.record(train_record(1));
  }
  EXPECT_TRUE(tb::list_event_files(dir).empty());
  fs::remove_all(dir);
}
