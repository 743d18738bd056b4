// run_ner.h: `bertrain run-ner` as a library function: token classification (NER, POS tagging) with
// BertForTokenClassification, google-research/bert's finetuning flags plus Hugging Face run_ner.py's
// (--label_all_tokens, --return_entity_level_metrics), evaluation and prediction files.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "bertrain/models/bert.h"
#include "bertrain/tasks/batching.h"
#include "bertrain/tasks/finetune_command.h"
#include "bertrain/tasks/ner/features.h"
#include "bertrain/train/finetune.h"

namespace bertrain::ner {

/// What evaluate_ner returns for one file.
struct NerEvaluation {
  NerMetrics metrics;
  double loss = 0;  ///< mean cross-entropy per labelled piece
  std::vector<std::vector<std::string>> predictions;  ///< per sentence, per word, in the file's scheme
};

/// Runs the model (eval mode, no gradients; its mode is restored) over `features` in batches of similar length
/// (tasks::length_sorted_order), each padded as `padding` says, and scores the
/// word predictions against the sentences' labels (compute_ner_metrics; chunks unless the scheme is none).
/// Throws bertrain::Error when batch_size < 1 or there are no windows.
NerEvaluation evaluate_ner(BertForTokenClassification& model, const std::vector<NerSentence>& sentences,
                           const NerFeatures& features, const LabelList& labels, const NerFeatureOptions& options,
                           int64_t batch_size,
                           const tasks::PaddingOptions& padding = {});

/// eval_results.json's keys, Hugging Face run_ner's with the "eval_" prefix: eval_precision, eval_recall,
/// eval_f1, eval_accuracy (overall; fractions), eval_loss, and with entity_level eval_<TYPE>_precision /
/// _recall / _f1 / _number per type. For the scheme none only eval_accuracy and eval_loss.
std::map<std::string, double> ner_metrics_map(const NerEvaluation& e, bool chunks, bool entity_level,
                                              const std::string& prefix = "eval_");

/// predictions.txt: for every sentence its preamble lines (comments, -DOCSTART-), then each word's input line
/// with the predicted label appended (after a TAB when the line has one, else a space: conlleval reads
/// "token ... gold predicted"), CoNLL-U's multiword-token and empty-node lines in place with "_" appended, then an
/// empty line.
std::string format_predictions(const std::vector<NerSentence>& sentences,
                               const std::vector<std::vector<std::string>>& predictions);

/// The flags of `bertrain run-ner`: the shared finetuning flags (run_classifier.py's names) and Hugging Face
/// run_ner.py's data flags.
struct RunNerOptions : tasks::FinetuneCommandOptions {
  RunNerOptions() {
    eval_batch_size = 32;
    predict_batch_size = 32;
  }
  bool do_eval = false;  ///< evaluate validation_file (after training, or the init checkpoint as it is)
  /// BasicTokenizer's tokenize_chinese_chars (Hugging Face's flag; the reference always does it).
  bool tokenize_chinese_chars = true;
  /// False: tokenize_chinese_chars is taken from init_checkpoint's tokenizer_config.json when it has one.
  bool tokenize_chinese_chars_given = false;
  std::string train_file, validation_file, test_file;  ///< Hugging Face run_ner's names
  std::string data_format = "auto";  ///< auto, conll, iob2, conllu (parse_ner_format)
  /// CoNLL-U only: upos or xpos (empty: upos). Given for another format, run_ner throws: a CoNLL line's label is
  /// its last column, a UNER .iob2 line's its third.
  std::string label_column;
  /// The files' tag scheme: iob1, iob2, iobes or none; "auto": none for CoNLL-U, iob2 otherwise.
  std::string tag_scheme = "auto";
  /// The scheme the model is trained in: iob2, iobes, or auto: the scheme of the init checkpoint's id2label when it
  /// has one (iobes when a label starts with S- or E-, else iob2), iob2 otherwise. A scheme that contradicts the
  /// checkpoint's labels throws.
  std::string model_tag_scheme = "auto";
  int doc_stride = 128;
  bool label_all_tokens = false;
  bool return_entity_level_metrics = false;
};

struct RunNerResult {
  int exit_code = 0;
  FinetuneResult training;
  std::map<std::string, double> eval_metrics;
};

/// Reads and checks every data file first (one error naming file and line for a malformed file or a label
/// training never saw), builds BertForTokenClassification with the labels as id2label (written to each
/// checkpoint's config.json), loads init_checkpoint (a config with label names decides the label list and its
/// order: labels are matched by name, CASES.md C43), then do_train (the shared finetuning loop, evaluating the
/// validation file after each epoch, best by eval_f1, or eval_accuracy for the scheme none), do_eval
/// (OUTPUT_DIR/eval_results.json, OUTPUT_DIR/predictions.txt) and do_predict (test_results.json,
/// test_predictions.txt). Throws bertrain::Error on bad flags, files or checkpoints.
RunNerResult run_ner(const RunNerOptions& options);

}  // namespace bertrain::ner
