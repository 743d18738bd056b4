// cmd_export_onnx.cpp: `bertrain export-onnx --checkpoint DIR --output model.onnx [--task ...] [--opset N]`: a
// checkpoint with its head as an ONNX model plus its tokenizer files (bertrain/io/onnx.h).
#include <spdlog/spdlog.h>

#include <memory>
#include <string>

#include "bertrain/io/onnx.h"
#include "commands.h"

namespace bertrain::cli {
namespace {

struct ExportFlags {
  OnnxExportOptions o;
  std::string task = "auto", do_lower_case;
};

int run_export(ExportFlags f) {
  f.o.task = parse_onnx_task(f.task);
  if (!f.do_lower_case.empty()) f.o.do_lower_case = parse_bool_flag("do_lower_case", f.do_lower_case);
  const OnnxExportResult r = export_onnx(f.o);
  spdlog::info("export-onnx: task {} ({})", onnx_task_name(r.task), r.task_reason);
  spdlog::info("{}", r.load_summary);
  for (const auto& w : r.warnings) spdlog::warn("export-onnx: {}", w);
  std::string outs;
  for (const auto& o : r.outputs) outs += (outs.empty() ? "" : ", ") + o;
  spdlog::info("export-onnx: opset {}, {} nodes, {} initializers, outputs {}, {} bytes", f.o.opset, r.nodes,
               r.initializers, outs, r.bytes);
  for (const auto& w : r.written) spdlog::info("wrote {}", w);
  return 0;
}

Registrar reg{{"export-onnx", "a checkpoint with its head as an ONNX model (for ONNX Runtime), with its tokenizer files",
               [](CLI::App& sub) {
                 auto f = std::make_shared<ExportFlags>();
                 sub.add_option("--checkpoint", f->o.checkpoint,
                                "checkpoint directory (config.json + model.safetensors), .safetensors file, or TF "
                                "checkpoint prefix")
                     ->required();
                 sub.add_option("--output", f->o.output,
                                "the .onnx file; vocab.txt, tokenizer_config.json and special_tokens_map.json go beside it")
                     ->required();
                 sub.add_option("--task", f->task,
                                "auto (default: from config.json's architectures, else the head the checkpoint has), "
                                "encoder, sequence-classification, question-answering, token-classification, "
                                "pretraining");
                 sub.add_option("--opset", f->o.opset, "ONNX opset, 13 to 17 (default 17)");
                 sub.add_option("--bert_config_file", f->o.bert_config_file,
                                "model config (default: config.json or bert_config.json beside the checkpoint)");
                 sub.add_option("--vocab_file", f->o.vocab_file, "vocab.txt to ship (default: the checkpoint's)");
                 sub.add_option("--do_lower_case", f->do_lower_case,
                                "true|false for tokenizer_config.json (default: the checkpoint's tokenizer_config.json, "
                                "else its Google model name or vocabulary, as the finetuning commands decide, else true)");
                 return std::function<int()>([f] { return run_export(*f); });
               }}};

}  // namespace
}  // namespace bertrain::cli
