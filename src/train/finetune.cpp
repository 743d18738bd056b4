// finetune.cpp: the shared finetuning loop. Under MPI every rank takes its B/R rows of each batch; dropout is keyed
// by global sample index and the loss normalised by B, so R ranks give the gradient of one.
#include "bertrain/train/finetune.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "bertrain/core/rng.h"
#include "bertrain/io/checkpoint.h"
#include "bertrain/io/safetensors.h"
#include "bertrain/ops/ops.h"
#include "bertrain/optim/clip.h"
#include "bertrain/train/communicator.h"
#include "bertrain/train/checkpoint_dir.h"
#include "bertrain/train/grad_reducer.h"
#include "bertrain/train/optimizer_factory.h"
#include "bertrain/train/signals.h"

namespace bertrain {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

/// The epoch's order of n training rows: Fisher-Yates from Rng(seed, epoch), as the loader does.
std::vector<int64_t> epoch_order(uint64_t seed, int64_t epoch, int64_t n) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  Rng rng(seed, 0x5eed0000ULL + static_cast<uint64_t>(epoch));
  for (int64_t i = n - 1; i > 0; --i) std::swap(order[static_cast<size_t>(i)], order[rng.randint(i + 1)]);
  return order;
}

void save_dir(const std::string& out, const std::string& name, Module& model, const BertConfig& cfg, Optimizer* opt,
              const json& state, const FinetuneTask& task, int64_t step_for_tmp) {
  CheckpointWriter w(out, step_for_tmp);
  save_model(w.dir(), model, cfg);
  if (opt) save_safetensors(w.path("optimizer.safetensors"), opt->state_tensors());
  if (task.write_extra_files) task.write_extra_files(w.dir());
  write_text(w.path("trainer_state.json"), state.dump(2));
  w.commit_as(name);
}

}  // namespace

FinetuneResult run_finetuning(Module& model, const BertConfig& cfg, const FinetuneOptions& o, const FinetuneTask& task) {
  BERTRAIN_CHECK(!o.output_dir.empty(), "finetuning: --output_dir is required");
  BERTRAIN_CHECK(o.train_batch_size > 0, "finetuning: train_batch_size must be positive");
  BERTRAIN_CHECK(o.learning_rate > 0, "finetuning: learning_rate must be positive");
  BERTRAIN_CHECK(o.warmup_proportion >= 0 && o.warmup_proportion <= 1, "finetuning: warmup_proportion must be in [0, 1]");
  BERTRAIN_CHECK(task.num_train_examples >= o.train_batch_size, "finetuning: ", task.num_train_examples,
                 " training examples are fewer than one batch of ", o.train_batch_size);
  std::shared_ptr<Communicator> comm = o.communicator ? o.communicator : world();
  const int world_size = comm->size(), rank = comm->rank();
  BERTRAIN_CHECK(o.train_batch_size % world_size == 0, "finetuning: train_batch_size ", o.train_batch_size,
                 " must be a multiple of the number of ranks (", world_size, ")");
  const int64_t rank_rows = o.train_batch_size / world_size;
  fs::create_directories(o.output_dir);
  const int64_t steps_per_epoch = task.num_train_examples / o.train_batch_size;  // drop_remainder, as the reference
  int64_t total = static_cast<int64_t>(static_cast<double>(task.num_train_examples) / o.train_batch_size * o.num_train_epochs);
  if (o.max_steps > 0) total = std::min(total, o.max_steps);
  BERTRAIN_CHECK(total > 0, "finetuning: no training steps (num_train_epochs ", o.num_train_epochs, ")");
  NamedParameters params = model.named_parameters();
  std::unique_ptr<Optimizer> opt = make_optimizer(o.optimizer, params);
  PhaseRecipe ph;
  ph.learning_rate = o.learning_rate;
  ph.num_train_steps = total;
  ph.warmup_proportion = o.warmup_proportion;
  ph.decay = "poly";  // power 1: google-research/bert's linear decay to 0 over num_train_steps
  ph.decay_power = 1.0;
  LrSchedule sched(schedule_of(ph));

  FinetuneResult res;
  int64_t step = 0;
  double best = -INFINITY;
  int64_t best_step = -1;
  const std::string metrics_path = (fs::path(o.output_dir) / "metrics.jsonl").string();
  if (o.resume) {
    if (auto dir = newest_checkpoint(o.output_dir)) {
      json st = json::parse(std::ifstream(fs::path(*dir) / "trainer_state.json"));
      LoadReport rep;
      LoadOptions lo;
      lo.strict = true;
      load_model(*dir, model, rep, lo);
      OptimizerCounters c;
      c.step = st.at("optimizer_step").get<int64_t>();
      opt->load_state(SafetensorsFile::open((fs::path(*dir) / "optimizer.safetensors").string()).load_all(), c);
      step = st.at("global_step").get<int64_t>();
      best = st.at("best_metric").is_null() ? -INFINITY : st.at("best_metric").get<double>();
      best_step = st.at("best_step").get<int64_t>();
      spdlog::info("resumed from {} at step {}", *dir, step);
    }
  }
  std::unique_ptr<GradientReducer> reducer;
  if (world_size > 1) {
    double step0 = static_cast<double>(step);
    comm->broadcast(&step0, sizeof step0, 0);
    BERTRAIN_CHECK(step0 == static_cast<double>(step), "rank ", rank, " resumes at step ", step, " but rank 0 at step ",
                   step0, ": every rank must see the same output_dir");
    check_same_parameters(params, *comm);
    BERTRAIN_CHECK(o.allreduce_bucket_mb > 0, "allreduce_bucket_mb must be positive, got ", o.allreduce_bucket_mb);
    reducer = std::make_unique<GradientReducer>(params, comm, static_cast<int64_t>(o.allreduce_bucket_mb * (1 << 20)));
    spdlog::info("data parallel: {}; {} rows of each batch per rank", comm->description(), rank_rows);
  }
  if (step == 0 && rank == 0) write_text(metrics_path, "");

  auto state = [&](int64_t s) {
    return json{{"global_step", s},
                {"epoch", static_cast<double>(s) / static_cast<double>(steps_per_epoch)},
                {"optimizer_step", opt->counters().step},
                {"best_metric", std::isfinite(best) ? json(best) : json(nullptr)},
                {"best_step", best_step},
                {"primary_metric", task.primary_metric},
                {"seed", o.seed},
                {"learning_rate", sched.lr(s)}};
  };
  auto checkpoint = [&](int64_t s) {
    if (rank != 0) return;
    save_dir(o.output_dir, checkpoint_dir_name(s), model, cfg, opt.get(), state(s), task, s);
    prune_checkpoints(o.output_dir, o.save_total_limit);
  };
  auto evaluate = [&](int64_t s) {
    if (!task.evaluate || rank != 0) return;  // the other ranks go on and wait in the next step's sums
    NoGradGuard ng;
    model.eval();
    res.last_metrics = task.evaluate(s);
    model.train();
    json m{{"step", s}, {"eval", true}};
    for (auto& [k, v] : res.last_metrics) m[k] = std::isfinite(v) ? json(v) : json(nullptr);
    std::ofstream(metrics_path, std::ios::app) << m.dump() << "\n";
    if (!task.primary_metric.empty()) {
      auto it = res.last_metrics.find(task.primary_metric);
      BERTRAIN_ASSERT(it != res.last_metrics.end(), "evaluate() did not report ", task.primary_metric);
      if (it->second > best) {
        best = it->second;
        best_step = s;
        save_dir(o.output_dir, "best", model, cfg, nullptr, state(s), task, s);
        spdlog::info("new best {} = {:.4f} at step {}: saved {}/best", task.primary_metric, best, s, o.output_dir);
      }
    }
  };

  SignalGuard signals;
  model.train();
  const bool tty = o.progress && isatty(STDERR_FILENO) && rank == 0;
  spdlog::info("finetuning: {} {}, batch {}, {} steps ({} per epoch), lr {}, warmup {} steps", task.num_train_examples,
               task.example_noun, o.train_batch_size, total, steps_per_epoch, o.learning_rate, sched.warmup_steps());
  auto t_start = std::chrono::steady_clock::now();
  const int64_t first_step = step;
  std::vector<int64_t> order;
  int64_t order_epoch = -1;
  while (step < total) {
    const int64_t epoch = step / steps_per_epoch, pos = step % steps_per_epoch;
    if (epoch != order_epoch) {
      order = epoch_order(o.seed, epoch, task.num_train_examples);
      order_epoch = epoch;
    }
    const int64_t first = pos * o.train_batch_size + rank * rank_rows;  // this rank's rows of the batch
    std::vector<int64_t> rows(order.begin() + first, order.begin() + first + rank_rows);
    Variable loss = task.loss(rows, step * o.train_batch_size + rank * rank_rows);
    if (world_size > 1) loss = scale(loss, static_cast<double>(rank_rows) / static_cast<double>(o.train_batch_size));
    if (reducer) reducer->arm();
    loss.backward();
    double loss_value = loss.item();
    int stop_signal = signal_received();
    if (reducer) {
      reducer->finish();
      comm->allreduce(&loss_value, 1);
      double sig = stop_signal;
      comm->allreduce(&sig, 1, ReduceOp::max);
      stop_signal = static_cast<int>(sig);
    }
    const double norm = o.optimizer.clip_grad_norm > 0 ? clip_grad_norm(params, o.optimizer.clip_grad_norm)
                                                       : global_grad_norm(params);
    const double lr = sched.lr(step);
    const bool skip = !std::isfinite(norm) || !std::isfinite(loss_value);
    if (skip) spdlog::warn("step {}: non-finite loss or gradient norm, step skipped", step + 1);
    else opt->step(lr);
    opt->zero_grad();
    ++step;
    if (rank == 0)
      std::ofstream(metrics_path, std::ios::app)
          << json{{"step", step}, {"loss", loss_value}, {"lr", lr}, {"grad_norm", norm}, {"skipped", skip}}.dump() << "\n";
    if (step % o.log_every_steps == 0 || step == total) {
      const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
      const double eta = el / static_cast<double>(step - first_step) * static_cast<double>(total - step);
      char line[256];
      std::snprintf(line, sizeof line, "epoch %.2f step %lld/%lld | loss %.4f | lr %.3g | gnorm %.3g | eta %.0fs",
                    static_cast<double>(step) / steps_per_epoch, (long long)step, (long long)total, loss_value, lr,
                    norm, eta);
      if (tty) std::fprintf(stderr, "\r%s\x1b[K%s", line, step == total ? "\n" : "");
      else spdlog::info("{}", line);
    }
    const bool epoch_end = step % steps_per_epoch == 0 || step == total;
    if (epoch_end) evaluate(step);
    if ((o.save_checkpoints_steps > 0 && step % o.save_checkpoints_steps == 0) || epoch_end) checkpoint(step);
    if (stop_signal && step < total) {
      if (!epoch_end && !(o.save_checkpoints_steps > 0 && step % o.save_checkpoints_steps == 0)) checkpoint(step);
      spdlog::warn("signal {} received: checkpoint saved at step {}; continue with --resume", stop_signal, step);
      res.exit_code = 128 + stop_signal;
      break;
    }
  }
  res.global_step = step;
  res.best_metric = best;
  res.best_step = best_step;
  return res;
}

}  // namespace bertrain
