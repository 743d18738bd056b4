// lamb.cpp: LAMB (You et al. 2019, Algorithm 2): pass 1 updates the moments and accumulates ||w||^2 and ||r||^2
// per chunk; pass 2 recomputes r and applies w -= lr * ratio * r.
#include "bertrain/optim/lamb.h"

#include <algorithm>
#include <cmath>

#include "bertrain/core/error.h"
#include "bertrain/optim/clip.h"
#include "optim/multi_tensor.h"

namespace bertrain {
namespace {

template <class T>
struct LambCoef {
  T beta1, one_minus_beta1, beta2, one_minus_beta2;
  T gscale;     // 1 / max(1, global_norm / max_grad_norm), or 1
  T l2;         // l2 mode: lambda (0 otherwise)
  T wd;         // decoupled mode: lambda in r (0 otherwise)
  T inv_bc1;    // 1 / (1 - beta1^t), or 1
  T inv_bc2;    // 1 / (1 - beta2^t), or 1
  T eps;
};

// r = m_hat / (sqrt(v_hat) + eps) + wd * w, the same expression in both passes so pass 2 applies exactly what
// pass 1 measured.
template <class T>
inline T lamb_r(T m, T v, T w, const LambCoef<T>& c) {
  return (m * c.inv_bc1) / (std::sqrt(v * c.inv_bc2) + c.eps) + c.wd * w;
}

// Pass 1: m, v <- moments of g * gscale (+ l2 * w); returns sum w^2 and sum r^2 in double.
template <class T>
void lamb_pass1(const T* __restrict w, const T* __restrict g, T* __restrict m, T* __restrict v, int64_t n,
                const LambCoef<T>& c, double& w2, double& r2) {
  double sw = 0.0, sr = 0.0;
#pragma omp simd reduction(+ : sw, sr)
  for (int64_t i = 0; i < n; ++i) {
    const T wi = w[i];
    const T gi = g[i] * c.gscale + c.l2 * wi;
    const T mi = c.beta1 * m[i] + c.one_minus_beta1 * gi;
    const T vi = c.beta2 * v[i] + c.one_minus_beta2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const T r = lamb_r(mi, vi, wi, c);
    sw += static_cast<double>(wi) * static_cast<double>(wi);
    sr += static_cast<double>(r) * static_cast<double>(r);
  }
  w2 = sw;
  r2 = sr;
}

// Pass 2: w -= step * r (step = lr * trust ratio).
template <class T>
void lamb_pass2(T* __restrict w, const T* __restrict m, const T* __restrict v, int64_t n, const LambCoef<T>& c,
                T step) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const T wi = w[i];
    w[i] = wi - step * lamb_r(m[i], v[i], wi, c);
  }
}

}  // namespace

Lamb::Lamb(const NamedParameters& params, const LambOptions& o)
    : Optimizer(params, o.rules, {"exp_avg", "exp_avg_sq"}), opt_(o) {
  BERTRAIN_CHECK(o.beta1 >= 0 && o.beta1 < 1, "LambOptions.beta1 must be in [0, 1), got ", o.beta1);
  BERTRAIN_CHECK(o.beta2 >= 0 && o.beta2 < 1, "LambOptions.beta2 must be in [0, 1), got ", o.beta2);
  BERTRAIN_CHECK(std::isfinite(o.eps) && o.eps > 0, "LambOptions.eps must be finite and > 0, got ", o.eps);
  BERTRAIN_CHECK(std::isfinite(o.weight_decay) && o.weight_decay >= 0,
                 "LambOptions.weight_decay must be finite and >= 0, got ", o.weight_decay);
  BERTRAIN_CHECK(std::isfinite(o.max_grad_norm) && o.max_grad_norm >= 0,
                 "LambOptions.max_grad_norm must be finite and >= 0 (0 = off), got ", o.max_grad_norm);
  if (o.trust_clamp)
    BERTRAIN_CHECK(o.trust_clamp_min >= 0 && o.trust_clamp_min <= o.trust_clamp_max && std::isfinite(o.trust_clamp_max),
                   "LambOptions.trust_clamp: expected 0 <= trust_clamp_min <= trust_clamp_max < inf, got [",
                   o.trust_clamp_min, ", ", o.trust_clamp_max, "]");
  last_ratio_.assign(params_.size(), 1.0);
}

bool Lamb::adapted(size_t i) const {
  switch (opt_.adaptation) {
    case LambAdaptation::all: return true;
    case LambAdaptation::by_pattern: return params_[i].layer_adaptation;
    case LambAdaptation::decayed_only: return params_[i].weight_decay && opt_.weight_decay != 0.0;
  }
  return true;
}

void Lamb::update(double lr) {
  using namespace optim_detail;
  const std::vector<size_t> idx = params_with_grad();
  std::fill(last_ratio_.begin(), last_ratio_.end(), 1.0);
  double gscale = 1.0;
  last_grad_norm_ = 0.0;
  if (opt_.max_grad_norm > 0) {
    std::vector<Variable> vars;
    for (size_t i : idx) vars.push_back(params_[i].var);
    last_grad_norm_ = global_grad_norm(vars);
    // apex LAMBStage1Functor: clipped = norm > max ? norm / max : 1; g / clipped.
    const double clipped = last_grad_norm_ > opt_.max_grad_norm ? last_grad_norm_ / opt_.max_grad_norm : 1.0;
    gscale = 1.0 / clipped;
  }
  const double t = static_cast<double>(counters_.step);
  const double bc1 = opt_.bias_correction ? 1.0 - std::pow(opt_.beta1, t) : 1.0;
  const double bc2 = opt_.bias_correction ? 1.0 - std::pow(opt_.beta2, t) : 1.0;
  const bool decoupled = opt_.weight_decay_mode == WeightDecayMode::decoupled;
  std::vector<LambCoef<float>> cf(idx.size());
  std::vector<LambCoef<double>> cd(idx.size());
  std::vector<int64_t> numels(idx.size());
  for (size_t k = 0; k < idx.size(); ++k) {
    const OptimizerParam& p = params_[idx[k]];
    numels[k] = p.var.numel();
    const double wd = p.weight_decay ? opt_.weight_decay : 0.0;
    LambCoef<double> c{opt_.beta1, 1.0 - opt_.beta1, opt_.beta2,     1.0 - opt_.beta2, gscale,
                       decoupled ? 0.0 : wd,         decoupled ? wd : 0.0,            1.0 / bc1,
                       1.0 / bc2,  opt_.eps};
    cd[k] = c;
    cf[k] = {float(c.beta1), float(c.one_minus_beta1), float(c.beta2),   float(c.one_minus_beta2), float(c.gscale),
             float(c.l2),    float(c.wd),              float(c.inv_bc1), float(c.inv_bc2),         float(c.eps)};
  }
  ChunkPlan plan = plan_chunks(numels);
  std::vector<double> w2(plan.chunks.size()), r2(plan.chunks.size());
  for_each_chunk(plan, [&](int64_t ci, const Chunk& ch) {
    const size_t i = idx[ch.item];
    const Variable& var = params_[i].var;
    const int64_t n = ch.end - ch.begin;
    if (var.dtype() == DType::f32) {
      lamb_pass1(var.value().data<float>() + ch.begin, var.grad().data<float>() + ch.begin,
                 slot(0, i).data<float>() + ch.begin, slot(1, i).data<float>() + ch.begin, n, cf[ch.item], w2[ci],
                 r2[ci]);
    } else {
      lamb_pass1(var.value().data<double>() + ch.begin, var.grad().data<double>() + ch.begin,
                 slot(0, i).data<double>() + ch.begin, slot(1, i).data<double>() + ch.begin, n, cd[ch.item], w2[ci],
                 r2[ci]);
    }
  });
  const std::vector<double> wn2 = sum_per_item(plan, w2), rn2 = sum_per_item(plan, r2);
  std::vector<double> step(idx.size());
  for (size_t k = 0; k < idx.size(); ++k) {
    double ratio = 1.0;
    if (adapted(idx[k])) {
      const double wn = std::sqrt(wn2[k]), rn = std::sqrt(rn2[k]);
      // CASES C19 / tfa lamb.py: ratio = w > 0 ? (r > 0 ? w / r : 1) : 1.
      // The clamp bounds the measured ratio only; the zero-norm fallback stays 1 so such tensors move at lr.
      if (wn > 0 && rn > 0) {
        ratio = wn / rn;
        if (opt_.trust_clamp) ratio = std::clamp(ratio, opt_.trust_clamp_min, opt_.trust_clamp_max);
      }
    }
    last_ratio_[idx[k]] = ratio;
    step[k] = lr * ratio;
  }
  for_each_chunk(plan, [&](int64_t, const Chunk& ch) {
    const size_t i = idx[ch.item];
    const Variable& var = params_[i].var;
    const int64_t n = ch.end - ch.begin;
    if (var.dtype() == DType::f32) {
      lamb_pass2(var.value().data<float>() + ch.begin, slot(0, i).data<float>() + ch.begin,
                 slot(1, i).data<float>() + ch.begin, n, cf[ch.item], static_cast<float>(step[ch.item]));
    } else {
      lamb_pass2(var.value().data<double>() + ch.begin, slot(0, i).data<double>() + ch.begin,
                 slot(1, i).data<double>() + ch.begin, n, cd[ch.item], step[ch.item]);
    }
  });
}

}  // namespace bertrain
