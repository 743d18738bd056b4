// bert_config.h: BertConfig, the model hyper-parameters under Hugging Face config.json key names.
// Parsing of config files lives in bertrain/io (lower layers never parse, DESIGN.md section 5).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace bertrain {

struct BertConfig {
  int64_t vocab_size = 30522;
  int64_t hidden_size = 768;
  int64_t num_hidden_layers = 12;
  int64_t num_attention_heads = 12;
  int64_t intermediate_size = 3072;
  /// "gelu" (exact erf form, as the released checkpoints and Hugging Face), "gelu_new" or "gelu_pytorch_tanh"
  /// (tanh form), "relu", "tanh".
  std::string hidden_act = "gelu";
  double hidden_dropout_prob = 0.1;
  double attention_probs_dropout_prob = 0.1;
  int64_t max_position_embeddings = 512;
  int64_t type_vocab_size = 2;
  double initializer_range = 0.02;
  /// 1e-12 as google-research/bert (its bert_config.json has no such key).
  double layer_norm_eps = 1e-12;
  /// Number of labels for BertForSequenceClassification (Hugging Face: derived from id2label).
  int64_t num_labels = 2;
  /// Class names by output index, Hugging Face's `id2label` (its `label2id` is the inverse, so names are
  /// distinct). Empty: transformers' default names LABEL_0 ... LABEL_{num_labels-1}. When not empty its size is
  /// num_labels. A finetuned classifier's names tell which output means which class (CASES.md C43).
  std::vector<std::string> id2label;
  /// The model class the weights belong to, Hugging Face's config.json "architectures" (its first entry):
  /// "BertForPreTraining", "BertForSequenceClassification", "BertForQuestionAnswering",
  /// "BertForTokenClassification", "BertModel", ... Empty (a google bert_config.json, or a config made in code):
  /// written as "BertForPreTraining". The task pipelines (tasks/pipeline.h) choose their task by it.
  std::string architecture;
  /// Hugging Face's "finetuning_task": the task a classifier or tagger was finetuned on ("SST-2", "generic",
  /// "squad", "ner", ...); empty (not written) for a pretrained model.
  std::string finetuning_task;

  /// The name of output `i`: id2label[i], or "LABEL_<i>" when id2label is empty.
  std::string label_name(int64_t i) const;
  /// True when id2label holds a name other than transformers' default LABEL_<i>: the config says what its
  /// classifier's outputs mean (a checkpoint "carries labels").
  bool has_label_names() const;
  /// Keys of the config file that bertrain does not use (google-research/bert's "directionality" and
  /// "pooler_*", any other tool's own keys), each as its JSON text: kept so that writing the config again
  /// (config.json, bert_config.json) loses nothing, as transformers keeps unknown config attributes.
  std::map<std::string, std::string> extra;

  /// Throws bertrain::Error naming the field when a size is not positive, hidden_size is not divisible by
  /// num_attention_heads, a probability is outside [0, 1), hidden_act is unknown, or id2label is not empty and
  /// has a size other than num_labels or a repeated name.
  void validate() const;
  /// hidden_size / num_attention_heads.
  int64_t head_size() const { return hidden_size / num_attention_heads; }
};

}  // namespace bertrain
