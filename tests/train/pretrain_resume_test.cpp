// pretrain_resume_test.cpp: exact resume of the pretraining loop (PretrainTrainer in-process) from a checkpoint
// taken inside an accumulation window (CASES.md C38, its numbers) and from a step boundary, both followed by shard,
// window and epoch boundaries: bit-identical losses and weights, and only the step's remaining micro-batches read.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "bertrain/data/hdf5_shard.h"
#include "bertrain/io/config.h"
#include "bertrain/schedule/schedule.h"
#include "bertrain/train/pretrainer.h"
#include "bertrain/train/train_state.h"
#include "test_util.h"

using namespace bertrain;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kT = 16, kP = 4;

// C38's data: 90 samples (shards of 31, 29 and 30, so micro-batches straddle shards), each with 2 masked positions.
struct Fixture {
  fs::path dir = test::temp_dir("pretrain_resume");
  fs::path shards = dir / "shards", config = dir / "config.json";
  Fixture() {
    fs::create_directories(shards);
    Rng rng(5);
    int64_t s = 0;
    for (int shard = 0; shard < 3; ++shard) {
      data::PretrainingFeatures f(kT, kP);
      for (int i = 0; i < (shard == 0 ? 31 : shard == 1 ? 29 : 30); ++i, ++s) {
        data::TrainingInstance inst;
        const int len = 8 + static_cast<int>(rng.randint(kT - 7));
        inst.tokens.push_back(2);
        while (static_cast<int>(inst.tokens.size()) < len - 1) inst.tokens.push_back(5 + static_cast<int32_t>(rng.randint(200)));
        inst.tokens.push_back(3);
        inst.segment_ids.assign(inst.tokens.size(), 0);
        for (size_t k = inst.tokens.size() / 2; k < inst.tokens.size(); ++k) inst.segment_ids[k] = 1;
        for (int32_t p : {2, 4}) {
          inst.masked_lm_positions.push_back(p);
          inst.masked_lm_labels.push_back(inst.tokens[static_cast<size_t>(p)]);
          inst.tokens[static_cast<size_t>(p)] = 4;
        }
        inst.is_random_next = s % 2 == 0;
        f.append(inst);
      }
      data::write_pretraining_shard((shards / ("part-0000" + std::to_string(shard) + "-training.hdf5")).string(), f);
    }
    save_bert_config(config.string(), test::tiny_bert_config(256, 8, 1, 2, 16, kT));
  }
  ~Fixture() { fs::remove_all(dir); }

  // Micro-batch 3, accumulation 5 (global batch 15): 6 updates per epoch, 2 epochs; a checkpoint every step.
  PretrainRecipe recipe(const std::string& out) const {
    PretrainRecipe r;
    r.bert_config_file = config.string();
    r.output_dir = (dir / out).string();
    r.seed = 11;
    r.save_checkpoints_steps = 1;
    r.save_total_limit = 0;
    r.shuffle_window_shards = 1;
    PhaseRecipe p;
    p.max_seq_length = kT;
    p.max_predictions_per_seq = kP;
    p.input_dir = shards.string();
    p.train_batch_size = 15;
    p.micro_batch_size = 3;
    p.schedule.learning_rate = 1e-2;
    p.schedule.num_train_steps = 12;
    p.schedule.num_warmup_steps = 4;
    r.phases.push_back(p);
    r.optimizer.name = OptimizerName::lamb;
    return r;
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

struct RunResult {
  std::vector<MicroBatchEvent> events;
  int rc = 0;
};

RunResult train(const PretrainRecipe& r, bool resume, std::function<void(const MicroBatchEvent&)> extra = {}) {
  RunResult run;
  PretrainOptions o;
  o.resume = resume;
  o.progress = false;
  o.on_micro_batch = [&](const MicroBatchEvent& e) {
    run.events.push_back(e);
    if (extra) extra(e);
  };
  PretrainTrainer t(r, o);
  run.rc = t.train();
  return run;
}

std::vector<nlohmann::json> step_records(const std::string& out) {
  std::vector<nlohmann::json> v;
  for (const std::string& line : test::split_lines(test::read_file(out + "/metrics.jsonl"))) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (!j.value("eval", false)) v.push_back(j);
  }
  return v;
}

// Every value but the timings, exactly.
void expect_same_records(const std::vector<nlohmann::json>& a, const std::vector<nlohmann::json>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    for (const char* k : {"step", "phase_step", "loss", "mlm_loss", "nsp_loss", "lr", "grad_norm", "skipped"})
      EXPECT_EQ(a[i].at(k), b[i].at(k)) << "step " << a[i].at("step") << " key " << k;
}

void expect_same_files(const std::string& a, const std::string& b) {
  EXPECT_TRUE(test::read_file(a) == test::read_file(b)) << a << " and " << b << " differ";
}

}  // namespace

TEST(PretrainResume, C38CheckpointInsideTheAccumulationWindow) {
  const Fixture& f = fixture();
  const PretrainRecipe ra = f.recipe("straight"), rb = f.recipe("interrupted");
  const RunResult a = train(ra, false);
  ASSERT_EQ(a.rc, 0);
  ASSERT_EQ(a.events.size(), 60u);  // 12 updates x 5 micro-batches
  // Update 9 (global_step 8 before it) is epoch 1's third step: epoch-1 micro-batches 10-14.
  for (int m = 0; m < 5; ++m) {
    const MicroBatchEvent& e = a.events[static_cast<size_t>(8 * 5 + m)];
    EXPECT_EQ(e.global_step, 8);
    EXPECT_EQ(e.micro, m);
    EXPECT_EQ(e.epoch, 1);
    EXPECT_EQ(e.epoch_step, 2);
  }

  // SIGTERM after epoch-1 micro-batch 12, the third of update 9.
  const RunResult b1 = train(rb, false, [](const MicroBatchEvent& e) {
    if (e.global_step == 8 && e.micro == 2) std::raise(SIGTERM);
  });
  EXPECT_EQ(b1.rc, 128 + SIGTERM);
  EXPECT_EQ(b1.events.size(), 43u);
  const std::string ck = rb.output_dir + "/checkpoint-8";
  const TrainState s = TrainState::read(ck);
  EXPECT_EQ(s.global_step, 8);
  EXPECT_EQ(s.micro_batch_index, 3);
  EXPECT_EQ(s.partial_losses.size(), 3u);
  EXPECT_EQ(s.data_cursor.epoch, 1);
  EXPECT_EQ(s.data_cursor.sample, 30);  // epoch 1's third global batch starts at position 2 x 15
  EXPECT_EQ(s.data_cursor.micro, 3);
  EXPECT_EQ(s.step_masked_tokens, 30);  // 15 samples x 2 masked positions
  EXPECT_TRUE(fs::exists(ck + "/partial_gradients.safetensors"));
  EXPECT_FALSE(fs::exists(rb.output_dir + "/checkpoint-9"));

  // Resume: only micro-batches 13 and 14 of epoch 1 are read for update 9, then the rest as the straight run.
  const RunResult b2 = train(rb, true);
  ASSERT_EQ(b2.rc, 0);
  ASSERT_EQ(b2.events.size(), 17u);
  for (size_t i = 0; i < b2.events.size(); ++i) {
    const MicroBatchEvent &got = b2.events[i], &want = a.events[43 + i];
    EXPECT_EQ(got.global_step, want.global_step);
    EXPECT_EQ(got.micro, want.micro);
    EXPECT_EQ(got.sample_index, want.sample_index);
  }
  EXPECT_EQ(b2.events[0].micro, 3);

  const auto ma = step_records(ra.output_dir), mb = step_records(rb.output_dir);
  expect_same_records(ma, mb);
  int lines9 = 0;
  for (const auto& j : mb) lines9 += j.at("step") == 9;
  EXPECT_EQ(lines9, 1);
  EXPECT_EQ(mb[8].at("lr").get<double>(), LrSchedule(ra.phases[0].schedule).lr(8));  // global_step 8's lr, once
  for (int step : {9, 10, 12}) {
    const std::string c = "/checkpoint-" + std::to_string(step);
    expect_same_files(ra.output_dir + c + "/model.safetensors", rb.output_dir + c + "/model.safetensors");
    expect_same_files(ra.output_dir + c + "/optimizer.safetensors", rb.output_dir + c + "/optimizer.safetensors");
  }
}

TEST(PretrainResume, FromAStepBoundaryAcrossShardWindowAndEpochBoundaries) {
  const Fixture& f = fixture();
  const PretrainRecipe ra = f.recipe("straight2"), rc = f.recipe("resumed2");
  ASSERT_EQ(train(ra, false).rc, 0);
  // Keep the straight run's files up to checkpoint-5 only, then resume: steps 6-12 cross two windows (shards of
  // 31, 29, 30 samples, one per window) and the epoch end.
  fs::create_directories(rc.output_dir);
  fs::copy(ra.output_dir + "/checkpoint-5", rc.output_dir + "/checkpoint-5", fs::copy_options::recursive);
  fs::copy_file(ra.output_dir + "/metrics.jsonl", rc.output_dir + "/metrics.jsonl");
  const RunResult c = train(rc, true);
  ASSERT_EQ(c.rc, 0);
  EXPECT_EQ(c.events.size(), 35u);
  expect_same_records(step_records(ra.output_dir), step_records(rc.output_dir));
  expect_same_files(ra.output_dir + "/checkpoint-12/model.safetensors", rc.output_dir + "/checkpoint-12/model.safetensors");
  expect_same_files(ra.output_dir + "/checkpoint-12/optimizer.safetensors",
                    rc.output_dir + "/checkpoint-12/optimizer.safetensors");
}

TEST(PretrainResume, CursorOfABertrainBeforeTheStreamingLoaderIsConverted) {
  // Checkpoints written before the streaming loader saved {"epoch", "position" (one rank's micro-batches), "rng"}:
  // step 5 of 6 in epoch 0 with 5 micro-batches per step was position 25. The resumed run continues after 5 global
  // batches, so here (the same loader on both sides of the checkpoint) exactly as the straight run.
  const Fixture& f = fixture();
  const PretrainRecipe ra = f.recipe("straight3"), rl = f.recipe("legacy3");
  ASSERT_EQ(train(ra, false).rc, 0);
  fs::create_directories(rl.output_dir);
  fs::copy(ra.output_dir + "/checkpoint-5", rl.output_dir + "/checkpoint-5", fs::copy_options::recursive);
  fs::copy_file(ra.output_dir + "/metrics.jsonl", rl.output_dir + "/metrics.jsonl");
  const std::string state_path = rl.output_dir + "/checkpoint-5/trainer_state.json";
  nlohmann::json st = nlohmann::json::parse(test::read_file(state_path));
  ASSERT_EQ(st["data_cursor"]["sample"], 75);
  st["data_cursor"] = {{"epoch", 0}, {"position", 25}, {"rng", st["data_cursor"]["rng"]}};
  test::write_file(state_path, st.dump(2));
  ASSERT_EQ(train(rl, true).rc, 0);
  expect_same_records(step_records(ra.output_dir), step_records(rl.output_dir));
  expect_same_files(ra.output_dir + "/checkpoint-12/model.safetensors", rl.output_dir + "/checkpoint-12/model.safetensors");
}

TEST(PretrainResume, PhaseCutOnResumeAtAMidStepCheckpointDropsThePartialStep) {
  // experiments/long-run/pretrain_long_run.sh ends phase 1 where the stop rule fired: SIGTERM (here mid-step, inside update 9),
  // then --resume with phase 1's num_train_steps cut to the steps done (8). The unfinished step is dropped, phase 1
  // ends (weights and moments as after update 8) and phase 2 follows: bit-identical to a run planned with 8 steps.
  // The learning rate is constant after warmup, so phase 1's first 8 updates do not depend on its length.
  const Fixture& f = fixture();
  auto two_phases = [&](const std::string& out, int64_t n1) {
    PretrainRecipe r = f.recipe(out);
    r.phases[0].schedule.decay = LrDecay::constant;
    r.phases[0].schedule.num_train_steps = n1;
    PhaseRecipe p2 = r.phases[0];
    p2.schedule.learning_rate = 5e-3;
    p2.schedule.num_train_steps = 3;
    p2.schedule.num_warmup_steps = 1;
    r.phases.push_back(p2);
    return r;
  };
  const PretrainRecipe ra = two_phases("planned8", 8), rb = two_phases("cut", 12), rb_cut = two_phases("cut", 8);
  ASSERT_EQ(train(ra, false).rc, 0);
  const RunResult b1 = train(rb, false, [](const MicroBatchEvent& e) {
    if (e.global_step == 8 && e.micro == 2) std::raise(SIGTERM);
  });
  ASSERT_EQ(b1.rc, 128 + SIGTERM);
  ASSERT_EQ(TrainState::read(rb.output_dir + "/checkpoint-8").micro_batch_index, 3);

  const RunResult b2 = train(rb_cut, true);
  ASSERT_EQ(b2.rc, 0);
  ASSERT_EQ(b2.events.size(), 15u);  // phase 2 alone: 3 updates x 5 micro-batches, from micro-batch 0
  EXPECT_EQ(b2.events[0].global_step, 8);
  EXPECT_EQ(b2.events[0].micro, 0);
  const TrainState end1 = TrainState::read(rb.output_dir + "/checkpoint-8");  // end_phase's checkpoint
  EXPECT_EQ(end1.micro_batch_index, 0);
  EXPECT_EQ(end1.phase, 1);
  EXPECT_FALSE(fs::exists(rb.output_dir + "/checkpoint-8/partial_gradients.safetensors"));
  expect_same_records(step_records(ra.output_dir), step_records(rb.output_dir));
  for (const char* c : {"/checkpoint-8", "/checkpoint-11"}) {
    expect_same_files(ra.output_dir + c + "/model.safetensors", rb.output_dir + c + "/model.safetensors");
    expect_same_files(ra.output_dir + c + "/optimizer.safetensors", rb.output_dir + c + "/optimizer.safetensors");
  }
}

TEST(PretrainResume, LastPhaseCutOnResumeAtAMidStepCheckpointEndsCleanly) {
  // The same cut in the last phase: the run ends at update 8 with a clean checkpoint (no partial step, the
  // weights of the mid-step checkpoint), and a further --resume has nothing to train.
  const Fixture& f = fixture();
  PretrainRecipe r12 = f.recipe("cutlast"), r8 = f.recipe("cutlast");
  r8.phases[0].schedule.num_train_steps = 8;
  const RunResult b1 = train(r12, false, [](const MicroBatchEvent& e) {
    if (e.global_step == 8 && e.micro == 2) std::raise(SIGTERM);
  });
  ASSERT_EQ(b1.rc, 128 + SIGTERM);
  const std::string ck = r12.output_dir + "/checkpoint-8";
  ASSERT_EQ(TrainState::read(ck).micro_batch_index, 3);
  const std::string weights = test::read_file(ck + "/model.safetensors");
  const RunResult b2 = train(r8, true);
  ASSERT_EQ(b2.rc, 0);
  EXPECT_TRUE(b2.events.empty());
  const TrainState s = TrainState::read(ck);
  EXPECT_EQ(s.micro_batch_index, 0);
  EXPECT_EQ(s.data_cursor.micro, 0);
  EXPECT_EQ(s.global_step, 8);
  EXPECT_FALSE(fs::exists(ck + "/partial_gradients.safetensors"));
  EXPECT_TRUE(test::read_file(ck + "/model.safetensors") == weights);
  const RunResult b3 = train(r8, true);
  EXPECT_EQ(b3.rc, 0);
  EXPECT_TRUE(b3.events.empty());
}
