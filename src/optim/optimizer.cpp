// optimizer.cpp: the Optimizer base: parameter validation and flags, step/zero_grad, state save and load.
#include "bertrain/optim/optimizer.h"

#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "bertrain/core/error.h"

namespace bertrain {

bool name_matches_any(const std::string& name, const std::vector<std::string>& patterns) {
  for (const auto& p : patterns)
    if (name.find(p) != std::string::npos) return true;
  return false;
}

Optimizer::Optimizer(const NamedParameters& params, const ParamRules& rules, std::vector<std::string> slot_names)
    : slot_names_(std::move(slot_names)) {
  BERTRAIN_CHECK(!params.empty(), "optimizer: expected at least one parameter, got none");
  for (const auto& p : rules.exclude_from_weight_decay)
    BERTRAIN_CHECK(!p.empty(), "ParamRules.exclude_from_weight_decay: an empty pattern would match every name");
  if (rules.exclude_from_layer_adaptation)
    for (const auto& p : *rules.exclude_from_layer_adaptation)
      BERTRAIN_CHECK(!p.empty(), "ParamRules.exclude_from_layer_adaptation: an empty pattern would match every name");
  const auto& la = rules.exclude_from_layer_adaptation ? *rules.exclude_from_layer_adaptation
                                                       : rules.exclude_from_weight_decay;
  std::set<std::string> seen;
  for (const auto& [name, var] : params) {
    BERTRAIN_CHECK(var.defined(), "optimizer: parameter '", name, "' is undefined");
    BERTRAIN_CHECK(var.dtype() == DType::f32 || var.dtype() == DType::f64, "optimizer: parameter '", name,
                   "' must be f32 or f64, got ", dtype_name(var.dtype()));
    BERTRAIN_CHECK(seen.insert(name).second, "optimizer: parameter name '", name, "' appears twice");
    for (const auto& other : params_)
      BERTRAIN_CHECK(other.var.impl() != var.impl(), "optimizer: parameters '", other.name, "' and '", name,
                     "' are the same Variable (a tied weight must be passed once)");
    params_.push_back({name, var, !name_matches_any(name, rules.exclude_from_weight_decay), !name_matches_any(name, la)});
  }
  slots_.resize(slot_names_.size());
  for (auto& s : slots_)
    for (const auto& p : params_) s.push_back(Tensor::zeros(p.var.shape(), p.var.dtype()));
}

std::vector<std::string> Optimizer::param_names(bool with_weight_decay) const {
  std::vector<std::string> out;
  for (const auto& p : params_)
    if (p.weight_decay == with_weight_decay) out.push_back(p.name);
  return out;
}

std::vector<size_t> Optimizer::params_with_grad() const {
  std::vector<size_t> out;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Variable& v = params_[i].var;
    const Tensor& g = v.grad();
    if (!g.defined()) continue;
    BERTRAIN_CHECK(g.dtype() == v.dtype() && g.shape() == v.shape(), "optimizer: gradient of '", params_[i].name,
                   "' is ", g.desc(), " but the parameter is ", v.value().desc());
    out.push_back(i);
  }
  return out;
}

void Optimizer::step(double lr) {
  BERTRAIN_CHECK(std::isfinite(lr) && lr >= 0, name(), ": learning rate must be finite and >= 0, got ", lr);
  NoGradGuard guard;
  ++counters_.step;
  update(lr);
}

void Optimizer::zero_grad() {
  for (auto& p : params_)
    if (p.var.grad().defined()) p.var.zero_grad();
}

void Optimizer::set_step(int64_t step) {
  BERTRAIN_CHECK(step >= 0, name(), ": step must be >= 0, got ", step);
  counters_.step = step;
}

std::vector<std::pair<std::string, Tensor>> Optimizer::state_tensors() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t s = 0; s < slot_names_.size(); ++s)
    for (size_t i = 0; i < params_.size(); ++i) out.emplace_back(slot_names_[s] + "." + params_[i].name, slots_[s][i]);
  return out;
}

void Optimizer::load_state(const std::vector<std::pair<std::string, Tensor>>& tensors,
                           const OptimizerCounters& counters) {
  BERTRAIN_CHECK(counters.step >= 0, name(), " load_state: step must be >= 0, got ", counters.step);
  std::map<std::string, const Tensor*> given;
  for (const auto& [n, t] : tensors) {
    BERTRAIN_CHECK(given.emplace(n, &t).second, name(), " load_state: tensor '", n, "' appears twice");
  }
  // Validate everything before copying anything, so a failed load leaves the optimizer unchanged.
  std::vector<std::pair<Tensor*, const Tensor*>> copies;
  for (size_t s = 0; s < slot_names_.size(); ++s) {
    for (size_t i = 0; i < params_.size(); ++i) {
      const std::string key = slot_names_[s] + "." + params_[i].name;
      auto it = given.find(key);
      BERTRAIN_CHECK(it != given.end(), name(), " load_state: missing state tensor '", key, "'");
      const Tensor& src = *it->second;
      Tensor& dst = slots_[s][i];
      BERTRAIN_CHECK(src.defined() && src.dtype() == dst.dtype() && src.shape() == dst.shape(), name(),
                     " load_state: state tensor '", key, "' must be ", dst.desc(), ", got ",
                     src.defined() ? src.desc() : std::string("undefined"));
      copies.emplace_back(&dst, &src);
      given.erase(it);
    }
  }
  BERTRAIN_CHECK(given.empty(), name(), " load_state: unexpected state tensor '",
                 given.empty() ? std::string() : given.begin()->first, "' (", given.size(),
                 " unknown in all; parameter names must match the saved run)");
  for (auto& [dst, src] : copies) std::memcpy(dst->raw_data(), src->raw_data(), dst->nbytes());
  counters_ = counters;
}

}  // namespace bertrain
