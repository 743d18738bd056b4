// cmd_bench.cpp: `bertrain bench <name>`, the parent of every benchmark in bench_registry() (allreduce, finetune,
// ops, optim, peak, predict, request, tokenizer, train), and `bench ops`: matmul through bertrain next to oneDNN's
// primitive called directly, and layer_norm / softmax / gelu forward+backward throughput next to a triad bandwidth
// measured in the same run.
#include <omp.h>

#include <cstdio>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>

#include "bench_util.h"
#include "bertrain/core/rng.h"
#include "bertrain/core/threads.h"
#include "bertrain/ops/ops.h"
#include "commands.h"

namespace bertrain::cli {

std::vector<BenchCommand>& bench_registry() {
  static std::vector<BenchCommand> r;
  return r;
}

double triad_bandwidth_gbs(long n) {
  std::unique_ptr<float[]> a(new float[n]), b(new float[n]), c(new float[n]);
#pragma omp parallel for schedule(static)
  for (long i = 0; i < n; ++i) {
    a[i] = 0;
    b[i] = 1;
    c[i] = 2;
  }
  const float s = 3;
  double t = median_seconds(
      [&] {
        float* pa = a.get();
        const float* pb = b.get();
        const float* pc = c.get();
#pragma omp parallel for simd schedule(static)
        for (long i = 0; i < n; ++i) pa[i] = pb[i] + s * pc[i];
      },
      7, 1);
  return 3.0 * 4.0 * n / t / 1e9;
}

namespace {

/// GFLOP/s of oneDNN's matmul primitive, created once and executed on preallocated buffers.
double onednn_direct_gflops(int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
  using namespace dnnl;
  engine eng(engine::kind::cpu, 0);
  stream st(eng);
  auto md = [](int64_t r, int64_t c, bool t) {
    return memory::desc({r, c}, memory::data_type::f32, t ? memory::dims{1, r} : memory::dims{c, 1});
  };
  memory::desc a = md(m, k, ta), b = md(k, n, tb), c = md(m, n, false);
  dnnl::matmul prim(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), eng));
  memory am(a, eng), bm(b, eng), cm(c, eng);
  std::fill_n(static_cast<float*>(am.get_data_handle()), m * k, 0.5f);
  std::fill_n(static_cast<float*>(bm.get_data_handle()), k * n, 0.25f);
  double t = median_seconds(
      [&] {
        prim.execute(st, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
        st.wait();
      },
      9);
  return 2.0 * m * n * k / t / 1e9;
}

double bertrain_gflops(int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
  Rng rng(1);
  Variable a(Tensor::uniform(ta ? Shape{k, m} : Shape{m, k}, -1, 1, rng));
  Variable b(Tensor::uniform(tb ? Shape{n, k} : Shape{k, n}, -1, 1, rng));
  double t = median_seconds([&] { Variable c = matmul(a, b, ta, tb); }, 9);
  return 2.0 * m * n * k / t / 1e9;
}

/// Forward + backward of a unary op on x (rows, cols): returns effective GB/s counting the minimum traffic
/// (forward reads x and writes y; backward reads dy and one saved tensor and writes dx: 5 tensors in all).
double fwd_bwd_gbs(const char* name, int64_t rows, int64_t cols) {
  Rng rng(2);
  Tensor x = Tensor::uniform({rows, cols}, -2, 2, rng);
  Variable gamma(Tensor::full({cols}, 1.0), true), beta(Tensor::zeros({cols}), true);
  Tensor seed = Tensor::uniform({rows, cols}, -1, 1, rng);
  std::string op = name;
  double t = median_seconds(
      [&] {
        Variable xv(x, true);
        Variable y = op == "layer_norm" ? layer_norm(xv, gamma, beta, 1e-12)
                     : op == "softmax"  ? softmax(xv)
                                        : gelu(xv, GeluForm::erf);
        y.backward(seed);
      },
      9);
  return 5.0 * 4.0 * rows * cols / t / 1e9;
}

int run_ops() {
  std::printf("bertrain bench ops: %d threads\n\n", num_threads());
  std::printf("matmul, f32, BERT-base shapes (M = 4096 tokens, K = 768); forms: NT forward (x W^T), NN dX, TN dW\n");
  std::printf("%-6s %6s %6s %6s %14s %14s %8s\n", "form", "M", "N", "K", "bertrain GF/s", "oneDNN GF/s", "ratio");
  double worst = 1e9;
  for (int64_t n : {768, 2304, 3072}) {
    struct Form {
      const char* name;
      int64_t m, n, k;
      bool ta, tb;
    };
    // y (4096, N) = x (4096, 768) W^T; dX (4096, 768) = dY (4096, N) W (N, 768); dW (N, 768) = dY^T x.
    for (Form f : {Form{"NT", 4096, n, 768, false, true}, Form{"NN", 4096, 768, n, false, false},
                   Form{"TN", n, 768, 4096, true, false}}) {
      double d = onednn_direct_gflops(f.m, f.n, f.k, f.ta, f.tb);
      double o = bertrain_gflops(f.m, f.n, f.k, f.ta, f.tb);
      worst = std::min(worst, o / d);
      std::printf("%-6s %6ld %6ld %6ld %14.1f %14.1f %7.1f%%\n", f.name, (long)f.m, (long)f.n, (long)f.k, o, d,
                  100.0 * o / d);
    }
  }
  std::printf("lowest bertrain/oneDNN ratio: %.1f%% (goal: 95%% or better)\n\n", 100.0 * worst);
  double bw = triad_bandwidth_gbs();
  std::printf("memory bandwidth (STREAM triad, same run): %.1f GB/s\n", bw);
  std::printf("forward+backward, f32, x (4096, 768) [softmax: (4096*12, 128)]; traffic counted as 5 tensors\n");
  std::printf("%-12s %10s %12s\n", "op", "GB/s", "of triad");
  for (auto [name, rows, cols] : {std::tuple<const char*, int64_t, int64_t>{"layer_norm", 4096, 768},
                                  {"softmax", 4096 * 12, 128}, {"gelu", 4096, 3072}}) {
    double g = fwd_bwd_gbs(name, rows, cols);
    std::printf("%-12s %10.1f %11.1f%%\n", name, g, 100.0 * g / bw);
  }
  return 0;
}

BenchRegistrar ops_reg{{"ops", "matmul GFLOP/s next to oneDNN; elementwise GB/s next to triad", [](CLI::App&) {
                          return std::function<int()>([] { return run_ops(); });
                        }}};

Registrar reg{{"bench",
               "benchmarks: bench allreduce | finetune | ops | optim | peak | predict | request | tokenizer | train",
               [](CLI::App& sub) {
                 sub.require_subcommand(1);
                 auto& benches = bench_registry();
                 std::sort(benches.begin(), benches.end(),
                           [](const BenchCommand& a, const BenchCommand& b) { return a.name < b.name; });
                 auto runners = std::make_shared<std::vector<std::pair<CLI::App*, std::function<int()>>>>();
                 for (auto& b : benches) {
                   CLI::App* s = sub.add_subcommand(b.name, b.help);
                   runners->emplace_back(s, b.setup(*s));
                 }
                 return std::function<int()>([runners] {
                   for (auto& [s, run] : *runners)
                     if (s->parsed()) return run();
                   return 1;
                 });
               }}};

}  // namespace
}  // namespace bertrain::cli
