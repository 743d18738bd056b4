// cmd_run_classifier.cpp: `bertrain run-classifier`, google-research/bert run_classifier.py's flags on
// glue::run_classifier (GLUE tasks and a generic CSV/TSV/JSONL task).
#include "bertrain/tasks/glue/run_classifier.h"
#include "commands.h"
#include "finetune_common.h"

namespace bertrain::cli {
namespace {

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : s + ",") {
    if (ch != ',') {
      cur += ch;
    } else if (!cur.empty()) {
      out.push_back(cur);
      cur.clear();
    }
  }
  return out;
}

Registrar reg{{"run-classifier",
               "finetune BertForSequenceClassification on a GLUE task or your own CSV/TSV/JSONL (run_classifier.py)",
               [](CLI::App& sub) {
                 auto o = std::make_shared<glue::RunClassifierOptions>();
                 auto f = std::make_shared<FinetuneFlags>();
                 auto labels = std::make_shared<std::string>();
                 glue::GlueOptions& go = o->generic;
                 f->add_to(sub, *o);
                 sub.add_flag("--do_eval", o->do_eval, "evaluate on the dev file");
                 sub.add_option("--task_name", o->task_name, "CoLA, SST-2, MRPC, QQP, STS-B, MNLI, QNLI, RTE, WNLI or generic")->required();
                 sub.add_option("--data_dir", o->data_dir, "directory with the task's train/dev/test files")->required();
                 sub.add_option("--format", go.format, "generic task: csv, tsv or jsonl (default: from the file names)");
                 sub.add_option("--text_a_column", go.text_a_column, "generic task: first text column or key");
                 sub.add_option("--text_b_column", go.text_b_column, "generic task: second text column (pairs)");
                 sub.add_option("--label_column", go.label_column, "generic task: label column");
                 sub.add_option("--index_column", go.index_column, "generic task: row id column for the submission file");
                 sub.add_option("--labels", *labels, "generic task: comma-separated label list");
                 sub.add_flag("--regression", go.regression, "generic task: a float label (num_labels = 1)");
                 return std::function<int()>([o, f, labels] {
                   f->resolve(*o);
                   o->generic.labels = split_commas(*labels);
                   return glue::run_classifier(*o).exit_code;
                 });
               }}};

}  // namespace
}  // namespace bertrain::cli
