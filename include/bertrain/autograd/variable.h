// variable.h: the define-by-run autodiff tape. A Variable holds a value, its gradient and whether it needs
// one; every differentiable op (bertrain/ops) records a Node when grad mode is on and an input needs a
// gradient. backward() walks the recorded graph in reverse topological order, accumulates leaf gradients,
// and frees each node's saved tensors as soon as it has run (as PyTorch's retain_graph=False).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bertrain/core/tensor.h"

namespace bertrain {

class Node;
class Variable;

/// Called once per backward() for a leaf that needs a gradient, right after its last contribution has
/// been accumulated (a later issue starts the allreduce of that parameter from here).
using GradReadyHook = std::function<void(Variable&)>;

struct VariableImpl {
  Tensor value;
  Tensor grad;  // undefined until the first backward reaches it
  bool requires_grad = false;
  std::shared_ptr<Node> grad_fn;  // null for leaves
  GradReadyHook grad_ready_hook;
};

class Variable {
 public:
  /// An undefined Variable.
  Variable() = default;
  /// A leaf holding `value`. Only floating-point leaves may require a gradient (throws otherwise).
  explicit Variable(Tensor value, bool requires_grad = false);

  bool defined() const { return impl_ != nullptr; }
  const Tensor& value() const;
  /// The gradient, (same shape as value); undefined before backward() reached this Variable.
  const Tensor& grad() const;
  Tensor& mutable_grad();
  /// Replaces the value in place (same shape and dtype, throws otherwise); for optimizers and loaders.
  void set_value(const Tensor& v);
  bool requires_grad() const;
  void set_requires_grad(bool r);
  bool is_leaf() const;
  const Shape& shape() const { return value().shape(); }
  DType dtype() const { return value().dtype(); }
  int64_t numel() const { return value().numel(); }
  int64_t size(int d) const { return value().size(d); }
  /// The value of a one-element Variable.
  double item() const { return value().item(); }

  /// Backpropagates from this scalar Variable with seed gradient 1. Throws bertrain::Error when it is
  /// not a one-element tensor or does not require a gradient.
  void backward();
  /// Backpropagates with an explicit seed gradient of the same shape.
  void backward(const Tensor& seed);

  /// Sets the gradient to zero (keeps its buffer so accumulation needs no allocation).
  void zero_grad();
  /// Drops the gradient buffer.
  void clear_grad();
  /// A new leaf sharing this value, cut from the graph, requiring no gradient.
  Variable detach() const;
  void set_grad_ready_hook(GradReadyHook hook);
  const std::shared_ptr<Node>& grad_fn() const;
  VariableImpl* impl() const { return impl_.get(); }
  /// Makes a non-leaf Variable: the output of `node` (used by ops).
  static Variable make_output(Tensor value, std::shared_ptr<Node> node);

 private:
  std::shared_ptr<VariableImpl> impl_;
};

/// Where a backward writes an input's gradient. `grad` is null when that input needs none; otherwise
/// `accumulate` says whether *grad already holds a value to add to (true) or must be overwritten (false,
/// *grad undefined: the op allocates it).
struct GradSlot {
  Tensor* grad = nullptr;
  bool accumulate = false;
  bool needed() const { return grad != nullptr; }
  /// Adds `g` (same shape) into the slot, allocating on first use. For ops that compute a temporary.
  void add(const Tensor& g);
  /// Returns the tensor to write into; when accumulate is false it is freshly allocated (uninitialised).
  Tensor& prepare(const Shape& shape, DType dtype);
};

/// A recorded op. Subclasses keep what backward needs (DESIGN.md section 2) and compute
/// input gradients from the output gradient `dy`.
class Node {
 public:
  virtual ~Node() = default;
  /// The op's name, for error messages and the gradient-check report.
  virtual const char* name() const = 0;
  /// Computes the gradients of inputs_[i] into slots[i] (skipping slots that are not needed).
  virtual void backward(const Tensor& dy, std::vector<GradSlot>& slots) = 0;
  /// The op's inputs, in order. Holding them keeps their values alive until backward has run.
  std::vector<Variable> inputs;
};

/// True unless a NoGradGuard is active on this thread.
bool grad_mode_enabled();

/// Disables recording on this thread for its lifetime (evaluation, optimizer updates).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

/// True when grad mode is on and any of `inputs` requires a gradient: whether an op records a Node.
bool should_record(std::initializer_list<const Variable*> inputs);

}  // namespace bertrain
