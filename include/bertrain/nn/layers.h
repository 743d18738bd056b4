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
  /// x: (..., in) -> (..., out). In eval mode without gradients, with the packed weight when
  /// pack_for_prediction() made one (linear_prepacked: the same values).
  Variable forward(const Variable& x) const;
  /// gelu(forward(x), form) for prediction: in eval mode one product with the GELU inside it (linear_gelu, or
  /// linear_prepacked with the packed weight); in training mode the two ops (bit-exact recomputation for activation
  /// checkpointing).
  Variable forward_gelu(const Variable& x, GeluForm form) const;
  /// Packs the weight for prediction (pack_linear): forward() and forward_gelu() use it in eval mode without
  /// gradients while the weight is the one packed with the values it had (linear_prepacked checks; a changed
  /// weight falls back to the plain product until packed again). f32 weights only; other dtypes are left as they are.
  void pack_for_prediction();
  /// Drops the packed weight (its memory goes back); forward() runs the plain product again.
  void drop_packed() { packed_.reset(); }
  const Variable& weight() const { return weight_; }
  const Variable& bias() const { return bias_; }

 private:
  Variable weight_, bias_;
  std::shared_ptr<const PackedLinear> packed_;
};

/// pack_for_prediction() on every Linear in `m` (itself and its submodules): what the prediction commands call after
/// loading a model, before its first request.
void pack_linears_for_prediction(Module& m);
/// drop_packed() on every Linear in `m`.
void drop_packed_linears(Module& m);

/// For one evaluation inside training: packs every Linear of `m` for prediction when made and drops the packed
/// copies when it ends (they cost about the memory of the weights, and training changes the weights after it).
class PackedForPrediction {
 public:
  explicit PackedForPrediction(Module& m) : m_(m) { pack_linears_for_prediction(m_); }
  ~PackedForPrediction() { drop_packed_linears(m_); }
  PackedForPrediction(const PackedForPrediction&) = delete;
  PackedForPrediction& operator=(const PackedForPrediction&) = delete;

 private:
  Module& m_;
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
