// gemm.cpp: oneDNN matmul for f32 with transposes expressed as strides (no copies), and accumulation as a
// sum post-op; Eigen for f64 (oneDNN has no f64 matmul). Primitives are cached by shape and operand dtype.
// bf16 operands (mixed precision): the same primitive with bf16 src/weights and an f32 destination and bias;
// oneDNN accumulates in f32 (its bf16 matmul contract).
#include "kernels/gemm.h"

// GCC 12.2's AVX-512 headers define _mm512_undefined_ps() and its kin as `__m512 __Y = __Y; return __Y;`, and
// -Wmaybe-uninitialized / -Wuninitialized then fire wherever Eigen's packet code (pset1, predux, ...) inlines them:
// hundreds of reports about a value that is undefined on purpose (GCC bug 105593, fixed in GCC 12.3 and 13 by a
// pragma inside the header). The same pragma here, for this file only, since the code at fault is the compiler's.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ == 12
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <Eigen/Core>
#include <array>
#include <cstdlib>
#include <new>
#include <unordered_map>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <tuple>

namespace bertrain::kernels {

namespace {

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// shape, transposes, accumulate, bias, operand dtype (f32 or bf16; the destination is always f32)
using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, bool, bool, bool, bool, DType, GemmEpilogue>;

struct Prim {
  dnnl::matmul prim;
  dnnl::memory::desc a, b, c, bias, scratchpad;
};

// Cached primitives are shared by every thread that calls gemm (the task pipelines run one model from several
// threads at once). oneDNN's library-managed scratchpad is common to all primitives and only safe when each
// primitive runs on the thread that created it, so every primitive is created with a user scratchpad and each
// calling thread passes its own buffer (oneDNN's "user" scratchpad mode: thread-safe as long as no buffer is used by
// two executions at once). The buffer grows to the largest scratchpad this thread has needed.
dnnl::primitive_attr base_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

void* thread_scratchpad(size_t bytes) {
  struct Buffer {
    void* p = nullptr;
    size_t size = 0;
    ~Buffer() { std::free(p); }
  };
  static thread_local Buffer buf;
  if (bytes > buf.size) {
    std::free(buf.p);
    buf.size = (bytes + 63) / 64 * 64;
    buf.p = std::aligned_alloc(64, buf.size);
    if (!buf.p) {
      buf.size = 0;
      throw std::bad_alloc();
    }
  }
  return buf.p;
}

// Runs p with its operands and this thread's scratchpad.
void execute(const Prim& p, dnnl::stream& stream, std::unordered_map<int, dnnl::memory> args) {
  const size_t bytes = p.scratchpad.get_size();
  if (bytes > 0) args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(p.scratchpad, engine(), thread_scratchpad(bytes)));
  p.prim.execute(stream, args);
  stream.wait();
}

std::mutex g_mu;
std::map<Key, Prim> g_cache;
int64_t g_created = 0;

dnnl::memory::desc md(int64_t batch, int64_t rows, int64_t cols, bool trans,
                      dnnl::memory::data_type dt = dnnl::memory::data_type::f32) {
  // logical (batch, rows, cols); stored as (batch, cols, rows) when trans.
  using dims = dnnl::memory::dims;
  dims d{batch, rows, cols};
  dims st = trans ? dims{rows * cols, 1, rows} : dims{rows * cols, cols, 1};
  return dnnl::memory::desc(d, dt, st);
}

// Both caches hold at most this many primitives and are emptied when full: the unpadded encoder's token count
// (the M of every linear) changes from batch to batch, so a long finetuning run would otherwise keep one primitive
// (and its JIT code) per count it ever saw. Primitives are handed out by value (shared handles), so emptying a
// cache never frees one in use.
constexpr size_t kMaxCachedPrimitives = 2048;

template <class Map>
void make_room(Map& cache) {
  if (cache.size() >= kMaxCachedPrimitives) cache.clear();
}

// The attributes of a product: a user scratchpad, then the sum post-op when accumulating and act's eltwise.
dnnl::primitive_attr product_attr(bool acc, GemmEpilogue act) {
  dnnl::primitive_attr attr = base_attr();
  if (acc || act != GemmEpilogue::none) {
    dnnl::post_ops po;
    if (acc) po.append_sum(1.0f);
    if (act != GemmEpilogue::none) {
      po.append_eltwise(1.0f, act == GemmEpilogue::gelu_erf ? dnnl::algorithm::eltwise_gelu_erf
                                                            : dnnl::algorithm::eltwise_gelu_tanh, 0.0f, 0.0f);
    }
    attr.set_post_ops(po);
  }
  return attr;
}

// Runs a product's primitive on a, b, c and the optional bias, with this thread's stream and scratchpad.
void execute_product(const Prim& p, void* a, const dnnl::memory& b, void* c, const Tensor* bias) {
  static thread_local dnnl::stream stream(engine());
  dnnl::memory am(p.a, engine(), a), cm(p.c, engine(), c);
  if (bias) {
    dnnl::memory biasm(p.bias, engine(), bias->raw_data());
    execute(p, stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_BIAS, biasm}, {DNNL_ARG_DST, cm}});
  } else {
    execute(p, stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, cm}});
  }
}

Prim get_prim(const GemmShape& s, bool acc, bool has_bias, DType operands = DType::f32,
              GemmEpilogue act = GemmEpilogue::none) {
  Key key{s.batch, s.m, s.n, s.k, s.trans_a, s.trans_b, acc, has_bias, operands, act};
  std::lock_guard<std::mutex> g(g_mu);
  auto it = g_cache.find(key);
  if (it != g_cache.end()) return it->second;
  make_room(g_cache);
  Prim p;
  const auto odt = operands == DType::bf16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
  p.a = md(s.batch, s.m, s.k, s.trans_a, odt);
  p.b = md(s.batch, s.k, s.n, s.trans_b, odt);
  p.c = md(s.batch, s.m, s.n, false);
  const dnnl::primitive_attr attr = product_attr(acc, act);
  if (has_bias) {
    p.bias = dnnl::memory::desc({1, 1, s.n}, dnnl::memory::data_type::f32, dnnl::memory::dims{s.n, s.n, 1});
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(p.a, p.b, p.bias, p.c), attr, engine());
    p.prim = dnnl::matmul(pd);
    p.scratchpad = pd.scratchpad_desc();
  } else {
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(p.a, p.b, p.c), attr, engine());
    p.prim = dnnl::matmul(pd);
    p.scratchpad = pd.scratchpad_desc();
  }
  ++g_created;
  return g_cache.emplace(key, std::move(p)).first->second;
}

/// get_prim, with oneDNN's "could not create a primitive descriptor" (in practice: bf16 on a CPU without
/// AVX-512) turned into a bertrain::Error naming the product.
Prim get_prim_or_throw(const GemmShape& s, bool acc, bool has_bias, DType operands,
                       GemmEpilogue act = GemmEpilogue::none) {
  try {
    return get_prim(s, acc, has_bias, operands, act);
  } catch (const dnnl::error& e) {
    throw Error(std::string("gemm: oneDNN has no ") + dtype_name(operands) + " matmul for " +
                std::to_string(s.batch) + " x (" + std::to_string(s.m) + " x " + std::to_string(s.k) + ") x (" +
                std::to_string(s.k) + " x " + std::to_string(s.n) + ") on this CPU: " + e.what() +
                (operands == DType::bf16 ? " (bf16 needs AVX-512; run without --bf16)" : ""));
  }
}

void gemm_f64(const GemmShape& s, const Tensor& a, const Tensor& b, Tensor& c, bool acc, const Tensor* bias) {
  using M = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const double* pa = a.data<double>();
  const double* pb = b.data<double>();
  double* pc = c.data<double>();
  for (int64_t i = 0; i < s.batch; ++i) {
    Eigen::Map<const M> A(pa + i * s.m * s.k, s.trans_a ? s.k : s.m, s.trans_a ? s.m : s.k);
    Eigen::Map<const M> B(pb + i * s.k * s.n, s.trans_b ? s.n : s.k, s.trans_b ? s.k : s.n);
    Eigen::Map<M> C(pc + i * s.m * s.n, s.m, s.n);
    M r;
    if (s.trans_a && s.trans_b) r = A.transpose() * B.transpose();
    else if (s.trans_a) r = A.transpose() * B;
    else if (s.trans_b) r = A * B.transpose();
    else r = A * B;
    if (bias) r.rowwise() += Eigen::Map<const Eigen::RowVectorXd>(bias->data<double>(), s.n);
    if (acc) C += r;
    else C = r;
  }
}

}  // namespace

void gemm(const GemmShape& s, const Tensor& a, const Tensor& b, Tensor& c, bool accumulate, const Tensor* bias,
          GemmEpilogue act) {
  BERTRAIN_ASSERT(a.numel() == s.batch * s.m * s.k && b.numel() == s.batch * s.k * s.n &&
                  c.numel() == s.batch * s.m * s.n);
  BERTRAIN_ASSERT(act == GemmEpilogue::none || (!accumulate && s.k > 0 && a.dtype() != DType::f64));
  if (s.m == 0 || s.n == 0) return;
  if (s.k == 0) {
    if (!accumulate) c.zero();
    return;
  }
  if (a.dtype() == DType::f64) {
    gemm_f64(s, a, b, c, accumulate, bias);
    return;
  }
  BERTRAIN_ASSERT((a.dtype() == DType::f32 || a.dtype() == DType::bf16) && b.dtype() == a.dtype() &&
                  c.dtype() == DType::f32 && (!bias || bias->dtype() == DType::f32));
  const Prim p = get_prim_or_throw(s, accumulate, bias != nullptr, a.dtype(), act);
  execute_product(p, a.raw_data(), dnnl::memory(p.b, engine(), b.raw_data()), c.raw_data(), bias);
}

namespace {

// Primitives whose weights are in the layout oneDNN picks (format_tag::any): key = M, N, K, bias, act.
using PackedKey = std::tuple<int64_t, int64_t, int64_t, bool, GemmEpilogue>;
std::map<PackedKey, Prim> g_packed_cache;

Prim get_packed_prim(int64_t m, int64_t n, int64_t k, bool has_bias, GemmEpilogue act) {
  PackedKey key{m, n, k, has_bias, act};
  std::lock_guard<std::mutex> g(g_mu);
  auto it = g_packed_cache.find(key);
  if (it != g_packed_cache.end()) return it->second;
  make_room(g_packed_cache);
  Prim p;
  using dt = dnnl::memory::data_type;
  p.a = dnnl::memory::desc({m, k}, dt::f32, dnnl::memory::dims{k, 1});
  p.b = dnnl::memory::desc({k, n}, dt::f32, dnnl::memory::format_tag::any);
  p.c = dnnl::memory::desc({m, n}, dt::f32, dnnl::memory::dims{n, 1});
  const dnnl::primitive_attr attr = product_attr(false, act);
  if (has_bias) p.bias = dnnl::memory::desc({1, n}, dt::f32, dnnl::memory::dims{n, 1});
  const dnnl::matmul::primitive_desc pd(
      has_bias ? dnnl::matmul::desc(p.a, p.b, p.bias, p.c) : dnnl::matmul::desc(p.a, p.b, p.c), attr, engine());
  p.prim = dnnl::matmul(pd);
  p.b = pd.weights_desc();  // the layout it wants
  p.scratchpad = pd.scratchpad_desc();
  return g_packed_cache.emplace(key, std::move(p)).first->second;
}

struct PackedImpl {
  dnnl::memory mem;  // owns the reordered weights
};

}  // namespace

PackedWeights pack_weights(const Tensor& w) {
  BERTRAIN_CHECK(w.dim() == 2 && w.dtype() == DType::f32, "pack_weights: expected f32 (N, K) weights, got ", w.desc());
  const int64_t n = w.size(0), k = w.size(1);
  BERTRAIN_CHECK(n > 0 && k > 0, "pack_weights: empty weights ", w.desc());
  // The layout of the primitive for M = 1 (the same for every M on BERT's shapes; gemm_packed checks it per M).
  const Prim p = get_packed_prim(1, n, k, false, GemmEpilogue::none);
  auto impl = std::make_shared<PackedImpl>();
  impl->mem = dnnl::memory(p.b, engine());
  dnnl::memory plain(dnnl::memory::desc({k, n}, dnnl::memory::data_type::f32, dnnl::memory::dims{1, k}), engine(),
                     w.raw_data());
  static thread_local dnnl::stream stream(engine());
  dnnl::reorder(plain, impl->mem).execute(stream, plain, impl->mem);
  stream.wait();
  return PackedWeights{n, k, impl};
}

bool gemm_packed(const Tensor& x, const PackedWeights& w, Tensor& y, const Tensor* bias, GemmEpilogue act) {
  BERTRAIN_ASSERT(w.impl && x.dtype() == DType::f32 && y.dtype() == DType::f32 && x.numel() % w.k == 0);
  const int64_t m = x.numel() / w.k;
  BERTRAIN_ASSERT(y.numel() == m * w.n && (!bias || (bias->dtype() == DType::f32 && bias->numel() == w.n)));
  if (m == 0) return true;
  const Prim p = get_packed_prim(m, w.n, w.k, bias != nullptr, act);
  const auto& packed = static_cast<const PackedImpl*>(w.impl.get())->mem;
  if (!(p.b == packed.get_desc())) return false;
  execute_product(p, x.raw_data(), packed, y.raw_data(), bias);
  return true;
}

namespace {

// gemm_strided's own primitive cache: key = dims, the three operands' strides, accumulate.
using StridedKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, std::array<int64_t, 12>, bool, bool>;
std::map<StridedKey, Prim> g_strided_cache;

dnnl::memory::desc strided_md(int64_t b1, int64_t b2, int64_t rows, int64_t cols, const GemmStrides& st,
                              dnnl::memory::data_type type = dnnl::memory::data_type::f32) {
  return dnnl::memory::desc({b1, b2, rows, cols}, type,
                            dnnl::memory::dims{st.b1, st.b2, st.row, st.col});
}

template <class T>
void gemm_strided_eigen(int64_t b1, int64_t b2, int64_t m, int64_t n, int64_t k, const T* a, const GemmStrides& sa,
                        const T* b, const GemmStrides& sb, T* c, const GemmStrides& sc, bool acc) {
  using M = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using S = Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>;
  for (int64_t i = 0; i < b1; ++i)
    for (int64_t j = 0; j < b2; ++j) {
      Eigen::Map<const M, 0, S> A(a + i * sa.b1 + j * sa.b2, m, k, S(sa.row, sa.col));
      Eigen::Map<const M, 0, S> B(b + i * sb.b1 + j * sb.b2, k, n, S(sb.row, sb.col));
      Eigen::Map<M, 0, S> C(c + i * sc.b1 + j * sc.b2, m, n, S(sc.row, sc.col));
      M r = A * B;
      if (acc) C += r;
      else C = r;
    }
}

}  // namespace

void gemm_strided(DType dt, int64_t b1, int64_t b2, int64_t m, int64_t n, int64_t k, const void* a,
                  const GemmStrides& sa, const void* b, const GemmStrides& sb, void* c, const GemmStrides& sc,
                  bool accumulate) {
  if (b1 == 0 || b2 == 0 || m == 0 || n == 0) return;
  if (dt == DType::f64) {
    gemm_strided_eigen<double>(b1, b2, m, n, k, static_cast<const double*>(a), sa, static_cast<const double*>(b),
                               sb, static_cast<double*>(c), sc, accumulate);
    return;
  }
  BERTRAIN_ASSERT(dt == DType::f32 || dt == DType::bf16);
  const bool bf16 = dt == DType::bf16;  // a and b bf16, c f32
  if (k == 0) {
    // An empty sum (c = 0, or unchanged when accumulating); a and b are not read, whatever their dtype.
    gemm_strided_eigen<float>(b1, b2, m, n, k, static_cast<const float*>(a), sa, static_cast<const float*>(b), sb,
                              static_cast<float*>(c), sc, accumulate);
    return;
  }
  Prim prim;
  {
    StridedKey key{b1, b2, m, n, k,
                   {sa.b1, sa.b2, sa.row, sa.col, sb.b1, sb.b2, sb.row, sb.col, sc.b1, sc.b2, sc.row, sc.col},
                   accumulate, bf16};
    std::lock_guard<std::mutex> g(g_mu);
    auto it = g_strided_cache.find(key);
    if (it == g_strided_cache.end()) {
      make_room(g_strided_cache);
      Prim p;
      const auto ab = bf16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
      p.a = strided_md(b1, b2, m, k, sa, ab);
      p.b = strided_md(b1, b2, k, n, sb, ab);
      p.c = strided_md(b1, b2, m, n, sc);
      dnnl::primitive_attr attr = base_attr();
      if (accumulate) {
        dnnl::post_ops po;
        po.append_sum(1.0f);
        attr.set_post_ops(po);
      }
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(p.a, p.b, p.c), attr, engine());
      p.prim = dnnl::matmul(pd);
      p.scratchpad = pd.scratchpad_desc();
      ++g_created;
      it = g_strided_cache.emplace(key, std::move(p)).first;
    }
    prim = it->second;
  }
  const Prim* pp = &prim;
  static thread_local dnnl::stream stream(engine());
  dnnl::memory am(pp->a, engine(), const_cast<void*>(a)), bm(pp->b, engine(), const_cast<void*>(b)),
      cm(pp->c, engine(), c);
  execute(*pp, stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
}

template <class T>
void gemm_serial(int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, bool trans_a, const T* b, int64_t ldb,
                 bool trans_b, T* c, int64_t ldc, bool accumulate) {
  if (m == 0 || n == 0) return;
  using M = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using CMap = Eigen::Map<const M, 0, Eigen::OuterStride<>>;
  Eigen::Map<M, 0, Eigen::OuterStride<>> C(c, m, n, Eigen::OuterStride<>(ldc));
  if (k == 0) {
    if (!accumulate) C.setZero();
    return;
  }
  const CMap A(a, trans_a ? k : m, trans_a ? m : k, Eigen::OuterStride<>(lda));
  const CMap B(b, trans_b ? n : k, trans_b ? k : n, Eigen::OuterStride<>(ldb));
  auto run = [&](const auto& x, const auto& y) {
    if (accumulate) C.noalias() += x * y;
    else C.noalias() = x * y;
  };
  if (!trans_a && !trans_b) run(A, B);
  else if (trans_a && !trans_b) run(A.transpose(), B);
  else if (!trans_a) run(A, B.transpose());
  else run(A.transpose(), B.transpose());
}

template void gemm_serial<float>(int64_t, int64_t, int64_t, const float*, int64_t, bool, const float*, int64_t, bool,
                                 float*, int64_t, bool);
template void gemm_serial<double>(int64_t, int64_t, int64_t, const double*, int64_t, bool, const double*, int64_t,
                                  bool, double*, int64_t, bool);

bool gemm_bf16_native() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto need = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);  // ISA values are bit sets
  return (isa & need) == need;
}

bool gemm_bf16_supported() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto need = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
  return (isa & need) == need;
}

int64_t gemm_primitives_created() {
  std::lock_guard<std::mutex> g(g_mu);
  return g_created;
}

int64_t gemm_primitives_cached() {
  std::lock_guard<std::mutex> g(g_mu);
  return static_cast<int64_t>(g_cache.size() + g_strided_cache.size());
}

}  // namespace bertrain::kernels
