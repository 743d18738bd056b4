// checkpoint.cpp: Module weights <-> safetensors with Hugging Face names, the way transformers'
// save_pretrained / from_pretrained treat BERT (tied decoder, LayerNorm.gamma/beta, base-model prefix).
#include "bertrain/io/checkpoint.h"

#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "bertrain/io/config.h"
#include "bertrain/io/safetensors.h"
#include "bertrain/io/tf_bert.h"
#include "bertrain/io/tf_checkpoint.h"
#include "bertrain/io/weights_file.h"

namespace bertrain {

namespace fs = std::filesystem;

namespace {

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }
bool ends_with(const std::string& s, const std::string& x) {
  return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
}

bool is_head_name(const std::string& n) {
  return starts_with(n, "bert.pooler.") || starts_with(n, "pooler.") || starts_with(n, "cls.") ||
         starts_with(n, "classifier.") || starts_with(n, "qa_outputs.");
}

// Buffers that transformers' checkpoints may carry but that are not parameters.
bool is_harmless_buffer(const std::string& n) {
  return ends_with(n, "embeddings.position_ids") || ends_with(n, "embeddings.token_type_ids");
}

// The parameters to write or fill: the first name of each distinct Variable, without the tied decoder.
std::vector<std::pair<std::string, Variable>> own_parameters(const Module& model, std::set<std::string>* tied) {
  std::vector<std::pair<std::string, Variable>> out;
  std::set<const VariableImpl*> seen;
  for (auto& [name, v] : model.named_parameters()) {
    if (name == kTiedDecoderWeight || !seen.insert(v.impl()).second) {
      if (tied) tied->insert(name);
      continue;
    }
    out.emplace_back(name, v);
  }
  return out;
}

}  // namespace

bool LoadReport::only_heads_missing() const {
  for (const auto& n : missing)
    if (!is_head_name(n)) return false;
  return true;
}

std::string LoadReport::summary() const {
  std::ostringstream os;
  os << loaded.size() << " tensors loaded";
  auto list = [&](const char* what, const std::vector<std::string>& v) {
    if (v.empty()) return;
    os << "\n" << v.size() << " " << what << ":";
    for (const auto& n : v) os << "\n  " << n;
  };
  list("missing (kept their initialisation)", missing);
  list("unexpected (ignored)", unexpected);
  list("ignored on purpose", ignored);
  list("renamed", renamed);
  list("converted", converted);
  if (!optimizer_state.empty())
    os << "\n" << optimizer_state.size() << " optimizer variables skipped (TF adam_m/adam_v slots, global_step, ...)";
  list("warnings", warnings);
  return os.str();
}

std::string default_config_file(const std::string& checkpoint) {
  std::error_code ec;
  fs::path dir = fs::is_directory(checkpoint, ec) ? fs::path(checkpoint) : fs::path(checkpoint).parent_path();
  if (dir.empty()) dir = ".";
  const fs::path hf = dir / kConfigFileName, google = dir / "bert_config.json";
  if (!fs::exists(hf, ec) && fs::exists(google, ec)) return google.string();
  return hf.string();
}

namespace {

// "a, b, c (and 7 more)" on one line: errors are one line, and tensor names come from the file.
std::string names_line(const std::vector<std::string>& names, size_t max_names = 10) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < max_names; ++i) out += (i ? ", " : "") + printable(names[i], 120);
  if (names.size() > max_names) out += " (and " + std::to_string(names.size() - max_names) + " more)";
  return out;
}

}  // namespace

std::string resolve_weights_file(const std::string& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return path;
  BERTRAIN_CHECK(fs::is_directory(path, ec), "checkpoint '", path, "' does not exist");
  // model.safetensors first, as transformers' from_pretrained prefers it when a directory holds both.
  for (const char* name : {kWeightsFileName, kTorchWeightsFileName}) {
    fs::path w = fs::path(path) / name;
    if (fs::is_regular_file(w, ec)) return w.string();
  }
  throw Error("checkpoint directory '" + path + "' has no " + kWeightsFileName + " and no " + kTorchWeightsFileName);
}

void save_model(const std::string& path, const Module& model, const std::optional<BertConfig>& config) {
  std::string weights = path;
  if (!ends_with(path, ".safetensors")) {
    std::error_code ec;
    fs::create_directories(path, ec);
    BERTRAIN_CHECK(!ec && fs::is_directory(path), "cannot create checkpoint directory '", path, "': ", ec.message());
    weights = (fs::path(path) / kWeightsFileName).string();
    if (config) save_bert_config((fs::path(path) / kConfigFileName).string(), *config);
  } else if (config) {
    save_bert_config((fs::path(path).parent_path() / kConfigFileName).string(), *config);
  }
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (auto& [name, v] : own_parameters(model, nullptr)) tensors.emplace_back(name, v.value());
  save_safetensors(weights, tensors, {{"format", "pt"}});
}

namespace {

// One tensor of the file being loaded, in Hugging Face terms: `name` is what the model's matching sees, `file_name`
// what messages call it (the TF variable for a TF checkpoint), `shape` the (out, in) shape.
struct SourceTensor {
  std::string name, file_name, dtype, file_shape;  // file_shape: as the file states it, for messages
  Shape shape;
  bool is_float = false;
  std::function<Tensor(DType)> load;
};

struct Source {
  std::string where;  // "checkpoint 'FILE'" or "TF checkpoint 'PREFIX'"
  std::vector<SourceTensor> tensors;
  std::vector<std::string> optimizer;  // TF optimizer variables, skipped
};

// A safetensors file or a PyTorch checkpoint (WeightsFile dispatches on the content).
Source weights_source(const std::string& path) {
  Source src;
  const std::string file_path = resolve_weights_file(path);
  auto file = std::make_shared<WeightsFile>(WeightsFile::open(file_path));
  src.where = "checkpoint '" + file_path + "'";
  for (const auto& n : file->names()) {
    const WeightsTensorInfo info = file->info(n);
    src.tensors.push_back({n, n, info.dtype, info.shape.str(), info.shape, is_float_dtype_name(info.dtype),
                           [file, n](DType dt) { return file->load(n, dt); }});
  }
  return src;
}

// Every model variable is read (CRC-checked) and transposed before anything is assigned: the TF file has no
// layout the model can use directly, and a corrupt tensor must stop the load before the model changes.
Source tf_source(const std::string& prefix) {
  Source src;
  TfCheckpointReader r = TfCheckpointReader::open(prefix);
  src.where = "TF checkpoint '" + r.prefix() + "'";
  TfMappingReport rep;
  for (auto& t : read_tf_bert_weights(r, nullptr, "", rep)) {
    Tensor value = t.value;
    std::string file_shape = "[";
    for (int i = 0; i < value.dim(); ++i) file_shape += (i ? ", " : "") + std::to_string(value.size(t.transposed ? value.dim() - 1 - i : i));
    file_shape += "]";
    if (t.transposed) file_shape += " (transposed: " + value.shape().str() + ")";
    src.tensors.push_back({t.hf_name, t.tf_name, safetensors_dtype_name(value.dtype()), file_shape, value.shape(),
                           dtype_is_float(value.dtype()), [value](DType dt) {
                             if (value.dtype() == dt) return value;
                             Tensor c = Tensor::empty(value.shape(), dt);
                             c.copy_from(value);
                             return c;
                           }});
  }
  src.optimizer = rep.optimizer;
  for (const auto* names : {&rep.unexpected, &rep.not_convertible})
    for (const auto& n : *names) src.tensors.push_back({n, n, "?", "", Shape{}, false, nullptr});
  return src;
}

bool same_values(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

}  // namespace

void load_model(const std::string& path, Module& model, LoadReport& report, const LoadOptions& options) {
  report = LoadReport{};
  const auto tf_prefix = find_tf_checkpoint(path);
  // The one place a checkpoint's format is chosen: TF (a prefix, or a directory holding one), else the weights
  // file of resolve_weights_file(): model.safetensors or pytorch_model.bin, told apart by their content.
  Source src = tf_prefix ? tf_source(*tf_prefix) : weights_source(path);
  const std::string& where = src.where;
  report.optimizer_state = src.optimizer;

  std::set<std::string> tied;
  auto params = own_parameters(model, &tied);
  std::map<std::string, size_t> index;
  bool model_prefixed = false;
  for (size_t i = 0; i < params.size(); ++i) {
    index[params[i].first] = i;
    if (starts_with(params[i].first, "bert.")) model_prefixed = true;
  }
  bool file_prefixed = false;
  std::map<std::string, const SourceTensor*> by_name;
  for (const auto& t : src.tensors) {
    if (starts_with(t.name, "bert.")) file_prefixed = true;
    by_name[t.name] = &t;
  }

  // File name -> model name: LayerNorm.gamma/beta aliases, then the base-model prefix (transformers'
  // _fix_key and base_model_prefix handling).
  auto map_name = [&](const std::string& n) {
    std::string m = n;
    if (ends_with(m, "LayerNorm.gamma")) m = m.substr(0, m.size() - 5) + "weight";
    else if (ends_with(m, "LayerNorm.beta")) m = m.substr(0, m.size() - 4) + "bias";
    if (model_prefixed && !file_prefixed && !starts_with(m, "cls.") && !starts_with(m, "classifier.") &&
        !starts_with(m, "qa_outputs."))
      m = "bert." + m;
    else if (!model_prefixed && file_prefixed && starts_with(m, "bert."))
      m = m.substr(5);
    return m;
  };

  struct Assignment {
    const SourceTensor* src;
    size_t param;
  };
  std::vector<Assignment> plan;
  std::map<size_t, std::string> assigned_from;
  auto word_emb = index.find(model_prefixed ? "bert.embeddings.word_embeddings.weight" : "embeddings.word_embeddings.weight");
  const SourceTensor* file_bias = by_name.count("cls.predictions.bias") ? by_name["cls.predictions.bias"] : nullptr;
  const SourceTensor* file_word = nullptr;
  for (const char* w : {"bert.embeddings.word_embeddings.weight", "embeddings.word_embeddings.weight"})
    if (by_name.count(w)) file_word = by_name[w];

  for (const auto& st : src.tensors) {
    const std::string& n = st.name;
    std::string m = map_name(n);
    if (is_harmless_buffer(m)) {
      report.ignored.push_back(n);
      continue;
    }
    if (m == kTiedDecoderWeight) {
      // Tied to the word embeddings: accept it when its shape agrees, never load it; report a decoder whose
      // values differ (the model uses the word embeddings: CASES.md C33).
      if (word_emb != index.end()) {
        const Shape& ws = params[word_emb->second].second.shape();
        BERTRAIN_CHECK(st.shape == ws, where, ", tensor '", st.file_name, "': shape ", st.shape.str(),
                       " differs from the word embeddings ", ws.str(), " it is tied to");
      }
      if (file_word && st.is_float && file_word->is_float &&
          !same_values(st.load(DType::f32), file_word->load(DType::f32)))
        report.warnings.push_back(st.file_name + " differs from " + file_word->file_name +
                                  ": the model ties the decoder to the word embeddings and uses those");
      report.ignored.push_back(n);
      continue;
    }
    if (m == "cls.predictions.decoder.bias") {
      if (file_bias) {
        BERTRAIN_CHECK(st.shape == file_bias->shape, where, ", tensor '", st.file_name, "': shape ", st.shape.str(),
                       " differs from cls.predictions.bias ", file_bias->shape.str(), " it is tied to");
        // One bias, added once (CASES.md C33): two different values make the file ambiguous.
        BERTRAIN_CHECK(!st.is_float || !file_bias->is_float ||
                           same_values(st.load(DType::f32), file_bias->load(DType::f32)),
                       where, ": tensors 'cls.predictions.bias' and '", st.file_name,
                       "' differ; the masked-LM bias is one tensor (added once), so the checkpoint is ambiguous");
        report.ignored.push_back(n);
        continue;
      }
      m = "cls.predictions.bias";
    }
    auto it = index.find(m);
    if (it == index.end()) {
      if (tied.count(m)) report.ignored.push_back(n);
      else report.unexpected.push_back(st.file_name);
      continue;
    }
    const auto& [pname, var] = params[it->second];
    BERTRAIN_CHECK(!assigned_from.count(it->second), where, ": tensors '", assigned_from[it->second], "' and '",
                   st.file_name, "' both map to parameter '", pname, "'");
    assigned_from[it->second] = st.file_name;
    BERTRAIN_CHECK(st.shape == var.shape(), where, ", tensor '", st.file_name, "': shape mismatch: the file has ",
                   st.file_shape, ", the model's parameter '", pname, "' is ", var.shape().str(),
                   " (from its config)");
    BERTRAIN_CHECK(st.is_float || !dtype_is_float(var.dtype()), where, ", tensor '", st.file_name, "': dtype ",
                   st.dtype, " cannot be loaded into floating-point parameter '", pname, "'");
    if (n != pname) report.renamed.push_back(st.file_name + " -> " + pname);
    if (st.dtype != safetensors_dtype_name(var.dtype()))
      report.converted.push_back(pname + ": " + st.dtype + " -> " + dtype_name(var.dtype()));
    plan.push_back({&st, it->second});
  }
  for (size_t i = 0; i < params.size(); ++i)
    if (!assigned_from.count(i)) report.missing.push_back(params[i].first);

  if (options.strict) {
    BERTRAIN_CHECK(report.missing.empty() && report.unexpected.empty(), where, " does not match the model exactly (",
                   report.missing.size(), " missing: ", names_line(report.missing), "; ", report.unexpected.size(),
                   " unexpected: ", names_line(report.unexpected), ")");
  }
  if (options.require_backbone && !report.only_heads_missing()) {
    std::string first;
    for (const auto& n : report.missing)
      if (!is_head_name(n)) {
        first = n;
        break;
      }
    throw Error(where + " lacks parameter '" + first + "' of the model (" + std::to_string(report.missing.size()) +
                " missing: " + names_line(report.missing) + "; " + std::to_string(report.unexpected.size()) +
                " unexpected: " + names_line(report.unexpected) + "): is it a checkpoint of another model?");
  }

  NoGradGuard no_grad;
  for (const auto& a : plan) {
    // Copy into the existing storage: views of a parameter held elsewhere stay valid.
    Tensor dst = params[a.param].second.value();
    dst.copy_from(a.src->load(dst.dtype()));
    report.loaded.push_back(params[a.param].first);
  }
}

}  // namespace bertrain
