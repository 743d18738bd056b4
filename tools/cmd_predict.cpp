// cmd_predict.cpp: `bertrain predict`: a checkpoint directory's task pipeline (tasks/predict.h) over a file of
// texts, pairs or questions, JSON lines out with the label names; no training flags to remember.
#include <spdlog/spdlog.h>

#include <memory>
#include <sstream>

#include "bertrain/core/error.h"
#include "bertrain/tasks/predict.h"
#include "commands.h"

namespace bertrain::cli {
namespace {

struct PredictFlags {
  tasks::PredictOptions o;
  std::string do_lower_case, pooling = "mean", layers = "-1";
};

int run_predict(PredictFlags f) {
  if (!f.do_lower_case.empty()) f.o.pipeline.do_lower_case = parse_bool_flag("do_lower_case", f.do_lower_case);
  f.o.pooling = f.pooling == "cls" ? tasks::FeatureExtractionPipeline::Pooling::cls
                                   : tasks::FeatureExtractionPipeline::Pooling::mean;
  f.o.layers.clear();
  std::stringstream ss(f.layers);
  for (std::string item; std::getline(ss, item, ',');) {
    try {
      size_t used = 0;
      f.o.layers.push_back(std::stoi(item, &used));
      BERTRAIN_CHECK(used == item.size(), "");
    } catch (const std::exception&) {
      throw Error("--layers: expected comma-separated integers such as -1,-2, got '" + f.layers + "'");
    }
  }
  const tasks::PredictSummary s = tasks::predict_file(f.o);
  spdlog::info("predict: {} lines, {} with {} -> {}", s.lines, s.task, f.o.checkpoint, s.output);
  return 0;
}

Registrar reg{{"predict",
               "run a checkpoint on new data: its task (classification, token classification, question answering "
               "or features) from its config.json, JSON lines out",
               [](CLI::App& sub) {
                 auto f = std::make_shared<PredictFlags>();
                 sub.add_option("--checkpoint", f->o.checkpoint,
                                "checkpoint directory: a run's best/ or checkpoint-N/, a Hugging Face directory, or a "
                                "TF checkpoint directory with bert_config.json and vocab.txt")
                     ->required();
                 sub.add_option("--input", f->o.input_file,
                                "one input per line: text, 'text ||| text_pair', or a JSON object (text, text_pair; "
                                "question, context; optional id) ('-' = stdin)")
                     ->required();
                 sub.add_option("--output", f->o.output_file, "JSON lines (default: stdout)");
                 sub.add_option("--task", f->o.task,
                                "text-classification, token-classification, question-answering or feature-extraction "
                                "(default: from the checkpoint's architectures)")
                     ->check(CLI::IsMember({"text-classification", "token-classification", "question-answering",
                                            "feature-extraction"}));
                 sub.add_option("--batch_size", f->o.pipeline.batch_size, "inputs per forward pass")
                     ->capture_default_str()
                     ->check(CLI::PositiveNumber);
                 sub.add_option("--max_seq_length", f->o.pipeline.max_seq_length,
                                "word pieces per input (default: the checkpoint's model_max_length)");
                 sub.add_option("--vocab_file", f->o.pipeline.vocab_file, "default: the checkpoint's vocab.txt");
                 sub.add_option("--do_lower_case", f->do_lower_case,
                                "default: the checkpoint's tokenizer_config.json; a contradicting value is refused");
                 sub.add_option("--pooling", f->pooling, "feature-extraction: cls or mean (default)")
                     ->check(CLI::IsMember({"cls", "mean"}));
                 sub.add_option("--layers", f->layers, "feature-extraction: encoder layers to concatenate (default -1)");
                 return std::function<int()>([f] { return run_predict(*f); });
               }}};

}  // namespace
}  // namespace bertrain::cli
