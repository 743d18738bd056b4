// pipeline.h: a finetuned (or pretrained) checkpoint directory as a ready-to-call model, as Hugging Face's
// pipeline("text-classification", model=dir) and sentence-transformers' encode: load in one call (config,
// weights, vocabulary, casing, labels and sequence length from the directory's own files, io/checkpoint_files.h),
// answer in one call. Inputs are batched inside (sorted by length, each batch through the unpadded encoder),
// outputs come back in input order.
//
// Thread safety: a loaded pipeline is immutable; its call operators are const and may run concurrently from
// any number of threads on one loaded object (each call keeps its activations on its own stack; gradients are
// off per thread, the model is in eval mode from loading on and never changes). Copies share the loaded model.
//
// Offsets: `start` / `end` count Unicode code points of the input (Python's str indexes, as Hugging Face's
// pipelines report them); `byte_start` / `byte_end` are the same span in UTF-8 bytes (std::string::substr).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace bertrain::tasks {

/// Settings every pipeline shares. What is left unset comes from the checkpoint directory.
struct PipelineOptions {
  /// Inputs per forward pass.
  int64_t batch_size = 32;
  /// Word pieces per sequence; 0: the checkpoint's model_max_length (tokenizer_config.json, where bertrain's
  /// finetuning commands write their --max_seq_length), else min(512, max_position_embeddings).
  int max_seq_length = 0;
  /// Empty: vocab.txt in the directory. A file whose contents differ from it is refused.
  std::string vocab_file;
  /// nullopt: the directory's tokenizer_config.json (or a Google model's name), else true. A value that
  /// contradicts the directory's is refused.
  std::optional<bool> do_lower_case;
};

/// The task a checkpoint directory was finetuned for, from config.json's "architectures":
/// "text-classification" (BertForSequenceClassification), "token-classification" (BertForTokenClassification),
/// "question-answering" (BertForQuestionAnswering), else "feature-extraction" (BertForPreTraining, BertModel,
/// ...). Throws bertrain::Error as read_checkpoint_files.
std::string pipeline_task(const std::string& checkpoint);

/// Sequence (pair) classification and regression: BertForSequenceClassification.
class TextClassificationPipeline {
 public:
  struct Input {
    std::string text;
    std::optional<std::string> text_pair;  ///< the second sequence of pair tasks (MNLI, QNLI, ...)
  };
  struct Result {
    std::string label;          ///< id2label[label_id]; empty for regression
    int32_t label_id = 0;       ///< argmax; 0 for regression
    double score = 0;           ///< the probability of `label` (softmax), or the predicted value for regression
    std::vector<float> scores;  ///< every label's probability in id2label order (the columns of test_results.tsv)
  };

  /// Loads a checkpoint directory (bertrain's, Hugging Face's, or a TF checkpoint with bert_config.json) whose
  /// weights hold a classifier. Throws bertrain::Error (one line) when a file is missing or invalid, the weights
  /// have no classifier.weight / classifier.bias, a setting contradicts the directory's, or max_seq_length
  /// exceeds max_position_embeddings.
  static TextClassificationPipeline load(const std::string& checkpoint, const PipelineOptions& options = {});

  /// One result per input, in input order. Texts are tokenized and truncated exactly as
  /// run-classifier (glue::convert_single_example). Throws bertrain::Error on text that is not UTF-8.
  std::vector<Result> operator()(const std::vector<Input>& inputs) const;
  Result operator()(const std::string& text) const;
  Result operator()(const std::string& text, const std::string& text_pair) const;

  const std::vector<std::string>& labels() const;  ///< id2label (LABEL_0 ... when the config names none)
  bool is_regression() const;
  int max_seq_length() const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

/// Token classification (NER, POS): BertForTokenClassification, as run-ner predicts it. The text is split into
/// words at whitespace (Python's str.split(), the words of a CoNLL file's lines: split punctuation off as the
/// training data did); each word gets the label of its first word piece in the window where it has the most
/// context (long texts are cut into doc_stride windows, as run-ner).
class TokenClassificationPipeline {
 public:
  struct Word {
    std::string word, label;  ///< label in the model's scheme (id2label)
    double score = 0;         ///< its probability at the word's first piece
    int64_t start = 0, end = 0, byte_start = 0, byte_end = 0;
  };
  /// A chunk of words, grouped by the tag scheme (B-/I-, or B-/I-/E-/S-, as ner::extract_chunks and seqeval) as
  /// Hugging Face's aggregation_strategy="simple" groups them: entity_group is the type without its prefix,
  /// score the mean of its words' scores, word the input's text from start to end.
  struct Entity {
    std::string entity_group, word;
    double score = 0;
    int64_t start = 0, end = 0, byte_start = 0, byte_end = 0;
  };
  struct Result {
    std::vector<Entity> entities;  ///< empty for plain labels (POS tags: see words)
    std::vector<Word> words;
  };
  /// doc_stride: 0 takes the checkpoint's (config.json task_specific_params["token-classification"], written by
  /// run-ner), else 128. Throws as TextClassificationPipeline::load, or when the weights have no classifier.
  static TokenClassificationPipeline load(const std::string& checkpoint, const PipelineOptions& options = {},
                                          int doc_stride = 0);
  std::vector<Result> operator()(const std::vector<std::string>& texts) const;
  Result operator()(const std::string& text) const;
  const std::vector<std::string>& labels() const;
  /// True when the labels mark chunks (IOB2 / IOBES); false for plain labels.
  bool has_chunks() const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

/// Extractive question answering: BertForQuestionAnswering with run-squad's features and post-processing
/// (squad::convert_examples_to_features, squad::compute_predictions: the same answers as predictions.json).
class QuestionAnsweringPipeline {
 public:
  struct Input {
    std::string question, context;
  };
  struct Result {
    std::string answer;  ///< "" when a SQuAD 2.0 model finds no answer
    double score = 0;    ///< the answer's probability among the n-best candidates (nbest_predictions.json)
    /// The answer's span in the context (-1 for no answer). The answer is the context's text there, except when
    /// the reference's get_final_text keeps the whole words of its span (then the span covers them).
    int64_t start = -1, end = -1, byte_start = -1, byte_end = -1;
  };
  /// The settings of run-squad's prediction; nullopt: the checkpoint's (config.json
  /// task_specific_params["question-answering"], written by run-squad), else run_squad.py's defaults.
  struct Settings {
    std::optional<int> doc_stride, max_query_length, n_best_size, max_answer_length;
    std::optional<bool> version_2_with_negative;
    std::optional<double> null_score_diff_threshold;
  };
  /// max_seq_length defaults as PipelineOptions says, with 384 (run_squad.py's) instead of 512.
  static QuestionAnsweringPipeline load(const std::string& checkpoint, const PipelineOptions& options = {},
                                        const Settings& settings = {});
  std::vector<Result> operator()(const std::vector<Input>& inputs) const;
  Result operator()(const std::string& question, const std::string& context) const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

/// One vector per text (sentence embeddings): the [CLS] vector or the mean over the text's tokens ([CLS] and
/// [SEP] included) of the chosen encoder layers, concatenated, as extract-features --pooling cls|mean computes
/// them (features::compute_layers and features::pool: the same values). Any checkpoint's encoder.
class FeatureExtractionPipeline {
 public:
  enum class Pooling { cls, mean };
  struct Input {
    std::string text;
    std::optional<std::string> text_pair;
  };
  /// layers: google-research/bert's indices (-1 the last encoder layer). Throws as the other loads, or for a
  /// layer outside [-L, L-1].
  static FeatureExtractionPipeline load(const std::string& checkpoint, const PipelineOptions& options = {},
                                        Pooling pooling = Pooling::mean, std::vector<int> layers = {-1});
  /// (len(layers) * H) values per input, in input order.
  std::vector<std::vector<float>> operator()(const std::vector<Input>& inputs) const;
  std::vector<float> operator()(const std::string& text) const;
  int64_t dim() const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace bertrain::tasks
