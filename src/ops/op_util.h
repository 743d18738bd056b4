// op_util.h: private helpers shared by the op implementations: the generic Node that binds an op's
// Saved state to its backward, dtype dispatch, and shape checks that name the op.
#pragma once

#include <utility>

#include "bertrain/autograd/variable.h"
#include "bertrain/core/error.h"

namespace bertrain::detail {

/// A Node for an op struct `Op` with `Op::kName`, `Op::Saved` and
/// `static void Op::backward(const Saved&, const Tensor& dy, std::vector<GradSlot>&)`.
template <class Op>
class OpNode final : public Node {
 public:
  explicit OpNode(typename Op::Saved s) : saved(std::move(s)) {}
  const char* name() const override { return Op::kName; }
  void backward(const Tensor& dy, std::vector<GradSlot>& slots) override { Op::backward(saved, dy, slots); }
  typename Op::Saved saved;
};

/// Wraps `out` as the output of op `Op` over `inputs`, recording a node when any input needs a gradient.
template <class Op>
Variable record(Tensor out, std::vector<Variable> inputs, typename Op::Saved saved) {
  bool rec = grad_mode_enabled();
  if (rec) {
    rec = false;
    for (auto& v : inputs)
      if (v.defined() && v.requires_grad()) rec = true;
  }
  if (!rec) return Variable(std::move(out), false);
  auto node = std::make_shared<OpNode<Op>>(std::move(saved));
  node->inputs = std::move(inputs);
  return Variable::make_output(std::move(out), std::move(node));
}

/// Throws "<op>: needs f32 or f64, got ..." unless t is f32 or f64.
inline void check_float(const char* op, const Tensor& t) {
  BERTRAIN_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::f64, op, ": needs an f32 or f64 tensor, got ",
                 t.desc());
}

/// Mixed precision (MatmulPrecision in ops.h; defined in matmul.cpp), shared by every op with products:
/// whether a product with f32/f64 operand `t` runs in bf16 now (never for f64), a bf16 copy of f32 `t` (from
/// the caching allocator, rounded as kernels/convert.h describes), and `t` as a gemm operand (its bf16 copy
/// when `bf16`, else `t` itself; the copy has the same layout, so strides carry over).
bool bf16_product(const Tensor& t);
Tensor to_bf16(const Tensor& t);
inline Tensor operand(const Tensor& t, bool bf16) { return bf16 ? to_bf16(t) : t; }

/// Number of elements the tensor has per row when viewed as (rows, last axis).
inline int64_t last_dim(const Tensor& t) { return t.dim() == 0 ? 1 : t.shape().back(); }

}  // namespace bertrain::detail

/// Runs the statement with `T` bound to float or double according to `dtype`.
#define BERTRAIN_DISPATCH_FLOAT(dtype, op, ...)                                   \
  do {                                                                            \
    if ((dtype) == ::bertrain::DType::f32) {                                      \
      using T = float;                                                            \
      __VA_ARGS__;                                                                \
    } else if ((dtype) == ::bertrain::DType::f64) {                               \
      using T = double;                                                           \
      __VA_ARGS__;                                                                \
    } else {                                                                      \
      BERTRAIN_CHECK(false, op, ": needs f32 or f64, got ", dtype_name(dtype));   \
    }                                                                             \
  } while (0)
