// cmd_extract_features.cpp: `bertrain extract-features`: google-research/bert's extract_features.py (same flags,
// same JSON lines), plus --pooling cls|mean for one vector per line as JSON lines or a .npy file.
#include <spdlog/spdlog.h>

#include <memory>
#include <sstream>
#include <string>

#include "bertrain/core/error.h"
#include "bertrain/tasks/features/features.h"
#include "commands.h"

namespace bertrain::cli {
namespace {

struct ExtractFlags {
  features::Options o;
  std::string layers = "-1,-2,-3,-4", do_lower_case, pooling = "none";
};

int run_extract(ExtractFlags f) {
  if (!f.do_lower_case.empty()) f.o.do_lower_case = parse_bool_flag("do_lower_case", f.do_lower_case);
  f.o.layers.clear();
  std::stringstream ss(f.layers);
  for (std::string item; std::getline(ss, item, ',');) {
    try {
      size_t used = 0;
      f.o.layers.push_back(std::stoi(item, &used));
      BERTRAIN_CHECK(used == item.size(), "");
    } catch (const std::exception&) {
      throw Error("--layers: expected comma-separated integers such as -1,-2,-3,-4, got '" + f.layers + "'");
    }
  }
  f.o.pooling = f.pooling == "cls" ? features::Pooling::cls
                : f.pooling == "mean" ? features::Pooling::mean
                                      : features::Pooling::none;
  const features::Summary s = features::extract_features(f.o);
  spdlog::info("extract-features: {}", s.load_report);
  spdlog::info("extract-features: {} lines ({} truncated to max_seq_length {}), {} values per {} -> {}", s.examples,
               s.truncated, s.max_seq_length, s.dim, f.o.pooling == features::Pooling::none ? "token and layer" : "line",
               s.output);
  return 0;
}

Registrar reg{{"extract-features",
               "contextual token vectors from chosen layers, as google-research/bert's extract_features.py",
               [](CLI::App& sub) {
                 auto f = std::make_shared<ExtractFlags>();
                 sub.add_option("--input_file", f->o.input_file, "one text per line: text_a or text_a ||| text_b ('-' = stdin)")
                     ->required();
                 sub.add_option("--output_file", f->o.output_file,
                                "JSON lines (default: stdout); a name ending in .npy writes a float32 matrix (needs --pooling)");
                 sub.add_option("--layers", f->layers, "encoder layers, google-research/bert's indices (default -1,-2,-3,-4)");
                 sub.add_option("--bert_config_file", f->o.bert_config_file,
                                "model config (default: config.json or bert_config.json beside --init_checkpoint)");
                 sub.add_option("--init_checkpoint", f->o.init_checkpoint,
                                "TF checkpoint prefix (dir/bert_model.ckpt), checkpoint directory, .safetensors or pytorch_model.bin")
                     ->required();
                 sub.add_option("--vocab_file", f->o.vocab_file, "vocab.txt (default: the one beside --init_checkpoint)");
                 sub.add_option("--do_lower_case", f->do_lower_case,
                                "true|false (default: --init_checkpoint's tokenizer_config.json, else true)");
                 sub.add_option("--max_seq_length", f->o.max_seq_length,
                                "tokens per line after WordPiece (default: --init_checkpoint's model_max_length, else 128)");
                 sub.add_option("--batch_size", f->o.batch_size, "lines per batch (default 32)");
                 sub.add_option("--pooling", f->pooling, "none (per token, the reference's output), cls or mean: one "
                                                         "vector per line, the chosen layers concatenated")
                     ->check(CLI::IsMember({"none", "cls", "mean"}));
                 return std::function<int()>([f] { return run_extract(*f); });
               }}};

}  // namespace
}  // namespace bertrain::cli
