// cmd_bench_finetune.cpp: `bertrain bench finetune`: BertForSequenceClassification training steps on a real task
// file (a GLUE task's or a generic CSV/TSV/JSONL train file), with bertrain's finetuning defaults (AdamW as
// google-research/bert, clip 1.0, the linear schedule, dropout of the config), through the code run-classifier
// runs: convert_examples_to_features, finetune_epoch_order (optionally group_by_length), make_classifier_batch
// (dynamic padding or --pad_to_max_length), BertModel's Unpad choice, TrainStep. For each batch path it reports
// real tokens/s, sequences/s, the padding share of the batches and MFU counted on real tokens.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "bench_util.h"
#include "bertrain/core/allocator.h"
#include "bertrain/core/error.h"
#include "bertrain/core/rng.h"
#include "bertrain/core/threads.h"
#include "bertrain/models/bert.h"
#include "bertrain/models/flops.h"
#include "bertrain/ops/ops.h"
#include "bertrain/tasks/batching.h"
#include "bertrain/tasks/glue/glue.h"
#include "bertrain/text/tokenizer.h"
#include "bertrain/train/communicator.h"
#include "bertrain/train/finetune.h"
#include "bertrain/train/optimizer_factory.h"
#include "bertrain/train/train_step.h"
#include "commands.h"
#include "nlohmann/json.hpp"

namespace bertrain::cli {
namespace {

struct FinetuneBenchFlags {
  std::string task_name = "QNLI";
  std::string data_dir;
  glue::GlueOptions generic;
  std::string labels;
  std::string vocab_file;
  std::string do_lower_case = "true";
  std::string models = "mini,base";
  std::string paths = "padded,dynamic,unpad,auto";
  int max_seq_length = 128;
  int64_t train_batch_size = 32;
  int64_t pad_to_multiple_of = 8;
  int steps = 10;
  int warmup = 2;
  uint64_t seed = 12345;
  double learning_rate = 5e-5;
  double peak_seconds = 0.25;
  std::string json_out;
  bool bf16 = false;
};

/// One way of batching and computing: the batch padding and the encoder path, as run-classifier's flags.
struct BatchPath {
  std::string name;               // as given: padded | dynamic | unpad | auto, optionally + "+gbl"
  bool pad_to_max_length = false;  // --pad_to_max_length
  Unpad unpad = Unpad::automatic;  // --unpad
  bool group_by_length = false;    // --group_by_length
  std::string flags;               // the run-classifier flags that give this path
};

BatchPath parse_path(const std::string& spec) {
  BatchPath p;
  p.name = spec;
  std::string base = spec;
  const std::string gbl = "+gbl";
  if (base.size() > gbl.size() && base.compare(base.size() - gbl.size(), gbl.size(), gbl) == 0) {
    p.group_by_length = true;
    base.resize(base.size() - gbl.size());
  }
  if (base == "padded") {
    p.pad_to_max_length = true;
    p.unpad = Unpad::never;
    p.flags = "--pad_to_max_length --unpad never";
  } else if (base == "dynamic") {
    p.unpad = Unpad::never;
    p.flags = "--unpad never";
  } else if (base == "unpad") {
    p.unpad = Unpad::always;
    p.flags = "--unpad always";
  } else if (base == "auto") {
    p.unpad = Unpad::automatic;
    p.flags = "(defaults)";
  } else {
    throw Error("bench finetune: --paths: unknown path '" + spec +
                "': expected padded, dynamic, unpad or auto, each optionally followed by +gbl");
  }
  if (p.group_by_length) p.flags += " --group_by_length";
  return p;
}

double max_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // Linux: KiB
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// The data every path trains on: the task's training features and their real lengths.
struct TaskData {
  std::string task;
  std::string train_path;
  std::vector<std::string> labels;
  bool regression = false;
  int num_labels = 0;
  std::vector<glue::ClassifierFeatures> features;
  std::vector<int32_t> lengths;  // real tokens of each feature ([CLS], [SEP] included)
  int64_t truncated = 0;
};

struct PathResult {
  std::vector<int64_t> positions;      // batch index within epoch 0 of each timed step
  std::vector<int64_t> seq_lengths;    // T of each timed batch
  std::vector<int64_t> real_tokens;    // real tokens of each timed batch
  std::vector<int64_t> unpadded;       // 1 when the step took the unpadded encoder path
  std::vector<std::vector<int32_t>> lengths;  // real tokens of each row of each timed batch
  std::vector<double> seconds, forward, backward, optimizer;
  double flops_real = 0, flops_padded = 0;  // summed over the timed steps
  double loss_first = 0, loss_last = 0;
  double params = 0, rss_mib = 0, alloc_peak_mib = 0;
};

/// Timed step k of `steps` takes the batch at position floor((2k + 1) * S / (2 steps)) of epoch 0 (S batches per
/// epoch): positions spread evenly over the epoch, so that with --group_by_length (mega-batches sorted longest
/// first) the timed batches are not just the longest ones of the first mega-batch.
std::vector<int64_t> timed_positions(int64_t steps_per_epoch, int steps) {
  std::vector<int64_t> pos;
  for (int k = 0; k < steps; ++k) pos.push_back((2 * k + 1) * steps_per_epoch / (2 * static_cast<int64_t>(steps)));
  return pos;
}

PathResult run_path(const BertConfig& cfg, const TaskData& data, const BatchPath& path, const FinetuneBenchFlags& f) {
  PathResult r;
  const int64_t n = static_cast<int64_t>(data.features.size()), B = f.train_batch_size;
  const int64_t steps_per_epoch = n / B;
  Rng init(f.seed, 0x1417);  // run_classifier's initialisation stream
  BertForSequenceClassification model(cfg, init);
  model.bert().set_unpad(path.unpad);
  model.train();
  const NamedParameters params = model.named_parameters();
  for (const auto& [name, v] : params) r.params += static_cast<double>(v.value().numel());
  FinetuneOptions fo;  // bertrain's finetuning defaults (run-classifier's): AdamW as google-research/bert, 3 epochs
  fo.learning_rate = f.learning_rate;
  fo.train_batch_size = B;
  fo.seed = f.seed;
  std::unique_ptr<Optimizer> opt = make_optimizer(fo.optimizer, params);
  LrSchedule sched(fo.schedule(static_cast<int64_t>(static_cast<double>(n) / B * fo.num_train_epochs)));
  TrainStepOptions so;
  so.clip_grad_norm = fo.optimizer.clip_grad_norm;
  TrainStep step(params, *opt, so, world());
  TrainState state;
  const tasks::PaddingOptions padding{path.pad_to_max_length, f.pad_to_multiple_of};
  const std::vector<int64_t> order =
      finetune_epoch_order(f.seed, 0, n, path.group_by_length, data.lengths, B);
  const std::vector<int64_t> timed = timed_positions(steps_per_epoch, f.steps);

  CachingAllocator::instance().reset_peak();
  using Clock = std::chrono::steady_clock;
  auto secs = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  for (int s = 0; s < f.warmup + f.steps; ++s) {
    const bool is_timed = s >= f.warmup;
    const int64_t pos = is_timed ? timed[static_cast<size_t>(s - f.warmup)] : s % steps_per_epoch;
    const std::vector<int64_t> rows(order.begin() + pos * B, order.begin() + (pos + 1) * B);
    Clock::time_point t0 = Clock::now(), t1, t2;
    int64_t T = 0;
    bool unpadded = false;
    auto micro_batch = [&](int64_t) {
      glue::ClassifierBatch cb = glue::make_classifier_batch(data.features, rows, data.regression, padding);
      T = cb.input_ids.size(1);
      const BertInputs in{cb.input_ids, cb.segment_ids, cb.input_mask, pos * B, f.seed};
      unpadded = model.bert().takes_unpadded_path(in);
      Variable loss = model.loss(model.forward(in), cb.labels);
      t1 = Clock::now();
      loss.backward();
      const double value = loss.item();
      t2 = Clock::now();
      return std::vector<double>{value};
    };
    const StepStats st = step.run(1, micro_batch, sched.lr(pos), state, false);
    const Clock::time_point t3 = Clock::now();
    BERTRAIN_CHECK(std::isfinite(st.losses[0]), "bench finetune: ", path.name, ": non-finite loss at step ", s);
    if (s == 0) r.loss_first = st.losses[0];
    r.loss_last = st.losses[0];
    if (!is_timed) continue;
    std::vector<int32_t> lens, padded_lens(static_cast<size_t>(B), static_cast<int32_t>(T));
    int64_t real = 0;
    for (int64_t row : rows) {
      lens.push_back(data.lengths[static_cast<size_t>(row)]);
      real += lens.back();
    }
    r.positions.push_back(pos);
    r.seq_lengths.push_back(T);
    r.real_tokens.push_back(real);
    r.unpadded.push_back(unpadded ? 1 : 0);
    r.lengths.push_back(lens);
    r.seconds.push_back(secs(t0, t3));
    r.forward.push_back(secs(t0, t1));
    r.backward.push_back(secs(t1, t2));
    r.optimizer.push_back(secs(t2, t3));
    r.flops_real += bert_classifier_flops(cfg, lens, data.num_labels).total();
    r.flops_padded += bert_classifier_flops(cfg, padded_lens, data.num_labels).total();
  }
  r.rss_mib = max_rss_mib();
  r.alloc_peak_mib = static_cast<double>(CachingAllocator::instance().stats().peak_bytes_in_use) / (1 << 20);
  return r;
}

TaskData read_task(const FinetuneBenchFlags& f) {
  TaskData d;
  glue::GlueOptions go = f.generic;
  go.labels = bench_split_commas(f.labels);
  const auto proc = glue::make_glue_processor(f.task_name, go);
  const text::FullTokenizer tok =
      text::FullTokenizer::from_vocab_file(f.vocab_file, parse_bool_flag("do_lower_case", f.do_lower_case));
  const glue::ExampleSet train = proc->get_train_set(f.data_dir);
  d.task = proc->task_name();
  d.train_path = train.path;
  d.labels = proc->labels();
  d.regression = proc->is_regression();
  d.num_labels = proc->num_labels();
  d.features = glue::convert_examples_to_features(train.examples, *proc, f.max_seq_length, tok);
  for (const auto& ft : d.features) {
    d.lengths.push_back(ft.num_tokens);
    d.truncated += ft.truncated ? 1 : 0;
  }
  BERTRAIN_CHECK(static_cast<int64_t>(d.features.size()) >= f.train_batch_size, "bench finetune: ", train.path,
                 ": ", d.features.size(), " training examples are fewer than one batch of ", f.train_batch_size);
  return d;
}

int run_finetune_bench(const FinetuneBenchFlags& f) {
  BERTRAIN_CHECK(f.steps >= 1, "bench finetune: --steps must be >= 1, got ", f.steps);
  BERTRAIN_CHECK(f.warmup >= 0, "bench finetune: --warmup must be >= 0, got ", f.warmup);
  BERTRAIN_CHECK(f.train_batch_size >= 1, "bench finetune: --train_batch_size must be >= 1, got ", f.train_batch_size);
  std::vector<std::pair<std::string, BertConfig>> models;
  for (const auto& m : bench_split_commas(f.models)) models.emplace_back(m, bench_model_config(m));
  std::vector<BatchPath> paths;
  for (const auto& p : bench_split_commas(f.paths)) paths.push_back(parse_path(p));
  BERTRAIN_CHECK(!models.empty() && !paths.empty(), "bench finetune: --models and --paths must not be empty");
  for (const auto& [name, c] : models)
    BERTRAIN_CHECK(f.max_seq_length <= c.max_position_embeddings, "bench finetune: ", name, ": --max_seq_length ",
                   f.max_seq_length, " exceeds max_position_embeddings ", c.max_position_embeddings);
  std::ofstream json;
  if (!f.json_out.empty()) {
    json.open(f.json_out, std::ios::app);
    BERTRAIN_CHECK(json.good(), "bench finetune: cannot open --json_out '", f.json_out, "'");
  }
  const TaskData data = read_task(f);
  const int64_t n = static_cast<int64_t>(data.features.size());
  const double mean_len = std::accumulate(data.lengths.begin(), data.lengths.end(), 0.0) / static_cast<double>(n);
  const int32_t max_len = *std::max_element(data.lengths.begin(), data.lengths.end());

  const FmaPeak peak = measure_fma_peak(f.peak_seconds);
  MatmulPrecisionGuard precision(f.bf16 ? MatmulPrecision::bf16 : MatmulPrecision::f32);
  double mfu_peak = peak.gflops;
  if (f.bf16) {
    const double bf = measure_bf16_dot_peak(f.peak_seconds);
    if (bf > 0) mfu_peak = bf;
  }
  std::printf("bertrain bench finetune: %s %s: %ld examples, real tokens per example mean %.2f, max %d (%ld "
              "truncated to max_seq_length %d); batch %ld, %s, %d threads\n",
              data.task.c_str(), data.train_path.c_str(), (long)n, mean_len, max_len, (long)data.truncated,
              f.max_seq_length, (long)f.train_batch_size,
              f.bf16 ? "bf16 matmuls (f32 accumulation, f32 master weights)" : "fp32", num_threads());
  std::printf("per path: %d warm-up steps (batches 0..), then %d timed steps at batches spread evenly over epoch 0 "
              "(of %ld); a step: batch, forward, loss, backward, clip 1.0, AdamW (google-research/bert), zero_grad\n",
              f.warmup, f.steps, (long)(n / f.train_batch_size));
  std::printf("peak_gflops %.1f (FMA loop, %s)%s\n", peak.gflops, peak.isa.c_str(),
              f.bf16 ? (mfu_peak != peak.gflops ? "; mfu relative to the bf16 dot-product peak" : "; no AVX512_BF16")
                     : "");
  std::printf("%-6s %-12s %6s %8s %9s %11s %8s %10s %7s %8s %8s %9s\n", "model", "path", "mean_T", "pad_frac",
              "step_ms", "real_tok_s", "seq_s", "gflops_re", "mfu_re", "unpadded", "rss_mib", "alloc_mib");
  for (const auto& [name, cfg0] : models) {
    BertConfig cfg = cfg0;
    cfg.num_labels = data.num_labels;
    cfg.id2label = data.regression ? std::vector<std::string>{} : data.labels;
    for (const BatchPath& path : paths) {
      const PathResult r = run_path(cfg, data, path, f);
      const double total = std::accumulate(r.seconds.begin(), r.seconds.end(), 0.0);
      const double real = std::accumulate(r.real_tokens.begin(), r.real_tokens.end(), 0.0);
      double slots = 0;
      for (int64_t T : r.seq_lengths) slots += static_cast<double>(T * f.train_batch_size);
      const double seqs = static_cast<double>(f.train_batch_size) * static_cast<double>(r.seconds.size());
      const double pad_frac = 1.0 - real / slots;
      const double gflops_real = r.flops_real / total / 1e9;
      const double mfu = gflops_real / mfu_peak;
      const int64_t unpadded_steps = std::accumulate(r.unpadded.begin(), r.unpadded.end(), int64_t{0});
      const std::string shown = name.substr(name.find_last_of('/') + 1);
      std::printf("%-6s %-12s %6.1f %7.1f%% %9.1f %11.0f %8.2f %10.1f %6.1f%% %4ld/%-3ld %8.0f %9.0f\n",
                  shown.c_str(), path.name.c_str(), slots / seqs, 100.0 * pad_frac, 1e3 * total / r.seconds.size(),
                  real / total, seqs / total, gflops_real, 100.0 * mfu, (long)unpadded_steps, (long)r.seconds.size(),
                  r.rss_mib, r.alloc_peak_mib);
      std::printf("       step parts (medians): batch + forward + loss %.1f ms, backward %.1f ms, clip + AdamW + "
                  "zero_grad %.1f ms; flags: %s\n",
                  1e3 * median(r.forward), 1e3 * median(r.backward), 1e3 * median(r.optimizer), path.flags.c_str());
      std::fflush(stdout);
      if (json.is_open()) {
        nlohmann::json j{{"bench", "finetune"}, {"framework", "bertrain"}, {"task", data.task},
                         {"train_file", data.train_path}, {"model", name}, {"path", path.name},
                         {"flags", path.flags}, {"pad_to_max_length", path.pad_to_max_length},
                         {"pad_to_multiple_of", f.pad_to_multiple_of},
                         {"unpad", path.unpad == Unpad::always ? "always" : path.unpad == Unpad::never ? "never" : "auto"},
                         {"group_by_length", path.group_by_length}, {"max_seq_length", f.max_seq_length},
                         {"batch_size", f.train_batch_size}, {"examples", n}, {"mean_real_length", mean_len},
                         {"max_real_length", max_len}, {"truncated_examples", data.truncated},
                         {"params", r.params}, {"optimizer", "AdamW"}, {"threads", num_threads()},
                         {"warmup", f.warmup}, {"steps", f.steps}, {"positions", r.positions},
                         {"batch_seq_lengths", r.seq_lengths}, {"batch_real_tokens", r.real_tokens},
                         {"batch_unpadded", r.unpadded}, {"batch_lengths", r.lengths}, {"step_seconds", r.seconds},
                         {"step_seconds_median", median(r.seconds)}, {"total_seconds", total},
                         {"forward_seconds_median", median(r.forward)},
                         {"backward_seconds_median", median(r.backward)},
                         {"optimizer_seconds_median", median(r.optimizer)}, {"real_tokens", real},
                         {"padded_tokens", slots}, {"padding_fraction", pad_frac},
                         {"real_tokens_per_second", real / total}, {"sequences_per_second", seqs / total},
                         {"flops_real", r.flops_real}, {"flops_padded", r.flops_padded},
                         {"gflops_real", gflops_real}, {"peak_gflops", mfu_peak}, {"mfu", mfu},
                         {"fp32_peak_gflops", peak.gflops}, {"peak_isa", peak.isa},
                         {"precision", f.bf16 ? "bf16" : "fp32"}, {"unpadded_steps", unpadded_steps},
                         {"max_rss_mib", r.rss_mib}, {"allocator_peak_mib", r.alloc_peak_mib},
                         {"loss_first", r.loss_first}, {"loss_last", r.loss_last}};
        json << j.dump() << "\n";
        json.flush();
      }
      CachingAllocator::instance().release_cache();  // the next path starts from an empty cache
    }
  }
  if (models.size() * paths.size() > 1)
    std::printf("rss_mib is the process's high-water mark so far: run one model and path per process for "
                "per-path figures (tools/bench/scripts/bench_finetune_compare.sh does); alloc_mib is per path.\n");
  return 0;
}

BenchRegistrar reg{
    {"finetune",
     "sequence-classification finetuning steps on a real task file: real tokens/s, seq/s, padding share, MFU on "
     "real tokens, for padded / dynamic / unpadded batches",
     [](CLI::App& sub) {
       auto f = std::make_shared<FinetuneBenchFlags>();
       sub.footer(
           "Reads the task's training file (--task_name, --data_dir and for the generic task its column flags, as\n"
           "run-classifier), tokenizes it at --max_seq_length and, for every model and path, builds a fresh\n"
           "BertForSequenceClassification (random initialisation from --seed; speed does not depend on the weights)\n"
           "and runs warm-up steps, then timed steps on batches spread evenly over epoch 0's order. Paths:\n"
           "  padded   every batch padded to max_seq_length, padded encoder (--pad_to_max_length --unpad never:\n"
           "           run_classifier.py's way)\n"
           "  dynamic  each batch padded to its longest example rounded up to --pad_to_multiple_of, padded encoder\n"
           "  unpad    dynamic padding and the unpadded encoder (--unpad always)\n"
           "  auto     run-classifier's defaults (dynamic padding, --unpad auto)\n"
           "  any of them followed by +gbl: with --group_by_length.\n"
           "Reported from the sums over the timed steps (batches differ in length, so not from a median step):\n"
           "real_tok_s = real tokens / seconds; seq_s = sequences / seconds; pad_frac = padding share of the\n"
           "batches' B x T positions (what the padded encoder computes in vain); mean_T = mean padded length;\n"
           "gflops_re / mfu_re: model FLOPs counted on real tokens only (bert_classifier_flops: each sequence at its\n"
           "own length, matmuls only, backward = 2 x forward) per second, over the FMA peak measured at the start\n"
           "(with --bf16 the bf16 dot-product peak); unpadded: timed steps that took the unpadded encoder.");
       sub.add_option("--task_name", f->task_name, "CoLA, SST-2, MRPC, QQP, STS-B, MNLI, QNLI, RTE, WNLI or generic")
           ->capture_default_str();
       sub.add_option("--data_dir", f->data_dir, "directory with the task's train file")->required();
       sub.add_option("--vocab_file", f->vocab_file, "BERT vocab.txt")->required();
       sub.add_option("--do_lower_case", f->do_lower_case, "true for uncased vocabularies")->capture_default_str();
       sub.add_option("--format", f->generic.format, "generic task: csv, tsv or jsonl (default: from the file names)");
       sub.add_option("--text_a_column", f->generic.text_a_column, "generic task: first text column or key")
           ->capture_default_str();
       sub.add_option("--text_b_column", f->generic.text_b_column, "generic task: second text column (pairs)");
       sub.add_option("--label_column", f->generic.label_column, "generic task: label column")->capture_default_str();
       sub.add_option("--labels", f->labels, "generic task: comma-separated label list");
       sub.add_option("--models", f->models, "comma-separated: tiny, mini, small, base or config .json paths")
           ->capture_default_str();
       sub.add_option("--paths", f->paths, "comma-separated: padded, dynamic, unpad, auto, each optionally +gbl")
           ->capture_default_str();
       sub.add_option("--max_seq_length", f->max_seq_length, "T of the features")->capture_default_str();
       sub.add_option("--train_batch_size", f->train_batch_size, "sequences per step")->capture_default_str();
       sub.add_option("--pad_to_multiple_of", f->pad_to_multiple_of, "dynamic padding's rounding")
           ->capture_default_str();
       sub.add_option("--learning_rate", f->learning_rate, "peak of the linear schedule")->capture_default_str();
       sub.add_option("--steps", f->steps, "timed steps per path")->capture_default_str();
       sub.add_option("--warmup", f->warmup, "untimed steps first")->capture_default_str();
       sub.add_option("--seed", f->seed, "initialisation, order and dropout seed")->capture_default_str();
       sub.add_option("--peak_seconds", f->peak_seconds, "length of each FMA peak run")->capture_default_str();
       sub.add_option("--json_out", f->json_out, "append one JSON line per model and path to this file");
       sub.add_flag("--bf16", f->bf16, "bf16 matmuls with f32 accumulation and f32 master weights (as run-classifier)");
       return std::function<int()>([f] { return run_finetune_bench(*f); });
     }}};

}  // namespace
}  // namespace bertrain::cli
