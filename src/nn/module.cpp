// module.cpp: Module bookkeeping and the basic layers.
#include "bertrain/nn/module.h"

#include "bertrain/core/error.h"
#include "bertrain/nn/layers.h"

namespace bertrain {

std::vector<std::pair<std::string, Variable>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Variable>> out;
  collect("", out);
  return out;
}

void Module::collect(const std::string& prefix, std::vector<std::pair<std::string, Variable>>& out) const {
  for (const auto& [n, v] : params_) out.emplace_back(prefix + n, v);
  for (const auto& [n, m] : children_) m->collect(prefix + n + ".", out);
}

std::vector<Variable> Module::parameters() const {
  std::vector<Variable> out;
  for (auto& [n, v] : named_parameters()) out.push_back(v);
  return out;
}

Variable Module::parameter(const std::string& dotted_name) const {
  for (auto& [n, v] : named_parameters())
    if (n == dotted_name) return v;
  throw Error("no parameter named '" + dotted_name + "'");
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (auto& [name, v] : named_parameters()) n += v.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, m] : children_) m->train(on);
}

void Module::apply(const std::function<void(Module&)>& fn) {
  fn(*this);
  for (auto& [n, m] : children_) m->apply(fn);
}

void Module::zero_grad() {
  for (auto& [n, v] : named_parameters()) v.zero_grad();
}

Variable Module::register_parameter(const std::string& name, Tensor init) {
  BERTRAIN_CHECK(!name.empty() && name.find('.') == std::string::npos, "invalid parameter name '", name, "'");
  for (auto& [n, v] : params_) BERTRAIN_CHECK(n != name, "parameter '", name, "' registered twice");
  Variable v(std::move(init), true);
  params_.emplace_back(name, v);
  return v;
}

void Module::replace_parameter(const std::string& name, Variable v) {
  for (auto& [n, p] : params_)
    if (n == name) {
      p = std::move(v);
      return;
    }
  throw Error("replace_parameter: no parameter named '" + name + "'");
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> m) {
  BERTRAIN_CHECK(m != nullptr, "register_module('", name, "') with a null module");
  for (auto& [n, c] : children_) BERTRAIN_CHECK(n != name, "submodule '", name, "' registered twice");
  children_.emplace_back(name, std::move(m));
}

Linear::Linear(int64_t in, int64_t out, bool bias, double init_std, Rng& rng, DType dtype) {
  BERTRAIN_CHECK(in > 0 && out > 0, "Linear: sizes must be positive, got in=", in, " out=", out);
  weight_ = register_parameter("weight", Tensor::truncated_normal({out, in}, 0.0, init_std, rng, dtype));
  if (bias) bias_ = register_parameter("bias", Tensor::zeros({out}, dtype));
}

Variable Linear::forward(const Variable& x) const {
  if (packed_ && !is_training() && !grad_mode_enabled()) return linear_prepacked(x, weight_, bias_, *packed_);
  return linear(x, weight_, bias_);
}

Variable Linear::forward_gelu(const Variable& x, GeluForm form) const {
  if (is_training()) return gelu(linear(x, weight_, bias_), form);
  if (packed_ && !grad_mode_enabled()) return linear_prepacked(x, weight_, bias_, *packed_, &form);
  return linear_gelu(x, weight_, bias_, form);
}

void Linear::pack_for_prediction() {
  if (weight_.dtype() == DType::f32 && weight_.numel() > 0) packed_ = pack_linear(weight_);
}

void pack_linears_for_prediction(Module& m) {
  m.apply([](Module& x) {
    if (auto* l = dynamic_cast<Linear*>(&x)) l->pack_for_prediction();
  });
}

void drop_packed_linears(Module& m) {
  m.apply([](Module& x) {
    if (auto* l = dynamic_cast<Linear*>(&x)) l->drop_packed();
  });
}

LayerNorm::LayerNorm(int64_t features, double eps, DType dtype) : eps_(eps) {
  weight_ = register_parameter("weight", Tensor::full({features}, 1.0, dtype));
  bias_ = register_parameter("bias", Tensor::zeros({features}, dtype));
}

Variable LayerNorm::forward(const Variable& x) const { return layer_norm(x, weight_, bias_, eps_); }

Variable LayerNorm::forward_residual(const Variable& x, const Variable& residual, const Dropout& dropout,
                                     uint64_t seed, int64_t first_row,
                                     const std::shared_ptr<const PackedTokens>& tokens) const {
  return dropout_add_layer_norm(x, residual, weight_, bias_, eps_, dropout.p(), dropout.is_training(),
                                dropout.key(seed, first_row, tokens));
}

Variable LayerNorm::forward_dropout(const Variable& x, const Dropout& dropout, uint64_t seed, int64_t first_row,
                                    const std::shared_ptr<const PackedTokens>& tokens) const {
  return layer_norm_dropout(x, weight_, bias_, eps_, dropout.p(), dropout.is_training(),
                            dropout.key(seed, first_row, tokens));
}

Embedding::Embedding(int64_t num, int64_t dim, double init_std, Rng& rng, DType dtype) {
  weight_ = register_parameter("weight", Tensor::truncated_normal({num, dim}, 0.0, init_std, rng, dtype));
}

Variable Embedding::forward(const Tensor& ids) const { return embedding(weight_, ids); }

Dropout::Dropout(double p, uint64_t stream) : p_(p), stream_(stream) {
  BERTRAIN_CHECK(p >= 0.0 && p < 1.0, "Dropout: p must be in [0, 1), got ", p);
}

Variable Dropout::forward(const Variable& x, uint64_t seed, int64_t first_row,
                          const std::shared_ptr<const PackedTokens>& tokens) const {
  return dropout(x, p_, is_training(), DropoutKey{seed, stream_, first_row, tokens});
}

void sgd_step(const std::vector<Variable>& params, double lr) {
  for (const Variable& p : params) {
    if (!p.grad().defined()) continue;
    Tensor w = p.value();
    const Tensor& g = p.grad();
    const int64_t n = w.numel();
    if (w.dtype() == DType::f32) {
      float* wp = w.data<float>();
      const float* gp = g.data<float>();
      const float l = static_cast<float>(lr);
      for (int64_t i = 0; i < n; ++i) wp[i] -= l * gp[i];
    } else {
      double* wp = w.data<double>();
      const double* gp = g.data<double>();
      for (int64_t i = 0; i < n; ++i) wp[i] -= lr * gp[i];
    }
  }
}

}  // namespace bertrain
