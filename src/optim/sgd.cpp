// sgd.cpp: SGD with momentum (torch.optim.SGD _single_tensor_sgd semantics), one fused pass.
#include "bertrain/optim/sgd.h"

#include <cmath>

#include "bertrain/core/error.h"
#include "optim/multi_tensor.h"

namespace bertrain {
namespace {

template <class T>
void sgd_kernel(T* __restrict p, const T* __restrict g, T* __restrict buf, int64_t n, T lr, T wd, T momentum,
                T damp_keep, bool first, bool nesterov) {
  if (momentum == T(0)) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) p[i] -= lr * (g[i] + wd * p[i]);
    return;
  }
  // First step: buf = d (torch clones d, no dampening); later buf = momentum * buf + (1 - dampening) * d.
  const T keep = first ? T(0) : momentum;
  const T add = first ? T(1) : damp_keep;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const T pi = p[i];
    const T d = g[i] + wd * pi;
    const T b = keep * buf[i] + add * d;
    buf[i] = b;
    p[i] = pi - lr * (nesterov ? d + momentum * b : b);
  }
}

}  // namespace

Sgd::Sgd(const NamedParameters& params, const SgdOptions& o) : Optimizer(params, o.rules, {"momentum_buffer"}), opt_(o) {
  BERTRAIN_CHECK(std::isfinite(o.momentum) && o.momentum >= 0, "SgdOptions.momentum must be finite and >= 0, got ",
                 o.momentum);
  BERTRAIN_CHECK(o.dampening >= 0 && o.dampening <= 1, "SgdOptions.dampening must be in [0, 1], got ", o.dampening);
  BERTRAIN_CHECK(std::isfinite(o.weight_decay) && o.weight_decay >= 0,
                 "SgdOptions.weight_decay must be finite and >= 0, got ", o.weight_decay);
  BERTRAIN_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0),
                 "SgdOptions.nesterov requires momentum > 0 and dampening == 0, got momentum ", o.momentum,
                 ", dampening ", o.dampening);
}

void Sgd::update(double lr) {
  using namespace optim_detail;
  const std::vector<size_t> idx = params_with_grad();
  std::vector<int64_t> numels(idx.size());
  for (size_t k = 0; k < idx.size(); ++k) numels[k] = params_[idx[k]].var.numel();
  const bool first = counters_.step == 1;
  ChunkPlan plan = plan_chunks(numels);
  for_each_chunk(plan, [&](int64_t, const Chunk& ch) {
    const size_t i = idx[ch.item];
    const Variable& var = params_[i].var;
    const double wd = params_[i].weight_decay ? opt_.weight_decay : 0.0;
    const int64_t n = ch.end - ch.begin;
    if (var.dtype() == DType::f32)
      sgd_kernel(var.value().data<float>() + ch.begin, var.grad().data<float>() + ch.begin,
                 slot(0, i).data<float>() + ch.begin, n, float(lr), float(wd), float(opt_.momentum),
                 float(1.0 - opt_.dampening), first, opt_.nesterov);
    else
      sgd_kernel(var.value().data<double>() + ch.begin, var.grad().data<double>() + ch.begin,
                 slot(0, i).data<double>() + ch.begin, n, lr, wd, opt_.momentum, 1.0 - opt_.dampening, first,
                 opt_.nesterov);
  });
}

}  // namespace bertrain
