// finetune_common.cpp: see finetune_common.h.
#include "finetune_common.h"

#include <map>

#include "commands.h"

namespace bertrain::cli {

void FinetuneFlags::add_to(CLI::App& app, tasks::FinetuneCommandOptions& o) {
  FinetuneOptions& t = o.finetune;
  app.add_option("--init_checkpoint", o.init_checkpoint,
                 "checkpoint directory (model.safetensors or pytorch_model.bin), .safetensors file, pytorch_model.bin "
                 "(read without running its pickle) or TF checkpoint prefix (dir/bert_model.ckpt)");
  app.add_option("--bert_config_file", o.bert_config_file, "model config (default: config.json, or bert_config.json, beside --init_checkpoint)");
  app.add_option("--vocab_file", o.vocab_file, "BERT vocab.txt (default: vocab.txt of --init_checkpoint)");
  app.add_option("--do_lower_case", do_lower_case,
                 "true for uncased models (default: --init_checkpoint's tokenizer_config.json, else true)");
  app.add_option("--max_seq_length", o.max_seq_length,
                 "tokens per sequence after WordPiece (default: the model_max_length of an --init_checkpoint "
                 "finetuned for this task, else 128; run-squad 384)");
  app.add_option("--train_batch_size", t.train_batch_size)->capture_default_str();
  app.add_option("--eval_batch_size", o.eval_batch_size)->capture_default_str();
  app.add_option("--predict_batch_size", o.predict_batch_size)->capture_default_str();
  app.add_option("--learning_rate", t.learning_rate, "peak learning rate (AdamW)")->capture_default_str();
  app.add_option("--num_train_epochs", t.num_train_epochs)->capture_default_str();
  app.add_option("--warmup_proportion", t.warmup_proportion)->capture_default_str();
  app.add_option("--max_steps", t.max_steps, "stop after this many steps (0: num_train_epochs decides)");
  app.add_option("--output_dir", t.output_dir)->required();
  app.add_option("--seed", t.seed)->capture_default_str();
  app.add_option("--save_checkpoints_steps", t.save_checkpoints_steps, "also save at every epoch end")->capture_default_str();
  app.add_option("--optimizer", t.optimizer.name, "adamw (default, google-research/bert's variant) or lamb")
      ->transform(CLI::CheckedTransformer(std::map<std::string, OptimizerName>{{"adamw", OptimizerName::adamw},
                                                                               {"lamb", OptimizerName::lamb}}));
  app.add_option("--lr_convention", t.lr_convention,
                 "warmup rounding and step indexing of the schedule: google_bert (default), nvidia, hugging_face")
      ->transform(CLI::CheckedTransformer(std::map<std::string, LrConvention>{
          {"google_bert", LrConvention::google_bert}, {"nvidia", LrConvention::nvidia},
          {"hugging_face", LrConvention::hugging_face}}));
  app.add_flag("--do_train", o.do_train);
  app.add_flag("--do_predict", o.do_predict);
  app.add_flag("--resume", t.resume, "continue from the newest checkpoint in output_dir");
  app.add_flag("--bf16", o.bf16, "mixed precision: bf16 matmuls with f32 accumulation, f32 master weights");
  app.add_flag("--pad_to_max_length", o.padding.pad_to_max_length,
               "pad every batch to max_seq_length (default: to its longest example, rounded up)");
  app.add_option("--pad_to_multiple_of", o.padding.pad_to_multiple_of,
                 "dynamic padding rounds each batch's length up to this multiple")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--unpad", o.unpad,
                 "encoder path: auto (default: the unpadded encoder when at least 10% of a training batch is padding, and for any padding in evaluation and prediction), "
                 "always (real tokens only, attention per sequence), never (every padded position computed)")
      ->transform(CLI::CheckedTransformer(std::map<std::string, Unpad>{
          {"auto", Unpad::automatic}, {"always", Unpad::always}, {"never", Unpad::never}}));
  app.add_flag("--group_by_length", t.group_by_length,
               "training batches of similar length: shuffle, then sort by length within mega-batches of 50 "
               "batches (Hugging Face's group_by_length)");
  add_tensorboard_flags(app, t.tensorboard, t.tensorboard_dir);
}

void add_tensorboard_flags(CLI::App& app, bool& on, std::string& dir) {
  app.add_flag("--tensorboard", on,
               "TensorBoard event files of the metrics (default true; --tensorboard=false: none)")
      ->capture_default_str();
  app.add_option("--tensorboard_dir", dir, "directory of the TensorBoard event files (default: output_dir)");
}

void FinetuneFlags::resolve(tasks::FinetuneCommandOptions& o) const {
  if (!do_lower_case.empty()) o.do_lower_case = parse_bool_flag("do_lower_case", do_lower_case);
}

}  // namespace bertrain::cli
