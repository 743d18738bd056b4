// finetune.cpp: the shared finetuning loop. Under MPI every rank takes its B/R rows of each batch; dropout is keyed
// by global sample index and the loss normalised by B, so R ranks give the gradient of one.
#include "bertrain/train/finetune.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "bertrain/core/rng.h"
#include "bertrain/ops/ops.h"
#include "bertrain/train/checkpoint_dir.h"
#include "bertrain/train/communicator.h"
#include "bertrain/train/optimizer_factory.h"
#include "bertrain/train/signals.h"
#include "bertrain/train/step_logger.h"
#include "bertrain/train/train_step.h"

namespace bertrain {

namespace fs = std::filesystem;

namespace {

}  // namespace

std::vector<int64_t> finetune_epoch_order(uint64_t seed, int64_t epoch, int64_t n, bool group_by_length,
                                          std::span<const int32_t> lengths, int64_t batch_size) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  Rng rng(seed, 0x5eed0000ULL + static_cast<uint64_t>(epoch));
  for (int64_t i = n - 1; i > 0; --i) std::swap(order[static_cast<size_t>(i)], order[rng.randint(i + 1)]);
  if (!group_by_length) return order;
  BERTRAIN_CHECK(static_cast<int64_t>(lengths.size()) == n, "group_by_length: ", lengths.size(),
                 " lengths for ", n, " training rows");
  BERTRAIN_CHECK(batch_size >= 1, "group_by_length: batch size must be >= 1, got ", batch_size);
  const int64_t mult = std::max<int64_t>(1, std::min<int64_t>(n / (batch_size * 4), 50));
  const int64_t mega = mult * batch_size;
  auto longer = [&](int64_t a, int64_t b) { return lengths[a] > lengths[b]; };
  int64_t max_start = 0;  // the mega-batch whose first (longest) row is the longest; the first on ties (argmax)
  for (int64_t s = 0; s < n; s += mega) {
    std::stable_sort(order.begin() + s, order.begin() + std::min(n, s + mega), longer);
    if (lengths[order[s]] > lengths[order[max_start]]) max_start = s;
  }
  std::swap(order[0], order[max_start]);
  return order;
}

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
  // google-research/bert run_classifier.py: num_train_steps = int(examples / batch * epochs), each epoch's partial
  // batch dropped; the updates run continue into a further epoch's order when needed, so they always equal the
  // schedule's total (CASES C39).
  const int64_t steps_per_epoch = task.num_train_examples / o.train_batch_size;
  int64_t total = static_cast<int64_t>(static_cast<double>(task.num_train_examples) / o.train_batch_size * o.num_train_epochs);
  if (o.max_steps > 0) total = std::min(total, o.max_steps);
  BERTRAIN_CHECK(total > 0, "finetuning: no training steps (num_train_epochs ", o.num_train_epochs, ")");
  NamedParameters params = model.named_parameters();
  std::unique_ptr<Optimizer> opt = make_optimizer(o.optimizer, params);
  LrSchedule sched(o.schedule(total));

  FinetuneResult res;
  TrainState state;
  state.primary_metric = task.primary_metric;
  state.seed = o.seed;
  state.world_size = world_size;
  if (o.resume) {
    if (auto dir = newest_checkpoint(o.output_dir)) {
      state = load_checkpoint(*dir, model, opt.get(), params);
      spdlog::info("resumed from {} at step {}", *dir, state.global_step);
    }
  }
  if (world_size > 1) {
    double step0 = static_cast<double>(state.global_step);
    comm->broadcast(&step0, sizeof step0, 0);
    BERTRAIN_CHECK(step0 == static_cast<double>(state.global_step), "rank ", rank, " resumes at step ",
                   state.global_step, " but rank 0 at step ", step0, ": every rank must see the same output_dir");
    spdlog::info("data parallel: {} rows of each batch per rank", rank_rows);
  }
  TrainStepOptions so;
  so.clip_grad_norm = o.optimizer.clip_grad_norm;
  so.allreduce_bucket_mb = o.allreduce_bucket_mb;
  TrainStep step(params, *opt, so, comm);
  StepLogger log((fs::path(o.output_dir) / "metrics.jsonl").string(), rank == 0,
                 o.progress && isatty(STDERR_FILENO), o.log_every_steps,
                 !o.tensorboard ? "" : o.tensorboard_dir.empty() ? o.output_dir : o.tensorboard_dir);
  if (state.global_step == 0) log.start_new();
  else log.truncate_after(state.global_step);  // what a stopped run logged after its checkpoint is done again

  auto checkpoint = [&](const std::string& name, bool with_optimizer) {
    state.optimizer_step = opt->counters().step;
    state.epoch = static_cast<double>(state.global_step) / static_cast<double>(steps_per_epoch);
    state.learning_rate = sched.lr(state.global_step);
    CheckpointContents c;
    c.model = &model;
    c.config = &cfg;
    c.optimizer = with_optimizer ? opt.get() : nullptr;
    c.state = &state;
    c.write_extra_files = task.write_extra_files;
    save_checkpoint(o.output_dir, name, state.global_step, c);
    log.sync();
  };
  auto save_periodic = [&] {
    if (rank != 0) return;
    checkpoint(checkpoint_dir_name(state.global_step), true);
    prune_checkpoints(o.output_dir, o.save_total_limit);
  };
  auto evaluate = [&] {
    if (!task.evaluate || rank != 0) return;  // the other ranks go on and wait in the next step's sums
    NoGradGuard ng;
    model.eval();
    res.last_metrics = task.evaluate(state.global_step);
    model.train();
    MetricsRecord m{{"step", state.global_step}, {"eval", true}};
    for (auto& [k, v] : res.last_metrics) m.emplace_back(k, std::isfinite(v) ? MetricValue(v) : MetricValue());
    log.record(m);
    if (task.primary_metric.empty()) return;
    auto it = res.last_metrics.find(task.primary_metric);
    BERTRAIN_ASSERT(it != res.last_metrics.end(), "evaluate() did not report ", task.primary_metric);
    if (it->second > state.best_metric.value_or(-INFINITY)) {  // a NaN metric is never the best
      state.best_metric = it->second;
      state.best_step = state.global_step;
      checkpoint("best", false);
      spdlog::info("new best {} = {:.4f} at step {}: saved {}/best", task.primary_metric, it->second,
                   state.global_step, o.output_dir);
    }
  };

  SignalGuard signals;
  model.train();
  spdlog::info("finetuning: {} {}, batch {}, {} steps ({} per epoch), lr {}, warmup {} steps", task.num_train_examples,
               task.example_noun, o.train_batch_size, total, steps_per_epoch, o.learning_rate, sched.warmup_steps());
  log.restart_clock();
  const int64_t first_step = state.global_step;
  std::vector<int64_t> order;
  int64_t order_epoch = -1;
  while (state.global_step < total) {
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t epoch = state.global_step / steps_per_epoch, pos = state.global_step % steps_per_epoch;
    if (epoch != order_epoch) {
      order = finetune_epoch_order(o.seed, epoch, task.num_train_examples, o.group_by_length, task.lengths,
                                   o.train_batch_size);
      order_epoch = epoch;
    }
    const int64_t first = pos * o.train_batch_size + rank * rank_rows;  // this rank's rows of the batch
    const std::vector<int64_t> rows(order.begin() + first, order.begin() + first + rank_rows);
    auto micro_batch = [&](int64_t) {
      Variable loss = task.loss(rows, state.global_step * o.train_batch_size + rank * rank_rows);
      if (world_size > 1) loss = scale(loss, static_cast<double>(rank_rows) / static_cast<double>(o.train_batch_size));
      loss.backward();
      return std::vector<double>{loss.item()};
    };
    const StepStats st = step.run(1, micro_batch, sched.lr(state.global_step), state, false);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    MetricsRecord rec{{"step", state.global_step}, {"loss", st.losses[0]}, {"lr", st.lr}, {"grad_norm", st.grad_norm},
                      {"skipped", st.skipped}, {"skipped_steps", state.skipped_steps},
                      {"epoch", static_cast<double>(state.global_step) / static_cast<double>(steps_per_epoch)},
                      {"sequences_per_second", static_cast<double>(o.train_batch_size) / seconds}};
    if (!task.lengths.empty()) {  // the batch's real tokens (all ranks' rows)
      double tokens = 0;
      for (int64_t i = pos * o.train_batch_size; i < (pos + 1) * o.train_batch_size; ++i) tokens += task.lengths[order[i]];
      rec.emplace_back("real_tokens_per_second", tokens / seconds);
    }
    append_step_times(rec, st.times, seconds, step.comm().size());
    log.record(rec);
    StepProgress pr;
    char where[96];
    std::snprintf(where, sizeof where, "epoch %.2f step %lld/%lld",
                  static_cast<double>(state.global_step) / static_cast<double>(steps_per_epoch),
                  static_cast<long long>(state.global_step), static_cast<long long>(total));
    pr.where = where;
    pr.loss = st.losses[0];
    pr.lr = st.lr;
    pr.grad_norm = st.grad_norm;
    pr.sequences_per_second = static_cast<double>(o.train_batch_size) / seconds;
    set_progress_comm(pr, st.times, seconds, step.comm().size());
    pr.done = state.global_step - first_step;
    pr.total = total - first_step;
    pr.last = state.global_step == total;
    log.progress(pr, state.global_step);
    const bool epoch_end = state.global_step % steps_per_epoch == 0 || state.global_step == total;
    const bool periodic = o.save_checkpoints_steps > 0 && state.global_step % o.save_checkpoints_steps == 0;
    if (epoch_end) evaluate();
    if (periodic || epoch_end) save_periodic();
    if (st.stop_signal && state.global_step < total) {
      if (!periodic && !epoch_end) save_periodic();
      spdlog::warn("signal {} received: checkpoint saved at step {}; continue with --resume", st.stop_signal,
                   state.global_step);
      res.exit_code = 128 + st.stop_signal;
      break;
    }
  }
  res.global_step = state.global_step;
  res.best_metric = state.best_metric.value_or(-INFINITY);
  res.best_step = state.best_step;
  return res;
}

}  // namespace bertrain
