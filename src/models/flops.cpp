// flops.cpp: the model-FLOP counts of a BERT pretraining step and a classification finetuning step (see flops.h).
#include "bertrain/models/flops.h"

namespace bertrain {

BertStepFlops bert_pretraining_flops(const BertConfig& c, int64_t B, int64_t T, int64_t P) {
  const double b = static_cast<double>(B), t = static_cast<double>(T), p = static_cast<double>(P);
  const double H = static_cast<double>(c.hidden_size), I = static_cast<double>(c.intermediate_size);
  const double L = static_cast<double>(c.num_hidden_layers), NH = static_cast<double>(c.num_attention_heads);
  const double HS = static_cast<double>(c.head_size()), V = static_cast<double>(c.vocab_size);
  BertStepFlops f;
  f.dense = 6.0 * b * t * L * (4.0 * H * H + 2.0 * H * I);
  f.attention = 3.0 * 2.0 * 2.0 * b * NH * t * t * HS * L;
  f.mlm_head = 6.0 * b * p * (H * H + H * V);
  f.pooler_nsp = 6.0 * b * (H * H + 2.0 * H);
  return f;
}

BertStepFlops bert_classifier_flops(const BertConfig& c, std::span<const int32_t> lengths, int64_t num_labels) {
  const double H = static_cast<double>(c.hidden_size), I = static_cast<double>(c.intermediate_size);
  const double L = static_cast<double>(c.num_hidden_layers), NH = static_cast<double>(c.num_attention_heads);
  const double HS = static_cast<double>(c.head_size()), C = static_cast<double>(num_labels);
  double tokens = 0, squares = 0;
  for (int32_t len : lengths) {
    tokens += static_cast<double>(len);
    squares += static_cast<double>(len) * static_cast<double>(len);
  }
  BertStepFlops f;
  f.dense = 6.0 * tokens * L * (4.0 * H * H + 2.0 * H * I);
  f.attention = 3.0 * 2.0 * 2.0 * squares * NH * HS * L;
  f.pooler_nsp = 6.0 * static_cast<double>(lengths.size()) * (H * H + H * C);
  return f;
}

}  // namespace bertrain
