// bert_config.cpp: BertConfig validation (the checks its header documents).
#include "bertrain/models/bert_config.h"

#include "bertrain/core/error.h"

namespace bertrain {

void BertConfig::validate() const {
  auto positive = [](const char* key, int64_t v) {
    BERTRAIN_CHECK(v > 0, "BertConfig: ", key, " must be positive, got ", v);
  };
  positive("vocab_size", vocab_size);
  positive("hidden_size", hidden_size);
  positive("num_hidden_layers", num_hidden_layers);
  positive("num_attention_heads", num_attention_heads);
  positive("intermediate_size", intermediate_size);
  positive("max_position_embeddings", max_position_embeddings);
  positive("type_vocab_size", type_vocab_size);
  positive("num_labels", num_labels);
  BERTRAIN_CHECK(hidden_size % num_attention_heads == 0, "BertConfig: hidden_size (", hidden_size,
                 ") must be divisible by num_attention_heads (", num_attention_heads, ")");
  auto probability = [](const char* key, double p) {
    BERTRAIN_CHECK(p >= 0.0 && p < 1.0, "BertConfig: ", key, " must be in [0, 1), got ", p);
  };
  probability("hidden_dropout_prob", hidden_dropout_prob);
  probability("attention_probs_dropout_prob", attention_probs_dropout_prob);
  BERTRAIN_CHECK(hidden_act == "gelu" || hidden_act == "gelu_new" || hidden_act == "gelu_pytorch_tanh" ||
                     hidden_act == "relu" || hidden_act == "tanh",
                 "BertConfig: unknown hidden_act '", hidden_act,
                 "' (expected gelu, gelu_new, gelu_pytorch_tanh, relu or tanh)");
}

}  // namespace bertrain
