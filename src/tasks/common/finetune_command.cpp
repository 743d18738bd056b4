// finetune_command.cpp: the set-up both finetuning commands share (see finetune_command.h).
#include "bertrain/tasks/finetune_command.h"

#include <spdlog/spdlog.h>

#include <algorithm>
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

std::function<void(const std::string&)> tokenizer_files_writer(const FinetuneCommandOptions& o,
                                                               bool tokenize_chinese_chars) {
  BertTokenizerFiles t;
  t.vocab_file = o.vocab_file;
  t.do_lower_case = o.lower_case();
  t.model_max_length = o.max_seq_length;
  t.tokenize_chinese_chars = tokenize_chinese_chars;
  return [t](const std::string& dir) { save_tokenizer_files(dir, t); };
}

void take_tokenizer_defaults(const CheckpointFiles& ck, std::string& vocab_file, std::optional<bool>& do_lower_case) {
  if (!ck.vocab_file.empty()) {
    if (vocab_file.empty()) {
      vocab_file = ck.vocab_file;
    } else {
      BERTRAIN_CHECK(same_file_contents(vocab_file, ck.vocab_file), "--vocab_file ", vocab_file,
                     " contradicts the checkpoint: it differs from ", ck.vocab_file,
                     "; leave --vocab_file out to use the checkpoint's");
    }
  }
  if (ck.do_lower_case) {
    if (!do_lower_case) {
      do_lower_case = ck.do_lower_case;
    } else {
      BERTRAIN_CHECK(*do_lower_case == *ck.do_lower_case, "--do_lower_case ", *do_lower_case,
                     " contradicts the checkpoint: ", ck.do_lower_case_source, " says do_lower_case ",
                     *ck.do_lower_case, "; leave --do_lower_case out to use the checkpoint's");
    }
  }
}

std::optional<CheckpointFiles> apply_checkpoint_defaults(FinetuneCommandOptions& o, const std::string& architecture,
                                                         int default_max_seq_length) {
  std::optional<CheckpointFiles> ck;
  // A checkpoint that does not exist is left to load_init_checkpoint, after the data files have been checked (a bad
  // data file is reported first, in seconds).
  std::error_code ec;
  if (!o.init_checkpoint.empty() &&
      (fs::exists(o.init_checkpoint, ec) || fs::exists(o.init_checkpoint + ".index", ec))) {
    ck = read_checkpoint_files(o.init_checkpoint, o.bert_config_file);
    const bool vocab_given = !o.vocab_file.empty(), lower_given = o.do_lower_case.has_value();
    take_tokenizer_defaults(*ck, o.vocab_file, o.do_lower_case);
    if (!vocab_given && !o.vocab_file.empty()) spdlog::info("vocab_file: {} (the checkpoint's)", o.vocab_file);
    if (!lower_given && o.do_lower_case)
      spdlog::info("do_lower_case: {} (from {})", *o.do_lower_case, ck->do_lower_case_source);
    if (o.max_seq_length == 0 && ck->model_max_length && ck->architecture() == architecture) {
      o.max_seq_length = static_cast<int>(*ck->model_max_length);
      spdlog::info("max_seq_length: {} (the checkpoint's model_max_length)", o.max_seq_length);
    }
  }
  BERTRAIN_CHECK(!o.vocab_file.empty(), "give --vocab_file",
                 o.init_checkpoint.empty() ? std::string(" (or an --init_checkpoint with a vocab.txt)")
                                           : " (--init_checkpoint " + o.init_checkpoint + " has no vocab.txt)");
  if (!o.do_lower_case) o.do_lower_case = true;
  // The command's default, within the checkpoint's max_position_embeddings (a small model may have fewer).
  if (o.max_seq_length == 0)
    o.max_seq_length = ck ? static_cast<int>(std::min<int64_t>(default_max_seq_length, ck->config.max_position_embeddings))
                          : default_max_seq_length;
  BERTRAIN_CHECK(o.max_seq_length >= 1, "--max_seq_length must be positive, got ", o.max_seq_length);
  return ck;
}

}  // namespace bertrain::tasks
