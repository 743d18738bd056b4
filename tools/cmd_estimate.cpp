// cmd_estimate.cpp: `bertrain estimate --config R`: times a few training steps of each phase of a recipe on
// this machine (synthetic batches of the phase's shapes), and the evaluation passes the recipe's eval_dir and
// eval_every_steps imply (forward only, at the trainer's evaluation batch size), and projects the wall time and
// cost of the whole run.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "bertrain/autograd/variable.h"
#include "bertrain/core/error.h"
#include "bertrain/data/hdf5_shard.h"
#include "bertrain/data/synthetic.h"
#include "bertrain/io/config.h"
#include "bertrain/io/recipe.h"
#include "bertrain/models/bert.h"
#include "bertrain/ops/ops.h"
#include "bertrain/optim/clip.h"
#include "commands.h"
#include "bertrain/train/optimizer_factory.h"

namespace bertrain::cli {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

/// Evaluations the trainer runs in a phase covering global steps (first, first + n]: one at every multiple of
/// eval_every_steps before the phase's last step, and one at its end (PretrainTrainer's train() and end_phase()).
int64_t evaluations_in_phase(int64_t first, int64_t n, int64_t every) {
  int64_t k = 1;
  if (every > 0) k += (first + n - 1) / every - first / every;
  return k;
}

/// Forward passes of one evaluation: ceil(samples / batch) per eval shard (PretrainTrainer::evaluate), capped at
/// max_eval_steps when that is > 0.
int64_t eval_batches(const std::vector<int64_t>& shard_samples, int64_t batch, int64_t max_eval_steps) {
  int64_t b = 0;
  for (int64_t n : shard_samples) b += (n + batch - 1) / batch;
  return max_eval_steps > 0 ? std::min(b, max_eval_steps) : b;
}

// The median of n timed calls of f, in seconds. A median, not a mean: one call slowed by a transient (another
// process ending, page faults of a first touch) moves a mean of a few calls by tens of percent.
template <class F>
double median_seconds(int n, F&& f) {
  std::vector<double> t;
  for (int k = 0; k < n; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(seconds_since(t0));
  }
  std::sort(t.begin(), t.end());
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

int run(const std::string& config, const std::vector<std::string>& extras, double price, int micro_steps) {
  PretrainRecipe r = load_pretrain_recipe(config, parse_flag_overrides(extras, "estimate"));
  MatmulPrecisionGuard precision(r.bf16 ? MatmulPrecision::bf16 : MatmulPrecision::f32);
  BertConfig cfg = load_bert_config(r.bert_config_file);
  Rng rng(r.seed, 0x1417);
  BertForPreTraining model(cfg, rng);
  model.bert().set_activation_checkpointing(r.activation_checkpointing);
  model.bert().set_unpad(r.unpad);
  // The recipe's own optimizer (LAMB, AdamW, ...): its step time is part of every update.
  std::unique_ptr<Optimizer> opt = make_optimizer(r.optimizer, model.named_parameters());
  // The evaluation set the trainer reads at every evaluation (sizes only; nothing is loaded).
  std::vector<int64_t> eval_samples;
  if (!r.eval_dir.empty())
    for (const std::string& path : data::list_eval_shards(r.eval_dir))
      eval_samples.push_back(data::inspect_pretraining_shard(path).num_samples);
  double total = 0;
  int64_t first_step = 0;
  std::printf("%-6s %8s %8s %8s %6s %12s %12s %14s\n", "phase", "length", "batch", "micro", "accum", "s/micro", "s/step",
              "projected");
  for (size_t i = 0; i < r.phases.size(); ++i) {
    const PhaseRecipe& p = r.phases[i];
    const int64_t a = p.train_batch_size / p.micro_batch_size;
    const data::PretrainingBatch b =
        data::synthetic_pretraining_batch(p.micro_batch_size, p.max_seq_length, p.max_predictions_per_seq, cfg.vocab_size, rng);
    const BertInputs in{b.input_ids, b.token_type_ids, b.attention_mask, 0, 0};
    PretrainingTargets tg{b.masked_lm_positions, b.masked_lm_ids, b.masked_lm_weights, b.next_sentence_labels};
    tg.mlm_normalizer = 1.0;
    model.forward(in, tg).loss.backward();  // warm-up: primitive creation, allocator cache
    const double t_micro = median_seconds(micro_steps, [&] { model.forward(in, tg).loss.backward(); });
    // The update as the trainer does it: global-norm clipping, then the optimizer. The first update allocates
    // the optimizer's moments, so one untimed update comes first.
    auto update = [&] {
      if (r.optimizer.clip_grad_norm > 0) clip_grad_norm(model.named_parameters(), r.optimizer.clip_grad_norm);
      opt->step(1e-4);
    };
    update();
    const double t_opt = median_seconds(micro_steps, update);
    opt->zero_grad();
    const double t_step = a * t_micro + t_opt;
    const int64_t n = p.schedule.num_train_steps;
    double proj = t_step * static_cast<double>(n);
    // Evaluation: forward passes in eval mode at the phase's micro-batch size (as PretrainTrainer::evaluate).
    std::string eval_note;
    if (!eval_samples.empty()) {
      const int64_t evals = evaluations_in_phase(first_step, n, r.eval_every_steps);
      const int64_t batches = eval_batches(eval_samples, p.micro_batch_size, r.max_eval_steps);
      double t_fwd = 0;
      {
        NoGradGuard ng;
        model.eval();
        model.forward(in, tg);  // warm-up
        t_fwd = median_seconds(micro_steps, [&] { model.forward(in, tg); });
        model.train();
      }
      const double t_eval = static_cast<double>(batches) * t_fwd;
      proj += static_cast<double>(evals) * t_eval;
      char buf[160];
      std::snprintf(buf, sizeof buf, "  (with %ld evaluations of %ld batches, %.1f s each)", (long)evals, (long)batches,
                    t_eval);
      eval_note = buf;
    }
    first_step += n;
    total += proj;
    std::printf("%-6zu %8ld %8ld %8ld %6ld %12.3f %12.2f %13.2fh%s\n", i + 1, (long)p.max_seq_length,
                (long)p.train_batch_size, (long)p.micro_batch_size, (long)a, t_micro, t_step, proj / 3600,
                eval_note.c_str());
  }
  std::printf("projected wall time of the whole recipe on this machine: %.2f hours (%.1f days)\n", total / 3600,
              total / 86400);
  if (price > 0) std::printf("cost at %.4f per hour: %.2f\n", price, total / 3600 * price);
  return 0;
}

Registrar reg{{"estimate", "time a few steps of each phase of a recipe and project the whole run's wall time and cost",
               [](CLI::App& sub) {
                 auto config = std::make_shared<std::string>();
                 auto price = std::make_shared<double>(0.0);
                 auto steps = std::make_shared<int>(5);
                 sub.add_option("--config", *config, "recipe JSON")->required();
                 sub.add_option("--price_per_hour", *price, "machine price per hour, for the cost line");
                 sub.add_option("--micro_steps", *steps, "timed micro-batches (and updates, and evaluation batches) per phase; each is timed alone and the "
                                "median is used")->check(CLI::Range(1, 1000000));
                 sub.allow_extras();
                 sub.footer("Other flags override recipe keys as in pretrain: --key=value, --key value, or a bare "
                            "--flag (true); --phases.N.key for phase N.");
                 return std::function<int()>([&sub, config, price, steps] {
                   return run(*config, sub.remaining(), *price, *steps);
                 });
               }}};

}  // namespace
}  // namespace bertrain::cli
