// tf_bert.cpp: google-research/bert variable names <-> Hugging Face parameter names, and `bertrain convert`.
#include "bertrain/io/tf_bert.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "bertrain/core/error.h"
#include "bertrain/io/checkpoint.h"
#include "bertrain/io/config.h"
#include "bertrain/io/safetensors.h"
#include "bertrain/io/weights_file.h"
#include "io/file_util.h"

namespace bertrain {

namespace fs = std::filesystem;

namespace {

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }
bool ends_with(const std::string& s, const std::string& x) {
  return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t b = 0;
  for (;;) {
    size_t e = s.find(sep, b);
    out.push_back(s.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) return out;
    b = e + 1;
  }
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

bool all_digits(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

bool is_embedding(const std::string& s) {
  return s == "word_embeddings" || s == "position_embeddings" || s == "token_type_embeddings";
}

// The heads whose variables have fixed, unscoped or differently-shaped names (C33's table).
const std::map<std::string, std::string> kTfHeads = {
    {"output_weights", "classifier.weight"},
    {"output_bias", "classifier.bias"},
    {"cls/squad/output_weights", "qa_outputs.weight"},
    {"cls/squad/output_bias", "qa_outputs.bias"},
    {"cls/predictions/output_bias", "cls.predictions.bias"},
    {"cls/seq_relationship/output_weights", "cls.seq_relationship.weight"},
    {"cls/seq_relationship/output_bias", "cls.seq_relationship.bias"},
};

Tensor transpose2d(const Tensor& t) {
  BERTRAIN_ASSERT(t.dim() == 2, "transpose2d of ", t.desc());
  const int64_t r = t.size(0), c = t.size(1);
  Tensor out = Tensor::empty({c, r}, t.dtype());
  const size_t es = dtype_size(t.dtype());
  const char* src = static_cast<const char*>(t.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) std::memcpy(dst + (j * r + i) * es, src + (i * c + j) * es, es);
  return out;
}

std::string tf_shape_str(const Shape& s) {
  std::string out = "[";
  for (int i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  if (a.dtype() == b.dtype()) return std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
  Tensor c = Tensor::empty(b.shape(), a.dtype());
  c.copy_from(b);
  return std::memcmp(a.raw_data(), c.raw_data(), a.nbytes()) == 0;
}

}  // namespace

bool is_tf_optimizer_variable(const std::string& n) {
  if (n == "global_step" || n == "beta1_power" || n == "beta2_power" || n == "good_steps" || n == "loss_scale")
    return true;
  if (n.find("AdamWeightDecayOptimizer") != std::string::npos) return true;
  for (const char* slot : {"/adam_m", "/adam_v", "/Adam", "/Adam_1", "/lamb_m", "/lamb_v", "/Momentum"})
    if (ends_with(n, slot)) return true;
  return false;
}

std::optional<TfNameMapping> tf_to_hf_name(const std::string& n) {
  if (auto it = kTfHeads.find(n); it != kTfHeads.end()) return TfNameMapping{it->second, false};
  if (!starts_with(n, "bert/") && !starts_with(n, "cls/predictions/transform/")) return std::nullopt;
  std::vector<std::string> parts = split(n, '/'), out;
  bool transpose = false;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& p = parts[i];
    const bool last = i + 1 == parts.size();
    if (p.empty()) return std::nullopt;
    if (starts_with(p, "layer_") && all_digits(p.substr(6))) {
      out.push_back("layer");
      out.push_back(p.substr(6));
    } else if (last && p == "kernel") {
      out.push_back("weight");
      transpose = true;
    } else if (last && p == "gamma") {
      out.push_back("weight");
    } else if (last && p == "beta") {
      out.push_back("bias");
    } else if (last && is_embedding(p)) {
      out.push_back(p);
      out.push_back("weight");
    } else {
      out.push_back(p);
    }
  }
  return TfNameMapping{join(out, "."), transpose};
}

std::optional<TfNameMapping> hf_to_tf_name(const std::string& hf) {
  for (const auto& [tf, h] : kTfHeads)
    if (h == hf) return TfNameMapping{tf, false};
  std::string n = hf;
  // A checkpoint saved from BertModel has no "bert." prefix (transformers' base_model_prefix handling).
  if (starts_with(n, "embeddings.") || starts_with(n, "encoder.") || starts_with(n, "pooler.")) n = "bert." + n;
  if (!starts_with(n, "bert.") && !starts_with(n, "cls.predictions.transform.")) return std::nullopt;
  if (ends_with(n, "position_ids") || ends_with(n, "token_type_ids")) return std::nullopt;
  std::vector<std::string> parts = split(n, '.'), out;
  if (parts.size() < 2) return std::nullopt;
  const std::string leaf = parts.back(), parent = parts[parts.size() - 2];
  bool transpose = false;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (parts[i] == "layer" && i + 1 < parts.size() - 1 && all_digits(parts[i + 1])) {
      out.push_back("layer_" + parts[i + 1]);
      ++i;
    } else {
      if (parts[i].empty()) return std::nullopt;
      out.push_back(parts[i]);
    }
  }
  if (parent == "LayerNorm") {
    if (leaf == "weight" || leaf == "gamma") out.push_back("gamma");
    else if (leaf == "bias" || leaf == "beta") out.push_back("beta");
    else return std::nullopt;
  } else if (is_embedding(parent)) {
    if (leaf != "weight") return std::nullopt;  // the embedding matrix is the variable itself
  } else if (leaf == "weight") {
    out.push_back("kernel");
    transpose = true;
  } else if (leaf == "bias") {
    out.push_back("bias");
  } else {
    return std::nullopt;
  }
  return TfNameMapping{join(out, "/"), transpose};
}

std::optional<Shape> bert_parameter_shape(const std::string& hf, const BertConfig& c, int64_t classifier_rows) {
  const int64_t h = c.hidden_size, inter = c.intermediate_size, v = c.vocab_size;
  static const std::map<std::string, int> kFixed = {
      {"bert.embeddings.word_embeddings.weight", 0}, {"bert.embeddings.position_embeddings.weight", 1},
      {"bert.embeddings.token_type_embeddings.weight", 2}, {"bert.embeddings.LayerNorm.weight", 3},
      {"bert.embeddings.LayerNorm.bias", 3}, {"bert.pooler.dense.weight", 4}, {"bert.pooler.dense.bias", 3},
      {"cls.predictions.bias", 5}, {"cls.predictions.transform.dense.weight", 4},
      {"cls.predictions.transform.dense.bias", 3}, {"cls.predictions.transform.LayerNorm.weight", 3},
      {"cls.predictions.transform.LayerNorm.bias", 3}, {"cls.seq_relationship.weight", 6},
      {"cls.seq_relationship.bias", 7}, {"qa_outputs.weight", 6}, {"qa_outputs.bias", 7},
      {"classifier.weight", 8}, {"classifier.bias", 9}};
  if (auto it = kFixed.find(hf); it != kFixed.end()) {
    switch (it->second) {
      case 0: return Shape{v, h};
      case 1: return Shape{c.max_position_embeddings, h};
      case 2: return Shape{c.type_vocab_size, h};
      case 3: return Shape{h};
      case 4: return Shape{h, h};
      case 5: return Shape{v};
      case 6: return Shape{2, h};
      case 7: return Shape{2};
      case 8: return Shape{classifier_rows, h};
      default: return Shape{classifier_rows};
    }
  }
  const std::string pre = "bert.encoder.layer.";
  if (!starts_with(hf, pre)) return std::nullopt;
  const size_t dot = hf.find('.', pre.size());
  if (dot == std::string::npos) return std::nullopt;
  const std::string idx = hf.substr(pre.size(), dot - pre.size());
  if (!all_digits(idx) || std::stoll(idx) >= c.num_hidden_layers) return std::nullopt;
  const std::string rest = hf.substr(dot + 1);
  static const std::map<std::string, int> kLayer = {
      {"attention.self.query.weight", 0}, {"attention.self.key.weight", 0}, {"attention.self.value.weight", 0},
      {"attention.output.dense.weight", 0}, {"attention.self.query.bias", 1}, {"attention.self.key.bias", 1},
      {"attention.self.value.bias", 1}, {"attention.output.dense.bias", 1},
      {"attention.output.LayerNorm.weight", 1}, {"attention.output.LayerNorm.bias", 1},
      {"intermediate.dense.weight", 2}, {"intermediate.dense.bias", 3}, {"output.dense.weight", 4},
      {"output.dense.bias", 1}, {"output.LayerNorm.weight", 1}, {"output.LayerNorm.bias", 1}};
  auto it = kLayer.find(rest);
  if (it == kLayer.end()) return std::nullopt;
  switch (it->second) {
    case 0: return Shape{h, h};
    case 1: return Shape{h};
    case 2: return Shape{inter, h};
    case 3: return Shape{inter};
    default: return Shape{h, inter};
  }
}

namespace {

// The encoder-layer parameters of BertModel (Hugging Face names after "bert.encoder.layer.N.").
const char* const kLayerParameters[] = {
    "attention.self.query.weight",       "attention.self.query.bias",        "attention.self.key.weight",
    "attention.self.key.bias",           "attention.self.value.weight",      "attention.self.value.bias",
    "attention.output.dense.weight",     "attention.output.dense.bias",      "attention.output.LayerNorm.weight",
    "attention.output.LayerNorm.bias",   "intermediate.dense.weight",        "intermediate.dense.bias",
    "output.dense.weight",               "output.dense.bias",                "output.LayerNorm.weight",
    "output.LayerNorm.bias"};

// The layer index of a "bert.encoder.layer.N...." name, or -1.
int64_t encoder_layer_of(const std::string& hf) {
  const std::string pre = "bert.encoder.layer.";
  if (!starts_with(hf, pre)) return -1;
  const size_t dot = hf.find('.', pre.size());
  const std::string idx = hf.substr(pre.size(), dot == std::string::npos ? std::string::npos : dot - pre.size());
  return all_digits(idx) && idx.size() < 10 ? std::stoll(idx) : -1;
}

// A config whose num_hidden_layers disagrees with the file: every shape matches, so only the layer count tells.
// `present` holds the file's tensors in Hugging Face names ("bert." prefixed); `display` turns such a name into
// the file's own spelling for the message. Throws one line naming `where`, the tensor and `config_source`.
void check_layer_count(const std::set<std::string>& present, const BertConfig& cfg, const std::string& where,
                       const std::string& config_source, const std::function<std::string(const std::string&)>& display) {
  for (const std::string& n : present) {
    const int64_t l = encoder_layer_of(n);
    BERTRAIN_CHECK(l < cfg.num_hidden_layers, where, ", tensor '", display(n), "': layer ", l, " is beyond ",
                   config_source, ", which has num_hidden_layers ", cfg.num_hidden_layers);
  }
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l)
    for (const char* p : kLayerParameters) {
      const std::string n = "bert.encoder.layer." + std::to_string(l) + "." + p;
      BERTRAIN_CHECK(present.count(n), where, " has no tensor '", display(n), "', which ", config_source,
                     " needs (num_hidden_layers ", cfg.num_hidden_layers, ")");
    }
}

}  // namespace

std::string TfMappingReport::summary() const {
  std::ostringstream os;
  os << mapped.size() << " tensors converted";
  if (!optimizer.empty())
    os << "; " << optimizer.size() << " optimizer variables skipped (adam_m/adam_v slots, global_step, ...: not weights)";
  if (!tied.empty()) os << "; " << tied.size() << " tied tensors left out (" << join(tied, ", ") << ")";
  if (!not_convertible.empty())
    os << "\n" << not_convertible.size() << " tensors not convertible (left out): " << join(not_convertible, ", ");
  if (!unexpected.empty())
    os << "\n" << unexpected.size() << " tensors that are no BERT parameter (left out): " << join(unexpected, ", ");
  return os.str();
}

std::vector<TfBertTensor> read_tf_bert_weights(const TfCheckpointReader& r, const BertConfig* config,
                                               const std::string& config_source, TfMappingReport& report) {
  report = TfMappingReport{};
  const std::string where = "TF checkpoint '" + r.prefix() + "'";
  // The classifier's label count is the file's own (run_classifier.py's output_weights [num_labels, H]).
  int64_t classifier_rows = -1;
  if (r.contains("output_weights") && !r.info("output_weights").shape.empty())
    classifier_rows = r.info("output_weights").shape[0];
  else if (r.contains("output_bias") && !r.info("output_bias").shape.empty())
    classifier_rows = r.info("output_bias").shape[0];
  std::vector<TfBertTensor> out;
  if (config) {
    std::set<std::string> present;
    std::map<std::string, std::string> tf_of;
    for (const TfTensorInfo& e : r.entries())
      if (auto m = tf_to_hf_name(e.name); m && !is_tf_optimizer_variable(e.name)) {
        present.insert(m->name);
        tf_of[m->name] = e.name;
      }
    check_layer_count(present, *config, where, config_source, [&](const std::string& hf) {
      auto it = tf_of.find(hf);
      if (it != tf_of.end()) return it->second;
      auto m = hf_to_tf_name(hf);
      return m ? m->name : hf;
    });
  }
  for (const TfTensorInfo& e : r.entries()) {
    if (is_tf_optimizer_variable(e.name)) {
      report.optimizer.push_back(e.name);
      continue;
    }
    auto m = tf_to_hf_name(e.name);
    if (!m) {
      (tf_dtype_to_bertrain(e.dtype) ? report.unexpected : report.not_convertible).push_back(e.name);
      continue;
    }
    BERTRAIN_CHECK(tf_dtype_to_bertrain(e.dtype).has_value(), where, ", tensor '", e.name, "': ",
                   tf_dtype_name(e.dtype), " cannot be a model weight");
    if (config) {
      const auto want = bert_parameter_shape(m->name, *config, classifier_rows);
      if (!want) {
        report.unexpected.push_back(e.name);
        continue;
      }
      Shape tf_want = *want;
      if (m->transpose && want->size() == 2) tf_want = Shape{(*want)[1], (*want)[0]};
      BERTRAIN_CHECK(Shape(e.shape) == tf_want, where, ", tensor '", e.name, "': shape ", e.shape_str(),
                     " disagrees with ", config_source, ", which needs ", tf_shape_str(tf_want));
    }
    Tensor t = r.load(e.name);
    if (m->transpose) {
      BERTRAIN_CHECK(t.dim() == 2, where, ", tensor '", e.name, "': a kernel must be 2-D, got ", e.shape_str());
      t = transpose2d(t);
    }
    report.mapped.push_back(e.name + " -> " + m->name + (m->transpose ? ", transposed" : ""));
    out.push_back({m->name, e.name, m->transpose, std::move(t)});
  }
  return out;
}

std::vector<std::pair<std::string, Tensor>> hf_to_tf_tensors(const std::vector<std::pair<std::string, Tensor>>& hf,
                                                             const std::string& source, TfMappingReport& report) {
  report = TfMappingReport{};
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [n, t] : hf) by_name[n] = &t;
  auto find = [&](std::initializer_list<const char*> names) -> const Tensor* {
    for (const char* n : names)
      if (auto it = by_name.find(n); it != by_name.end()) return it->second;
    return nullptr;
  };
  const Tensor* word = find({"bert.embeddings.word_embeddings.weight", "embeddings.word_embeddings.weight"});
  const Tensor* bias = find({"cls.predictions.bias"});
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [n, t] : hf) {
    if (n == kTiedDecoderWeight) {
      // google-research/bert's head multiplies by the word embeddings: an untied decoder has nowhere to go.
      BERTRAIN_CHECK(word && same_bytes(*word, t), source, ": tensor '", n,
                     "' differs from bert.embeddings.word_embeddings.weight; google-research/bert's masked-LM "
                     "decoder is tied to the word embeddings, so this checkpoint cannot be written as one");
      report.tied.push_back(n);
      continue;
    }
    std::string name = n;
    if (n == "cls.predictions.decoder.bias") {
      if (bias) {
        BERTRAIN_CHECK(same_bytes(*bias, t), source, ": tensors 'cls.predictions.bias' and "
                       "'cls.predictions.decoder.bias' differ; they are one bias (added once), so the checkpoint is "
                       "ambiguous");
        report.tied.push_back(n);
        continue;
      }
      name = "cls.predictions.bias";
    }
    auto m = hf_to_tf_name(name);
    if (!m) {
      if (ends_with(n, "position_ids") || ends_with(n, "token_type_ids")) continue;
      report.unexpected.push_back(n);
      continue;
    }
    BERTRAIN_CHECK(!m->transpose || t.dim() == 2, source, ": tensor '", n, "' must be 2-D, got ", t.shape().str());
    report.mapped.push_back(n + " -> " + m->name + (m->transpose ? ", transposed" : ""));
    out.emplace_back(m->name, m->transpose ? transpose2d(t) : t);
  }
  return out;
}

std::optional<std::string> find_tf_checkpoint(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    if (fs::exists(fs::path(path) / kWeightsFileName, ec) || fs::exists(fs::path(path) / kTorchWeightsFileName, ec))
      return std::nullopt;
    std::vector<std::string> found;
    for (const auto& de : fs::directory_iterator(path, ec))
      if (de.is_regular_file() && de.path().extension() == ".index") found.push_back(de.path().string());
    std::sort(found.begin(), found.end());
    std::string names;
    for (const auto& f : found) names += (names.empty() ? "" : ", ") + fs::path(tf_checkpoint_prefix(f)).filename().string();
    // A training run's directory: its `checkpoint` file names the latest (tf.train.latest_checkpoint), and takes
    // precedence over a lone *.index, as in TF, which never falls back to the files it finds.
    if (const std::optional<std::string> latest = read_tf_checkpoint_state(path)) {
      if (is_tf_checkpoint(*latest)) return tf_checkpoint_prefix(*latest);
      // Gone. A directory copied elsewhere keeps TF1's absolute paths (or Windows ones): the hint names the copy.
      const size_t slash = latest->find_last_of("/\\");
      const std::string base = slash == std::string::npos ? *latest : latest->substr(slash + 1);
      const std::string moved = (fs::path(path) / base).string();
      std::string hint;
      if (!base.empty() && is_tf_checkpoint(moved)) {
        hint = " (was the directory moved? '" + printable(tf_checkpoint_prefix(moved)) + "' exists)";
      } else if (!found.empty()) {
        hint = " (the directory holds " + printable(names) + ": give one prefix)";
      }
      BERTRAIN_CHECK(false, (fs::path(path) / "checkpoint").string(), ": model_checkpoint_path names '",
                     printable(*latest), "', and '", printable(tf_checkpoint_prefix(*latest)), ".index' does not exist",
                     hint);
    }
    if (found.empty()) return std::nullopt;
    // Several checkpoints and no `checkpoint` file (model.ckpt-1000, model.ckpt-2000, ...): which one is meant is
    // the user's call, as with google-research/bert's --init_checkpoint, which takes a prefix.
    BERTRAIN_CHECK(found.size() == 1, "checkpoint directory '", path, "' holds ", found.size(), " TF checkpoints (",
                   names, ") and no ", kWeightsFileName, ": give one prefix, such as '",
                   tf_checkpoint_prefix(found.back()), "'");
    return tf_checkpoint_prefix(found[0]);
  }
  if (is_tf_checkpoint(path)) return tf_checkpoint_prefix(path);
  return std::nullopt;
}

namespace {

// The config and vocab that sit beside a checkpoint (Google's zips: bert_config.json + vocab.txt).
std::string beside(const std::string& input, const char* name) {
  std::error_code ec;
  fs::path dir = fs::is_directory(input, ec) ? fs::path(input) : fs::path(input).parent_path();
  if (dir.empty()) dir = ".";
  return (dir / name).string();
}

std::string pick_config(const std::string& input, const ConvertOptions& o, std::initializer_list<const char*> names) {
  if (!o.bert_config_file.empty()) return o.bert_config_file;
  std::error_code ec;
  for (const char* n : names) {
    std::string p = beside(input, n);
    if (fs::is_regular_file(p, ec)) return p;
  }
  throw Error("convert: no config beside '" + input + "' (looked for " + beside(input, *names.begin()) +
              "): give --bert_config_file");
}

std::string pick_vocab(const std::string& input, const ConvertOptions& o) {
  if (!o.vocab_file.empty()) {
    std::error_code ec;
    BERTRAIN_CHECK(fs::is_regular_file(o.vocab_file, ec), "convert: vocab file '", o.vocab_file, "' does not exist");
    return o.vocab_file;
  }
  std::error_code ec;
  std::string p = beside(input, "vocab.txt");
  return fs::is_regular_file(p, ec) ? p : std::string();
}

void make_dir(const std::string& out) {
  std::error_code ec;
  fs::create_directories(out, ec);
  BERTRAIN_CHECK(!ec && fs::is_directory(out, ec), "convert: cannot create output directory '", out, "'");
}

}  // namespace

namespace {

bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// A state dict as safetensors holds it: the tied MLM decoder weight and bias left out when they equal the word
// embeddings and cls.predictions.bias (transformers' save_pretrained drops shared tensors the same way; safetensors
// has no shared storage), a decoder bias without cls.predictions.bias renamed to it; everything else as it is.
std::vector<std::pair<std::string, Tensor>> safetensors_tensors(const std::vector<std::pair<std::string, Tensor>>& hf,
                                                                const std::string& source, TfMappingReport& report) {
  const Tensor* word = nullptr;
  const Tensor* bias = nullptr;
  for (const auto& [n, t] : hf) {
    if (n == "bert.embeddings.word_embeddings.weight" || n == "embeddings.word_embeddings.weight") word = &t;
    if (n == "cls.predictions.bias") bias = &t;
  }
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [n, t] : hf) {
    if (n == kTiedDecoderWeight && word && same_tensor(t, *word)) {
      report.tied.push_back(n);
      continue;
    }
    if (n == "cls.predictions.decoder.bias") {
      if (!bias) {
        out.emplace_back("cls.predictions.bias", t);
        report.mapped.push_back(n + " -> cls.predictions.bias");
        continue;
      }
      BERTRAIN_CHECK(same_tensor(t, *bias), source, ": tensors 'cls.predictions.bias' and "
                     "'cls.predictions.decoder.bias' differ; they are one bias (added once), so the checkpoint is "
                     "ambiguous");
      report.tied.push_back(n);
      continue;
    }
    out.emplace_back(n, t);
    report.mapped.push_back(n);
  }
  return out;
}

}  // namespace

ConvertResult convert_checkpoint(const std::string& input, const std::string& output, const ConvertOptions& o) {
  ConvertResult res;
  BERTRAIN_CHECK(!output.empty(), "convert: --output is required");
  if (auto prefix = find_tf_checkpoint(input)) {
    // TF -> bertrain / Hugging Face.
    const std::string cfg_path = pick_config(*prefix, o, {"bert_config.json", "config.json"});
    BertConfig cfg = load_bert_config(cfg_path);
    const std::string vocab = pick_vocab(*prefix, o);
    TfCheckpointReader r = TfCheckpointReader::open(*prefix);
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (auto& t : read_tf_bert_weights(r, &cfg, "config '" + cfg_path + "'", res.report))
      tensors.emplace_back(t.hf_name, std::move(t.value));
    bool has_word = false;
    for (const auto& [n, t] : tensors) {
      if (n == "bert.embeddings.word_embeddings.weight") has_word = true;
      if (n == "classifier.weight") {
        BERTRAIN_CHECK(cfg.id2label.empty() || static_cast<int64_t>(cfg.id2label.size()) == t.size(0), "TF checkpoint '",
                       r.prefix(), "': output_weights has ", t.size(0), " rows but config '", cfg_path, "' names ",
                       cfg.id2label.size(), " labels");
        cfg.num_labels = t.size(0);
      }
    }
    BERTRAIN_CHECK(has_word, "TF checkpoint '", r.prefix(), "' has no bert/embeddings/word_embeddings: not a "
                   "google-research/bert checkpoint");
    make_dir(output);
    const fs::path out(output);
    save_safetensors((out / kWeightsFileName).string(), tensors, {{"format", "pt"}});
    save_bert_config((out / kConfigFileName).string(), cfg);
    res.written = {(out / kConfigFileName).string(), (out / kWeightsFileName).string()};
    if (!vocab.empty()) {
      write_text_atomic((out / "vocab.txt").string(), read_text_file(vocab));
      res.written.push_back((out / "vocab.txt").string());
    }
    res.tensors = tensors.size();
    return res;
  }
  // bertrain / Hugging Face (model.safetensors or pytorch_model.bin) -> TF, or -> safetensors.
  const std::string weights = resolve_weights_file(input);
  const std::string cfg_path = pick_config(weights, o, {"config.json", "bert_config.json"});
  BertConfig cfg = load_bert_config(cfg_path);
  const std::string vocab = pick_vocab(weights, o);
  const WeightsFile f = WeightsFile::open(weights);
  const std::string format =
      !o.output_format.empty() ? o.output_format : f.format() == WeightsFile::Format::torch ? "safetensors" : "tf";
  BERTRAIN_CHECK(format == "tf" || format == "safetensors", "convert: --output_format is '", o.output_format,
                 "'; expected tf or safetensors");
  res.to_tf = format == "tf";
  int64_t classifier_rows = -1;
  if (f.contains("classifier.weight") && f.info("classifier.weight").shape.size() == 2)
    classifier_rows = f.info("classifier.weight").shape[0];
  std::set<std::string> present;
  std::map<std::string, std::string> file_name_of;
  for (const auto& n : f.names())
    if (auto m = hf_to_tf_name(n))
      if (auto back = tf_to_hf_name(m->name)) {
        present.insert(back->name);
        file_name_of[back->name] = n;
      }
  check_layer_count(present, cfg, "checkpoint '" + weights + "'", "config '" + cfg_path + "'", [&](const std::string& hf) {
    auto it = file_name_of.find(hf);
    return it != file_name_of.end() ? it->second : hf;
  });
  std::vector<std::pair<std::string, Tensor>> hf;
  for (const auto& n : f.names()) {
    const WeightsTensorInfo info = f.info(n);
    std::string canon = n;
    if (auto m = hf_to_tf_name(n)) {
      // Check against the config in Hugging Face terms (the name the model would give the parameter).
      auto back = tf_to_hf_name(m->name);
      canon = back ? back->name : n;
      auto want = bert_parameter_shape(canon, cfg, classifier_rows);
      BERTRAIN_CHECK(!want || info.shape == *want, "checkpoint '", weights, "', tensor '", n, "': shape ",
                     info.shape.str(), " disagrees with config '", cfg_path, "', which needs ", want->str());
    }
    // TF wants DT_FLOAT; safetensors keeps the file's dtype (F16 widened to F32: bertrain has no f16).
    hf.emplace_back(n, is_float_dtype_name(info.dtype) && res.to_tf ? f.load(n, DType::f32) : f.load(n));
  }
  if (!res.to_tf) {
    const std::string source = "checkpoint '" + weights + "'";
    std::vector<std::pair<std::string, Tensor>> out = safetensors_tensors(hf, source, res.report);
    bool has_word = false;
    for (const auto& [n, t] : out) has_word |= n == "bert.embeddings.word_embeddings.weight" || n == "embeddings.word_embeddings.weight";
    BERTRAIN_CHECK(has_word, source, " has no bert.embeddings.word_embeddings.weight: not a BERT checkpoint");
    if (classifier_rows > 0) {
      BERTRAIN_CHECK(cfg.id2label.empty() || static_cast<int64_t>(cfg.id2label.size()) == classifier_rows, source,
                     ": classifier.weight has ", classifier_rows, " rows but config '", cfg_path, "' names ",
                     cfg.id2label.size(), " labels");
      cfg.num_labels = classifier_rows;
    }
    make_dir(output);
    const fs::path outp(output);
    save_safetensors((outp / kWeightsFileName).string(), out, {{"format", "pt"}});
    save_bert_config((outp / kConfigFileName).string(), cfg);
    res.written = {(outp / kConfigFileName).string(), (outp / kWeightsFileName).string()};
    if (!vocab.empty()) {
      write_text_atomic((outp / "vocab.txt").string(), read_text_file(vocab));
      res.written.push_back((outp / "vocab.txt").string());
    }
    res.tensors = out.size();
    return res;
  }
  const std::string source = "checkpoint '" + weights + "'";
  auto tf = hf_to_tf_tensors(hf, source, res.report);
  bool has_word = false;
  for (auto& [n, t] : tf) {
    if (n == "bert/embeddings/word_embeddings") has_word = true;
    BERTRAIN_CHECK(dtype_is_float(t.dtype()), source, ": tensor '", n, "' is ", dtype_name(t.dtype()),
                   ", not a floating-point weight");
  }
  BERTRAIN_CHECK(has_word, source, " has no bert.embeddings.word_embeddings.weight: not a BERT checkpoint");
  make_dir(output);
  const fs::path out(output);
  const std::string prefix = (out / "bert_model.ckpt").string();
  save_tf_checkpoint(prefix, tf);
  write_text_atomic((out / "bert_config.json").string(), bert_config_to_google_json(cfg));
  res.written = {prefix + ".index", tf_data_file_name(prefix, 0, 1), (out / "bert_config.json").string()};
  if (!vocab.empty()) {
    write_text_atomic((out / "vocab.txt").string(), read_text_file(vocab));
    res.written.push_back((out / "vocab.txt").string());
  }
  res.tensors = tf.size();
  return res;
}

}  // namespace bertrain
