// cmd_bench_train.cpp: `bertrain bench train`: full BertForPreTraining training steps (forward, backward,
// global-norm clipping, LAMB step, zero_grad) on synthetic batches (data::synthetic_pretraining_batch), reported
// as sequences/s, tokens/s, model GFLOP/s (bert_pretraining_flops) and MFU against the FMA peak measured in the
// same run, plus peak RSS and the allocator's peak.
// --bf16: the same steps with bf16 matmuls (MatmulPrecision::bf16); MFU then uses the measured bf16
// dot-product peak (VDPBF16PS), and the JSON also gives the MFU against the fp32 peak.
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.h"
#include "bertrain/core/allocator.h"
#include "bertrain/core/error.h"
#include "bertrain/core/rng.h"
#include "bertrain/core/threads.h"
#include "bertrain/data/synthetic.h"
#include "bertrain/io/config.h"
#include "bertrain/models/bert.h"
#include "bertrain/models/flops.h"
#include "bertrain/optim/clip.h"
#include "bertrain/optim/lamb.h"
#include "bertrain/ops/ops.h"
#include "nlohmann/json.hpp"

namespace bertrain::cli {

std::vector<std::string> bench_split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

BertConfig bench_model_config(const std::string& name) {
  if (name.size() > 5 && name.substr(name.size() - 5) == ".json") return load_bert_config(name);
  struct Size {
    const char* name;
    int64_t layers, hidden, heads;
  };
  for (Size s : {Size{"tiny", 2, 128, 2}, Size{"mini", 4, 256, 4}, Size{"small", 4, 512, 8},
                 Size{"base", 12, 768, 12}}) {
    if (name == s.name) {
      BertConfig c;  // defaults: vocab 30522, gelu (erf), dropout 0.1, 512 positions, 2 token types
      c.num_hidden_layers = s.layers;
      c.hidden_size = s.hidden;
      c.num_attention_heads = s.heads;
      c.intermediate_size = 4 * s.hidden;
      c.validate();
      return c;
    }
  }
  throw Error("bench: unknown model '" + name + "': expected tiny, mini, small, base or a config .json path");
}

namespace {

struct TrainBenchFlags {
  std::string models = "tiny,mini,small,base";
  std::string seq_lens = "128,512";
  int64_t batch_size = 0;               // 0: 4096 / T (32 at 128, 8 at 512)
  int64_t max_predictions_per_seq = 0;  // 0: 20 * T / 128 (20 at 128, 80 at 512)
  int steps = 10;
  int warmup = 3;
  uint64_t seed = 1;
  double peak_seconds = 0.25;
  std::string json_out;
  bool bf16 = false;
  // The padded encoder by default: the FLOP count below counts padded positions, and PyTorch's side of the
  // comparison (tools/bench/scripts/bench_torch.py) computes them too. --unpad auto|always measures the unpadded encoder.
  Unpad unpad = Unpad::never;
};

struct Batch {
  BertInputs in;
  PretrainingTargets targets;
};

/// CPU time of the whole process (all threads), in seconds.
double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double max_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // Linux: KiB
}

struct Result {
  std::string model;
  int64_t T = 0, B = 0, P = 0;
  double params = 0;
  BertStepFlops flops;
  double step_median = 0, step_mean = 0, step_min = 0, step_max = 0;
  double forward_median = 0, backward_median = 0, optimizer_median = 0;  // the parts of a step, each a median
  double cpu_median = 0;  // process CPU seconds per step (all threads): robust to other jobs with --num_threads 1
  double loss_first = 0, loss_last = 0;
  double rss_mib = 0, alloc_peak_mib = 0;
};

Result run_config(const std::string& model_name, const BertConfig& c, int64_t T, const TrainBenchFlags& f) {
  Result r;
  r.model = model_name;
  r.T = T;
  r.B = f.batch_size > 0 ? f.batch_size : std::max<int64_t>(1, 4096 / T);
  r.P = f.max_predictions_per_seq > 0 ? f.max_predictions_per_seq : std::max<int64_t>(1, 20 * T / 128);
  r.flops = bert_pretraining_flops(c, r.B, r.T, r.P);

  Rng init_rng(f.seed);
  BertForPreTraining model(c, init_rng);
  model.train();
  model.bert().set_unpad(f.unpad);
  const NamedParameters params = model.named_parameters();
  for (const auto& [name, v] : params) r.params += static_cast<double>(v.value().numel());
  Lamb opt(params);  // the pretraining recipe's defaults: by-pattern adaptation, decay 0.01, google's exclusions

  Rng data_rng(f.seed, 1);
  std::vector<Batch> batches;  // a few distinct batches, cycled
  for (int i = 0; i < 4; ++i) {
    const data::PretrainingBatch b = data::synthetic_pretraining_batch(r.B, r.T, r.P, c.vocab_size, data_rng);
    batches.push_back({BertInputs{b.input_ids, b.token_type_ids, b.attention_mask, 0, 0},
                       PretrainingTargets{b.masked_lm_positions, b.masked_lm_ids, b.masked_lm_weights,
                                          b.next_sentence_labels}});
  }

  CachingAllocator::instance().reset_peak();
  std::vector<double> times, fwd, bwd, optim, cpu;
  using Clock = std::chrono::steady_clock;
  auto secs = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  for (int s = 0; s < f.warmup + f.steps; ++s) {
    Batch& b = batches[s % batches.size()];
    b.in.first_sample = s * r.B;
    b.in.dropout_seed = f.seed;
    const double c0 = process_cpu_seconds();
    const auto t0 = Clock::now();
    PretrainingOutput out = model.forward(b.in, b.targets);
    const auto t1 = Clock::now();
    out.loss.backward();
    const double loss = out.loss.item();
    out = PretrainingOutput{};  // the graph is freed inside the timed step, as in the trainer's loop
    const auto t2 = Clock::now();
    (void)clip_grad_norm(params, 1.0);  // as the trainer: clip_grad_norm 1.0 before the optimizer
    opt.step(1e-4);
    opt.zero_grad();
    const auto t3 = Clock::now();
    const double c3 = process_cpu_seconds();
    BERTRAIN_CHECK(std::isfinite(loss), "bench train: ", model_name, " T=", T, ": non-finite loss at step ", s);
    if (s == 0) r.loss_first = loss;
    r.loss_last = loss;
    if (s >= f.warmup) {
      times.push_back(secs(t0, t3));
      cpu.push_back(c3 - c0);
      fwd.push_back(secs(t0, t1));
      bwd.push_back(secs(t1, t2));
      optim.push_back(secs(t2, t3));
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  };
  r.forward_median = median(fwd);
  r.backward_median = median(bwd);
  r.optimizer_median = median(optim);
  r.step_median = median(times);
  r.cpu_median = median(cpu);
  r.step_mean = std::accumulate(times.begin(), times.end(), 0.0) / static_cast<double>(times.size());
  r.step_min = *std::min_element(times.begin(), times.end());
  r.step_max = *std::max_element(times.begin(), times.end());
  r.rss_mib = max_rss_mib();
  r.alloc_peak_mib = static_cast<double>(CachingAllocator::instance().stats().peak_bytes_in_use) / (1 << 20);
  return r;
}

int run_train_bench(const TrainBenchFlags& f) {
  BERTRAIN_CHECK(f.steps >= 1, "bench train: --steps must be >= 1, got ", f.steps);
  BERTRAIN_CHECK(f.warmup >= 0, "bench train: --warmup must be >= 0, got ", f.warmup);
  std::vector<std::pair<std::string, BertConfig>> models;
  for (const auto& m : bench_split_commas(f.models)) models.emplace_back(m, bench_model_config(m));
  std::vector<int64_t> lens;
  for (const auto& s : bench_split_commas(f.seq_lens)) {
    size_t used = 0;
    int64_t t = 0;
    try {
      t = std::stoll(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    BERTRAIN_CHECK(used == s.size(), "bench train: --seq_lens: expected integers separated by commas, got '",
                   f.seq_lens, "'");
    lens.push_back(t);
  }
  BERTRAIN_CHECK(!models.empty() && !lens.empty(), "bench train: --models and --seq_lens must not be empty");
  BERTRAIN_CHECK(f.batch_size >= 0 && f.max_predictions_per_seq >= 0,
                 "bench train: --batch_size and --max_predictions_per_seq must be >= 0 (0: the default)");
  for (const auto& [name, c] : models)  // before the peak measurement: fail fast
    for (int64_t T : lens)
      BERTRAIN_CHECK(T >= 8 && T <= c.max_position_embeddings, "bench train: ", name, ": sequence length must be in [8, ",
                     c.max_position_embeddings, "], got ", T);
  std::ofstream json;
  if (!f.json_out.empty()) {
    json.open(f.json_out, std::ios::app);
    BERTRAIN_CHECK(json.good(), "bench train: cannot open --json_out '", f.json_out, "'");
  }

  const FmaPeak peak = measure_fma_peak(f.peak_seconds);
  MatmulPrecisionGuard precision(f.bf16 ? MatmulPrecision::bf16 : MatmulPrecision::f32);
  std::printf("bertrain bench train: %s, %d threads, %d warm-up + %d timed steps per config "
              "(forward, backward, clip_grad_norm 1.0, LAMB, zero_grad), %s encoder\n",
              f.bf16 ? "bf16 matmuls (f32 accumulation, f32 master weights)" : "fp32", num_threads(), f.warmup,
              f.steps,
              f.unpad == Unpad::never ? "padded" : f.unpad == Unpad::always ? "unpadded" : "automatic (--unpad auto)");
  std::printf("peak_gflops %.1f (FMA loop, %s; AVX-512 %.1f, AVX2 %.1f GFLOP/s)\n", peak.gflops, peak.isa.c_str(),
              peak.avx512, peak.avx2);
  // MFU denominator: the fp32 FMA peak, or with --bf16 the bf16 dot-product peak (fp32's when not measurable).
  double mfu_peak = peak.gflops;
  if (f.bf16) {
    const double bf = measure_bf16_dot_peak(f.peak_seconds);
    if (bf > 0) {
      mfu_peak = bf;
      std::printf("bf16_peak_gflops %.1f (VDPBF16PS loop): mfu below is relative to this bf16 peak\n", bf);
    } else {
      std::printf("bf16: this CPU has no AVX512_BF16 (oneDNN emulates bf16, slower than fp32); mfu below is "
                  "relative to the fp32 peak\n");
    }
  }
  std::printf("model FLOPs/step = 6*B*T*L*(4H^2+2HI) + 12*B*NH*T^2*HS*L + 6*B*P*(H^2+HV) + 6*B*(H^2+2H) "
              "(matmuls only; see --help)\n");
  std::printf("%-6s %4s %3s %3s %8s %10s %9s %8s %10s %8s %6s %9s %10s\n", "model", "T", "B", "P", "params_M",
              "gflop_step", "step_ms", "seq_s", "tokens_s", "gflops", "mfu", "rss_mib", "alloc_mib");
  for (const auto& [name, c] : models) {
    for (int64_t T : lens) {
      Result r = run_config(name, c, T, f);
      const std::string shown = name.substr(name.find_last_of('/') + 1);  // a config path shows as its file name
      const double gflops = r.flops.total() / r.step_median / 1e9;
      const double mfu = gflops / mfu_peak;
      const double seq_s = static_cast<double>(r.B) / r.step_median;
      std::printf("%-6s %4ld %3ld %3ld %8.2f %10.1f %9.1f %8.2f %10.0f %8.1f %5.1f%% %9.0f %10.0f\n", shown.c_str(),
                  (long)r.T, (long)r.B, (long)r.P, r.params / 1e6, r.flops.total() / 1e9, r.step_median * 1e3, seq_s,
                  seq_s * static_cast<double>(r.T), gflops, 100.0 * mfu, r.rss_mib, r.alloc_peak_mib);
      std::printf("       step parts (medians): forward %.1f ms, backward %.1f ms, clip + LAMB + zero_grad %.1f ms; "
                  "process CPU time %.1f ms per step\n",
                  r.forward_median * 1e3, r.backward_median * 1e3, r.optimizer_median * 1e3, r.cpu_median * 1e3);
      std::fflush(stdout);
      if (json.is_open()) {
        nlohmann::json j{{"bench", "train"}, {"framework", "bertrain"}, {"model", name}, {"seq_len", r.T},
                         {"batch_size", r.B}, {"max_predictions_per_seq", r.P}, {"params", r.params},
                         {"optimizer", "LAMB"}, {"threads", num_threads()}, {"warmup", f.warmup}, {"steps", f.steps},
                         {"flops_per_step", r.flops.total()}, {"flops_dense", r.flops.dense},
                         {"flops_attention", r.flops.attention}, {"flops_mlm_head", r.flops.mlm_head},
                         {"flops_pooler_nsp", r.flops.pooler_nsp}, {"step_seconds_median", r.step_median},
                         {"step_seconds_mean", r.step_mean}, {"step_seconds_min", r.step_min},
                         {"step_seconds_max", r.step_max}, {"forward_seconds_median", r.forward_median},
                         {"step_cpu_seconds_median", r.cpu_median},
                         {"backward_seconds_median", r.backward_median},
                         {"optimizer_seconds_median", r.optimizer_median}, {"sequences_per_second", seq_s},
                         {"tokens_per_second", seq_s * static_cast<double>(r.T)}, {"gflops", gflops},
                         {"peak_gflops", mfu_peak}, {"peak_isa", peak.isa}, {"mfu", mfu},
                         {"precision", f.bf16 ? "bf16" : "fp32"}, {"fp32_peak_gflops", peak.gflops},
                         {"unpad", f.unpad == Unpad::never ? "never" : f.unpad == Unpad::always ? "always" : "auto"},
                         {"mfu_fp32_peak", gflops / peak.gflops},
                         {"max_rss_mib", r.rss_mib}, {"allocator_peak_mib", r.alloc_peak_mib},
                         {"loss_first", r.loss_first}, {"loss_last", r.loss_last}};
        json << j.dump() << "\n";
        json.flush();
      }
      CachingAllocator::instance().release_cache();  // the next config starts from an empty cache
    }
  }
  if (models.size() * lens.size() > 1)
    std::printf("rss_mib is the process's high-water mark (getrusage ru_maxrss) so far: run one config per process "
                "for per-config figures; alloc_mib is the caching allocator's peak bytes in use for that config.\n");
  return 0;
}

BenchRegistrar reg{
    {"train",
     "full pretraining steps of BertForPreTraining: seq/s, tokens/s, GFLOP/s, MFU vs the measured FMA peak, peak RSS",
     [](CLI::App& sub) {
       auto f = std::make_shared<TrainBenchFlags>();
       sub.footer(
           "Each config: warm-up steps, then timed steps of forward, backward, clip_grad_norm(1.0), LAMB step and\n"
           "zero_grad on synthetic batches (random ids, length uniform in [3T/4, T] then padding, 15% of real tokens\n"
           "masked, P prediction slots). Reported from the median step time.\n"
           "Model FLOPs per step (matmuls only, 2 flops per multiply-add, backward = 2 x forward):\n"
           "  6*B*T*L*(4*H*H + 2*H*I)          encoder Q, K, V, attention output, intermediate, output\n"
           "+ 12*B*NH*T*T*HS*L                 attention scores and context, 2 matmuls x 2 x 3 (fwd+bwd)\n"
           "+ 6*B*P*(H*H + H*V)                masked-LM transform and tied decoder at the P slots only\n"
           "+ 6*B*(H*H + 2*H)                  pooler and next-sentence classifier\n"
           "Padded positions and slots count (they are computed). Embeddings, biases, layer norm, softmax, GELU,\n"
           "dropout, losses and the optimizer are not counted. MFU = achieved GFLOP/s / the fp32 FMA peak measured\n"
           "at the start of the same run (`bertrain bench peak`); with --bf16, / the bf16 dot-product (VDPBF16PS)\n"
           "peak measured the same way (JSON mfu_fp32_peak keeps the fp32 ratio). rss_mib: getrusage ru_maxrss;\n"
           "alloc_mib: peak bytes in use in bertrain's caching allocator during the config. The process CPU time per\n"
           "step counts all threads (spin-waiting included); with --num_threads 1 it measures the work of a step\n"
           "even while other jobs share the cores, where wall times are not comparable.");
       sub.add_option("--models", f->models, "comma-separated: tiny, mini, small, base or config .json paths (default all four)");
       sub.add_option("--seq_lens", f->seq_lens, "comma-separated sequence lengths (default 128,512)");
       sub.add_option("--batch_size", f->batch_size, "sequences per step (default 4096 / T: 32 at 128, 8 at 512)");
       sub.add_option("--max_predictions_per_seq", f->max_predictions_per_seq,
                      "prediction slots P per sequence (default 20 * T / 128: 20 at 128, 80 at 512)");
       sub.add_option("--steps", f->steps, "timed steps per config (default 10)");
       sub.add_option("--warmup", f->warmup, "untimed steps first (default 3)");
       sub.add_option("--seed", f->seed, "initialisation, data and dropout seed (default 1)");
       sub.add_option("--peak_seconds", f->peak_seconds, "length of each FMA peak run (default 0.25)");
       sub.add_option("--json_out", f->json_out, "append one JSON line per config to this file");
       sub.add_flag("--bf16", f->bf16,
                    "mixed precision: bf16 matmuls with f32 accumulation and f32 master weights (as pretrain --bf16)");
       sub.add_option("--unpad", f->unpad,
                      "encoder path: never (default: every padded position computed, as the FLOP count assumes and "
                      "PyTorch does), auto or always (the unpadded encoder; the FLOP count and MFU still count the "
                      "padded positions)")
           ->transform(CLI::CheckedTransformer(std::map<std::string, Unpad>{
               {"auto", Unpad::automatic}, {"always", Unpad::always}, {"never", Unpad::never}}));
       return std::function<int()>([f] { return run_train_bench(*f); });
     }}};

}  // namespace
}  // namespace bertrain::cli
