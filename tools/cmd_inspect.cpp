// cmd_inspect.cpp: `bertrain inspect PATH`: a checkpoint's config, parameter count and every tensor's name, dtype
// and shape (PATH: a directory with config.json + model.safetensors or pytorch_model.bin, a .safetensors, a
// pytorch_model.bin, or a TensorFlow checkpoint: its prefix, .index, or a directory holding one).
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <set>
#include <sstream>
#include <tuple>

#include "bertrain/io/checkpoint.h"
#include "bertrain/io/config.h"
#include "bertrain/io/safetensors.h"
#include "bertrain/io/tf_bert.h"
#include "bertrain/io/tf_checkpoint.h"
#include "bertrain/io/torch_checkpoint.h"
#include "bertrain/io/weights_file.h"
#include "commands.h"

namespace bertrain::cli {
namespace {

void print_config(std::ostream& out, const std::string& cfg_path) {
  const BertConfig c = load_bert_config(cfg_path);
  out << "config: " << cfg_path << "\n"
      << "  vocab_size: " << c.vocab_size << "\n"
      << "  hidden_size: " << c.hidden_size << "\n"
      << "  num_hidden_layers: " << c.num_hidden_layers << "\n"
      << "  num_attention_heads: " << c.num_attention_heads << "\n"
      << "  intermediate_size: " << c.intermediate_size << "\n"
      << "  hidden_act: " << c.hidden_act << "\n"
      << "  hidden_dropout_prob: " << c.hidden_dropout_prob << "\n"
      << "  attention_probs_dropout_prob: " << c.attention_probs_dropout_prob << "\n"
      << "  max_position_embeddings: " << c.max_position_embeddings << "\n"
      << "  type_vocab_size: " << c.type_vocab_size << "\n"
      << "  initializer_range: " << c.initializer_range << "\n"
      << "  layer_norm_eps: " << c.layer_norm_eps << "\n"
      << "  num_labels: " << c.num_labels << "\n";
  if (c.has_label_names()) {
    out << "  id2label:";
    for (int64_t i = 0; i < c.num_labels; ++i) out << " " << i << "=" << c.label_name(i);
    out << "\n";
  }
  for (const auto& [k, v] : c.extra) out << "  " << k << ": " << v << " (kept, not used)\n";
}

// A TF checkpoint: every entry with its dtype, shape and what bertrain makes of it.
void inspect_tf(std::ostream& out, const std::string& prefix) {
  const TfCheckpointReader r = TfCheckpointReader::open(prefix);
  out << "checkpoint: " << prefix << " (TensorFlow, " << r.num_shards() << " data shard"
      << (r.num_shards() > 1 ? "s" : "") << ", bundle version " << r.version_producer() << ")\n";
  std::error_code ec;
  const std::string cfg = default_config_file(prefix);
  if (std::filesystem::exists(cfg, ec)) print_config(out, cfg);
  else out << "config: none (no bert_config.json or config.json beside it)\n";
  size_t width = 4, model = 0, optimizer = 0, other = 0;
  int64_t params = 0;
  for (const auto& e : r.entries()) {
    width = std::max(width, e.name.size());
    if (is_tf_optimizer_variable(e.name)) ++optimizer;
    else if (tf_to_hf_name(e.name) && tf_dtype_to_bertrain(e.dtype)) ++model, params += e.numel();
    else ++other;
  }
  out << "tensors: " << r.entries().size() << " (" << model << " model variables, " << optimizer
      << " optimizer variables, " << other << " other)\nparameters: " << params << "\n";
  for (const auto& e : r.entries()) {
    std::string what;
    if (e.sliced) what = "  (slice of a partitioned variable: not readable)";
    else if (!tf_dtype_to_bertrain(e.dtype)) what = "  (not convertible)";
    else if (is_tf_optimizer_variable(e.name)) what = "  (optimizer, skipped)";
    else if (auto m = tf_to_hf_name(e.name)) what = "  -> " + m->name + (m->transpose ? " (transposed)" : "");
    const std::string dt = tf_dtype_name(e.dtype);
    out << e.name << std::string(width + 2 - e.name.size(), ' ') << dt
        << std::string(dt.size() < 12 ? 12 - dt.size() : 1, ' ') << e.shape_str() << what << "\n";
  }
}

int run_inspect(const std::string& path) {
  namespace fs = std::filesystem;
  std::ostringstream out;  // printed whole at the end: a bad checkpoint leaves stdout empty
  if (auto prefix = find_tf_checkpoint(path)) {
    inspect_tf(out, *prefix);
    std::cout << out.str();
    return 0;
  }
  std::error_code ec;
  out << "checkpoint: " << path << "\n";
  if (fs::is_directory(path, ec)) {
    fs::path cfg = fs::path(path) / kConfigFileName;
    if (fs::exists(cfg, ec)) print_config(out, cfg.string());
    else out << "config: none (no " << kConfigFileName << ")\n";
  }
  const std::string weights = resolve_weights_file(path);
  const WeightsFile f = WeightsFile::open(weights);
  out << "weights: " << weights << "\n";
  if (const SafetensorsFile* st = f.safetensors()) {
    out << "metadata:";
    if (st->metadata().empty()) out << " none";
    for (const auto& [k, v] : st->metadata()) out << " " << k << "=" << v;
    out << "\n";
  } else {
    const TorchCheckpoint* t = f.torch();
    out << "format: PyTorch zip (torch.save), records under '" << t->archive_name() << "/', version " << t->version()
        << "\n";
  }
  const auto names = f.names();
  int64_t params = 0;
  size_t width = 4;
  std::set<std::tuple<std::string, int64_t, int64_t>> counted;  // PyTorch: (storage, offset, elements) seen
  for (const auto& n : names) {
    width = std::max(width, n.size());
    const WeightsTensorInfo in = f.info(n);
    // Floating-point tensors only (position_ids is an integer buffer); tied weights sharing a storage count once.
    if (!is_float_dtype_name(in.dtype)) continue;
    if (const TorchCheckpoint* t = f.torch()) {
      const TorchTensorInfo& ti = t->info(n);
      if (!counted.emplace(ti.storage_key, ti.storage_offset, in.shape.numel()).second) continue;
    }
    params += in.shape.numel();
  }
  out << "tensors: " << names.size() << "\nparameters: " << params << "\n";
  for (const auto& n : names) {
    const WeightsTensorInfo in = f.info(n);
    out << n << std::string(width + 2 - n.size(), ' ') << in.dtype
        << std::string(6 - std::min<size_t>(in.dtype.size(), 5), ' ') << in.shape.str();
    if (const TorchCheckpoint* t = f.torch()) {
      const TorchTensorInfo& ti = t->info(n);
      if (!ti.contiguous() || ti.storage_offset != 0) out << "  (view: offset " << ti.storage_offset << ")";
      const auto shared = t->sharing_storage(n);
      if (!shared.empty()) out << "  (shares its storage with " << shared.front()
                               << (shared.size() > 1 ? " and " + std::to_string(shared.size() - 1) + " more" : "") << ")";
    }
    out << "\n";
  }
  std::cout << out.str();
  return 0;
}

Registrar reg{{"inspect", "print a checkpoint's config, parameter count and tensors (name, dtype, shape)",
               [](CLI::App& sub) {
                 auto path = std::make_shared<std::string>();
                 sub.add_option("path", *path,
                                "checkpoint directory (config.json + model.safetensors or pytorch_model.bin), "
                                ".safetensors file, pytorch_model.bin, or TF checkpoint prefix (dir/bert_model.ckpt)")
                     ->required();
                 return std::function<int()>([path] { return run_inspect(*path); });
               }}};

}  // namespace
}  // namespace bertrain::cli
