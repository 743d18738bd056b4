// cmd_run_ner.cpp: `bertrain run-ner`: token classification (NER, POS) on ner::run_ner, with run_classifier.py's
// finetuning flags and Hugging Face run_ner.py's data flags.
#include <map>

#include "bertrain/tasks/ner/run_ner.h"
#include "commands.h"

namespace bertrain::cli {
namespace {

Registrar reg{{"run-ner",
               "finetune BertForTokenClassification for NER or POS tagging on CoNLL, UNER .iob2 or CoNLL-U files",
               [](CLI::App& sub) {
                 auto o = std::make_shared<ner::RunNerOptions>();
                 auto lower = std::make_shared<std::string>("true");
                 FinetuneOptions& t = o->finetune;
                 t.learning_rate = 5e-5;
                 sub.add_option("--train_file", o->train_file, "training file");
                 sub.add_option("--validation_file", o->validation_file, "dev file (evaluated after each epoch)");
                 sub.add_option("--test_file", o->test_file, "file to predict with --do_predict");
                 sub.add_option("--data_format", o->data_format, "auto (by extension), conll, iob2 (UNER) or conllu")
                     ->capture_default_str();
                 sub.add_option("--label_column", o->label_column, "CoNLL-U: upos or xpos")->capture_default_str();
                 sub.add_option("--tag_scheme", o->tag_scheme,
                                "the files' tags: iob1, iob2, iobes or none (plain labels); auto: none for CoNLL-U, "
                                "iob2 otherwise")
                     ->capture_default_str();
                 sub.add_option("--model_tag_scheme", o->model_tag_scheme, "scheme the model is trained in: iob2 or iobes")
                     ->capture_default_str();
                 sub.add_option("--doc_stride", o->doc_stride, "next window of a long sentence starts this many pieces later")
                     ->capture_default_str();
                 sub.add_flag("--label_all_tokens", o->label_all_tokens, "label every sub-token, not only the first");
                 sub.add_flag("--return_entity_level_metrics", o->return_entity_level_metrics,
                              "per-type precision/recall/f1/number in eval_results.json");
                 sub.add_option("--init_checkpoint", o->init_checkpoint, "checkpoint directory or .safetensors file");
                 sub.add_option("--bert_config_file", o->bert_config_file, "model config (default: config.json beside it)");
                 sub.add_option("--vocab_file", o->vocab_file, "BERT vocab.txt")->required();
                 sub.add_option("--do_lower_case", *lower, "true for uncased models")->capture_default_str();
                 sub.add_option("--tokenize_chinese_chars", o->tokenize_chinese_chars,
                                "isolate CJK characters before WordPiece (default true)");
                 sub.add_option("--max_seq_length", o->max_seq_length)->capture_default_str();
                 sub.add_option("--train_batch_size", t.train_batch_size)->capture_default_str();
                 sub.add_option("--eval_batch_size", o->eval_batch_size)->capture_default_str();
                 sub.add_option("--predict_batch_size", o->predict_batch_size)->capture_default_str();
                 sub.add_option("--learning_rate", t.learning_rate)->capture_default_str();
                 sub.add_option("--num_train_epochs", t.num_train_epochs)->capture_default_str();
                 sub.add_option("--warmup_proportion", t.warmup_proportion)->capture_default_str();
                 sub.add_option("--max_steps", t.max_steps, "stop after this many steps (0: num_train_epochs decides)");
                 sub.add_option("--output_dir", t.output_dir)->required();
                 sub.add_option("--seed", t.seed)->capture_default_str();
                 sub.add_option("--save_checkpoints_steps", t.save_checkpoints_steps)->capture_default_str();
                 sub.add_flag("--do_train", o->do_train);
                 sub.add_flag("--do_eval", o->do_eval, "evaluate --validation_file");
                 sub.add_flag("--do_predict", o->do_predict, "predict --test_file");
                 sub.add_flag("--resume", t.resume, "continue from the newest checkpoint in output_dir");
                 sub.add_flag("--bf16", o->bf16, "bf16 matmuls with f32 accumulation");
                 return std::function<int()>([o, lower] {
                   o->do_lower_case = parse_bool_flag("do_lower_case", *lower);
                   return ner::run_ner(*o).exit_code;
                 });
               }}};

}  // namespace
}  // namespace bertrain::cli
