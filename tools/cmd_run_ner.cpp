// cmd_run_ner.cpp: `bertrain run-ner`: token classification (NER, POS) on ner::run_ner, with run_classifier.py's
// finetuning flags and Hugging Face run_ner.py's data flags.
#include "bertrain/tasks/ner/run_ner.h"
#include "commands.h"
#include "finetune_common.h"

namespace bertrain::cli {
namespace {

Registrar reg{{"run-ner",
               "finetune BertForTokenClassification for NER or POS tagging on CoNLL, UNER .iob2 or CoNLL-U files",
               [](CLI::App& sub) {
                 auto o = std::make_shared<ner::RunNerOptions>();
                 auto f = std::make_shared<FinetuneFlags>();
                 f->add_to(sub, *o);
                 sub.add_flag("--do_eval", o->do_eval, "evaluate --validation_file");
                 sub.add_option("--train_file", o->train_file, "training file");
                 sub.add_option("--validation_file", o->validation_file, "dev file (evaluated after each epoch)");
                 sub.add_option("--test_file", o->test_file, "file to predict with --do_predict");
                 sub.add_option("--data_format", o->data_format, "auto (by extension), conll, iob2 (UNER) or conllu")
                     ->capture_default_str();
                 sub.add_option("--label_column", o->label_column, "CoNLL-U only: upos (default) or xpos")
                     ->check(CLI::Validator(
                         [](std::string& v) { return v.empty() ? std::string("must be upos or xpos, not empty") : std::string(); },
                         "upos|xpos"));
                 sub.add_option("--tag_scheme", o->tag_scheme,
                                "the files' tags: iob1, iob2, iobes or none (plain labels); auto: none for CoNLL-U, "
                                "iob2 otherwise")
                     ->capture_default_str();
                 sub.add_option("--model_tag_scheme", o->model_tag_scheme, "scheme the model is trained in: iob2, iobes, or auto (the init checkpoint's id2label, else iob2)")
                     ->capture_default_str();
                 sub.add_option("--doc_stride", o->doc_stride, "next window of a long sentence starts this many pieces later")
                     ->capture_default_str();
                 sub.add_flag("--label_all_tokens", o->label_all_tokens, "label every sub-token, not only the first");
                 sub.add_flag("--return_entity_level_metrics", o->return_entity_level_metrics,
                              "per-type precision/recall/f1/number in eval_results.json");
                 auto* chinese = sub.add_option("--tokenize_chinese_chars", o->tokenize_chinese_chars,
                                                "isolate CJK characters before WordPiece (default: the "
                                                "--init_checkpoint's tokenizer_config.json, else true)");
                 return std::function<int()>([o, f, chinese] {
                   f->resolve(*o);
                   o->tokenize_chinese_chars_given = chinese->count() > 0;
                   return ner::run_ner(*o).exit_code;
                 });
               }}};

}  // namespace
}  // namespace bertrain::cli
