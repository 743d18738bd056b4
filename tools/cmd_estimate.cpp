// cmd_estimate.cpp: `bertrain estimate --config R`: times a few training steps of each phase of a recipe on
// this machine (synthetic batches of the phase's shapes) and projects the wall time and cost of the whole run.
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>

#include "bertrain/core/error.h"
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
  double total = 0;
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
    auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < micro_steps; ++k) model.forward(in, tg).loss.backward();
    const double t_micro = seconds_since(t0) / micro_steps;
    // The update as the trainer does it: global-norm clipping, then the optimizer. The first update allocates
    // the optimizer's moments, so one untimed update comes first.
    auto update = [&] {
      if (r.optimizer.clip_grad_norm > 0) clip_grad_norm(model.named_parameters(), r.optimizer.clip_grad_norm);
      opt->step(1e-4);
    };
    update();
    auto t1 = std::chrono::steady_clock::now();
    update();
    const double t_opt = seconds_since(t1);
    opt->zero_grad();
    const double t_step = a * t_micro + t_opt;
    const double proj = t_step * static_cast<double>(p.schedule.num_train_steps);
    total += proj;
    std::printf("%-6zu %8ld %8ld %8ld %6ld %12.3f %12.2f %13.2fh\n", i + 1, (long)p.max_seq_length,
                (long)p.train_batch_size, (long)p.micro_batch_size, (long)a, t_micro, t_step, proj / 3600);
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
                 auto steps = std::make_shared<int>(2);
                 sub.add_option("--config", *config, "recipe JSON")->required();
                 sub.add_option("--price_per_hour", *price, "machine price per hour, for the cost line");
                 sub.add_option("--micro_steps", *steps, "timed micro-batches per phase")->check(CLI::PositiveNumber);
                 sub.allow_extras();
                 sub.footer("Other flags override recipe keys as in pretrain: --key=value, --key value, or a bare "
                            "--flag (true); --phases.N.key for phase N.");
                 return std::function<int()>([&sub, config, price, steps] {
                   return run(*config, sub.remaining(), *price, *steps);
                 });
               }}};

}  // namespace
}  // namespace bertrain::cli
