// module.h: Module, the base of every layer and model: named parameters and submodules with dotted names
// (`encoder.layer.0.output.dense.weight`, as Hugging Face), train/eval mode, zero_grad.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bertrain/autograd/variable.h"

namespace bertrain {

class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// Every parameter of this module and its submodules, depth first in registration order, with dotted names.
  std::vector<std::pair<std::string, Variable>> named_parameters() const;
  std::vector<Variable> parameters() const;
  /// The parameter with this dotted name; throws bertrain::Error naming it when there is none.
  Variable parameter(const std::string& dotted_name) const;
  /// Number of scalar parameters.
  int64_t num_parameters() const;

  /// Training mode (dropout active) for this module and all submodules.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  /// Sets every parameter gradient to zero (keeping its buffer).
  void zero_grad();
  /// Calls fn on this module and then on every submodule, depth first in registration order.
  void apply(const std::function<void(Module&)>& fn);

 protected:
  /// Registers a leaf parameter that requires a gradient; the name must be unique within this module.
  Variable register_parameter(const std::string& name, Tensor init);
  /// Registers a submodule; its parameters appear as "name.<param>".
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    add_child(name, m);
    return m;
  }
  /// Replaces a registered parameter by another Variable (weight tying: the MLM decoder shares the word
  /// embeddings).
  void replace_parameter(const std::string& name, Variable v);

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> m);
  void collect(const std::string& prefix, std::vector<std::pair<std::string, Variable>>& out) const;
  std::vector<std::pair<std::string, Variable>> params_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

}  // namespace bertrain
