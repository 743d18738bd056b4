// cmd_convert.cpp: `bertrain convert --input X --output DIR`: a google-research/bert TensorFlow checkpoint to a
// bertrain / Hugging Face directory, or back; a PyTorch pytorch_model.bin to either (the direction comes from the
// input and --output_format; see bertrain/io/tf_bert.h).
#include <spdlog/spdlog.h>

#include <memory>
#include <string>

#include "bertrain/io/tf_bert.h"
#include "commands.h"

namespace bertrain::cli {
namespace {

struct ConvertFlags {
  std::string input, output;
  ConvertOptions options;
};

int run_convert(const ConvertFlags& f) {
  const ConvertResult r = convert_checkpoint(f.input, f.output, f.options);
  spdlog::info("convert: {} -> {} ({}): {} tensors", f.input, f.output,
               r.to_tf ? "-> TensorFlow" : "-> bertrain / Hugging Face safetensors", r.tensors);
  spdlog::info("{}", r.report.summary());
  for (const auto& w : r.written) spdlog::info("wrote {}", w);
  return 0;
}

Registrar reg{{"convert",
               "convert a google-research/bert TF checkpoint to a bertrain / Hugging Face directory, or back; or a "
               "PyTorch pytorch_model.bin to either",
               [](CLI::App& sub) {
                 auto f = std::make_shared<ConvertFlags>();
                 sub.add_option("--input", f->input,
                                "TF checkpoint (prefix such as dir/bert_model.ckpt, or a directory with one *.index), "
                                "or a bertrain / Hugging Face checkpoint directory, .safetensors file or "
                                "pytorch_model.bin")
                     ->required();
                 sub.add_option("--output", f->output,
                                "output directory: config.json + model.safetensors + vocab.txt from a TF input; "
                                "bert_model.ckpt.{index,data-00000-of-00001} + bert_config.json + vocab.txt otherwise")
                     ->required();
                 sub.add_option("--bert_config_file", f->options.bert_config_file,
                                "model config (default: bert_config.json or config.json beside the input)");
                 sub.add_option("--vocab_file", f->options.vocab_file, "vocab to copy (default: vocab.txt beside the input)");
                 sub.add_option("--output_format", f->options.output_format,
                                "for a bertrain / Hugging Face input: tf or safetensors (default: safetensors for a "
                                "pytorch_model.bin, tf for safetensors)")
                     ->check(CLI::IsMember({"tf", "safetensors"}));
                 return std::function<int()>([f] { return run_convert(*f); });
               }}};

}  // namespace
}  // namespace bertrain::cli
