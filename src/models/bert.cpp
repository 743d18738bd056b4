// bert.cpp: BERT encoder and heads. Only composition of ops here: gradients live in the ops layer.
#include "bertrain/models/bert.h"

#include <algorithm>
#include <cmath>

#include "bertrain/core/error.h"

namespace bertrain {

namespace {

/// First index of the largest value (the scalar scan's answer). The max is a vector reduction (exact in any
/// order) and then searched for: the masked-LM accuracy scans (B*P, V) logits every step.
template <class T>
int64_t argmax_row(const T* x, int64_t n) {
  T mx = x[0];
#pragma omp simd reduction(max : mx)
  for (int64_t j = 1; j < n; ++j) mx = std::max(mx, x[j]);
  if (!std::isnan(mx))
    for (int64_t j = 0; j < n; ++j)
      if (x[j] == mx) return j;
  int64_t best = 0;  // NaNs: the scalar scan
  for (int64_t j = 1; j < n; ++j)
    if (x[j] > x[best]) best = j;
  return best;
}
#define BERTRAIN_DISPATCH_LOGITS(t, offset, n, out)                                            \
  out = (t).dtype() == DType::f64 ? argmax_row((t).data<double>() + (offset), n)             \
                                  : argmax_row((t).data<float>() + (offset), n)

/// A named container, so the module tree mirrors Hugging Face's (encoder.layer.0.attention.self...).
struct Group : Module {
  using Module::register_module;
  using Module::register_parameter;
};

// Dropout streams: one per site, fixed by the model structure.
constexpr uint64_t kStreamEmbeddings = 1;
constexpr uint64_t kStreamClassifier = 2;
uint64_t layer_stream(int layer, int site) { return 1000 + 10 * static_cast<uint64_t>(layer) + site; }

void check_ids_shape(const char* what, const Tensor& t, const Tensor& ids) {
  if (!t.defined()) return;
  BERTRAIN_CHECK(t.shape() == ids.shape(), "model input: ", what, " has shape ", t.shape().str(),
                 " but input_ids has ", ids.shape().str());
  BERTRAIN_CHECK(t.dtype() == DType::i32, "model input: ", what, " must be i32, got ", t.desc());
}

/// (1 - attention_mask) * -10000 as (B, T) in `dtype` (google-research/bert's create_attention_mask).
Tensor additive_mask(const BertInputs& in, DType dtype) {
  const int64_t b = in.input_ids.size(0), t = in.input_ids.size(1);
  Tensor m = Tensor::zeros({b, t}, dtype);
  if (!in.attention_mask.defined()) return m;
  const int32_t* a = in.attention_mask.data<int32_t>();
  for (int64_t i = 0; i < b * t; ++i)
    if (a[i] == 0) m.set(i, -10000.0);
  return m;
}

}  // namespace

/// The intermediate layer: bert_activation(act, linear(x, W, b)); in eval mode with a GELU, linear_gelu (one product
/// with the GELU inside it, where no gradient is recorded). Never in training mode: activation checkpointing
/// recomputes a layer with gradients and must get the values of its forward bit for bit.
static Variable bert_intermediate(const std::string& act, const Linear& dense, const Variable& x, bool eval_mode) {
  if (eval_mode && act == "gelu") return dense.forward_gelu(x, GeluForm::erf);
  if (eval_mode && (act == "gelu_new" || act == "gelu_pytorch_tanh")) return dense.forward_gelu(x, GeluForm::tanh);
  return bert_activation(act, dense.forward(x));
}

Variable bert_activation(const std::string& act, const Variable& x) {
  if (act == "gelu") return gelu(x, GeluForm::erf);
  if (act == "gelu_new" || act == "gelu_pytorch_tanh") return gelu(x, GeluForm::tanh);
  if (act == "relu") return relu(x);
  if (act == "tanh") return tanh(x);
  throw Error("unknown hidden_act '" + act + "'");
}

BertEmbeddings::BertEmbeddings(const BertConfig& c, Rng& rng, DType dt) : max_positions_(c.max_position_embeddings) {
  word_ = register_module("word_embeddings", std::make_shared<Embedding>(c.vocab_size, c.hidden_size,
                                                                          c.initializer_range, rng, dt));
  position_ = register_module("position_embeddings", std::make_shared<Embedding>(
                                                         c.max_position_embeddings, c.hidden_size, c.initializer_range, rng, dt));
  token_type_ = register_module("token_type_embeddings", std::make_shared<Embedding>(
                                                             c.type_vocab_size, c.hidden_size, c.initializer_range, rng, dt));
  norm_ = register_module("LayerNorm", std::make_shared<LayerNorm>(c.hidden_size, c.layer_norm_eps, dt));
  dropout_ = register_module("dropout", std::make_shared<Dropout>(c.hidden_dropout_prob, kStreamEmbeddings));
}

Variable BertEmbeddings::forward(const BertInputs& in) const {
  const Tensor& ids = in.input_ids;
  const int64_t b = ids.size(0), t = ids.size(1);
  Tensor pos = Tensor::empty({t}, DType::i32);
  for (int64_t i = 0; i < t; ++i) pos.data<int32_t>()[i] = static_cast<int32_t>(i);
  Tensor tt = in.token_type_ids.defined() ? in.token_type_ids : Tensor::zeros({b, t}, DType::i32);
  Variable e = add(word_->forward(ids), position_->forward(pos));  // (B, T, H) + (T, H)
  e = add(e, token_type_->forward(tt));
  return norm_->forward_dropout(e, *dropout_, in.dropout_seed, in.first_sample);  // layer_norm_dropout
}

Variable BertEmbeddings::forward_packed(const Tensor& ids, const Tensor& positions, const Tensor& token_types,
                                        const std::shared_ptr<const PackedTokens>& tokens, const BertInputs& in) const {
  Variable e = add(word_->forward(ids), position_->forward(positions));  // (N, H), the padded path's sums
  e = add(e, token_type_->forward(token_types));
  return norm_->forward_dropout(e, *dropout_, in.dropout_seed, in.first_sample, tokens);
}

BertLayer::BertLayer(const BertConfig& c, int i, Rng& rng, DType dt) : c_(c) {
  const int64_t h = c.hidden_size;
  const double r = c.initializer_range;
  auto attention = register_module("attention", std::make_shared<Group>());
  auto self = attention->register_module("self", std::make_shared<Group>());
  query_ = self->register_module("query", std::make_shared<Linear>(h, h, true, r, rng, dt));
  key_ = self->register_module("key", std::make_shared<Linear>(h, h, true, r, rng, dt));
  value_ = self->register_module("value", std::make_shared<Linear>(h, h, true, r, rng, dt));
  probs_dropout_ = self->register_module("dropout",
                                         std::make_shared<Dropout>(c.attention_probs_dropout_prob, layer_stream(i, 0)));
  auto aout = attention->register_module("output", std::make_shared<Group>());
  attn_out_ = aout->register_module("dense", std::make_shared<Linear>(h, h, true, r, rng, dt));
  attn_norm_ = aout->register_module("LayerNorm", std::make_shared<LayerNorm>(h, c.layer_norm_eps, dt));
  attn_dropout_ = aout->register_module("dropout", std::make_shared<Dropout>(c.hidden_dropout_prob, layer_stream(i, 1)));
  auto inter = register_module("intermediate", std::make_shared<Group>());
  inter_ = inter->register_module("dense", std::make_shared<Linear>(h, c.intermediate_size, true, r, rng, dt));
  auto out = register_module("output", std::make_shared<Group>());
  out_ = out->register_module("dense", std::make_shared<Linear>(c.intermediate_size, h, true, r, rng, dt));
  out_norm_ = out->register_module("LayerNorm", std::make_shared<LayerNorm>(h, c.layer_norm_eps, dt));
  out_dropout_ = out->register_module("dropout", std::make_shared<Dropout>(c.hidden_dropout_prob, layer_stream(i, 2)));
}

bool BertLayer::fuse_qkv(const Variable& x) const {
  if (fused_qkv_ == FusedQkv::always) return true;
  if (fused_qkv_ == FusedQkv::never) return false;
  return x.dtype() == DType::f32 && matmul_precision() == MatmulPrecision::bf16;
}

Variable BertLayer::qkv(const Variable& x) const {
  return linear_concat(x, {query_->weight(), key_->weight(), value_->weight()},
                       {query_->bias(), key_->bias(), value_->bias()});  // (.., 3H): Q | K | V
}

Variable BertLayer::forward(const Variable& x, const Tensor& mask, const BertInputs& in) const {
  const int64_t nh = c_.num_attention_heads, hs = c_.head_size();
  const double sc = 1.0 / std::sqrt(static_cast<double>(hs));
  const DropoutKey pkey = probs_dropout_->key(in.dropout_seed, in.first_sample);
  // Q, K, V and the context stay (B, T, H) = (B, T, NH, HS): the fused op reads the heads with strides.
  Variable ctx = fuse_qkv(x) ? attention_qkv(qkv(x), nh, mask, sc, probs_dropout_->p(), probs_dropout_->is_training(),
                                             pkey)
                             : attention(query_->forward(x), key_->forward(x), value_->forward(x), nh, mask, sc,
                                         probs_dropout_->p(), probs_dropout_->is_training(), pkey);
  // layer_norm(dropout(dense(.)) + residual), each fused into one op.
  Variable h1 = attn_norm_->forward_residual(attn_out_->forward(ctx), x, *attn_dropout_, in.dropout_seed, in.first_sample);
  Variable f = bert_intermediate(c_.hidden_act, *inter_, h1, !is_training());  // (B, T, I)
  return out_norm_->forward_residual(out_->forward(f), h1, *out_dropout_, in.dropout_seed, in.first_sample);
}

Variable BertLayer::forward_packed(const Variable& x, const std::shared_ptr<const PackedTokens>& tokens,
                                   const BertInputs& in) const {
  const int64_t nh = c_.num_attention_heads, hs = c_.head_size();
  const double sc = 1.0 / std::sqrt(static_cast<double>(hs));
  const DropoutKey pkey = probs_dropout_->key(in.dropout_seed, in.first_sample);
  Variable ctx = fuse_qkv(x) ? attention_varlen_qkv(qkv(x), nh, tokens->cu_seqlens, sc, probs_dropout_->p(),
                                                    probs_dropout_->is_training(), pkey)
                             : attention_varlen(query_->forward(x), key_->forward(x), value_->forward(x), nh,
                                                tokens->cu_seqlens, sc, probs_dropout_->p(),
                                                probs_dropout_->is_training(), pkey);
  Variable h1 = attn_norm_->forward_residual(attn_out_->forward(ctx), x, *attn_dropout_, in.dropout_seed,
                                             in.first_sample, tokens);
  Variable f = bert_intermediate(c_.hidden_act, *inter_, h1, !is_training());  // (N, I)
  return out_norm_->forward_residual(out_->forward(f), h1, *out_dropout_, in.dropout_seed, in.first_sample, tokens);
}

std::shared_ptr<const PackedTokens> pack_tokens(const BertInputs& in) {
  const int64_t b = in.input_ids.size(0), t = in.input_ids.size(1);
  auto p = std::make_shared<PackedTokens>();
  p->cu_seqlens.assign(1, 0);
  const int32_t* m = in.attention_mask.defined() ? in.attention_mask.data<int32_t>() : nullptr;
  for (int64_t i = 0; i < b; ++i) {
    int64_t len = t;
    if (m) {
      len = 0;
      while (len < t && m[i * t + len] != 0) ++len;
      for (int64_t j = len; j < t; ++j)
        if (m[i * t + j] != 0) return nullptr;  // not left-aligned
    }
    for (int64_t j = 0; j < len; ++j) {
      p->sample.push_back(static_cast<int32_t>(i));
      p->position.push_back(static_cast<int32_t>(j));
    }
    p->cu_seqlens.push_back(p->cu_seqlens.back() + len);
  }
  return p;
}

BertModel::BertModel(const BertConfig& c, Rng& rng, DType dt, bool add_pooler) : c_(c) {
  c.validate();
  embeddings_ = register_module("embeddings", std::make_shared<BertEmbeddings>(c, rng, dt));
  auto encoder = register_module("encoder", std::make_shared<Group>());
  auto layer = encoder->register_module("layer", std::make_shared<Group>());
  for (int i = 0; i < c.num_hidden_layers; ++i)
    layers_.push_back(layer->register_module(std::to_string(i), std::make_shared<BertLayer>(c, i, rng, dt)));
  if (add_pooler) {
    auto pooler = register_module("pooler", std::make_shared<Group>());
    pooler_ = pooler->register_module("dense", std::make_shared<Linear>(c.hidden_size, c.hidden_size, true,
                                                                         c.initializer_range, rng, dt));
  }
}

void BertModel::set_fused_qkv(FusedQkv f) {
  fused_qkv_ = f;
  for (const auto& l : layers_) l->set_fused_qkv(f);
}

bool BertModel::takes_unpadded_path(const BertInputs& in) const {
  if (unpad_ == Unpad::never) return false;
  if (unpad_ == Unpad::always) return true;
  if (!in.attention_mask.defined()) return false;  // nothing to remove
  const int32_t* m = in.attention_mask.data<int32_t>();
  int64_t real = 0;
  for (int64_t i = 0; i < in.attention_mask.numel(); ++i) real += m[i] != 0;
  const double positions = static_cast<double>(std::max<int64_t>(1, in.attention_mask.numel()));
  const double padding = 1.0 - static_cast<double>(real) / positions;
  const bool predicting = !grad_mode_enabled() && !is_training();
  if (predicting ? padding <= kUnpadMinPaddingFractionNoGrad : padding < kUnpadMinPaddingFraction) return false;
  return pack_tokens(in) != nullptr;
}

BertModel::Output BertModel::forward(const BertInputs& in, bool all_encoder_layers,
                                     bool need_sequence_output) const {
  const Tensor& ids = in.input_ids;
  BERTRAIN_CHECK(ids.defined() && ids.dim() == 2 && ids.dtype() == DType::i32,
                 "model input: input_ids must be i32 (B, T), got ", ids.desc());
  BERTRAIN_CHECK(ids.size(1) <= c_.max_position_embeddings, "model input: sequence length ", ids.size(1),
                 " exceeds max_position_embeddings ", c_.max_position_embeddings);
  check_ids_shape("token_type_ids", in.token_type_ids, ids);
  check_ids_shape("attention_mask", in.attention_mask, ids);
  const int64_t b = ids.size(0), t = ids.size(1);
  const bool params_need_grad = grad_mode_enabled();
  if (takes_unpadded_path(in)) {
    std::shared_ptr<const PackedTokens> tokens = pack_tokens(in);
    BERTRAIN_CHECK(tokens != nullptr, "model input: --unpad=always needs left-aligned attention masks (1s, then 0s)");
    const int64_t n = tokens->cu_seqlens.back();
    Tensor pids = Tensor::empty({n}, DType::i32), ppos = Tensor::empty({n}, DType::i32),
           ptt = Tensor::empty({n}, DType::i32);
    const int32_t* tt = in.token_type_ids.defined() ? in.token_type_ids.data<int32_t>() : nullptr;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t at = int64_t{tokens->sample[i]} * t + tokens->position[i];
      pids.data<int32_t>()[i] = ids.data<int32_t>()[at];
      ppos.data<int32_t>()[i] = tokens->position[i];
      ptt.data<int32_t>()[i] = tt ? tt[at] : 0;
    }
    // Packed row of each padded position (B * T), -1 at padding: the (B, T, H) layout with zeros at padding.
    Tensor idx = Tensor::empty({b * t}, DType::i32);
    for (int64_t i = 0; i < b; ++i)
      for (int64_t j = 0; j < t; ++j) {
        const int64_t len = tokens->cu_seqlens[i + 1] - tokens->cu_seqlens[i];
        idx.data<int32_t>()[i * t + j] = j < len ? static_cast<int32_t>(tokens->cu_seqlens[i] + j) : -1;
      }
    auto padded = [&](const Variable& x) { return reshape(gather_rows_or_zero(x, idx), {b, t, c_.hidden_size}); };
    Variable h = embeddings_->forward_packed(pids, ppos, ptt, tokens, in);
    Output o;
    for (const auto& layer : layers_) {
      if (checkpointing_ && is_training()) {
        auto l = layer;
        h = checkpoint([l, tokens, in](const Variable& x) { return l->forward_packed(x, tokens, in); }, h,
                       params_need_grad);
      } else {
        h = layer->forward_packed(h, tokens, in);
      }
      if (all_encoder_layers) o.all_encoder_layers.push_back(padded(h));
    }
    o.unpadded = true;
    o.packed_output = h;
    o.packed = tokens;
    if (all_encoder_layers && !o.all_encoder_layers.empty())
      o.sequence_output = o.all_encoder_layers.back();
    else if (need_sequence_output)
      o.sequence_output = padded(h);
    if (pooler_) {  // the first token of each sequence (an empty one gets zeros)
      Tensor first = Tensor::empty({b}, DType::i32);
      for (int64_t i = 0; i < b; ++i)
        first.data<int32_t>()[i] =
            tokens->cu_seqlens[i + 1] > tokens->cu_seqlens[i] ? static_cast<int32_t>(tokens->cu_seqlens[i]) : -1;
      o.pooled_output = tanh(pooler_->forward(gather_rows_or_zero(h, first)));
    }
    return o;
  }
  const DType dt = embeddings_->word_embeddings().dtype();
  Tensor mask = additive_mask(in, dt);
  Variable h = embeddings_->forward(in);
  std::vector<Variable> layers_out;
  for (const auto& layer : layers_) {
    if (checkpointing_ && is_training()) {
      auto l = layer;
      h = checkpoint([l, mask, in](const Variable& x) { return l->forward(x, mask, in); }, h, params_need_grad);
    } else {
      h = layer->forward(h, mask, in);
    }
    if (all_encoder_layers) layers_out.push_back(h);
  }
  Output o;
  o.sequence_output = h;
  o.all_encoder_layers = std::move(layers_out);
  if (pooler_) {
    Variable first = reshape(slice(h, 1, 0, 1), {b, c_.hidden_size});
    o.pooled_output = tanh(pooler_->forward(first));
  }
  return o;
}

BertForPreTraining::BertForPreTraining(const BertConfig& c, Rng& rng, DType dt) {
  bert_ = register_module("bert", std::make_shared<BertModel>(c, rng, dt));
  auto cls = register_module("cls", std::make_shared<Group>());
  cls_ = cls;
  auto predictions = cls->register_module("predictions", std::make_shared<Group>());
  decoder_bias_ = predictions->register_parameter("bias", Tensor::zeros({c.vocab_size}, dt));
  auto transform = predictions->register_module("transform", std::make_shared<Group>());
  transform_dense_ = transform->register_module(
      "dense", std::make_shared<Linear>(c.hidden_size, c.hidden_size, true, c.initializer_range, rng, dt));
  transform_norm_ = transform->register_module("LayerNorm", std::make_shared<LayerNorm>(c.hidden_size, c.layer_norm_eps, dt));
  seq_relationship_ = cls->register_module("seq_relationship",
                                           std::make_shared<Linear>(c.hidden_size, 2, true, c.initializer_range, rng, dt));
}

PretrainingOutput BertForPreTraining::forward(const BertInputs& in, const PretrainingTargets& tg) const {
  const BertConfig& c = bert_->config();
  const int64_t b = in.input_ids.size(0), t = in.input_ids.size(1);
  const Tensor& pos = tg.masked_lm_positions;
  BERTRAIN_CHECK(pos.defined() && pos.dim() == 2 && pos.size(0) == b && pos.dtype() == DType::i32,
                 "pretraining targets: masked_lm_positions must be i32 (", b, ", P), got ", pos.desc());
  const int64_t p = pos.size(1);
  BERTRAIN_CHECK(tg.masked_lm_ids.defined() && tg.masked_lm_ids.shape() == pos.shape() &&
                     tg.masked_lm_ids.dtype() == DType::i32,
                 "pretraining targets: masked_lm_ids must be i32 ", pos.shape().str(), ", got ", tg.masked_lm_ids.desc());
  BERTRAIN_CHECK(tg.masked_lm_weights.defined() && tg.masked_lm_weights.shape() == pos.shape(),
                 "pretraining targets: masked_lm_weights must be ", pos.shape().str(), ", got ",
                 tg.masked_lm_weights.desc());
  BertModel::Output enc = bert_->forward(in, /*all_encoder_layers=*/false, /*need_sequence_output=*/false);
  const Variable& seq = enc.unpadded ? enc.packed_output : enc.sequence_output;
  const DType dt = seq.dtype();

  // Masked-LM head at the masked positions only: rows b * T + position of the flattened (B*T, H) output, or
  // cu_seqlens[b] + position of the packed one (unpadded path).
  Tensor flat = Tensor::empty({b * p}, DType::i32);
  const int32_t* pp = pos.data<int32_t>();
  const Tensor w32 = tg.masked_lm_weights.to(DType::f32);
  const float* wp = w32.data<float>();
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < p; ++j) {
      const int32_t q = pp[i * p + j];
      BERTRAIN_CHECK(q >= 0 && q < t, "pretraining targets: masked_lm_positions[", i, ", ", j, "] = ", q,
                     " is outside the sequence length ", t);
      if (!enc.unpadded) {
        flat.data<int32_t>()[i * p + j] = static_cast<int32_t>(i * t + q);
        continue;
      }
      const int64_t start = enc.packed->cu_seqlens[i], len = enc.packed->cu_seqlens[i + 1] - start;
      // A padded prediction slot (weight 0) may point anywhere (it reads a zero row here, the padded path a
      // padding position's output: weight 0 either way); a real one must be a real token.
      BERTRAIN_CHECK(q < len || wp[i * p + j] == 0.f, "pretraining targets: masked_lm_positions[", i, ", ", j,
                     "] = ", q, " is a padding position (the sequence has ", len,
                     " tokens); use --unpad=never for such data");
      flat.data<int32_t>()[i * p + j] = q < len ? static_cast<int32_t>(start + q) : -1;
    }
  Variable rows = enc.unpadded ? gather_rows_or_zero(seq, flat)
                               : gather_rows(reshape(seq, {b * t, c.hidden_size}), flat);  // (B*P, H)
  Variable hdn = transform_norm_->forward(bert_activation(c.hidden_act, transform_dense_->forward(rows)));
  Variable logits = linear(hdn, bert_->embeddings().word_embeddings(), decoder_bias_);  // (B*P, V), tied decoder
  Tensor w = tg.masked_lm_weights.to(dt).reshape({b * p});
  double wsum = 0;
  {
    const Tensor w64 = w.to(DType::f64);
    for (int64_t i = 0; i < b * p; ++i) wsum += w64.data<double>()[i];
  }
  const double mlm_norm = tg.mlm_normalizer > 0 ? tg.mlm_normalizer : wsum + 1e-5;
  Tensor labels = tg.masked_lm_ids.reshape({b * p});
  PretrainingOutput o;
  o.mlm_loss = cross_entropy(logits, labels, w, mlm_norm);
  o.mlm_logits = logits.value();
  o.mlm_weight = wsum;
  {
    // Accuracy at the real slots; argmax over the vocab row (f32 or f64 logits).
    const Tensor& lv = logits.value();
    const int64_t v = lv.size(1);
    const int32_t* lab = labels.data<int32_t>();
    const Tensor w64 = w.to(DType::f64);
    const double* wp = w64.data<double>();
    for (int64_t i = 0; i < b * p; ++i) {
      if (wp[i] == 0) continue;
      int64_t best = 0;
      BERTRAIN_DISPATCH_LOGITS(lv, i * v, v, best);
      if (best == lab[i]) o.mlm_correct += wp[i];
    }
  }
  o.loss = o.mlm_loss;
  if (tg.next_sentence_labels.defined()) {
    const Tensor& nl = tg.next_sentence_labels;
    BERTRAIN_CHECK(nl.dtype() == DType::i32 && nl.shape() == Shape({b}),
                   "pretraining targets: next_sentence_labels must be i32 (", b, "), got ", nl.desc());
    Variable nsp = seq_relationship_->forward(enc.pooled_output);  // (B, 2)
    o.nsp_loss = cross_entropy(nsp, nl, Tensor(), tg.nsp_normalizer > 0 ? tg.nsp_normalizer : static_cast<double>(b));
    o.nsp_logits = nsp.value();
    for (int64_t i = 0; i < b; ++i) {
      const int pred = o.nsp_logits.get(2 * i + 1) > o.nsp_logits.get(2 * i) ? 1 : 0;
      o.nsp_correct += pred == nl.data<int32_t>()[i];
    }
    o.nsp_count = static_cast<double>(b);
    o.loss = add(o.mlm_loss, o.nsp_loss);
  }
  return o;
}

BertForSequenceClassification::BertForSequenceClassification(const BertConfig& c, Rng& rng, DType dt) : c_(c) {
  bert_ = register_module("bert", std::make_shared<BertModel>(c, rng, dt));
  dropout_ = register_module("dropout", std::make_shared<Dropout>(c.hidden_dropout_prob, kStreamClassifier));
  classifier_ = register_module("classifier", std::make_shared<Linear>(c.hidden_size, c.num_labels, true,
                                                                        c.initializer_range, rng, dt));
}

Variable BertForSequenceClassification::forward(const BertInputs& in) const {
  BertModel::Output o = bert_->forward(in);
  return classifier_->forward(dropout_->forward(o.pooled_output, in.dropout_seed, in.first_sample));
}

Variable BertForSequenceClassification::loss(const Variable& logits, const Tensor& labels, double normalizer) const {
  const int64_t b = logits.size(0);
  const double n = normalizer > 0 ? normalizer : static_cast<double>(b);
  if (c_.num_labels == 1) {
    BERTRAIN_CHECK(labels.numel() == b && dtype_is_float(labels.dtype()),
                   "regression labels must be float (", b, "), got ", labels.desc());
    Variable d = sub(reshape(logits, {b}), Variable(labels.to(logits.dtype()).reshape({b})));
    return scale(sum(mul(d, d)), 1.0 / n);
  }
  return cross_entropy(logits, labels, Tensor(), n);
}

BertForTokenClassification::BertForTokenClassification(const BertConfig& c, Rng& rng, DType dt) : c_(c) {
  bert_ = register_module("bert", std::make_shared<BertModel>(c, rng, dt, false));
  dropout_ = register_module("dropout", std::make_shared<Dropout>(c.hidden_dropout_prob, kStreamClassifier));
  classifier_ = register_module("classifier", std::make_shared<Linear>(c.hidden_size, c.num_labels, true,
                                                                        c.initializer_range, rng, dt));
}

Variable BertForTokenClassification::forward(const BertInputs& in) const {
  BertModel::Output o = bert_->forward(in);
  return classifier_->forward(dropout_->forward(o.sequence_output, in.dropout_seed, in.first_sample));
}

Variable BertForTokenClassification::loss(const Variable& logits, const Tensor& labels, double normalizer) const {
  BERTRAIN_CHECK(logits.value().dim() == 3 && labels.dim() == 2 && labels.size(0) == logits.size(0) &&
                     labels.size(1) == logits.size(1) && labels.dtype() == DType::i32,
                 "token classification: labels must be i32 (B, T) matching logits ", logits.value().desc(), ", got ",
                 labels.desc());
  const int64_t n = labels.numel(), c = logits.size(2);
  int64_t count = 0;
  const int32_t* l = labels.data<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    BERTRAIN_CHECK(l[i] == -100 || (l[i] >= 0 && l[i] < c), "token classification: label ", l[i], " at position ", i,
                   " outside [0, ", c, ") and not -100");
    count += l[i] != -100 ? 1 : 0;
  }
  const double norm = normalizer > 0 ? normalizer : static_cast<double>(std::max<int64_t>(count, 1));
  return cross_entropy(reshape(logits, {n, c}), labels.reshape({n}), Tensor(), norm, -100);
}

BertForQuestionAnswering::BertForQuestionAnswering(const BertConfig& c, Rng& rng, DType dt) {
  bert_ = register_module("bert", std::make_shared<BertModel>(c, rng, dt, false));
  qa_outputs_ = register_module("qa_outputs",
                                std::make_shared<Linear>(c.hidden_size, 2, true, c.initializer_range, rng, dt));
}

BertForQuestionAnswering::Output BertForQuestionAnswering::forward(const BertInputs& in) const {
  Variable logits = qa_outputs_->forward(bert_->forward(in).sequence_output);  // (B, T, 2)
  const int64_t b = logits.size(0), t = logits.size(1);
  Output o{reshape(slice(logits, 2, 0, 1), {b, t}), reshape(slice(logits, 2, 1, 2), {b, t})};
  if (in.attention_mask.defined()) {  // padding is no answer: -10000 added there (exp underflows to exactly 0)
    const Variable mask(additive_mask(in, logits.dtype()));
    o.start_logits = add(o.start_logits, mask);
    o.end_logits = add(o.end_logits, mask);
  }
  return o;
}

Variable BertForQuestionAnswering::loss(const Output& o, const Tensor& sp, const Tensor& ep, double normalizer) const {
  const double n = normalizer > 0 ? normalizer : static_cast<double>(o.start_logits.size(0));
  return scale(add(cross_entropy(o.start_logits, sp, Tensor(), n), cross_entropy(o.end_logits, ep, Tensor(), n)), 0.5);
}

}  // namespace bertrain
