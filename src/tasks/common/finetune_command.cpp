// finetune_command.cpp: the set-up both finetuning commands share (see finetune_command.h).
#include "bertrain/tasks/finetune_command.h"

#include <spdlog/spdlog.h>

#include <filesystem>

#include "bertrain/core/error.h"
#include "bertrain/io/config.h"
#include "bertrain/io/tokenizer_files.h"
#include "bertrain/ops/ops.h"
#include "bertrain/text/tokenizer.h"
#include "bertrain/train/train_step.h"

namespace bertrain::tasks {

namespace fs = std::filesystem;

BertConfig finetune_model_config(const FinetuneCommandOptions& o) {
  std::string path = o.bert_config_file;
  if (path.empty()) {
    BERTRAIN_CHECK(!o.init_checkpoint.empty(), "give --bert_config_file (or --init_checkpoint with a config.json beside it)");
    path = default_config_file(o.init_checkpoint);
  }
  return load_bert_config(path);
}

void check_finetune_inputs(const FinetuneCommandOptions& o, const BertConfig& cfg, const text::FullTokenizer& tok) {
  BERTRAIN_CHECK(static_cast<int64_t>(tok.vocab().size()) <= cfg.vocab_size, "vocab file ", o.vocab_file, " has ",
                 tok.vocab().size(), " entries but the model's vocab_size is ", cfg.vocab_size);
  BERTRAIN_CHECK(o.max_seq_length <= cfg.max_position_embeddings, "--max_seq_length ", o.max_seq_length,
                 " exceeds max_position_embeddings ", cfg.max_position_embeddings);
}

LoadReport load_init_checkpoint(const std::string& init_checkpoint, Module& model) {
  LoadReport rep;
  if (init_checkpoint.empty()) {
    spdlog::info("no --init_checkpoint: training from random initialisation");
    return rep;
  }
  load_model(init_checkpoint, model, rep);
  spdlog::info("init_checkpoint {}: {}", init_checkpoint, rep.summary());
  return rep;
}

void set_bf16(bool bf16) {
  set_matmul_precision(bf16 ? MatmulPrecision::bf16 : MatmulPrecision::f32);
  if (bf16)
    log_bf16_outlook();
}

std::function<void(const std::string&)> tokenizer_files_writer(const FinetuneCommandOptions& o, const BertConfig& cfg) {
  BertTokenizerFiles t;
  t.vocab_file = o.vocab_file;
  t.do_lower_case = o.do_lower_case;
  t.model_max_length = cfg.max_position_embeddings;
  return [t](const std::string& dir) { save_tokenizer_files(dir, t); };
}

}  // namespace bertrain::tasks
