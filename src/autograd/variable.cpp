// variable.cpp: Variable bookkeeping and the backward engine.
#include "bertrain/autograd/variable.h"

#include <unordered_map>

namespace bertrain {

namespace {
thread_local bool g_grad_mode = true;
}

bool grad_mode_enabled() { return g_grad_mode; }
NoGradGuard::NoGradGuard() : prev_(g_grad_mode) { g_grad_mode = false; }
NoGradGuard::~NoGradGuard() { g_grad_mode = prev_; }

bool should_record(std::initializer_list<const Variable*> inputs) {
  if (!g_grad_mode) return false;
  for (const Variable* v : inputs)
    if (v && v->defined() && v->requires_grad()) return true;
  return false;
}

Variable::Variable(Tensor value, bool requires_grad) : impl_(std::make_shared<VariableImpl>()) {
  BERTRAIN_CHECK(value.defined(), "Variable from an undefined tensor");
  BERTRAIN_CHECK(!requires_grad || dtype_is_float(value.dtype()), "only floating-point Variables can require a ",
                 "gradient, got ", value.desc());
  impl_->value = std::move(value);
  impl_->requires_grad = requires_grad;
}

Variable Variable::make_output(Tensor value, std::shared_ptr<Node> node) {
  Variable v(std::move(value), node != nullptr);
  v.impl_->grad_fn = std::move(node);
  return v;
}

const Tensor& Variable::value() const {
  BERTRAIN_CHECK(impl_, "use of an undefined Variable");
  return impl_->value;
}
const Tensor& Variable::grad() const {
  BERTRAIN_CHECK(impl_, "use of an undefined Variable");
  return impl_->grad;
}
Tensor& Variable::mutable_grad() {
  BERTRAIN_CHECK(impl_, "use of an undefined Variable");
  return impl_->grad;
}
void Variable::set_value(const Tensor& v) {
  BERTRAIN_CHECK(impl_, "use of an undefined Variable");
  BERTRAIN_CHECK(v.shape() == impl_->value.shape() && v.dtype() == impl_->value.dtype(), "set_value: expected ",
                 impl_->value.desc(), ", got ", v.desc());
  impl_->value = v;
}
bool Variable::requires_grad() const { return impl_ && impl_->requires_grad; }
void Variable::set_requires_grad(bool r) {
  BERTRAIN_CHECK(impl_, "use of an undefined Variable");
  BERTRAIN_CHECK(!r || dtype_is_float(impl_->value.dtype()), "only floating-point Variables can require a gradient");
  impl_->requires_grad = r;
}
bool Variable::is_leaf() const { return !impl_ || !impl_->grad_fn; }
void Variable::zero_grad() {
  if (impl_ && impl_->grad.defined()) impl_->grad.zero();
}
void Variable::clear_grad() {
  if (impl_) impl_->grad = Tensor();
}
Variable Variable::detach() const { return Variable(value(), false); }
void Variable::set_grad_ready_hook(GradReadyHook hook) {
  BERTRAIN_CHECK(impl_, "use of an undefined Variable");
  impl_->grad_ready_hook = std::move(hook);
}
const std::shared_ptr<Node>& Variable::grad_fn() const {
  BERTRAIN_CHECK(impl_, "use of an undefined Variable");
  return impl_->grad_fn;
}

void GradSlot::add(const Tensor& g) {
  if (!grad) return;
  if (!accumulate) {
    *grad = g.shares_storage(*grad) ? g.clone() : g;
    accumulate = true;
    return;
  }
  check_same_shape("gradient accumulation", *grad, g);
  BERTRAIN_ASSERT(grad->dtype() == g.dtype());
  const int64_t n = g.numel();
  if (g.dtype() == DType::f32) {
    float* d = grad->data<float>();
    const float* s = g.data<float>();
#pragma omp parallel for simd if (n > 65536)
    for (int64_t i = 0; i < n; ++i) d[i] += s[i];
  } else if (g.dtype() == DType::f64) {
    double* d = grad->data<double>();
    const double* s = g.data<double>();
#pragma omp parallel for simd if (n > 65536)
    for (int64_t i = 0; i < n; ++i) d[i] += s[i];
  } else {
    BERTRAIN_CHECK(false, "gradient accumulation in ", dtype_name(g.dtype()), " is not supported");
  }
}

Tensor& GradSlot::prepare(const Shape& shape, DType dtype) {
  BERTRAIN_ASSERT(grad != nullptr);
  if (!accumulate) *grad = Tensor::empty(shape, dtype);
  else BERTRAIN_ASSERT(grad->shape() == shape && grad->dtype() == dtype, grad->desc(), " vs ", shape.str());
  return *grad;
}

void Variable::backward() {
  BERTRAIN_CHECK(defined() && numel() == 1, "backward() without a seed needs a one-element Variable, got ",
                 defined() ? value().desc() : "undefined");
  backward(Tensor::full(shape(), 1.0, dtype()));
}

void Variable::backward(const Tensor& seed) {
  BERTRAIN_CHECK(requires_grad(), "backward() on a Variable that does not require a gradient");
  check_same_shape("backward seed", value(), seed);
  // Topological order by iterative depth-first search (post-order), and the number of consumers of every
  // Variable within this graph, so leaf hooks fire after the last contribution.
  // order holds strong references: a node's inputs die with the node, which is freed as soon as it has run.
  std::vector<std::shared_ptr<VariableImpl>> order;
  std::unordered_map<VariableImpl*, bool> visited;
  std::vector<std::pair<std::shared_ptr<VariableImpl>, size_t>> stack{{impl_, 0}};
  visited[impl_.get()] = true;
  while (!stack.empty()) {
    VariableImpl* v = stack.back().first.get();
    size_t& next = stack.back().second;
    Node* n = v->grad_fn.get();
    if (n && next < n->inputs.size()) {
      const std::shared_ptr<VariableImpl>& in = n->inputs[next++].impl_;
      if (!in || !in->requires_grad) continue;
      if (!visited[in.get()]) {
        visited[in.get()] = true;
        stack.push_back({in, 0});
      }
      continue;
    }
    order.push_back(std::move(stack.back().first));
    stack.pop_back();
  }
  // Seed.
  if (impl_->grad.defined() && is_leaf()) {
    GradSlot s{&impl_->grad, true};
    s.add(seed);
  } else {
    impl_->grad = seed.clone();
  }
  std::vector<GradSlot> slots;
  std::vector<Tensor> temps;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    VariableImpl* v = it->get();
    if (!v->grad_fn) {  // a leaf: all its contributions are in
      if (v->grad_ready_hook && v->grad.defined()) {
        Variable handle;
        handle.impl_ = *it;
        v->grad_ready_hook(handle);
      }
      continue;
    }
    std::shared_ptr<Node> node = std::move(v->grad_fn);  // frees the node (and saved state) after this step
    if (!v->grad.defined()) continue;                     // nothing flowed here
    // An input that appears twice (mul(x, x)) gets its second slot in a temporary, added afterwards, so the
    // two contributions never overwrite each other.
    const size_t ni = node->inputs.size();
    slots.assign(ni, GradSlot{});
    temps.assign(ni, Tensor());
    for (size_t i = 0; i < ni; ++i) {
      VariableImpl* in = node->inputs[i].impl();
      if (!in || !in->requires_grad) continue;
      bool dup = false;
      for (size_t j = 0; j < i; ++j) dup = dup || node->inputs[j].impl() == in;
      slots[i] = dup ? GradSlot{&temps[i], false} : GradSlot{&in->grad, in->grad.defined()};
    }
    node->backward(v->grad, slots);
    for (size_t i = 0; i < ni; ++i) {
      if (!temps[i].defined()) continue;
      VariableImpl* in = node->inputs[i].impl();
      GradSlot s{&in->grad, in->grad.defined()};
      s.add(temps[i]);
    }
    v->grad = Tensor();  // non-leaf gradient no longer needed
    v->requires_grad = false;
  }
}

}  // namespace bertrain
