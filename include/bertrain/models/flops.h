// flops.h: model FLOPs of one BERT pretraining step (forward + backward), the numerator of model FLOPs
// utilisation (MFU) in `bertrain bench train` and scripts/bench_torch.py.
#pragma once

#include <cstdint>

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

}  // namespace bertrain
