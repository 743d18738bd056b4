// cmd_run_squad.cpp: `bertrain run-squad`, google-research/bert run_squad.py's flags on squad::run_squad
// (SQuAD v1.1 and v2.0, scored by the official metric after each epoch).
#include <cstdlib>

#include "bertrain/tasks/squad/run_squad.h"
#include "commands.h"
#include "finetune_common.h"

namespace bertrain::cli {
namespace {

Registrar reg{{"run-squad", "finetune BertForQuestionAnswering on SQuAD v1.1 / v2.0 and predict (run_squad.py)",
               [](CLI::App& sub) {
                 auto o = std::make_shared<squad::RunSquadOptions>();
                 auto f = std::make_shared<FinetuneFlags>();
                 f->add_to(sub, *o);  // no --do_eval: run_squad.py evaluates through --do_predict
                 sub.add_option("--train_file", o->train_file, "SQuAD JSON for training");
                 sub.add_option("--predict_file", o->predict_file, "SQuAD JSON to predict (and score, when it has answers)");
                 sub.add_option("--doc_stride", o->doc_stride)->capture_default_str();
                 sub.add_option("--max_query_length", o->max_query_length)->capture_default_str();
                 sub.add_option("--n_best_size", o->n_best_size)->capture_default_str();
                 sub.add_option("--max_answer_length", o->max_answer_length)->capture_default_str();
                 sub.add_flag("--version_2_with_negative", o->version_2_with_negative, "SQuAD 2.0: questions may have no answer");
                 sub.add_option("--null_score_diff_threshold", o->null_score_diff_threshold)->capture_default_str();
                 const CLI::Validator at_least_one(
                     [](std::string& v) {  // non-numbers are left to CLI11's integer conversion, which names them
                       char* end = nullptr;
                       const long long n = std::strtoll(v.c_str(), &end, 10);
                       return (end != v.c_str() && *end == '\0' && n < 1) ? "must be at least 1, got " + v : std::string();
                     },
                     "N >= 1");
                 sub.add_option("--max_train_examples", o->max_train_examples, "use only the first N training questions")
                     ->check(at_least_one);
                 sub.add_option("--max_predict_examples", o->max_predict_examples, "predict only the first N questions")
                     ->check(at_least_one);
                 return std::function<int()>([o, f] {
                   f->resolve(*o);
                   return squad::run_squad(*o).exit_code;
                 });
               }}};

}  // namespace
}  // namespace bertrain::cli
