// flops.cpp: the model-FLOP count of a BERT pretraining step (see flops.h).
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

}  // namespace bertrain
