// layers.h: the building blocks of BERT: Linear, LayerNorm, Embedding, Dropout, and initialisers.
#pragma once

#include "bertrain/core/rng.h"
#include "bertrain/nn/module.h"
#include "bertrain/ops/ops.h"

namespace bertrain {

/// y = x W^T + b; weight (out, in), bias (out), as torch.nn.Linear and Hugging Face checkpoints store them.
/// Initialised as google-research/bert: weight ~ truncated normal(0, init_std), bias 0.
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias, double init_std, Rng& rng, DType dtype = DType::f32);
  /// x: (..., in) -> (..., out).
  Variable forward(const Variable& x) const;
  const Variable& weight() const { return weight_; }
  const Variable& bias() const { return bias_; }

 private:
  Variable weight_, bias_;
};

class Dropout;

/// Layer norm over the last axis, weight 1 and bias 0 at start (Hugging Face names: weight, bias).
class LayerNorm : public Module {
 public:
  LayerNorm(int64_t features, double eps, DType dtype = DType::f32);
  /// x: (..., features) -> same shape.
  Variable forward(const Variable& x) const;
  /// layer_norm(dropout(x) + residual) with `dropout`'s probability, mode and key, fused into one op
  /// (dropout_add_layer_norm). x, residual: (B, ..., features), or packed tokens (N, features) with `tokens`.
  Variable forward_residual(const Variable& x, const Variable& residual, const Dropout& dropout, uint64_t seed,
                            int64_t first_row, const std::shared_ptr<const PackedTokens>& tokens = nullptr) const;
  /// dropout(layer_norm(x)) with `dropout`'s probability, mode and key, fused into one op (layer_norm_dropout;
  /// BERT's embeddings). x: (B, ..., features), or packed tokens (N, features) with `tokens`.
  Variable forward_dropout(const Variable& x, const Dropout& dropout, uint64_t seed, int64_t first_row,
                           const std::shared_ptr<const PackedTokens>& tokens = nullptr) const;

 private:
  Variable weight_, bias_;
  double eps_;
};

/// A lookup table (num, dim) initialised from truncated normal(0, init_std), as google-research/bert.
class Embedding : public Module {
 public:
  Embedding(int64_t num, int64_t dim, double init_std, Rng& rng, DType dtype = DType::f32);
  /// ids: i32 of shape S -> S + (dim).
  Variable forward(const Tensor& ids) const;
  const Variable& weight() const { return weight_; }

 private:
  Variable weight_;
};

/// Inverted dropout with probability p; `stream` identifies this site so masks are keyed by
/// (seed, stream, global sample index) (see DropoutKey).
class Dropout : public Module {
 public:
  Dropout(double p, uint64_t stream);
  /// x: (B, ...); first_row is the global sample index of x's row 0. With `tokens`, x is packed tokens (N, ...)
  /// and each row is keyed by its sample and position (DropoutKey::tokens).
  Variable forward(const Variable& x, uint64_t seed, int64_t first_row,
                   const std::shared_ptr<const PackedTokens>& tokens = nullptr) const;
  double p() const { return p_; }
  /// This site's key, for fused ops that apply the dropout themselves (attention).
  DropoutKey key(uint64_t seed, int64_t first_row, const std::shared_ptr<const PackedTokens>& tokens = nullptr) const {
    return DropoutKey{seed, stream_, first_row, tokens};
  }

 private:
  double p_;
  uint64_t stream_;
};

/// Plain SGD, w -= lr * grad, for every parameter that has a gradient (the optimizer layer has the real ones).
void sgd_step(const std::vector<Variable>& params, double lr);

}  // namespace bertrain
