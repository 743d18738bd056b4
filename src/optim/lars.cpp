// lars.cpp: LARS (You et al. 2017, Algorithm 1): pass 1 computes ||w|| and ||g|| per tensor over fixed chunks,
// pass 2 applies v = m v + lr * lambda * (g + beta w); w -= v in one fused loop.
#include "bertrain/optim/lars.h"

#include <cmath>

#include "bertrain/core/error.h"
#include "optim/multi_tensor.h"

namespace bertrain {
namespace {

template <class T>
void lars_norms(const T* __restrict w, const T* __restrict g, int64_t n, double& w2, double& g2) {
  double sw = 0.0, sg = 0.0;
#pragma omp simd reduction(+ : sw, sg)
  for (int64_t i = 0; i < n; ++i) {
    const double wi = static_cast<double>(w[i]), gi = static_cast<double>(g[i]);
    sw += wi * wi;
    sg += gi * gi;
  }
  w2 = sw;
  g2 = sg;
}

template <class T>
void lars_apply(T* __restrict w, const T* __restrict g, T* __restrict buf, int64_t n, T momentum, T scaled_lr,
                T wd) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const T wi = w[i];
    const T vi = momentum * buf[i] + scaled_lr * (g[i] + wd * wi);
    buf[i] = vi;
    w[i] = wi - vi;
  }
}

}  // namespace

Lars::Lars(const NamedParameters& params, const LarsOptions& o)
    : Optimizer(params, o.rules, {"momentum_buffer"}), opt_(o) {
  BERTRAIN_CHECK(o.momentum >= 0 && o.momentum < 1, "LarsOptions.momentum must be in [0, 1), got ", o.momentum);
  BERTRAIN_CHECK(std::isfinite(o.weight_decay) && o.weight_decay >= 0,
                 "LarsOptions.weight_decay must be finite and >= 0, got ", o.weight_decay);
  BERTRAIN_CHECK(std::isfinite(o.trust_coefficient) && o.trust_coefficient > 0,
                 "LarsOptions.trust_coefficient must be finite and > 0, got ", o.trust_coefficient);
  BERTRAIN_CHECK(std::isfinite(o.eps) && o.eps >= 0, "LarsOptions.eps must be finite and >= 0, got ", o.eps);
  last_local_.assign(params_.size(), 1.0);
}

void Lars::update(double lr) {
  using namespace optim_detail;
  const std::vector<size_t> idx = params_with_grad();
  std::fill(last_local_.begin(), last_local_.end(), 1.0);
  std::vector<int64_t> numels(idx.size());
  for (size_t k = 0; k < idx.size(); ++k) numels[k] = params_[idx[k]].var.numel();
  ChunkPlan plan = plan_chunks(numels);
  std::vector<double> w2(plan.chunks.size()), g2(plan.chunks.size());
  for_each_chunk(plan, [&](int64_t ci, const Chunk& ch) {
    const Variable& var = params_[idx[ch.item]].var;
    const int64_t n = ch.end - ch.begin;
    if (var.dtype() == DType::f32)
      lars_norms(var.value().data<float>() + ch.begin, var.grad().data<float>() + ch.begin, n, w2[ci], g2[ci]);
    else
      lars_norms(var.value().data<double>() + ch.begin, var.grad().data<double>() + ch.begin, n, w2[ci], g2[ci]);
  });
  const std::vector<double> wn2 = sum_per_item(plan, w2), gn2 = sum_per_item(plan, g2);
  std::vector<double> scaled(idx.size()), wds(idx.size());
  for (size_t k = 0; k < idx.size(); ++k) {
    const OptimizerParam& p = params_[idx[k]];
    const double wd = p.weight_decay ? opt_.weight_decay : 0.0;
    double local = 1.0;
    if (p.layer_adaptation) {
      const double wn = std::sqrt(wn2[k]), gn = std::sqrt(gn2[k]);
      const double denom = gn + wd * wn + opt_.eps;
      local = (wn > 0 && denom > 0) ? opt_.trust_coefficient * wn / denom : 1.0;
    }
    last_local_[idx[k]] = local;
    scaled[k] = lr * local;
    wds[k] = wd;
  }
  for_each_chunk(plan, [&](int64_t, const Chunk& ch) {
    const size_t i = idx[ch.item];
    const Variable& var = params_[i].var;
    const int64_t n = ch.end - ch.begin;
    if (var.dtype() == DType::f32)
      lars_apply(var.value().data<float>() + ch.begin, var.grad().data<float>() + ch.begin,
                 slot(0, i).data<float>() + ch.begin, n, float(opt_.momentum), float(scaled[ch.item]),
                 float(wds[ch.item]));
    else
      lars_apply(var.value().data<double>() + ch.begin, var.grad().data<double>() + ch.begin,
                 slot(0, i).data<double>() + ch.begin, n, opt_.momentum, scaled[ch.item], wds[ch.item]);
  });
}

}  // namespace bertrain
