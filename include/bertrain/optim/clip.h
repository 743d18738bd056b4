// clip.h: the global L2 norm of all gradients, and clipping by it (torch.nn.utils.clip_grad_norm_).
#pragma once

#include <vector>

#include "bertrain/optim/optimizer.h"

namespace bertrain {

/// sqrt(sum over parameters and elements of grad^2), in double whatever the dtype. Deterministic for any
/// thread count: each tensor is summed in fixed chunks of 32768 elements combined in order, then tensors in
/// the order given. Parameters without a gradient are skipped. Returns +inf or NaN when a gradient holds one.
double global_grad_norm(const std::vector<Variable>& params);
double global_grad_norm(const NamedParameters& params);

/// Clips by global norm as torch.nn.utils.clip_grad_norm_: norm = global_grad_norm(params); when the norm is
/// finite and max_norm / (norm + 1e-6) < 1 every gradient is multiplied by that factor. Returns the norm before
/// clipping. A non-finite norm is returned as it is and no gradient is touched: the caller should skip the
/// step (std::isfinite(result) is the report). max_norm > 0, throws bertrain::Error otherwise.
double clip_grad_norm(const std::vector<Variable>& params, double max_norm);
double clip_grad_norm(const NamedParameters& params, double max_norm);

}  // namespace bertrain
