// cmd_bench_request.cpp: `bertrain bench request`: where the time of one batch-1 prediction request goes. The whole
// request (BertModel's forward in eval mode without gradients, the path `bench predict`'s latency requests take) next to
// every op of its embeddings, of one encoder layer and of the pooler, each timed alone at the request's shapes
// (median of --reps calls after warm-up calls), with GFLOP/s and the share of the machine's measured FMA peak for
// the products. The sum of the ops against the whole request is what runs between them (set-up, allocation, the
// caches the next op's weights come from). The counterpart for ONNX Runtime is tools/bench/ort_profile.js.
// Results: docs/results/onnx-predict.md.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"
#include "bertrain/autograd/variable.h"
#include "bertrain/core/error.h"
#include "bertrain/core/rng.h"
#include "bertrain/core/threads.h"
#include "bertrain/io/checkpoint.h"
#include "bertrain/io/config.h"
#include "bertrain/models/bert.h"
#include "bertrain/ops/ops.h"
#include "commands.h"

namespace bertrain::cli {
namespace {

struct RequestBenchFlags {
  std::string model = "mini", checkpoint;
  int tokens = 51, reps = 2000;
  bool packed = true;
  double peak_seconds = 0.25;
};

int run_request_bench(const RequestBenchFlags& f) {
  BERTRAIN_CHECK(f.tokens >= 1, "bench request: --tokens must be >= 1, got ", f.tokens);
  BERTRAIN_CHECK(f.reps >= 1, "bench request: --reps must be >= 1, got ", f.reps);
  BERTRAIN_CHECK(f.checkpoint.empty() || std::filesystem::exists(f.checkpoint), "bench request: checkpoint '",
                 f.checkpoint, "' does not exist");
  const BertConfig c = f.checkpoint.empty() ? bench_model_config(f.model) : load_bert_config(default_config_file(f.checkpoint));
  const int64_t t = f.tokens, h = c.hidden_size, in = c.intermediate_size, nh = c.num_attention_heads;
  BERTRAIN_CHECK(t <= c.max_position_embeddings, "bench request: --tokens ", t, " exceeds max_position_embeddings ",
                 c.max_position_embeddings);
  const double peak = measure_fma_peak(f.peak_seconds).gflops;
  Rng rng(0);
  BertModel model(c, rng);
  if (!f.checkpoint.empty()) {
    LoadReport rep;
    load_model(f.checkpoint, model, rep);
  }
  model.eval();
  if (f.packed) pack_linears_for_prediction(model);  // as the prediction commands do
  model.set_unpad(Unpad::automatic);  // one unpadded request: the padded path (no padding to remove)
  NoGradGuard ng;

  // One request: token ids 1000.., the second half segment B, no padding (bench predict's latency requests).
  Tensor ids = Tensor::empty({1, t}, DType::i32), types = Tensor::empty({1, t}, DType::i32),
         mask = Tensor::empty({1, t}, DType::i32);
  for (int64_t j = 0; j < t; ++j) {
    ids.data<int32_t>()[j] = static_cast<int32_t>(1000 + j % (c.vocab_size - 1000));
    types.data<int32_t>()[j] = j >= t / 2 ? 1 : 0;
    mask.data<int32_t>()[j] = 1;
  }
  const BertInputs inputs{ids, types, mask, 0, 0};
  const int warm = std::max(10, f.reps / 10);
  const double whole = median_seconds([&] { (void)model.forward(inputs); }, f.reps, warm);

  // The ops at the request's shapes, with weights of the model's shapes (speed does not depend on their values).
  auto rnd = [&](Shape s) { return Variable(Tensor::uniform(s, -0.05, 0.05, rng)); };
  const Variable x = rnd({1, t, h}), x2 = rnd({1, t, h}), wh = rnd({h, h}), bh = rnd({h}), wi = rnd({in, h}),
                 bi = rnd({in}), wo = rnd({h, in}), gamma = rnd({h}), beta = rnd({h}), inter = rnd({1, t, in});
  const Variable word = rnd({c.vocab_size, h}), pos = rnd({c.max_position_embeddings, h}), tt = rnd({c.type_vocab_size, h});
  Tensor positions = Tensor::empty({t}, DType::i32);
  for (int64_t j = 0; j < t; ++j) positions.data<int32_t>()[j] = static_cast<int32_t>(j);
  const Tensor additive = Tensor::zeros({1, t}, DType::f32);
  const Variable q = linear(x, wh, bh);
  // The products as the model runs them: with packed weights (linear_prepacked) unless --packed=false.
  const auto pwh = pack_linear(wh), pwi = pack_linear(wi), pwo = pack_linear(wo);
  auto lin = [&](const Variable& a, const Variable& w, const Variable& b, const PackedLinear& pk, const GeluForm* g) {
    if (f.packed) return linear_prepacked(a, w, b, pk, g);
    return g ? linear_gelu(a, w, b, *g) : linear(a, w, b);
  };
  const DropoutKey key{};
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_size()));
  const GeluForm gelu_form = c.hidden_act == "gelu" ? GeluForm::erf : GeluForm::tanh;
  struct Row {
    std::string name;
    double seconds, flops;
    int per_request;
  };
  std::vector<Row> rows;
  auto time = [&](const std::string& name, double flops, int per_request, const std::function<void()>& fn) {
    rows.push_back({name, median_seconds(fn, f.reps, warm), flops, per_request});
  };
  const double L = c.num_hidden_layers, T = static_cast<double>(t), H = static_cast<double>(h);
  time("embeddings: 3 lookups, 2 adds, layer norm", 0, 1, [&] {
    Variable e = add(embedding(word, ids), embedding(pos, positions));
    (void)layer_norm_dropout(add(e, embedding(tt, types)), gamma, beta, c.layer_norm_eps, 0.0, false, key);
  });
  time("query, key, value: 3 linears (H -> H)", 3 * 2 * T * H * H, c.num_hidden_layers, [&] {
    (void)lin(x, wh, bh, *pwh, nullptr);
    (void)lin(x, wh, bh, *pwh, nullptr);
    (void)lin(x, wh, bh, *pwh, nullptr);
  });
  time("attention (QK^T, softmax, PV)", 2 * 2 * T * T * H, c.num_hidden_layers,
       [&] { (void)attention(q, q, q, nh, additive, scale, 0.0, false, key); });
  time("attention output linear (H -> H)", 2 * T * H * H, c.num_hidden_layers, [&] { (void)lin(x, wh, bh, *pwh, nullptr); });
  time("residual add + layer norm (x2)", 0, c.num_hidden_layers, [&] {
    (void)dropout_add_layer_norm(x, x2, gamma, beta, c.layer_norm_eps, 0.0, false, key);
    (void)dropout_add_layer_norm(x, x2, gamma, beta, c.layer_norm_eps, 0.0, false, key);
  });
  time("intermediate linear + GELU (H -> I)", 2 * T * H * static_cast<double>(in), c.num_hidden_layers,
       [&] { (void)lin(x, wi, bi, *pwi, &gelu_form); });
  time("output linear (I -> H)", 2 * T * H * static_cast<double>(in), c.num_hidden_layers,
       [&] { (void)lin(inter, wo, bh, *pwo, nullptr); });
  time("pooler: first token, linear, tanh", 2 * H * H, 1,
       [&] { (void)tanh(lin(reshape(slice(x, 1, 0, 1), {1, h}), wh, bh, *pwh, nullptr)); });

  std::printf("bertrain bench request: %s (%lld layers, hidden %lld, intermediate %lld, %lld heads), one request of %d "
              "tokens, %d threads, %s weights, fp32 peak %.1f GFLOP/s (measured)\n",
              f.checkpoint.empty() ? f.model.c_str() : f.checkpoint.c_str(), static_cast<long long>(c.num_hidden_layers),
              static_cast<long long>(h), static_cast<long long>(in), static_cast<long long>(nh), f.tokens, num_threads(),
              f.packed ? "packed" : "plain", peak);
  std::printf("%-45s %9s %6s %11s %9s %8s %7s\n", "op (each timed alone)", "us each", "times", "us/request",
              "share", "GFLOP/s", "of peak");
  double sum = 0, flops = 0, product_seconds = 0;
  for (const Row& r : rows) {
    const double per_req = r.seconds * r.per_request;
    sum += per_req;
    flops += r.flops * r.per_request;
    if (r.flops > 0) product_seconds += per_req;
    const double g = r.flops / r.seconds / 1e9;
    std::printf("%-45s %9.1f %6d %11.1f %8.1f%%", r.name.c_str(), 1e6 * r.seconds, r.per_request, 1e6 * per_req,
                100.0 * per_req / whole);
    if (r.flops > 0) std::printf(" %8.1f %6.1f%%", g, 100.0 * g / peak);
    std::printf("\n");
  }
  std::printf("%-45s %9s %6s %11.1f %8.1f%%\n", "sum of the ops", "", "", 1e6 * sum, 100.0 * sum / whole);
  std::printf("%-45s %9s %6s %11.1f %8.1f%%\n", "between the ops (whole request - sum)", "", "", 1e6 * (whole - sum),
              100.0 * (whole - sum) / whole);
  std::printf("%-45s %9s %6s %11.1f %8.1f%% %8.1f %6.1f%%\n", "whole request (BertModel::forward, median)", "", "",
              1e6 * whole, 100.0, flops / whole / 1e9, 100.0 * flops / whole / 1e9 / peak);
  std::printf("products and attention: %.1f%% of the request's time at %.1f GFLOP/s (%.1f%% of peak); %.0f MFLOP per "
              "request over %g layers\n",
              100.0 * product_seconds / whole, flops / product_seconds / 1e9, 100.0 * flops / product_seconds / 1e9 / peak,
              flops / 1e6, L);
  return 0;
}

BenchRegistrar reg{{"request",
                    "where a batch-1 prediction request's time goes: the whole request next to each op of it timed "
                    "alone, with GFLOP/s against the measured peak",
                    [](CLI::App& sub) {
                      auto f = std::make_shared<RequestBenchFlags>();
                      auto* model = sub.add_option("--model", f->model,
                                                   "tiny, mini, small, base or a config .json (random weights)")
                                        ->capture_default_str();
                      sub.add_option("--checkpoint", f->checkpoint,
                                     "a checkpoint instead of --model (its config and weights)")
                          ->excludes(model);
                      sub.add_option("--tokens", f->tokens, "tokens of the request")->capture_default_str();
                      sub.add_option("--reps", f->reps, "timed calls per measurement (median)")->capture_default_str();
                      sub.add_option("--packed", f->packed,
                                     "weights packed for prediction, as the prediction commands run (false: plain)")
                          ->capture_default_str();
                      sub.add_option("--peak_seconds", f->peak_seconds, "length of the FMA peak run")
                          ->capture_default_str();
                      return std::function<int()>([f] { return run_request_bench(*f); });
                    }}};

}  // namespace
}  // namespace bertrain::cli
