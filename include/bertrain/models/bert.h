// bert.h: the BERT encoder (Devlin et al. 2019) and its pretraining, classification and question-answering
// heads, with Hugging Face's module structure so that named_parameters() yields Hugging Face names
// (bert.encoder.layer.3.attention.self.query.weight, cls.predictions.bias, ...), weights stored (out, in).
// Behaviour matches google-research/bert modeling.py: post-LN layers, 1/sqrt(head size) scaling, the additive
// (1 - mask) * -10000 attention mask, truncated-normal initialisation.
// Shapes: B batch, T sequence length, H hidden, NH heads, HS head size, I intermediate, V vocab,
// P masked positions per sequence.
#pragma once

#include <memory>
#include <vector>

#include "bertrain/core/rng.h"
#include "bertrain/models/bert_config.h"
#include "bertrain/nn/layers.h"

namespace bertrain {

/// One batch of model inputs.
struct BertInputs {
  Tensor input_ids;       ///< i32 (B, T)
  Tensor token_type_ids;  ///< i32 (B, T); undefined means all 0
  Tensor attention_mask;  ///< i32 (B, T), 1 for real tokens, 0 for padding; undefined means all 1
  /// Dropout keys: the global index of row 0 and the run's dropout seed (see DropoutKey), so masks do not
  /// depend on how a global batch is split into micro-batches or ranks.
  int64_t first_sample = 0;
  uint64_t dropout_seed = 0;
};

/// Which computation BertModel::forward runs (`--unpad` on the command line).
/// padded: the (B, T, H) batch with the additive attention mask, every padding position computed (as
/// google-research/bert). unpadded: only the real tokens, packed as one (N, H) matrix through every token-wise op
/// (embeddings, linears, GELU, layer norms, dropout keyed by sample and position) and attention_varlen per
/// sequence on its own length (the layout of NVIDIA's FasterTransformer "remove padding" and FlashAttention's
/// varlen kernels); needs left-aligned masks (1s then 0s). Both give the same outputs at real positions, losses
/// and gradients (to rounding) and draw the same dropout masks. automatic: unpadded when the batch's masks are
/// left-aligned and padding is at least kUnpadMinPaddingFraction of its B * T positions, or any padding at all when
/// predicting (eval mode under NoGradGuard: prediction and evaluation), else padded.
enum class Unpad { automatic, always, never };
/// The padding share from which Unpad::automatic takes the unpadded path: where the two paths meet, measured on
/// real task files (README "Unpadded encoder": equal within noise at 10.5% padding, unpadded 23-25% faster at 26%).
inline constexpr double kUnpadMinPaddingFraction = 0.10;
/// The same when predicting (eval mode, no gradients): the unpadded forward alone is no slower even without
/// padding (bert-mini, batch 1: p50 within 5% either way) and 3-14% faster on length-sorted batches of 32 with 7.8%
/// padding, so any padding takes it (docs/results/onnx-predict.md).
inline constexpr double kUnpadMinPaddingFractionNoGrad = 0.0;

/// Maps BertConfig::hidden_act to an op; throws for an unknown name.
Variable bert_activation(const std::string& hidden_act, const Variable& x);

class BertEmbeddings : public Module {
 public:
  BertEmbeddings(const BertConfig& c, Rng& rng, DType dtype);
  /// -> (B, T, H): LayerNorm(word + position + token type), then dropout.
  Variable forward(const BertInputs& in) const;
  /// The same for packed tokens: ids, positions, token types i32 (N) -> (N, H); dropout keyed by `tokens`.
  Variable forward_packed(const Tensor& ids, const Tensor& positions, const Tensor& token_types,
                          const std::shared_ptr<const PackedTokens>& tokens, const BertInputs& in) const;
  const Variable& word_embeddings() const { return word_->weight(); }

 private:
  std::shared_ptr<Embedding> word_, position_, token_type_;
  std::shared_ptr<LayerNorm> norm_;
  std::shared_ptr<Dropout> dropout_;
  int64_t max_positions_;
};

/// When an encoder layer runs its query, key and value projections as one fused gemm (linear_concat, then
/// attention_qkv / attention_varlen_qkv on its (.., 3H) output) instead of three linears: bf16_only (the default:
/// under MatmulPrecision::bf16, where the fusion also rounds the shared input to bf16 once instead of three
/// times; f32 and f64 keep the three linears, so their results stay bit-identical to before the fusion existed),
/// always, never. The parameters are the same three linears either way (Hugging Face's query, key, value).
enum class FusedQkv { bf16_only, always, never };

class BertLayer : public Module {
 public:
  BertLayer(const BertConfig& c, int index, Rng& rng, DType dtype);
  /// x: (B, T, H), mask: additive (B, T) -> (B, T, H).
  Variable forward(const Variable& x, const Tensor& mask, const BertInputs& in) const;
  /// Packed tokens x: (N, H) -> (N, H), attention per sequence (attention_varlen).
  Variable forward_packed(const Variable& x, const std::shared_ptr<const PackedTokens>& tokens,
                          const BertInputs& in) const;
  void set_fused_qkv(FusedQkv f) { fused_qkv_ = f; }

 private:
  /// linear_concat of the query, key and value linears when fused_qkv_ says so for x's dtype and the precision.
  bool fuse_qkv(const Variable& x) const;
  Variable qkv(const Variable& x) const;

  BertConfig c_;
  FusedQkv fused_qkv_ = FusedQkv::bf16_only;
  std::shared_ptr<Linear> query_, key_, value_, attn_out_, inter_, out_;
  std::shared_ptr<LayerNorm> attn_norm_, out_norm_;
  std::shared_ptr<Dropout> probs_dropout_, attn_dropout_, out_dropout_;
};

/// The encoder stack with embeddings and pooler: Hugging Face's BertModel.
class BertModel : public Module {
 public:
  BertModel(const BertConfig& c, Rng& rng, DType dtype = DType::f32, bool add_pooler = true);
  struct Output {
    /// (B, T, H); on the unpadded path zeros at padding positions, and undefined when forward() was asked not
    /// to build it (need_sequence_output false)
    Variable sequence_output;
    Variable pooled_output;    ///< (B, H): tanh(dense(first token)); undefined without a pooler
    /// With all_encoder_layers: the output of every encoder layer, (B, T, H) each, first layer first, so
    /// all_encoder_layers.back() is sequence_output (google-research/bert's get_all_encoder_layers(); Hugging
    /// Face's hidden_states without the embeddings). On the unpadded path zeros at padding positions.
    std::vector<Variable> all_encoder_layers;
    bool unpadded = false;     ///< which path ran
    Variable packed_output;    ///< unpadded path: (N, H), the real tokens in packed order
    std::shared_ptr<const PackedTokens> packed;  ///< unpadded path: where each packed row came from
  };
  /// Throws bertrain::Error when shapes disagree, T exceeds max_position_embeddings, or Unpad::always meets a
  /// mask that is not left-aligned. Keeping every layer's output (all_encoder_layers) changes no value; it only
  /// holds L tensors of (B, T, H) while Output lives. need_sequence_output false lets the unpadded path skip
  /// building the (B, T, H) sequence_output (pretraining reads packed_output); the padded path always has it.
  Output forward(const BertInputs& in, bool all_encoder_layers = false, bool need_sequence_output = true) const;
  /// The path forward() takes for `in` under the current setting (see Unpad).
  bool takes_unpadded_path(const BertInputs& in) const;
  void set_unpad(Unpad u) { unpad_ = u; }
  /// The Q, K, V projection of every layer (FusedQkv; default bf16_only).
  void set_fused_qkv(FusedQkv f);
  FusedQkv fused_qkv() const { return fused_qkv_; }
  Unpad unpad() const { return unpad_; }
  const BertConfig& config() const { return c_; }
  const BertEmbeddings& embeddings() const { return *embeddings_; }
  /// Recompute each encoder layer in backward instead of keeping its activations.
  void set_activation_checkpointing(bool on) { checkpointing_ = on; }

 private:
  BertConfig c_;
  std::shared_ptr<BertEmbeddings> embeddings_;
  std::vector<std::shared_ptr<BertLayer>> layers_;
  std::shared_ptr<Linear> pooler_;
  bool checkpointing_ = false;
  Unpad unpad_ = Unpad::automatic;
  FusedQkv fused_qkv_ = FusedQkv::bf16_only;
};

/// The real tokens of a batch packed back to back (Unpad): sequence lengths from attention_mask (B, T) (all T
/// when undefined), which must be left-aligned. Returns null when a row is not (a 1 after a 0).
std::shared_ptr<const PackedTokens> pack_tokens(const BertInputs& in);

/// Pretraining targets for one batch (NVIDIA's HDF5 keys).
struct PretrainingTargets {
  Tensor masked_lm_positions;   ///< i32 (B, P), padded slots 0
  Tensor masked_lm_ids;         ///< i32 (B, P), padded slots 0
  Tensor masked_lm_weights;     ///< f32 (B, P), 1 for real slots, 0 for padding
  Tensor next_sentence_labels;  ///< i32 (B): 0 = B follows A, 1 = B is random (google-research/bert); or undefined
  /// Loss normalisers; 0 means this batch alone: sum(w) + 1e-5 for masked-LM, B for next-sentence. With
  /// gradient accumulation the trainer passes the global batch's values so micro-batches sum to the big batch.
  double mlm_normalizer = 0;
  double nsp_normalizer = 0;
};

struct PretrainingOutput {
  Variable loss;      ///< mlm_loss + nsp_loss (scalar)
  Variable mlm_loss;  ///< sum(w * CE) / normalizer over the prediction slots
  Variable nsp_loss;  ///< sum CE / normalizer; undefined without next-sentence labels
  Tensor mlm_logits;  ///< (B * P, V)
  Tensor nsp_logits;  ///< (B, 2)
  double mlm_correct = 0, mlm_weight = 0;  ///< sum(w * [argmax == label]), sum(w)
  double nsp_correct = 0, nsp_count = 0;
};

/// Hugging Face's BertForPreTraining: masked-LM head evaluated only at the masked positions (dense +
/// activation + LayerNorm, then the decoder tied to the word embeddings plus its own bias
/// cls.predictions.bias) and the next-sentence head cls.seq_relationship. Losses as google-research/bert's
/// run_pretraining.py.
class BertForPreTraining : public Module {
 public:
  BertForPreTraining(const BertConfig& c, Rng& rng, DType dtype = DType::f32);
  /// Throws bertrain::Error naming the field when target shapes disagree with the inputs.
  PretrainingOutput forward(const BertInputs& in, const PretrainingTargets& t) const;
  BertModel& bert() { return *bert_; }
  const BertModel& bert() const { return *bert_; }

 private:
  std::shared_ptr<BertModel> bert_;
  std::shared_ptr<Module> cls_;
  std::shared_ptr<Linear> transform_dense_, seq_relationship_;
  std::shared_ptr<LayerNorm> transform_norm_;
  Variable decoder_bias_;
};

/// Hugging Face's BertForSequenceClassification: dropout(pooled) -> classifier (num_labels). Loss: mean CE,
/// or mean squared error when num_labels == 1 (regression, STS-B).
class BertForSequenceClassification : public Module {
 public:
  BertForSequenceClassification(const BertConfig& c, Rng& rng, DType dtype = DType::f32);
  /// -> logits (B, num_labels).
  Variable forward(const BertInputs& in) const;
  /// labels: i32 (B) class ids, or f32 (B) targets when num_labels == 1. normalizer 0 means B.
  Variable loss(const Variable& logits, const Tensor& labels, double normalizer = 0) const;
  BertModel& bert() { return *bert_; }

 private:
  BertConfig c_;
  std::shared_ptr<BertModel> bert_;
  std::shared_ptr<Dropout> dropout_;
  std::shared_ptr<Linear> classifier_;
};

/// Hugging Face's BertForTokenClassification: dropout(sequence output) -> classifier (H -> num_labels) at every
/// position; the encoder has no pooler (as Hugging Face's add_pooling_layer=False). Parameter names bert.*,
/// classifier.weight (num_labels, H), classifier.bias (num_labels).
class BertForTokenClassification : public Module {
 public:
  BertForTokenClassification(const BertConfig& c, Rng& rng, DType dtype = DType::f32);
  /// -> logits (B, T, num_labels).
  Variable forward(const BertInputs& in) const;
  /// Cross-entropy over the positions whose label is not ignore_index (-100, as Hugging Face): labels i32 (B, T),
  /// divided by `normalizer` (0: the number of labelled positions, Hugging Face's mean). Throws bertrain::Error
  /// when shapes disagree or a label is outside [0, num_labels) and not -100.
  Variable loss(const Variable& logits, const Tensor& labels, double normalizer = 0) const;
  BertModel& bert() { return *bert_; }

 private:
  BertConfig c_;
  std::shared_ptr<BertModel> bert_;
  std::shared_ptr<Dropout> dropout_;
  std::shared_ptr<Linear> classifier_;
};

/// Hugging Face's BertForQuestionAnswering: qa_outputs (H -> 2) gives start and end logits (B, T) each, with
/// (1 - attention_mask) * -10000 added (google-research/bert's attention-mask constant), so padding positions take
/// no part in the loss (their softmax probability is exactly 0 in f32 and f64) and are never answers: the loss and
/// the gradients do not depend on how far a batch is padded (dynamic padding, the unpadded encoder). A deliberate
/// difference from run_squad.py and transformers, whose losses count the padding positions too.
class BertForQuestionAnswering : public Module {
 public:
  BertForQuestionAnswering(const BertConfig& c, Rng& rng, DType dtype = DType::f32);
  struct Output {
    Variable start_logits, end_logits;  ///< (B, T)
  };
  Output forward(const BertInputs& in) const;
  /// (CE(start) + CE(end)) / 2, each a mean over the batch; positions i32 (B) in [0, T).
  Variable loss(const Output& o, const Tensor& start_positions, const Tensor& end_positions,
                double normalizer = 0) const;
  BertModel& bert() { return *bert_; }

 private:
  std::shared_ptr<BertModel> bert_;
  std::shared_ptr<Linear> qa_outputs_;
};

}  // namespace bertrain
