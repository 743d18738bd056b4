// cmd_pretrain.cpp: `bertrain pretrain`: a recipe file plus flag overrides, or google-research/bert's
// run_pretraining.py flags alone for a single phase.
#include <spdlog/spdlog.h>

#include "bertrain/core/error.h"
#include "bertrain/io/recipe.h"
#include "bertrain/train/pretrainer.h"
#include "commands.h"

namespace bertrain::cli {
namespace {

Registrar reg{{"pretrain",
               "pretrain BERT (masked LM + next sentence) from a recipe; any recipe key can be overridden with "
               "--key=value, --phases.N.key=value for phase N",
               [](CLI::App& sub) {
                 auto config = std::make_shared<std::string>();
                 auto resume = std::make_shared<bool>(false);
                 auto phase = std::make_shared<int>(0);
                 auto no_progress = std::make_shared<bool>(false);
                 auto bucket_mb = std::make_shared<double>(25);
                 sub.add_option("--config", *config, "recipe JSON (see README: Recipes); optional with flags");
                 sub.add_flag("--resume", *resume, "continue from the newest complete checkpoint in output_dir");
                 sub.add_option("--phase", *phase, "run only this phase (1-based)")->check(CLI::PositiveNumber);
                 sub.add_flag("--no_progress", *no_progress, "log lines instead of a live progress line");
                 sub.add_option("--allreduce_bucket_mb", *bucket_mb,
                                "under mpirun: gradients are summed over ranks in buckets of this size (MB)")
                     ->check(CLI::PositiveNumber);
                 sub.allow_extras();
                 sub.footer(
                     "Other flags override recipe keys (--key=value, --key value, or a bare --flag for true), e.g. "
                     "--learning_rate=1e-3 (every phase), "
                     "--phases.2.learning_rate=4e-3, --optimizer.name=adamw, --output_dir=DIR. google-research/bert "
                     "run_pretraining.py flags work without a recipe: --bert_config_file --input_file --output_dir "
                     "--init_checkpoint --train_batch_size --max_seq_length --max_predictions_per_seq "
                     "--num_train_steps --num_warmup_steps --learning_rate --save_checkpoints_steps --do_train "
                     "--do_eval (with --eval_dir). TensorBoard event files go to output_dir (--tensorboard_dir=DIR moves "
                     "them, --tensorboard=false turns them off).");
                 return std::function<int()>([&sub, config, resume, phase, no_progress, bucket_mb] {
                   PretrainRecipe r = load_pretrain_recipe(*config, parse_flag_overrides(sub.remaining(), "pretrain"));
                   r.validate();
                   PretrainOptions o;
                   o.resume = *resume;
                   o.only_phase = *phase;
                   o.progress = !*no_progress;
                   o.allreduce_bucket_mb = *bucket_mb;
                   PretrainTrainer t(r, o);
                   int rc = 0;
                   if (r.do_train) rc = t.train();
                   if (rc == 0 && r.do_eval) {
                     BERTRAIN_CHECK(!r.eval_dir.empty(), "--do_eval needs --eval_dir (a directory of HDF5 shards)");
                     t.evaluate(r.eval_dir);
                   }
                   if (rc != 0) spdlog::warn("interrupted by signal {}; continue with --resume", rc - 128);
                   return rc;
                 });
               }}};

}  // namespace
}  // namespace bertrain::cli
