// ops.h: every differentiable op of bertrain. Each op keeps its forward, the state its backward needs and
// its backward side by side in src/ops/ (DESIGN.md section 2); gradients are defined only there.
// Floating-point ops run in f32 (compute) and f64 (gradient checks); all tensors are contiguous row-major.
// Every op throws bertrain::Error naming itself and the offending shapes on misuse.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "bertrain/autograd/variable.h"

namespace bertrain {

// ---- matrix products (oneDNN matmul for f32, cached by shape; Eigen for f64; see MatmulPrecision) ----

/// a: (M, K) or (K, M) when trans_a; b: (K, N) or (N, K) when trans_b -> (M, N).
Variable matmul(const Variable& a, const Variable& b, bool trans_a = false, bool trans_b = false);
/// Batched matmul over leading axes: a: (..., M, K), b: (..., K, N) (either transposed in its last two
/// axes) with equal leading axes -> (..., M, N).
Variable bmm(const Variable& a, const Variable& b, bool trans_a = false, bool trans_b = false);
/// x: (..., in), weight: (out, in) as Hugging Face / PyTorch store it, bias: (out) or undefined -> (..., out).
Variable linear(const Variable& x, const Variable& weight, const Variable& bias);
/// Several linears of one input as one gemm, their outputs side by side (BERT's fused Q, K, V projection, as
/// NVIDIA's FasterTransformer and Megatron-LM run it): concat({linear(x, weights[i], biases[i])}, -1).
/// x: (..., in), weights[i]: (out_i, in), biases: empty or one (out_i) per weight -> (..., sum out_i).
/// The weights stay separate parameters: each forward concatenates them into one (sum out_i, in) operand (under
/// MatmulPrecision::bf16 rounding each into its rows of one bf16 buffer, which the separate linears round anyway),
/// kept until backward (bert-base's Q, K, V: 2304 x 768, 3.4 MiB in bf16, 6.8 MiB in f32, per layer). Backward:
/// dx = dy W one gemm over K = sum out_i, dW one gemm (x rounded to bf16 once for all blocks) then split into the
/// weights' gradients, and the bias gradients from one pass over dy (fused with its rounding under bf16). Equals
/// the separate linears to f32 rounding (the summation order of dx differs). Throws bertrain::Error on shape or
/// dtype mismatches.
Variable linear_concat(const Variable& x, const std::vector<Variable>& weights, const std::vector<Variable>& biases);

// ---- matmul compute precision (mixed precision, `--bf16`) ----

/// Precision of the f32 products of matmul, bmm, linear and attention (forward and the backward gemms).
/// f32: plain f32 (the default; results are bit-identical to bertrain before this option existed).
/// bf16: each f32 operand is rounded to bfloat16 (round to nearest even, kernels/convert.h) and oneDNN
/// multiplies with f32 accumulation into an f32 result (+ f32 bias): the "mixed precision" of Micikevicius et
/// al. 2018 / Kalamkar et al. 2019 ("A Study of BFLOAT16 for Deep Learning Training"), as torch.autocast on CPU
/// does it for matmuls. Parameters, gradients and optimizer state stay f32 (master weights); every other op
/// (layer norm and softmax statistics, GELU, losses) still runs in f32. Error: each operand is rounded by at
/// most 2^-9 relative, so each term a_ik b_kj by at most about 2^-8 relative, then summed in f32:
/// |c - exact| <= (2^-8 + k 2^-24) sum_k |a_ik b_kj| (roughly; tested against f64 in tests/bf16_test.cpp).
/// Backward runs in the precision the forward ran in (recorded with the op), whatever the setting is by then:
/// the incoming gradient is rounded to bf16 once for both gradient gemms (linear and linear_concat: in the same
/// pass that sums its columns for the bias gradient, in f32), and the saved f32 operands are rounded again (the
/// same bits as in forward; linear_concat keeps its small concatenated bf16 weight). The bf16 copies of
/// activations are not kept between forward and backward:
/// the graph holds the f32 inputs anyway, so keeping them would add memory (measured +1.2 GB, +17%, on
/// bert-base at 32 x 128) to save conversions that cost about 1% of a step.
/// f64 tensors are never affected (gradient checks stay exact).
/// On a CPU without AVX512_BF16 (see matmul_bf16_native) oneDNN emulates bf16 with AVX-512: correct, but
/// slower than f32. Without AVX-512 (see matmul_bf16_supported) oneDNN 2.6 has no bf16 matmul at all.
enum class MatmulPrecision { f32, bf16 };

/// Sets the process-wide precision (it is read when a product's forward runs; not meant to be changed while
/// another thread is running a forward pass). Throws bertrain::Error for bf16 when !matmul_bf16_supported(),
/// or for a value outside the enum.
void set_matmul_precision(MatmulPrecision p);
MatmulPrecision matmul_precision();
/// "f32" or "bf16".
const char* matmul_precision_name(MatmulPrecision p);
/// True when bf16 products run on native AVX512_BF16 kernels (oneDNN's effective ISA includes
/// avx512_core_bf16; DNNL_MAX_CPU_ISA can lower it); false means emulated and slower than f32.
bool matmul_bf16_native();
/// True when bf16 products can run at all (oneDNN's effective ISA includes AVX-512, avx512_core).
bool matmul_bf16_supported();

/// Scoped precision (RAII, like torch.autocast): sets `p` for its lifetime and restores the previous one.
class MatmulPrecisionGuard {
 public:
  explicit MatmulPrecisionGuard(MatmulPrecision p) : prev_(matmul_precision()) { set_matmul_precision(p); }
  ~MatmulPrecisionGuard() { set_matmul_precision(prev_); }
  MatmulPrecisionGuard(const MatmulPrecisionGuard&) = delete;
  MatmulPrecisionGuard& operator=(const MatmulPrecisionGuard&) = delete;

 private:
  MatmulPrecision prev_;
};

// ---- element-wise; `b` broadcasts over the leading axes of `a` (its shape is a suffix of a's) ----

Variable add(const Variable& a, const Variable& b);
Variable sub(const Variable& a, const Variable& b);
Variable mul(const Variable& a, const Variable& b);
/// a * s for a constant s.
Variable scale(const Variable& a, double s);

enum class GeluForm {
  erf,  ///< 0.5 x (1 + erf(x / sqrt 2)): "gelu" in Hugging Face configs and the released BERT checkpoints
  tanh  ///< 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): "gelu_new", "gelu_pytorch_tanh"
};
/// Hendrycks & Gimpel 2016, "Gaussian Error Linear Units", eq. for the exact form and its tanh approximation.
Variable gelu(const Variable& x, GeluForm form = GeluForm::erf);
/// gelu(linear(x, weight, bias), form): x (..., in), weight (out, in), bias (out) -> (..., out). Where no gradient
/// is recorded (under NoGradGuard, or no input requires one) and the product runs in f32, one oneDNN matmul with a
/// GELU post-op (kernels::gemm with GemmEpilogue: prediction's BERT intermediate layer, as ONNX Runtime's BiasGelu and
/// FasterTransformer fuse it), whose erf and tanh are oneDNN's approximations: the same values as the two ops to
/// about 1e-6 relative; otherwise exactly the two ops. Throws as linear() and gelu() do.
Variable linear_gelu(const Variable& x, const Variable& weight, const Variable& bias, GeluForm form = GeluForm::erf);

/// A linear's weight (out, in) reordered once into the blocked layout oneDNN's f32 matmul prefers (prediction's
/// constant weights, as ONNX Runtime pre-packs a model's MatMul weights when a session loads): products with it
/// skip reading the weight in its plain layout and packing it on every call (15-25% of a product at batch 1).
/// Remembers which weight it came from (its data pointer and 16 of its values spread over it), so
/// linear_prepacked() can tell when the weight was replaced or rewritten since. Opaque.
struct PackedLinear;
/// Packs `weight` (f32, (out, in)). Throws bertrain::Error for another dtype or rank, or an empty weight.
std::shared_ptr<const PackedLinear> pack_linear(const Variable& weight);
/// linear(x, weight, bias), or linear_gelu(x, weight, bias, *gelu), computed with `packed`: the same kernel on the same
/// values (the packing done ahead). Where a gradient would be recorded, for non-f32 operands or bf16 products, or when
/// `packed` no longer matches `weight` (another tensor, or its sampled values changed), exactly linear() or
/// linear_gelu() on `weight` instead: always the values of the current weight. Throws as linear() does.
Variable linear_prepacked(const Variable& x, const Variable& weight, const Variable& bias, const PackedLinear& packed,
                          const GeluForm* gelu = nullptr);
Variable tanh(const Variable& x);
Variable relu(const Variable& x);

// ---- normalisation and attention ----

/// Layer norm over the last axis (Ba et al. 2016): y = (x - mean) / sqrt(var + eps) * gamma + beta with the
/// biased variance and eps inside the square root, statistics in f32 (f64 for f64 inputs), as
/// torch.nn.LayerNorm and google-research/bert's layer_norm. x: (..., C), gamma, beta: (C).
Variable layer_norm(const Variable& x, const Variable& gamma, const Variable& beta, double eps);

/// Softmax over the last axis of x + mask. x: (B, ..., N); mask: undefined, or additive (B, N) f32/f64 added
/// to every row of sample b (google-research/bert's (1 - attention_mask) * -10000). Not differentiable in mask.
Variable softmax(const Variable& x, const Tensor& mask = Tensor());

/// The real tokens of a padded (B, T) batch packed back to back (the unpadded encoder): token i is position
/// position[i] of sample sample[i] (0-based within the batch); sequence b holds rows [cu_seqlens[b],
/// cu_seqlens[b + 1]). N = sample.size() = position.size() = cu_seqlens.back().
struct PackedTokens {
  std::vector<int32_t> sample, position;
  std::vector<int64_t> cu_seqlens;  ///< B + 1 offsets
};

/// Identifies one dropout site's random draws. Element j of row r (r along axis 0, the sample axis; j the
/// flat index within the row) is decided by 16 bits of the keyed Philox block (seed, stream,
/// (first_row + r) * 2^32 + j / 8): word (j / 2) % 4, its low half for even j, high half for odd j. It is
/// dropped when that 16-bit value is below round(p * 65536) (p to within 2^-17). So masks depend on the global
/// sample index and the site, never on micro-batch split, rank or thread count, and fused ops that apply
/// dropout themselves (attention, dropout_add_layer_norm) draw exactly the masks this op would.
struct DropoutKey {
  uint64_t seed = 0;
  uint64_t stream = 0;    ///< one per dropout site (layer)
  int64_t first_row = 0;  ///< global index of row 0 of x (with tokens: of sample 0 of the batch)
  /// Packed tokens (the unpadded encoder), or null. When set, x is (N, C) and row i is decided as elements
  /// [position[i] * C, position[i] * C + C) of sample first_row + sample[i]: the draws of row (sample, position)
  /// of the padded (B, T, C) tensor, so both paths drop the same elements of the same token.
  std::shared_ptr<const PackedTokens> tokens;
};
/// Inverted dropout: kept values are scaled by 1 / (1 - p) in training; the identity when !training or p == 0.
Variable dropout(const Variable& x, double p, bool training, const DropoutKey& key);

/// The embeddings' end, fused: dropout(layer_norm(x, gamma, beta, eps), p, training, key) in one pass per row,
/// drawing exactly the masks dropout() would (keyed on x's first axis, or DropoutKey::tokens for packed (N, C)
/// tokens). x: (B, ..., C), gamma, beta: (C). Same arithmetic, in the same order, as the two ops: bit-identical.
Variable layer_norm_dropout(const Variable& x, const Variable& gamma, const Variable& beta, double eps, double p,
                            bool training, const DropoutKey& key);

/// The end of a post-LN residual block, fused: layer_norm(dropout(x, p, training, key) + residual, gamma, beta,
/// eps) (BERT's BertSelfOutput / BertOutput; Vaswani et al. 2017, section 5.4, dropout before the residual add).
/// x, residual: (B, ..., C) of one shape; gamma, beta: (C) -> (B, ..., C). Draws exactly the masks dropout(x, ...)
/// would (keyed on x's first axis); the sum is never stored. Same arithmetic as the three ops in sequence.
Variable dropout_add_layer_norm(const Variable& x, const Variable& residual, const Variable& gamma,
                                const Variable& beta, double eps, double p, bool training, const DropoutKey& key);

/// Multi-head scaled dot-product attention (Vaswani et al. 2017, eq. 1) as BERT runs it, fused: for every
/// sample b and head h, P = dropout(softmax(Q_bh K_bh^T * scale + mask_b)) and ctx_bh = P V_bh.
/// q: (B, TQ, H), k, v: (B, TK, H) with H = num_heads * HS and head h in columns [h HS, (h + 1) HS) (the layout
/// the Q, K, V linears produce; no permute copies are made); mask: undefined or additive (B, TK) f32/f64, as in
/// softmax(); -> ctx (B, TQ, H). The dropout on P (probability p, when training) decides probability
/// (head, query, key) of sample b as DropoutKey's element j = (head * 2^12 + query) * 2^12 + key of row b: the
/// index does not depend on TQ or TK, so a token's masks are the same however far its batch is padded and on
/// the unpadded path. TQ, TK <= 4096 and NH <= 2048 (else bertrain::Error). Equals
/// permute(bmm(dropout(softmax(scale(bmm(Qh, Kh, false, true), scale), mask)), Vh)) with Xh the (B, NH, T, HS)
/// permutations (google-research/bert's attention_layer), with the backward of the chain in one pass.
/// Not differentiable in mask.
Variable attention(const Variable& q, const Variable& k, const Variable& v, int64_t num_heads, const Tensor& mask,
                   double scale, double p, bool training, const DropoutKey& key);

/// Self-attention on the fused Q, K, V projection's output (linear_concat of the query, key and value linears):
/// qkv (B, T, 3H) with Q in columns [0, H), K in [H, 2H), V in [2H, 3H) -> ctx (B, T, H). Equals
/// attention(Q, K, V, ...) with the three column blocks (the same arithmetic on the same values; the heads are
/// read with a row stride of 3H, no copies; under bf16 qkv is rounded once for the three). Its gradient is one
/// (B, T, 3H) tensor, the blocks side by side, as linear_concat's backward takes it.
Variable attention_qkv(const Variable& qkv, int64_t num_heads, const Tensor& mask, double scale, double p,
                       bool training, const DropoutKey& key);

/// Variable-length multi-head attention on packed tokens (the unpadded encoder; the layout of FlashAttention's
/// flash_attn_varlen_func and of NVIDIA FasterTransformer's "remove padding"): q, k, v (N, H) hold the real tokens
/// of B sequences back to back, sequence b in rows [cu_seqlens[b], cu_seqlens[b + 1]) (B + 1 non-decreasing
/// offsets from 0 to N); each sequence attends to itself only, on its own length L_b (no mask, no padding), with
/// the fused forward and backward of attention(). -> ctx (N, H). Dropout on P decides probability
/// (head, query, key) of sequence b exactly as attention() does for sample key.first_row + b, so a sequence gets
/// the masks it gets padded: attention_varlen(packed) equals attention(padded, padding mask) on the real rows
/// (to rounding). L_b <= 4096, NH <= 2048. Throws bertrain::Error on bad shapes or offsets.
Variable attention_varlen(const Variable& q, const Variable& k, const Variable& v, int64_t num_heads,
                          const std::vector<int64_t>& cu_seqlens, double scale, double p, bool training,
                          const DropoutKey& key);
/// attention_varlen on the fused projection's packed output: qkv (N, 3H), Q, K, V in column blocks as in
/// attention_qkv -> ctx (N, H).
Variable attention_varlen_qkv(const Variable& qkv, int64_t num_heads, const std::vector<int64_t>& cu_seqlens,
                              double scale, double p, bool training, const DropoutKey& key);

// ---- indexing ----

/// Rows of `table` at `ids`: table (V, H), ids i32 of any shape S -> S + (H). Backward scatter-adds,
/// repeated ids accumulate. Throws naming the bad id when an id is outside [0, V).
Variable embedding(const Variable& table, const Tensor& ids);
/// Rows of x (N, H) at idx i32 (M) -> (M, H) (masked positions of a flattened (B*T, H) sequence output).
Variable gather_rows(const Variable& x, const Tensor& idx);
/// gather_rows where an index of -1 gives a row of zeros (which takes no gradient): the padded (B*T, H) layout of
/// the unpadded encoder's packed (N, H) tokens. Throws bertrain::Error for an index outside [-1, N).
Variable gather_rows_or_zero(const Variable& x, const Tensor& idx);

/// Softmax cross-entropy from logits (N, C) with integer labels i32 (N): returns sum_i w_i * ce_i / normalizer
/// as a scalar. weights: f32/f64 (N) or undefined (all 1); rows whose label is ignore_index count with weight 0.
/// google-research/bert's masked-LM loss is this with normalizer = sum(w) + 1e-5 (CASES.md C10).
Variable cross_entropy(const Variable& logits, const Tensor& labels, const Tensor& weights, double normalizer,
                       int32_t ignore_index = -100);

// ---- shape ----

Variable reshape(const Variable& x, const Shape& shape);
/// Swaps axes d0 and d1 (a copy: tensors are always contiguous).
Variable transpose(const Variable& x, int d0, int d1);
/// Reorders the axes: output axis i is input axis perm[i] (a copy).
Variable permute(const Variable& x, const std::vector<int>& perm);
/// Elements [begin, end) along axis `dim` (a copy unless dim is the first axis).
Variable slice(const Variable& x, int dim, int64_t begin, int64_t end);
/// Joins along axis `dim`; all other axes must agree.
Variable concat(const std::vector<Variable>& xs, int dim);

// ---- reductions (fixed summation order: identical results for any thread count) ----

/// Sum of all elements -> shape ().
Variable sum(const Variable& x);
/// Mean of all elements -> shape ().
Variable mean(const Variable& x);

}  // namespace bertrain

namespace bertrain {

/// Activation checkpointing (Chen et al. 2016, "Training Deep Nets with Sublinear Memory Cost"): runs
/// f(x) without recording and keeps only x; backward runs f again with recording (dropout masks are keyed,
/// so they replay exactly) and backpropagates through it: parameters used inside f get their gradients
/// accumulated directly, x gets its gradient through the returned Variable. `needs_grad` says whether
/// anything inside f (its parameters) requires a gradient, so the op records even when x does not.
Variable checkpoint(const std::function<Variable(const Variable&)>& f, const Variable& x, bool needs_grad);

}  // namespace bertrain
