// bert_config.cpp: BertConfig validation.
#include "bertrain/models/bert_config.h"

#include <set>

#include "bertrain/core/error.h"

namespace bertrain {

void BertConfig::validate() const {
  auto positive = [](const char* name, int64_t v) {
    BERTRAIN_CHECK(v > 0, "config: ", name, " must be positive, got ", v);
  };
  positive("vocab_size", vocab_size);
  positive("hidden_size", hidden_size);
  positive("num_hidden_layers", num_hidden_layers);
  positive("num_attention_heads", num_attention_heads);
  positive("intermediate_size", intermediate_size);
  positive("max_position_embeddings", max_position_embeddings);
  positive("type_vocab_size", type_vocab_size);
  positive("num_labels", num_labels);
  BERTRAIN_CHECK(hidden_size % num_attention_heads == 0, "config: hidden_size (", hidden_size,
                 ") must be divisible by num_attention_heads (", num_attention_heads, ")");
  BERTRAIN_CHECK(hidden_dropout_prob >= 0 && hidden_dropout_prob < 1,
                 "config: hidden_dropout_prob must be in [0, 1), got ", hidden_dropout_prob);
  BERTRAIN_CHECK(attention_probs_dropout_prob >= 0 && attention_probs_dropout_prob < 1,
                 "config: attention_probs_dropout_prob must be in [0, 1), got ", attention_probs_dropout_prob);
  BERTRAIN_CHECK(initializer_range > 0, "config: initializer_range must be positive, got ", initializer_range);
  BERTRAIN_CHECK(layer_norm_eps >= 0, "config: layer_norm_eps must be >= 0, got ", layer_norm_eps);
  BERTRAIN_CHECK(hidden_act == "gelu" || hidden_act == "gelu_new" || hidden_act == "gelu_pytorch_tanh" ||
                     hidden_act == "relu" || hidden_act == "tanh",
                 "config: unknown hidden_act '", hidden_act,
                 "' (expected gelu, gelu_new, gelu_pytorch_tanh, relu or tanh)");
  if (!id2label.empty()) {
    BERTRAIN_CHECK(static_cast<int64_t>(id2label.size()) == num_labels, "config: id2label has ", id2label.size(),
                   " labels but num_labels is ", num_labels);
    std::set<std::string> seen;
    for (const std::string& name : id2label)
      BERTRAIN_CHECK(seen.insert(name).second, "config: id2label names '", name,
                     "' twice (label2id, its inverse, needs distinct names)");
  }
}

std::string BertConfig::label_name(int64_t i) const {
  BERTRAIN_ASSERT(i >= 0 && i < num_labels, "label index ", i, " outside [0, ", num_labels, ")");
  return id2label.empty() ? "LABEL_" + std::to_string(i) : id2label[static_cast<size_t>(i)];
}

bool BertConfig::has_label_names() const {
  for (size_t i = 0; i < id2label.size(); ++i)
    if (id2label[i] != "LABEL_" + std::to_string(i)) return true;
  return false;
}

}  // namespace bertrain
