// cmd_bench_predict.cpp: `bertrain bench predict`: prediction throughput and latency of bertrain's prediction path
// (run-classifier's: length-sorted batches, dynamic padding to a multiple of 8, the unpadded encoder where it pays)
// on a real task file, next to ONNX Runtime running the same checkpoint exported by export-onnx (Node.js package
// onnxruntime-node through tools/bench/ort_predict.js; same token ids, same thread count, all graph optimizations).
// Throughput at --batch_size (real tokens/s, sequences/s); latency of batch 1 over --latency_requests requests.
// Results: docs/results/onnx-predict.md.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "bench_util.h"
#include "bertrain/autograd/variable.h"
#include "bertrain/core/error.h"
#include "bertrain/core/threads.h"
#include "bertrain/io/atomic_file.h"
#include "bertrain/io/checkpoint.h"
#include "bertrain/io/config.h"
#include "bertrain/io/onnx.h"
#include "bertrain/models/bert.h"
#include "bertrain/tasks/batching.h"
#include "bertrain/tasks/glue/glue.h"
#include "bertrain/text/tokenizer.h"
#include "commands.h"
#include "nlohmann/json.hpp"

#ifndef BERTRAIN_SOURCE_DIR
#define BERTRAIN_SOURCE_DIR "."
#endif

namespace bertrain::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct PredictBenchFlags {
  std::string checkpoint, model, vocab_file, task_name = "QNLI", data_dir, do_lower_case = "true", work_dir, json_out;
  std::string ort_runtime = std::string(BERTRAIN_SOURCE_DIR) + "/.deps/onnxruntime/node_modules/onnxruntime-node";
  std::string ort_script = std::string(BERTRAIN_SOURCE_DIR) + "/tools/bench/ort_predict.js";
  int max_seq_length = 128;
  int64_t batch_size = 32, max_examples = 0;
  std::string torch_export_script = std::string(BERTRAIN_SOURCE_DIR) + "/tools/bench/scripts/torch_onnx_export.py";
  int latency_requests = 500;
  bool ort = true, torch_export = true;
};

struct Throughput {
  double seconds = 0, cpu_seconds = 0;
  int64_t sequences = 0, real_tokens = 0, positions = 0;
};

double secs(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }
/// CPU time of the process (every thread), seconds: on a busy machine it is disturbed far less than wall time.
double cpu_now() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

/// The classifier's forward (or the encoder's, for a checkpoint without a classifier) on one batch.
struct Predictor {
  std::shared_ptr<Module> model;
  BertModel* bert = nullptr;
  BertForSequenceClassification* classifier = nullptr;
  void run(const glue::ClassifierBatch& b) const {
    NoGradGuard ng;
    const BertInputs in{b.input_ids, b.segment_ids, b.input_mask, 0, 0};
    if (classifier) {
      (void)classifier->forward(in);
    } else {
      (void)bert->forward(in);
    }
  }
};

Throughput bertrain_throughput(const Predictor& p, const std::vector<glue::ClassifierFeatures>& f,
                               const std::vector<int64_t>& order, int64_t batch, const tasks::PaddingOptions& pad) {
  std::vector<glue::ClassifierBatch> batches;
  Throughput t;
  for (size_t k = 0; k < order.size(); k += static_cast<size_t>(batch)) {
    const std::vector<int64_t> rows(order.begin() + static_cast<int64_t>(k),
                                    order.begin() + static_cast<int64_t>(std::min(order.size(), k + batch)));
    batches.push_back(glue::make_classifier_batch(f, rows, false, pad));
    t.positions += batches.back().input_ids.numel();
    for (int64_t r : rows) t.real_tokens += f[static_cast<size_t>(r)].num_tokens;
  }
  t.sequences = static_cast<int64_t>(order.size());
  // Warm-up: one untimed pass over the same batches. Each new token count (the M of every product on the unpadded
  // path) makes oneDNN compile its primitives once; a server that has run a while has met them.
  for (const auto& b : batches) p.run(b);
  const auto t0 = Clock::now();
  const double c0 = cpu_now();
  for (const auto& b : batches) p.run(b);
  t.seconds = secs(t0, Clock::now());
  t.cpu_seconds = cpu_now() - c0;
  return t;
}

std::string row(const std::string& name, const Throughput& t) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-40s %9.1f %11.0f %9.1f %11.0f %8.1f%% %8.2f", name.c_str(), t.sequences / t.seconds,
                t.real_tokens / t.seconds, t.sequences / t.cpu_seconds, t.real_tokens / t.cpu_seconds,
                100.0 * (1.0 - static_cast<double>(t.real_tokens) / t.positions), t.seconds);
  return buf;
}

nlohmann::json to_json(const Throughput& t) {
  return {{"seconds", t.seconds},
          {"cpu_seconds", t.cpu_seconds},
          {"sequences_per_s", t.sequences / t.seconds},
          {"real_tokens_per_s", t.real_tokens / t.seconds},
          {"sequences_per_cpu_s", t.sequences / t.cpu_seconds},
          {"real_tokens_per_cpu_s", t.real_tokens / t.cpu_seconds},
          {"padding_share", 1.0 - static_cast<double>(t.real_tokens) / t.positions}};
}

/// A checkpoint of `model` (a bench size name or a config .json) with random weights (seed 0) and `vocab_file`'s
/// vocabulary, written to `dir`: the speed of a size for which no trained checkpoint is at hand (prediction's cost
/// does not depend on the weights' values).
std::string write_random_checkpoint(const std::string& model, const std::string& vocab_file, const fs::path& dir) {
  BERTRAIN_CHECK(fs::is_regular_file(vocab_file), "bench predict: --vocab_file '", vocab_file, "' does not exist");
  BertConfig cfg = bench_model_config(model);
  Rng rng(0);
  BertModel m(cfg, rng);
  const fs::path out = dir / ("random-" + fs::path(model).stem().string());
  save_model(out.string(), m, cfg);
  fs::copy_file(vocab_file, out / "vocab.txt", fs::copy_options::overwrite_existing);
  return out.string();
}

int run_predict_bench(PredictBenchFlags f) {
  BERTRAIN_CHECK(f.batch_size >= 1, "bench predict: --batch_size must be >= 1, got ", f.batch_size);
  BERTRAIN_CHECK(f.latency_requests >= 1, "bench predict: --latency_requests must be >= 1, got ", f.latency_requests);
  BERTRAIN_CHECK(f.checkpoint.empty() != f.model.empty(),
                 "bench predict: give either --checkpoint or --model (with --vocab_file), not ",
                 f.checkpoint.empty() ? "neither" : "both");
  BERTRAIN_CHECK(f.model.empty() || !f.vocab_file.empty(), "bench predict: --model needs --vocab_file");
  BERTRAIN_CHECK(f.vocab_file.empty() || !f.model.empty(),
                 "bench predict: --vocab_file is for --model (a checkpoint brings its own vocab.txt)");
  BERTRAIN_CHECK(f.checkpoint.empty() || fs::exists(f.checkpoint), "bench predict: checkpoint '", f.checkpoint,
                 "' does not exist");
  // Everything a run needs at its end is checked before any timing starts.
  if (!f.json_out.empty()) {
    std::ofstream j(f.json_out, std::ios::app);
    BERTRAIN_CHECK(j.good(), "bench predict: cannot open --json_out '", f.json_out, "' for appending");
  }
  if (f.ort) {
    BERTRAIN_CHECK(fs::is_regular_file(f.ort_script), "bench predict: --ort_script '", f.ort_script,
                   "' does not exist");
    BERTRAIN_CHECK(fs::is_directory(f.ort_runtime), "bench predict: --ort_runtime '", f.ort_runtime,
                   "' does not exist (scripts/setup.sh installs onnxruntime-node; --ort=false leaves ONNX Runtime out)");
    BERTRAIN_CHECK(!f.torch_export || fs::is_regular_file(f.torch_export_script), "bench predict: --torch_export_script '",
                   f.torch_export_script, "' does not exist");
  }
  std::string work = f.work_dir;
  if (!work.empty()) {
    std::error_code ec;
    fs::create_directories(work, ec);
    BERTRAIN_CHECK(!ec && fs::is_directory(work), "bench predict: --work_dir '", work, "' cannot be created",
                   ec ? ": " + ec.message() : std::string());
  } else {
    std::string tmpl = (fs::temp_directory_path() / "bertrain-bench-predict-XXXXXX").string();
    BERTRAIN_CHECK(::mkdtemp(tmpl.data()) != nullptr, "bench predict: cannot create a temporary directory");
    work = tmpl;
  }
  struct RemoveTemporary {  // the temporary work directory goes on every exit, errors included
    std::string dir;
    ~RemoveTemporary() {
      std::error_code ec;
      if (!dir.empty()) fs::remove_all(dir, ec);
    }
  } remove_temporary{f.work_dir.empty() ? work : std::string()};
  if (!f.model.empty()) f.checkpoint = write_random_checkpoint(f.model, f.vocab_file, work);
  const BertConfig cfg = load_bert_config(default_config_file(f.checkpoint));
  BERTRAIN_CHECK(f.max_seq_length <= cfg.max_position_embeddings, "bench predict: --max_seq_length ", f.max_seq_length,
                 " exceeds max_position_embeddings ", cfg.max_position_embeddings);
  // The task file's dev set, as run-classifier --do_eval reads it.
  const auto proc = glue::make_glue_processor(f.task_name);
  const fs::path cdir = fs::is_directory(f.checkpoint) ? fs::path(f.checkpoint) : fs::path(f.checkpoint).parent_path();
  const text::FullTokenizer tok =
      text::FullTokenizer::from_vocab_file((cdir / "vocab.txt").string(), parse_bool_flag("do_lower_case", f.do_lower_case));
  const glue::ExampleSet dev = proc->get_dev_set(f.data_dir, 0);
  std::vector<glue::InputExample> examples = dev.examples;
  if (f.max_examples > 0 && static_cast<int64_t>(examples.size()) > f.max_examples) examples.resize(f.max_examples);
  const std::vector<glue::ClassifierFeatures> feats =
      glue::convert_examples_to_features(examples, *proc, f.max_seq_length, tok);
  const int64_t n = static_cast<int64_t>(feats.size());
  BERTRAIN_CHECK(n >= 1, "bench predict: ", dev.path, " has no examples");
  std::vector<int32_t> lengths;
  for (const auto& x : feats) lengths.push_back(x.num_tokens);

  // The model: the checkpoint's classifier when it has one, else its encoder (the prediction path's cost either way).
  OnnxExportOptions eo;
  eo.checkpoint = f.checkpoint;
  eo.output = (fs::path(work) / "model.onnx").string();
  Rng rng(0);
  Predictor p;
  LoadReport rep;
  LoadOptions lo;
  {
    auto m = std::make_shared<BertForSequenceClassification>(cfg, rng);
    load_model(f.checkpoint, *m, rep, lo);
    const bool has_classifier =
        std::none_of(rep.missing.begin(), rep.missing.end(), [](const std::string& s) { return s.rfind("classifier.", 0) == 0; });
    if (has_classifier) {
      p.model = m;
      p.classifier = m.get();
      p.bert = &m->bert();
      eo.task = OnnxTask::sequence_classification;
    } else {
      auto e = std::make_shared<BertModel>(cfg, rng);
      LoadReport r2;
      load_model(f.checkpoint, *e, r2, lo);
      p.model = e;
      p.bert = e.get();
      eo.task = OnnxTask::encoder;
    }
  }
  p.model->eval();
  pack_linears_for_prediction(*p.model);  // as the prediction commands do
  p.bert->set_unpad(Unpad::automatic);
  const double mean_len = std::accumulate(lengths.begin(), lengths.end(), 0.0) / static_cast<double>(n);
  std::printf("bench predict: %s (%s) on %s: %lld examples, mean %.1f tokens (max_seq_length %d), batch %lld, %d threads\n",
              f.checkpoint.c_str(), onnx_task_name(eo.task).c_str(), dev.path.c_str(), static_cast<long long>(n), mean_len,
              f.max_seq_length, static_cast<long long>(f.batch_size), num_threads());

  // bertrain: its prediction path (length-sorted, dynamic padding to a multiple of 8, Unpad::automatic), and file order.
  std::vector<int64_t> file_order(static_cast<size_t>(n));
  std::iota(file_order.begin(), file_order.end(), 0);
  const std::vector<int64_t> sorted = tasks::length_sorted_order(lengths);
  nlohmann::json out{{"checkpoint", f.checkpoint}, {"task", onnx_task_name(eo.task)}, {"file", dev.path}, {"examples", n},
                     {"mean_tokens", mean_len}, {"batch_size", f.batch_size}, {"threads", num_threads()}};
  if (!f.model.empty()) out["random_model"] = f.model;
  std::printf("%-40s %9s %11s %9s %11s %9s %8s\n", "path (per wall second, per CPU second)", "seq/s", "real tok/s",
              "seq/cpu-s", "tok/cpu-s", "padding", "seconds");
  const Throughput bs = bertrain_throughput(p, feats, sorted, f.batch_size, {false, 8});
  const Throughput bf = bertrain_throughput(p, feats, file_order, f.batch_size, {false, 8});
  p.bert->set_unpad(Unpad::always);  // the unpadded encoder on every batch, however little padding it has
  const Throughput bu = bertrain_throughput(p, feats, sorted, f.batch_size, {false, 8});
  p.bert->set_unpad(Unpad::automatic);
  std::printf("%s\n%s\n%s\n", row("bertrain length-sorted (prediction path)", bs).c_str(),
              row("bertrain length-sorted, --unpad always", bu).c_str(),
              row("bertrain file order, dynamic padding", bf).c_str());
  out["bertrain"]["length_sorted"] = to_json(bs);
  out["bertrain"]["length_sorted_unpad_always"] = to_json(bu);
  out["bertrain"]["file_order"] = to_json(bf);
  // Latency: batch 1, the examples in file order (cycling), after the same requests untimed (every length met once).
  std::vector<double> ms, cpu_ms;
  const int reqs = f.latency_requests;
  for (int k = 0; k < 2 * reqs; ++k) {
    const int64_t r = (k % reqs) % n;
    const glue::ClassifierBatch b = glue::make_classifier_batch(feats, std::vector<int64_t>{r}, false, {false, 1});
    const auto t0 = Clock::now();
    const double c0 = cpu_now();
    p.run(b);
    if (k >= reqs) {
      ms.push_back(1e3 * secs(t0, Clock::now()));
      cpu_ms.push_back(1e3 * (cpu_now() - c0));
    }
  }
  std::sort(ms.begin(), ms.end());
  std::sort(cpu_ms.begin(), cpu_ms.end());
  auto pct = [&](const std::vector<double>& s, double q) {
    return s[std::min(s.size() - 1, static_cast<size_t>(std::max(0.0, std::ceil(q * s.size()) - 1)))];
  };
  out["bertrain"]["latency"] = {{"requests", ms.size()},          {"p50_ms", pct(ms, 0.5)},
                                {"p99_ms", pct(ms, 0.99)},        {"cpu_p50_ms", pct(cpu_ms, 0.5)},
                                {"cpu_p99_ms", pct(cpu_ms, 0.99)}};
  std::printf("latency batch 1, %zu requests: bertrain p50 %.2f ms, p99 %.2f ms (CPU time p50 %.2f ms, p99 %.2f ms)\n",
              ms.size(), pct(ms, 0.5), pct(ms, 0.99), pct(cpu_ms, 0.5), pct(cpu_ms, 0.99));

  if (f.ort) {
    const OnnxExportResult er = export_onnx(eo);
    // The same token ids for ONNX Runtime: per example its input_ids then its token_type_ids (real tokens).
    std::string bytes;
    for (const auto& x : feats) {
      bytes.append(reinterpret_cast<const char*>(x.input_ids.data()), sizeof(int32_t) * static_cast<size_t>(x.num_tokens));
      bytes.append(reinterpret_cast<const char*>(x.segment_ids.data()), sizeof(int32_t) * static_cast<size_t>(x.num_tokens));
    }
    const fs::path w(work);
    write_text_atomic((w / "tokens.bin").string(), bytes);
    // One ONNX Runtime pass over `model`: throughput rows and the latency line, under out[key].
    auto run_ort = [&](const std::string& model, const std::string& tag, const std::string& key,
                       const std::string& label) {
      nlohmann::json m{{"runtime", f.ort_runtime}, {"model", model}, {"threads", num_threads()},
                       {"batch_size", f.batch_size}, {"latency_requests", f.latency_requests}, {"lengths", lengths},
                       {"tokens_file", (w / "tokens.bin").string()}, {"out", (w / (tag + ".json")).string()}};
      write_text_atomic((w / ("manifest_" + tag + ".json")).string(), m.dump());
      const std::string cmd = "node '" + f.ort_script + "' '" + (w / ("manifest_" + tag + ".json")).string() + "'";
      BERTRAIN_CHECK(std::system(cmd.c_str()) == 0, "bench predict: ONNX Runtime run failed: ", cmd,
                     " (is onnxruntime-node in ", f.ort_runtime, "? scripts/setup.sh installs it)");
      std::ifstream in(w / (tag + ".json"));
      const nlohmann::json o = nlohmann::json::parse(in);
      for (const char* k : {"file_order", "length_sorted"}) {
        const auto& x = o["throughput"][k];
        Throughput t{x["seconds"].get<double>(), x["cpu_seconds"].get<double>(), x["sequences"].get<int64_t>(),
                     x["real_tokens"].get<int64_t>(), x["padded_positions"].get<int64_t>()};
        std::printf("%s\n", row(label + (k == std::string("file_order") ? " file order" : " length-sorted") +
                                    ", padded to longest", t).c_str());
        out[key][k] = to_json(t);
      }
      out[key]["latency"] = o["latency"];
      const auto& l = o["latency"];
      std::printf("latency batch 1, %d requests: %s p50 %.2f ms, p99 %.2f ms (CPU time p50 %.2f ms, p99 %.2f ms)\n",
                  l["requests"].get<int>(), label.c_str(), l["p50_ms"].get<double>(), l["p99_ms"].get<double>(),
                  l["cpu_p50_ms"].get<double>(), l["cpu_p99_ms"].get<double>());
    };
    run_ort(eo.output, "ort", "onnxruntime", "onnxruntime");
    out["onnx_model_bytes"] = er.bytes;
    if (f.torch_export) {
      // PyTorch's own export of the same weights (what a Hugging Face user gets), in the same runtime.
      const std::string tm = (w / "torch.onnx").string();
      const std::string cmd = "/usr/bin/python3 '" + f.torch_export_script + "' '" + f.checkpoint + "' '" + tm + "'";
      BERTRAIN_CHECK(std::system(cmd.c_str()) == 0, "bench predict: torch.onnx.export failed: ", cmd,
                     " (python3-torch is needed; --torch_export=false leaves this contender out)");
      run_ort(tm, "ort_torch", "onnxruntime_torch_export", "onnxruntime (torch.onnx.export)");
    }
  }
  if (!f.json_out.empty()) {
    std::ofstream j(f.json_out, std::ios::app);
    BERTRAIN_CHECK(j.good(), "bench predict: cannot open --json_out '", f.json_out, "'");
    j << out.dump() << "\n";
  }
  return 0;
}

BenchRegistrar reg{{"predict",
                    "prediction throughput and latency of bertrain's prediction path against ONNX Runtime on the "
                    "exported model, on a task's dev file",
                    [](CLI::App& sub) {
                      auto f = std::make_shared<PredictBenchFlags>();
                      sub.add_option("--checkpoint", f->checkpoint, "checkpoint directory with vocab.txt");
                      sub.add_option("--model", f->model,
                                     "instead of --checkpoint: tiny, mini, small, base or a config .json, with random "
                                     "weights (seed 0; the speed does not depend on them) and --vocab_file");
                      sub.add_option("--vocab_file", f->vocab_file, "BERT vocab.txt for --model");
                      sub.add_option("--task_name", f->task_name, "GLUE task whose dev.tsv is read (default QNLI)");
                      sub.add_option("--data_dir", f->data_dir, "directory holding the task's dev file")->required();
                      sub.add_option("--do_lower_case", f->do_lower_case, "true|false (default true)");
                      sub.add_option("--max_seq_length", f->max_seq_length, "default 128");
                      sub.add_option("--batch_size", f->batch_size, "throughput batch size (default 32)");
                      sub.add_option("--max_examples", f->max_examples, "first N examples of the file (default all)");
                      sub.add_option("--latency_requests", f->latency_requests, "batch-1 requests timed (default 500)");
                      sub.add_option("--ort", f->ort, "also run ONNX Runtime (default true)");
                      sub.add_option("--ort_runtime", f->ort_runtime, "the onnxruntime-node package directory");
                      sub.add_option("--ort_script", f->ort_script, "tools/bench/ort_predict.js");
                      sub.add_option("--torch_export", f->torch_export,
                                     "also run ONNX Runtime on PyTorch's torch.onnx.export of the same weights "
                                     "(default true; needs python3-torch)");
                      sub.add_option("--torch_export_script", f->torch_export_script,
                                     "tools/bench/scripts/torch_onnx_export.py");
                      sub.add_option("--work_dir", f->work_dir, "keep the exported model and token ids here (created if needed)");
                      sub.add_option("--json_out", f->json_out, "append the results as one JSON line");
                      return std::function<int()>([f] { return run_predict_bench(*f); });
                    }}};

}  // namespace
}  // namespace bertrain::cli
