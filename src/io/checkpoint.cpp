// checkpoint.cpp: Module weights <-> safetensors with Hugging Face names, the way transformers'
// save_pretrained / from_pretrained treat BERT (tied decoder, LayerNorm.gamma/beta, base-model prefix).
#include "bertrain/io/checkpoint.h"

#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "bertrain/io/config.h"
#include "bertrain/io/safetensors.h"

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

bool is_float_st(const std::string& d) { return d == "F32" || d == "F64" || d == "BF16" || d == "F16"; }

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
  return os.str();
}

std::string resolve_weights_file(const std::string& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return path;
  BERTRAIN_CHECK(fs::is_directory(path, ec), "checkpoint '", path, "' does not exist");
  fs::path w = fs::path(path) / kWeightsFileName;
  if (fs::is_regular_file(w, ec)) return w.string();
  BERTRAIN_CHECK(!fs::exists(fs::path(path) / "pytorch_model.bin", ec), "checkpoint directory '", path,
                 "' has pytorch_model.bin but no ", kWeightsFileName,
                 ": bertrain reads safetensors only (convert with safetensors.torch.save_file)");
  throw Error("checkpoint directory '" + path + "' has no " + kWeightsFileName);
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

void load_model(const std::string& path, Module& model, LoadReport& report, const LoadOptions& options) {
  report = LoadReport{};
  const std::string file_path = resolve_weights_file(path);
  SafetensorsFile file = SafetensorsFile::open(file_path);
  const std::string where = "checkpoint '" + file_path + "'";

  std::set<std::string> tied;
  auto params = own_parameters(model, &tied);
  std::map<std::string, size_t> index;
  bool model_prefixed = false;
  for (size_t i = 0; i < params.size(); ++i) {
    index[params[i].first] = i;
    if (starts_with(params[i].first, "bert.")) model_prefixed = true;
  }
  const std::vector<std::string> names = file.names();
  bool file_prefixed = false;
  for (const auto& n : names)
    if (starts_with(n, "bert.")) file_prefixed = true;

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
    std::string file_name;
    size_t param;
  };
  std::vector<Assignment> plan;
  std::map<size_t, std::string> assigned_from;
  auto word_emb = index.find(model_prefixed ? "bert.embeddings.word_embeddings.weight" : "embeddings.word_embeddings.weight");
  const bool file_has_bias = file.contains("cls.predictions.bias");

  for (const auto& n : names) {
    const SafetensorsInfo& info = file.info(n);
    std::string m = map_name(n);
    if (is_harmless_buffer(m)) {
      report.ignored.push_back(n);
      continue;
    }
    if (m == kTiedDecoderWeight) {
      // Tied to the word embeddings: accept it when its shape agrees, never load it.
      if (word_emb != index.end()) {
        const Shape& ws = params[word_emb->second].second.shape();
        BERTRAIN_CHECK(info.shape == ws, where, ", tensor '", n, "': shape ", info.shape.str(),
                       " differs from the word embeddings ", ws.str(), " it is tied to");
      }
      report.ignored.push_back(n);
      continue;
    }
    if (m == "cls.predictions.decoder.bias") {
      if (file_has_bias) {
        const SafetensorsInfo& b = file.info("cls.predictions.bias");
        BERTRAIN_CHECK(info.shape == b.shape, where, ", tensor '", n, "': shape ", info.shape.str(),
                       " differs from cls.predictions.bias ", b.shape.str(), " it is tied to");
        report.ignored.push_back(n);
        continue;
      }
      m = "cls.predictions.bias";
    }
    auto it = index.find(m);
    if (it == index.end()) {
      if (tied.count(m)) report.ignored.push_back(n);
      else report.unexpected.push_back(n);
      continue;
    }
    const auto& [pname, var] = params[it->second];
    BERTRAIN_CHECK(!assigned_from.count(it->second), where, ": tensors '", assigned_from[it->second], "' and '", n,
                   "' both map to parameter '", pname, "'");
    assigned_from[it->second] = n;
    BERTRAIN_CHECK(info.shape == var.shape(), where, ", tensor '", n, "': shape mismatch: the file has ",
                   info.shape.str(), ", the model's parameter '", pname, "' is ", var.shape().str());
    BERTRAIN_CHECK(is_float_st(info.dtype) || !dtype_is_float(var.dtype()), where, ", tensor '", n, "': dtype ",
                   info.dtype, " cannot be loaded into floating-point parameter '", pname, "'");
    if (n != pname) report.renamed.push_back(n + " -> " + pname);
    if (info.dtype != safetensors_dtype_name(var.dtype()))
      report.converted.push_back(pname + ": " + info.dtype + " -> " + dtype_name(var.dtype()));
    plan.push_back({n, it->second});
  }
  for (size_t i = 0; i < params.size(); ++i)
    if (!assigned_from.count(i)) report.missing.push_back(params[i].first);

  if (options.strict) {
    BERTRAIN_CHECK(report.missing.empty() && report.unexpected.empty(), where, " does not match the model exactly (",
                   report.missing.size(), " missing, ", report.unexpected.size(), " unexpected):\n", report.summary());
  }
  if (options.require_backbone && !report.only_heads_missing()) {
    std::string first;
    for (const auto& n : report.missing)
      if (!is_head_name(n)) {
        first = n;
        break;
      }
    throw Error(where + " lacks parameter '" + first + "' of the model (and " +
                std::to_string(report.missing.size() - 1) + " more missing): is it a checkpoint of another model?\n" +
                report.summary());
  }

  NoGradGuard no_grad;
  for (const auto& a : plan) {
    // Copy into the existing storage: views of a parameter held elsewhere stay valid.
    Tensor dst = params[a.param].second.value();
    dst.copy_from(file.load(a.file_name, dst.dtype()));
    report.loaded.push_back(params[a.param].first);
  }
}

}  // namespace bertrain
