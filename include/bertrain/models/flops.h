// flops.h: model FLOPs of one BERT pretraining step and of one sequence-classification finetuning step
// (forward + backward), the numerators of model FLOPs utilisation (MFU) in `bertrain bench train`,
// `bertrain bench finetune` and tools/bench/scripts/bench_torch.py.
#pragma once

#include <cstdint>
#include <span>

#include "bertrain/models/bert_config.h"

namespace bertrain {

/// FLOPs of one step by part; total() is their sum.
struct BertStepFlops {
  double dense = 0, attention = 0, mlm_head = 0, pooler_nsp = 0;
  double total() const { return dense + attention + mlm_head + pooler_nsp; }
};

/// Model FLOPs of one BertForPreTraining training step (forward + backward) on B sequences of length T with P
/// masked-LM prediction slots each, counting 2 flops per multiply-add of every matmul and nothing else. Backward
/// costs twice the forward (input and weight gradients), hence the factor 6 = 3 x 2:
///   encoder dense layers: 6 * B*T * L * (4*H*H + 2*H*I)       (Q, K, V, attention output; intermediate, output)
///   attention matmuls:    3 * 2 * 2 * B * NH * T^2 * HS * L   (scores Q K^T and context P V, fwd + bwd)
///   masked-LM head:       6 * B*P * (H*H + H*V)               (transform dense and tied decoder, masked rows only)
///   pooler + NSP:         6 * B * (H*H + 2*H)
/// Padded positions and padded prediction slots are counted (the step computes them). Not counted: embeddings
/// (gathers), biases, layer norm, softmax, GELU, dropout, the losses, clipping and the optimizer (all
/// O(tokens x H) or O(parameters), under 1% at BERT sizes). This is the usual "6 x parameters x tokens" count
/// (Kaplan et al. 2020; PaLM's MFU, Chowdhery et al. 2022, appendix B) with the attention term and the
/// masked-only decoder made explicit. Shapes are taken as given (no validation).
BertStepFlops bert_pretraining_flops(const BertConfig& config, int64_t B, int64_t T, int64_t P);

/// Model FLOPs of one BertForSequenceClassification training step (forward + backward) counted on REAL tokens:
/// the sequences of the batch have lengths[b] real tokens each ([CLS] and [SEP] included, padding excluded),
/// and each is counted as if computed alone at its own length, whatever padding the step actually computed:
///   encoder dense layers: 6 * sum_b L_b * L * (4*H*H + 2*H*I)
///   attention matmuls:    3 * 2 * 2 * sum_b L_b^2 * NH * HS * L
///   pooler + classifier:  6 * B * (H*H + H*C)                 (in `pooler_nsp`; `mlm_head` is 0)
/// with C = num_labels. Same conventions as bert_pretraining_flops (2 flops per multiply-add, matmuls only,
/// backward = 2 x forward). Passing every length as T gives the FLOPs of the padded step. This is "MFU on real
/// tokens": padding computed is work done but not counted. No validation of the lengths.
BertStepFlops bert_classifier_flops(const BertConfig& config, std::span<const int32_t> lengths, int64_t num_labels);

}  // namespace bertrain
