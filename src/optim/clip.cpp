// clip.cpp: deterministic global gradient norm and clipping by it.
#include "bertrain/optim/clip.h"

#include <cmath>

#include "bertrain/core/error.h"
#include "optim/multi_tensor.h"

namespace bertrain {
namespace {

std::vector<Tensor> defined_grads(const std::vector<Variable>& params) {
  std::vector<Tensor> out;
  for (const auto& v : params) {
    BERTRAIN_CHECK(v.defined(), "clip_grad_norm: undefined parameter");
    const Tensor& g = v.grad();
    if (!g.defined()) continue;
    BERTRAIN_CHECK(g.dtype() == DType::f32 || g.dtype() == DType::f64, "clip_grad_norm: gradients must be f32 or ",
                   "f64, got ", g.desc());
    out.push_back(g);
  }
  return out;
}

std::vector<Variable> vars_of(const NamedParameters& params) {
  std::vector<Variable> out;
  out.reserve(params.size());
  for (const auto& p : params) out.push_back(p.second);
  return out;
}

double norm_of(const std::vector<Tensor>& grads) {
  using namespace optim_detail;
  std::vector<int64_t> numels;
  for (const auto& g : grads) numels.push_back(g.numel());
  ChunkPlan plan = plan_chunks(numels);
  std::vector<double> partial(plan.chunks.size(), 0.0);
  for_each_chunk(plan, [&](int64_t c, const Chunk& ch) {
    const Tensor& g = grads[ch.item];
    partial[c] = g.dtype() == DType::f32 ? sum_squares(g.data<float>() + ch.begin, ch.end - ch.begin)
                                         : sum_squares(g.data<double>() + ch.begin, ch.end - ch.begin);
  });
  double total = 0.0;
  for (double s : sum_per_item(plan, partial)) total += s;
  return std::sqrt(total);
}

template <class T>
void scale_all(const std::vector<Tensor>& grads, double factor) {
  using namespace optim_detail;
  std::vector<int64_t> numels;
  for (const auto& g : grads) numels.push_back(g.numel());
  ChunkPlan plan = plan_chunks(numels);
  for_each_chunk(plan, [&](int64_t, const Chunk& ch) {
    const Tensor& g = grads[ch.item];
    if (g.dtype() == DType::f32) {
      float* x = g.data<float>();
      const float f = static_cast<float>(factor);
#pragma omp simd
      for (int64_t i = ch.begin; i < ch.end; ++i) x[i] *= f;
    } else {
      double* x = g.data<double>();
#pragma omp simd
      for (int64_t i = ch.begin; i < ch.end; ++i) x[i] *= factor;
    }
  });
}

}  // namespace

double global_grad_norm(const std::vector<Variable>& params) { return norm_of(defined_grads(params)); }
double global_grad_norm(const NamedParameters& params) { return global_grad_norm(vars_of(params)); }

double clip_grad_norm(const std::vector<Variable>& params, double max_norm) {
  BERTRAIN_CHECK(std::isfinite(max_norm) && max_norm > 0, "clip_grad_norm: max_norm must be finite and > 0, got ",
                 max_norm);
  std::vector<Tensor> grads = defined_grads(params);
  const double norm = norm_of(grads);
  if (!std::isfinite(norm)) return norm;
  const double coef = max_norm / (norm + 1e-6);  // torch.nn.utils.clip_grad_norm_
  if (coef < 1.0) scale_all<float>(grads, coef);
  return norm;
}

double clip_grad_norm(const NamedParameters& params, double max_norm) { return clip_grad_norm(vars_of(params), max_norm); }

}  // namespace bertrain
