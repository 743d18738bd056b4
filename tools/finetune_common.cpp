// finetune_common.cpp: see finetune_common.h.
#include "finetune_common.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <map>

#include "bertrain/core/error.h"
#include "bertrain/io/checkpoint.h"
#include "bertrain/io/config.h"
#include "bertrain/io/tokenizer_files.h"
#include "bertrain/ops/ops.h"
#include "commands.h"

namespace bertrain::cli {

namespace fs = std::filesystem;

void FinetuneFlags::add_to(CLI::App& app, double default_lr, int default_seq_len, bool with_do_eval) {
  opt.learning_rate = default_lr;
  max_seq_length = default_seq_len;
  app.add_option("--init_checkpoint", init_checkpoint, "checkpoint directory or .safetensors file (bertrain or Hugging Face)");
  app.add_option("--bert_config_file", bert_config_file, "model config (default: config.json beside --init_checkpoint)");
  app.add_option("--vocab_file", vocab_file, "BERT vocab.txt")->required();
  app.add_option("--do_lower_case", do_lower_case, "true for uncased models")->capture_default_str();
  app.add_option("--max_seq_length", max_seq_length, "tokens per sequence after WordPiece")->capture_default_str();
  app.add_option("--train_batch_size", opt.train_batch_size)->capture_default_str();
  app.add_option("--eval_batch_size", eval_batch_size)->capture_default_str();
  app.add_option("--predict_batch_size", predict_batch_size)->capture_default_str();
  app.add_option("--learning_rate", opt.learning_rate, "peak learning rate (AdamW)")->capture_default_str();
  app.add_option("--num_train_epochs", opt.num_train_epochs)->capture_default_str();
  app.add_option("--warmup_proportion", opt.warmup_proportion)->capture_default_str();
  app.add_option("--max_steps", opt.max_steps, "stop after this many steps (0: num_train_epochs decides)");
  app.add_option("--output_dir", output_dir)->required();
  app.add_option("--seed", opt.seed)->capture_default_str();
  app.add_option("--save_checkpoints_steps", opt.save_checkpoints_steps, "also save at every epoch end")->capture_default_str();
  app.add_option("--optimizer", opt.optimizer.name, "adamw (default, google-research/bert's variant) or lamb")
      ->transform(CLI::CheckedTransformer(std::map<std::string, OptimizerName>{{"adamw", OptimizerName::adamw},
                                                                               {"lamb", OptimizerName::lamb}}));
  app.add_option("--lr_convention", opt.lr_convention,
                 "warmup rounding and step indexing of the schedule: google_bert (default), nvidia, hugging_face")
      ->transform(CLI::CheckedTransformer(std::map<std::string, LrConvention>{
          {"google_bert", LrConvention::google_bert}, {"nvidia", LrConvention::nvidia},
          {"hugging_face", LrConvention::hugging_face}}));
  app.add_flag("--do_train", do_train);
  if (with_do_eval) app.add_flag("--do_eval", do_eval, "evaluate on the dev file");
  app.add_flag("--do_predict", do_predict);
  app.add_flag("--resume", opt.resume, "continue from the newest checkpoint in output_dir");
  app.add_flag("--bf16", bf16, "mixed precision: bf16 matmuls with f32 accumulation, f32 master weights");
}

void FinetuneFlags::apply_precision() const {
  set_matmul_precision(bf16 ? MatmulPrecision::bf16 : MatmulPrecision::f32);
  if (bf16)
    spdlog::info("bf16 mixed precision: matmuls in bf16 with f32 accumulation, f32 master weights ({})",
                 matmul_bf16_native() ? "native AVX512_BF16"
                                      : "this CPU has no AVX512_BF16: oneDNN emulates it, slower than f32");
}

bool FinetuneFlags::lower() const { return parse_bool_flag("do_lower_case", do_lower_case); }

BertConfig finetune_config(const FinetuneFlags& f) {
  std::string path = f.bert_config_file;
  if (path.empty()) {
    BERTRAIN_CHECK(!f.init_checkpoint.empty(), "give --bert_config_file (or --init_checkpoint with a config.json beside it)");
    fs::path ck(f.init_checkpoint);
    path = ((fs::is_directory(ck) ? ck : ck.parent_path()) / "config.json").string();
  }
  return load_bert_config(path);
}

void load_init_checkpoint(const FinetuneFlags& f, Module& model) {
  if (f.init_checkpoint.empty()) {
    spdlog::info("no --init_checkpoint: training from random initialisation");
    return;
  }
  LoadReport rep;
  load_model(f.init_checkpoint, model, rep);
  spdlog::info("init_checkpoint {}: {}", f.init_checkpoint, rep.summary());
}

void write_tokenizer_files(const FinetuneFlags& f, const std::string& dir) {
  BertTokenizerFiles t;
  t.vocab_file = f.vocab_file;
  t.do_lower_case = f.lower();
  t.model_max_length = finetune_config(f).max_position_embeddings;
  save_tokenizer_files(dir, t);
}

}  // namespace bertrain::cli
