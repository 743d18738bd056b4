// finetune_common.h: the google-research/bert finetuning flags run-classifier and run-squad share, bound to
// the library's options struct (bertrain/tasks/finetune_command.h).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "bertrain/tasks/finetune_command.h"

namespace bertrain::cli {

/// --tensorboard (a bool flag: `--tensorboard=false` turns the event files off) and --tensorboard_dir DIR.
void add_tensorboard_flags(CLI::App& app, bool& on, std::string& dir);

/// Adds --init_checkpoint --bert_config_file --vocab_file --do_lower_case --max_seq_length --train_batch_size
/// --eval_batch_size --predict_batch_size --learning_rate --num_train_epochs --warmup_proportion --max_steps
/// --output_dir --seed --save_checkpoints_steps --optimizer --lr_convention --do_train --do_predict --resume --bf16,
/// --pad_to_max_length --pad_to_multiple_of --unpad --group_by_length, --tensorboard --tensorboard_dir,
/// bound to `o` (defaults shown from it). --do_lower_case is kept as text in `do_lower_case` (absl's
/// true/false/1/0; empty when not given, so that the checkpoint's setting applies): call resolve() in the
/// command's callback.
struct FinetuneFlags {
  std::string do_lower_case;
  void add_to(CLI::App& app, tasks::FinetuneCommandOptions& o);
  void resolve(tasks::FinetuneCommandOptions& o) const;
};

}  // namespace bertrain::cli
