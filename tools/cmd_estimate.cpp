// cmd_estimate.cpp: `bertrain estimate --config R`: times a few training steps of each phase of a recipe on
// this machine (synthetic batches of the phase's shapes), and the evaluation passes the recipe's eval_dir and
// eval_every_steps imply, and projects the wall time and cost of the whole run (bertrain/train/estimate.h).
#include <cstdio>
#include <vector>

#include "bertrain/io/recipe.h"
#include "bertrain/train/estimate.h"
#include "commands.h"

namespace bertrain::cli {
namespace {

int run(const std::string& config, const std::vector<std::string>& extras, double price, int micro_steps) {
  const PretrainRecipe r = load_pretrain_recipe(config, parse_flag_overrides(extras, "estimate"));
  std::printf("%-6s %8s %8s %8s %6s %12s %12s %14s\n", "phase", "length", "batch", "micro", "accum", "s/micro", "s/step",
              "projected");
  std::fflush(stdout);
  double total = 0;
  // Each row as its phase is timed (a long recipe's estimate takes minutes).
  estimate_recipe(r, micro_steps, [&](size_t i, const PhaseEstimate& e) {
    char eval_note[160] = "";
    if (e.evaluations > 0)
      std::snprintf(eval_note, sizeof eval_note, "  (with %ld evaluations of %ld batches, %.1f s each)",
                    (long)e.evaluations, (long)e.batches_per_evaluation, e.seconds_per_evaluation);
    std::printf("%-6zu %8ld %8ld %8ld %6ld %12.3f %12.2f %13.2fh%s\n", i + 1, (long)e.max_seq_length,
                (long)e.train_batch_size, (long)e.micro_batch_size, (long)e.accumulation, e.seconds_per_micro_batch,
                e.seconds_per_step, e.projected_seconds / 3600, eval_note);
    std::fflush(stdout);
    total += e.projected_seconds;
  });
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
