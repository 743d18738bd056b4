// adamw.cpp: AdamW / Adam-L2 update, one fused vectorised pass per chunk over p, g, m, v.
#include "bertrain/optim/adamw.h"

#include <cmath>

#include "bertrain/core/error.h"
#include "optim/multi_tensor.h"

namespace bertrain {
namespace {

void check_beta(const char* what, const char* field, double b) {
  BERTRAIN_CHECK(b >= 0.0 && b < 1.0, what, ".", field, " must be in [0, 1), got ", b);
}

// Scalars of one tensor's update, computed in double and narrowed once.
template <class T>
struct AdamCoef {
  T beta1, one_minus_beta1, beta2, one_minus_beta2;
  T decay_mul;      // decoupled: 1 - lr * wd (1 when the tensor has no decay)
  T l2;             // l2 mode: wd (0 otherwise)
  T step_size;      // lr / (1 - beta1^t), or lr
  T inv_sqrt_bc2;   // 1 / sqrt(1 - beta2^t), or 1
  T eps;
};

// p <- p * decay_mul - step_size * m / (sqrt(v) * inv_sqrt_bc2 + eps), after m, v take g (+ l2 * p).
// torch.optim.AdamW _single_tensor_adamw: param.mul_(1 - lr*wd); denom = exp_avg_sq.sqrt() / bc2_sqrt + eps;
// param.addcdiv_(exp_avg, denom, value=-lr/bc1).
template <class T>
void adam_kernel(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v, int64_t n,
                 const AdamCoef<T>& c) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const T pi = p[i];
    const T gi = g[i] + c.l2 * pi;
    const T mi = c.beta1 * m[i] + c.one_minus_beta1 * gi;
    const T vi = c.beta2 * v[i] + c.one_minus_beta2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = pi * c.decay_mul - c.step_size * (mi / (std::sqrt(vi) * c.inv_sqrt_bc2 + c.eps));
  }
}

}  // namespace

AdamW::AdamW(const NamedParameters& params, const AdamWOptions& o)
    : Optimizer(params, o.rules, {"exp_avg", "exp_avg_sq"}), opt_(o) {
  check_beta("AdamWOptions", "beta1", o.beta1);
  check_beta("AdamWOptions", "beta2", o.beta2);
  BERTRAIN_CHECK(std::isfinite(o.eps) && o.eps > 0, "AdamWOptions.eps must be finite and > 0, got ", o.eps);
  BERTRAIN_CHECK(std::isfinite(o.weight_decay) && o.weight_decay >= 0,
                 "AdamWOptions.weight_decay must be finite and >= 0, got ", o.weight_decay);
}

void AdamW::update(double lr) {
  using namespace optim_detail;
  const std::vector<size_t> idx = params_with_grad();
  const double t = static_cast<double>(counters_.step);
  const double bc1 = opt_.bias_correction ? 1.0 - std::pow(opt_.beta1, t) : 1.0;
  const double bc2 = opt_.bias_correction ? 1.0 - std::pow(opt_.beta2, t) : 1.0;
  std::vector<AdamCoef<float>> cf(idx.size());
  std::vector<AdamCoef<double>> cd(idx.size());
  std::vector<int64_t> numels(idx.size());
  for (size_t k = 0; k < idx.size(); ++k) {
    const OptimizerParam& p = params_[idx[k]];
    numels[k] = p.var.numel();
    const double wd = p.weight_decay ? opt_.weight_decay : 0.0;
    const bool decoupled = opt_.weight_decay_mode == WeightDecayMode::decoupled;
    AdamCoef<double> c{opt_.beta1,        1.0 - opt_.beta1, opt_.beta2, 1.0 - opt_.beta2,
                       decoupled ? 1.0 - lr * wd : 1.0,     decoupled ? 0.0 : wd,
                       lr / bc1,          1.0 / std::sqrt(bc2),         opt_.eps};
    cd[k] = c;
    cf[k] = {float(c.beta1),     float(c.one_minus_beta1), float(c.beta2),        float(c.one_minus_beta2),
             float(c.decay_mul), float(c.l2),              float(c.step_size),    float(c.inv_sqrt_bc2),
             float(c.eps)};
  }
  ChunkPlan plan = plan_chunks(numels);
  for_each_chunk(plan, [&](int64_t, const Chunk& ch) {
    const size_t i = idx[ch.item];
    const Variable& var = params_[i].var;
    const int64_t n = ch.end - ch.begin;
    if (var.dtype() == DType::f32) {
      adam_kernel(var.value().data<float>() + ch.begin, var.grad().data<float>() + ch.begin,
                  slot(0, i).data<float>() + ch.begin, slot(1, i).data<float>() + ch.begin, n, cf[ch.item]);
    } else {
      adam_kernel(var.value().data<double>() + ch.begin, var.grad().data<double>() + ch.begin,
                  slot(0, i).data<double>() + ch.begin, slot(1, i).data<double>() + ch.begin, n, cd[ch.item]);
    }
  });
}

}  // namespace bertrain
