// step_logger.cpp: see step_logger.h.
#include "bertrain/train/step_logger.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "bertrain/core/error.h"
#include "bertrain/io/atomic_file.h"
#include "bertrain/io/tensorboard.h"
#include "bertrain/train/checkpoint_dir.h"

namespace bertrain {

namespace {

using json = nlohmann::json;

std::string fmt_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  char buf[32];
  const long t = std::lround(s);
  std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
  return buf;
}

json to_json(const MetricsRecord& r) {
  json j = json::object();
  for (const auto& kv : r) {  // not a structured binding: clang 14 cannot capture one in the lambda
    const auto& k = kv.first;
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, std::monostate>) j[k] = nullptr;
          else j[k] = x;
        },
        kv.second);
  }
  return j;
}

}  // namespace

std::string metrics_json(const MetricsRecord& r, int indent) { return to_json(r).dump(indent); }

std::vector<tensorboard::Scalar> tensorboard_scalars(const MetricsRecord& r) {
  // metrics.jsonl key -> TensorBoard tag of a training record (the guide docs/guides/tensorboard.md shows it).
  static const std::pair<const char*, const char*> kTrainTags[] = {
      {"loss", "train/loss"},
      {"lr", "train/learning_rate"},
      {"grad_norm", "train/grad_norm"},
      {"epoch", "train/epoch"},
      {"mlm_loss", "train/mlm_loss"},
      {"nsp_loss", "train/nsp_loss"},
      {"sequences_per_second", "train/sequences_per_second"},
      {"real_tokens_per_second", "train/tokens_per_second"},
      {"data_wait_fraction", "train/data_wait"},
      {"skipped_steps", "train/skipped_steps"},
      {"phase", "train/phase"},
  };
  auto number = [](const MetricValue& v, double& out) {
    if (const auto* d = std::get_if<double>(&v)) out = *d;
    else if (const auto* i = std::get_if<int64_t>(&v)) out = static_cast<double>(*i);
    else return false;
    return true;
  };
  bool eval = false, has_step = false;
  for (const auto& [k, v] : r) {
    if (k == "eval") eval = std::holds_alternative<bool>(v) && std::get<bool>(v);
    if (k == "step") has_step = true;
  }
  std::vector<tensorboard::Scalar> out;
  if (!has_step) return out;
  for (const auto& [k, v] : r) {
    double x;
    if (!number(v, x) || !std::isfinite(x)) continue;  // metrics.jsonl holds null for a non-finite number
    if (eval) {
      if (k != "step" && k != "global_step") out.push_back({"eval/" + k, static_cast<float>(x)});
      continue;
    }
    for (const auto& [key, tag] : kTrainTags)
      if (k == key) out.push_back({tag, static_cast<float>(x)});
  }
  return out;
}

StepLogger::StepLogger(std::string metrics_path, bool write, bool live, int64_t log_every, std::string tensorboard_dir)
    : path_(std::move(metrics_path)), tensorboard_dir_(std::move(tensorboard_dir)), write_(write), live_(live),
      log_every_(std::max<int64_t>(1, log_every)) {}
StepLogger::~StepLogger() = default;
StepLogger::StepLogger(StepLogger&&) noexcept = default;
StepLogger& StepLogger::operator=(StepLogger&&) noexcept = default;

std::string StepLogger::tensorboard_file() const { return events_ ? events_->path() : std::string(); }

void StepLogger::sync() {
  if (events_) events_->sync();
}

namespace {
void log_truncation(const std::string& dir, const tensorboard::TruncateReport& rep, const char* why) {
  for (const std::string& n : rep.notes) spdlog::warn("TensorBoard event file {}", n);
  if (rep.files_rewritten + rep.files_removed > 0)
    spdlog::info("TensorBoard: {} {} step record(s) from the event files in {} ({} rewritten, {} removed)", why,
                 rep.dropped, dir, rep.files_rewritten, rep.files_removed);
}
}  // namespace

void StepLogger::start_new() {
  if (!write_) return;
  write_text_atomic(path_, "");
  if (!tensorboard_dir_.empty()) {
    events_.reset();
    log_truncation(tensorboard_dir_, tensorboard::truncate_event_files(tensorboard_dir_, -1),
                   "a new run: removed the earlier run's");
  }
}

void StepLogger::truncate_after(int64_t step) {
  if (!write_) return;
  if (!tensorboard_dir_.empty()) {
    events_.reset();  // the resumed run writes a new file after the rewritten ones
    log_truncation(tensorboard_dir_, tensorboard::truncate_event_files(tensorboard_dir_, step),
                   ("resumed at step " + std::to_string(step) + ": dropped the later").c_str());
  }
  std::ifstream in(path_);
  if (!in.good()) return;
  std::string line, kept;
  while (std::getline(in, line)) {
    try {
      json j = json::parse(line);
      if (j.value("step", int64_t{0}) <= step) kept += line + "\n";
    } catch (const json::exception&) {
      // a line cut by a crash: dropped
    }
  }
  in.close();
  write_text_atomic(path_, kept);
}

void StepLogger::record(const MetricsRecord& r) {
  if (!write_) return;
  std::ofstream f(path_, std::ios::app);
  f << to_json(r).dump() << "\n";
  f.flush();
  BERTRAIN_CHECK(f.good(), "cannot append to ", path_, ": ", std::strerror(errno));
  if (tensorboard_dir_.empty()) return;
  const std::vector<tensorboard::Scalar> scalars = tensorboard_scalars(r);
  if (scalars.empty()) return;
  int64_t step = 0;
  for (const auto& [k, v] : r)
    if (k == "step" && std::holds_alternative<int64_t>(v)) step = std::get<int64_t>(v);
  if (!events_) {
    events_ = std::make_unique<tensorboard::EventFileWriter>(tensorboard_dir_);
    spdlog::info("TensorBoard event file {}", events_->path());
  }
  events_->add_scalars(step, scalars);
}

double StepLogger::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

void StepLogger::progress(const StepProgress& p, int64_t step_number) {
  if (!write_) return;  // rank 0 owns the console
  if (step_number % log_every_ != 0 && !p.last) return;
  const double eta = p.done > 0 ? elapsed() / static_cast<double>(p.done) * static_cast<double>(p.total - p.done) : NAN;
  std::string parts;
  for (const auto& [name, v] : p.parts) {
    char b[64];
    std::snprintf(b, sizeof b, "%s%s %.4f", parts.empty() ? "" : " ", name.c_str(), v);
    parts += b;
  }
  char rate[96] = "";
  if (p.tokens_per_second > 0)
    std::snprintf(rate, sizeof rate, " | %.1f seq/s %.0f tok/s", p.sequences_per_second, p.tokens_per_second);
  else if (p.sequences_per_second > 0)
    std::snprintf(rate, sizeof rate, " | %.1f seq/s", p.sequences_per_second);
  if (p.data_wait_fraction >= 0) {
    const size_t n = std::strlen(rate);
    std::snprintf(rate + n, sizeof rate - n, " | data wait %.1f%%", 100 * p.data_wait_fraction);
  }
  char comm[96] = "";
  if (p.comm_exposed_fraction >= 0)
    std::snprintf(comm, sizeof comm, " | comm exposed %.1f%% (allreduce %.0f ms, %.1f MB/rank)",
                  100 * p.comm_exposed_fraction, 1e3 * p.allreduce_seconds, p.allreduce_bytes / 1e6);
  char line[740];
  std::snprintf(line, sizeof line, "%s | loss %.4f%s%s%s | lr %.3g | gnorm %.3g%s%s | eta %s", p.where.c_str(), p.loss,
                parts.empty() ? "" : " (", parts.c_str(), parts.empty() ? "" : ")", p.lr, p.grad_norm, rate, comm,
                fmt_duration(eta).c_str());
  if (live_) std::fprintf(stderr, "\r%s\x1b[K%s", line, p.last ? "\n" : "");
  else spdlog::info("{}", line);
}

}  // namespace bertrain
