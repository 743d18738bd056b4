// checkpoint_dir.cpp: temporary directory + fsync + rename.
#include "bertrain/train/checkpoint_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "bertrain/core/error.h"
#include "bertrain/io/atomic_file.h"
#include "bertrain/io/checkpoint.h"
#include "bertrain/io/safetensors.h"

namespace bertrain {

namespace fs = std::filesystem;

namespace {

void fsync_path(const fs::path& p) {
  int fd = ::open(p.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

std::optional<int64_t> step_of(const fs::path& p) {
  const std::string n = p.filename().string();
  if (n.rfind("checkpoint-", 0) != 0) return std::nullopt;
  try {
    size_t used = 0;
    int64_t s = std::stoll(n.substr(11), &used);
    if (used != n.size() - 11) return std::nullopt;
    return s;
  } catch (...) {
    return std::nullopt;
  }
}

std::vector<std::pair<int64_t, fs::path>> list_checkpoints(const std::string& out) {
  std::vector<std::pair<int64_t, fs::path>> v;
  std::error_code ec;
  if (!fs::is_directory(out, ec)) return v;
  for (const auto& e : fs::directory_iterator(out)) {
    if (!e.is_directory()) continue;
    auto s = step_of(e.path());
    if (s && fs::exists(e.path() / "trainer_state.json")) v.emplace_back(*s, e.path());
  }
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

std::string checkpoint_dir_name(int64_t step) { return "checkpoint-" + std::to_string(step); }

CheckpointWriter::CheckpointWriter(const std::string& output_dir, int64_t step) : out_(output_dir) {
  fs::create_directories(out_);
  tmp_ = (fs::path(out_) / (".tmp-" + checkpoint_dir_name(step) + "-" + std::to_string(::getpid()))).string();
  final_ = (fs::path(out_) / checkpoint_dir_name(step)).string();
  std::error_code ec;
  fs::remove_all(tmp_, ec);
  BERTRAIN_CHECK(fs::create_directories(tmp_, ec), "cannot create checkpoint directory ", tmp_, ": ", ec.message());
}

CheckpointWriter::~CheckpointWriter() {
  if (!committed_) {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }
}

std::string CheckpointWriter::path(const std::string& file) const { return (fs::path(tmp_) / file).string(); }

void CheckpointWriter::commit_as(const std::string& name) {
  final_ = (fs::path(out_) / name).string();
  commit();
}

void CheckpointWriter::commit() {
  for (const auto& e : fs::directory_iterator(tmp_)) fsync_path(e.path());
  fsync_path(tmp_);
  std::error_code ec;
  if (fs::exists(final_)) {
    // Same step saved again (end of phase right after a periodic save): move the old one aside first.
    const std::string old = final_ + ".old-" + std::to_string(::getpid());
    fs::rename(final_, old, ec);
    BERTRAIN_CHECK(!ec, "cannot replace ", final_, ": ", ec.message());
    fs::rename(tmp_, final_, ec);
    BERTRAIN_CHECK(!ec, "cannot rename ", tmp_, " to ", final_, ": ", ec.message());
    fs::remove_all(old, ec);
  } else {
    fs::rename(tmp_, final_, ec);
    BERTRAIN_CHECK(!ec, "cannot rename ", tmp_, " to ", final_, ": ", ec.message());
  }
  fsync_path(out_);
  committed_ = true;
}

std::optional<std::string> newest_checkpoint(const std::string& output_dir) {
  std::error_code ec;
  if (fs::is_directory(output_dir, ec)) {
    std::vector<fs::directory_entry> entries(fs::directory_iterator(output_dir), fs::directory_iterator{});
    for (const auto& e : entries) {
      const std::string n = e.path().filename().string();
      const size_t old_at = n.find(".old-");
      if (old_at != std::string::npos && n.rfind("checkpoint-", 0) == 0) {
        // Killed between the two renames of a same-step replacement: the old copy is the complete one.
        const fs::path orig = e.path().parent_path() / n.substr(0, old_at);
        if (!fs::exists(orig)) fs::rename(e.path(), orig, ec);
        else fs::remove_all(e.path(), ec);
      } else if (n.rfind(".tmp-checkpoint-", 0) == 0 || n.rfind(".deleting-", 0) == 0) {
        fs::remove_all(e.path(), ec);
      }
    }
  }
  auto v = list_checkpoints(output_dir);
  if (v.empty()) return std::nullopt;
  return v.back().second.string();
}

void prune_checkpoints(const std::string& output_dir, int64_t limit) {
  if (limit <= 0) return;
  auto v = list_checkpoints(output_dir);
  std::error_code ec;
  // Rename first (atomic), then delete: a crash mid-deletion leaves a ".deleting-" directory that the next
  // newest_checkpoint() removes, never a half-deleted checkpoint-N that looks complete.
  for (size_t i = 0; i + static_cast<size_t>(limit) < v.size(); ++i) {
    fs::path doomed = v[i].second.parent_path() / (".deleting-" + v[i].second.filename().string());
    fs::rename(v[i].second, doomed, ec);
    if (!ec) fs::remove_all(doomed, ec);
  }
}

std::string save_checkpoint(const std::string& output_dir, const std::string& name, int64_t step,
                            const CheckpointContents& c) {
  BERTRAIN_ASSERT(c.model && c.state, "save_checkpoint: model and state are required");
  CheckpointWriter w(output_dir, step);
  save_model(w.dir(), *c.model, c.config ? std::optional<BertConfig>(*c.config) : std::nullopt);
  if (c.optimizer) save_safetensors(w.path("optimizer.safetensors"), c.optimizer->state_tensors());
  if (c.partial_gradients) {
    std::vector<std::pair<std::string, Tensor>> g;
    for (const auto& [n, v] : *c.partial_gradients)
      if (v.grad().defined()) g.emplace_back(n, v.grad());
    save_safetensors(w.path("partial_gradients.safetensors"), g);
  }
  if (c.write_extra_files) c.write_extra_files(w.dir());
  // trainer_state.json last: a directory is complete when it is renamed into place.
  write_text_atomic(w.path("trainer_state.json"), c.state->to_json());
  w.commit_as(name);
  return (fs::path(output_dir) / name).string();
}

TrainState load_checkpoint(const std::string& dir, Module& model, Optimizer* optimizer, const NamedParameters& params) {
  TrainState s = TrainState::read(dir);
  LoadReport rep;
  LoadOptions lo;
  lo.strict = true;
  load_model(dir, model, rep, lo);
  if (optimizer) {
    SafetensorsFile of = SafetensorsFile::open((fs::path(dir) / "optimizer.safetensors").string());
    OptimizerCounters c;
    c.step = s.optimizer_step;
    optimizer->load_state(of.load_all(), c);
  }
  if (s.micro_batch_index > 0) {
    SafetensorsFile gf = SafetensorsFile::open((fs::path(dir) / "partial_gradients.safetensors").string());
    for (const auto& [n, v] : params) {
      Variable handle = v;  // a handle: shares the parameter's gradient
      if (gf.contains(n)) handle.mutable_grad() = gf.load(n);
    }
  }
  return s;
}

}  // namespace bertrain
