// config.cpp: BertConfig <-> config.json (Hugging Face) / bert_config.json (google-research/bert).
#include "bertrain/io/config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "bertrain/core/error.h"
#include "bertrain/core/json_limits.h"
#include "bertrain/io/atomic_file.h"
#include "io/file_util.h"

namespace bertrain {

namespace {

using json = nlohmann::json;

void read_int(const json& j, const char* key, int64_t& out, const std::string& source) {
  auto it = j.find(key);
  if (it == j.end()) return;
  // transformers writes sizes as JSON integers; a float with an integral value (768.0) is accepted too,
  // as Python's json and int() would.
  if (it->is_number_integer()) {
    BERTRAIN_CHECK(!it->is_number_unsigned() || it->get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX), source,
                   ": \"", key, "\" is too large: ", it->dump());
    out = it->get<int64_t>();
    return;
  }
  if (it->is_number_float()) {
    double v = it->get<double>();
    BERTRAIN_CHECK(std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9.0e15, source, ": \"", key,
                   "\" must be an integer, got ", it->dump());
    out = static_cast<int64_t>(v);
    return;
  }
  throw Error(source + ": \"" + key + "\" must be an integer, got " + std::string(it->type_name()) + " " + it->dump());
}

void read_double(const json& j, const char* key, double& out, const std::string& source) {
  auto it = j.find(key);
  if (it == j.end()) return;
  BERTRAIN_CHECK(it->is_number(), source, ": \"", key, "\" must be a number, got ", it->type_name(), " ", it->dump());
  out = it->get<double>();
}

void read_string(const json& j, const char* key, std::string& out, const std::string& source) {
  auto it = j.find(key);
  if (it == j.end()) return;
  BERTRAIN_CHECK(it->is_string(), source, ": \"", key, "\" must be a string, got ", it->type_name(), " ", it->dump());
  out = it->get<std::string>();
}


// Hugging Face's labels: "id2label" {"0": "name", ...} (keys are output indexes written as strings, as
// transformers' json.dumps turns int keys into strings) and "label2id" {"name": 0, ...}, its inverse. Either may
// come alone; when both come they must agree, and so must "num_labels" (which transformers derives from them).
void read_labels(const json& j, BertConfig& c, const std::string& source) {
  std::vector<std::string> id2label;
  const auto id2 = j.find("id2label");
  if (id2 != j.end()) {
    BERTRAIN_CHECK(id2->is_object(), source, ": \"id2label\" must be an object, got ", id2->type_name());
    id2label.assign(id2->size(), "");
    std::vector<bool> seen(id2->size(), false);
    for (const auto& [key, name] : id2->items()) {
      size_t used = 0;
      long long i = -1;
      try {
        i = std::stoll(key, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      BERTRAIN_CHECK(used == key.size() && i >= 0 && i < static_cast<long long>(id2label.size()) && !seen[i], source,
                     ": \"id2label\" key \"", key, "\" is not one of the output indexes 0..", id2label.size() - 1,
                     " (each once)");
      BERTRAIN_CHECK(name.is_string(), source, ": \"id2label\" \"", key, "\" must be a string, got ", name.dump());
      seen[i] = true;
      id2label[i] = name.get<std::string>();
    }
  }
  if (const auto l2i = j.find("label2id"); l2i != j.end()) {
    BERTRAIN_CHECK(l2i->is_object(), source, ": \"label2id\" must be an object, got ", l2i->type_name());
    std::vector<std::string> inverse(l2i->size());
    std::vector<bool> seen(l2i->size(), false);
    for (const auto& [name, id] : l2i->items()) {
      BERTRAIN_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 &&
                         id.get<int64_t>() < static_cast<int64_t>(inverse.size()) && !seen[id.get<size_t>()],
                     source, ": \"label2id\" \"", name, "\" must be one of the output indexes 0..", inverse.size() - 1,
                     " (each once), got ", id.dump());
      seen[id.get<size_t>()] = true;
      inverse[id.get<size_t>()] = name;
    }
    if (id2 == j.end()) id2label = std::move(inverse);
    else
      BERTRAIN_CHECK(inverse == id2label, source, ": \"label2id\" ", l2i->dump(), " is not the inverse of \"id2label\" ",
                     id2->dump());
  }
  if (j.contains("num_labels")) {
    read_int(j, "num_labels", c.num_labels, source);
    BERTRAIN_CHECK(id2label.empty() || c.num_labels == static_cast<int64_t>(id2label.size()), source,
                   ": \"num_labels\" is ", c.num_labels, " but \"id2label\"/\"label2id\" name ", id2label.size(),
                   " labels");
  } else if (!id2label.empty() || id2 != j.end()) {
    c.num_labels = static_cast<int64_t>(id2label.size());
  }
  c.id2label = std::move(id2label);
}

// Keys with a meaning to bertrain or written by bert_config_to_json() itself: never kept as extras.
const std::set<std::string> kKnownKeys = {
    "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "hidden_act",
    "hidden_dropout_prob", "attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size",
    "initializer_range", "layer_norm_eps", "num_labels", "id2label", "label2id", "position_embedding_type",
    "architectures", "model_type", "pad_token_id", "torch_dtype", "classifier_dropout", "use_cache",
    "transformers_version", "finetuning_task"};

void add_extras(json& j, const BertConfig& c) {
  for (const auto& [k, v] : c.extra)
    if (!j.contains(k)) j[k] = json::parse(v);
}

}  // namespace

BertConfig parse_bert_config(const std::string& json_text, const std::string& source) {
  check_json_depth(json_text, source);
  json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  BERTRAIN_CHECK(!j.is_discarded(), source, ": not valid JSON");
  BERTRAIN_CHECK(j.is_object(), source, ": expected a JSON object, got ", j.type_name());
  BertConfig c;
  read_int(j, "vocab_size", c.vocab_size, source);
  read_int(j, "hidden_size", c.hidden_size, source);
  read_int(j, "num_hidden_layers", c.num_hidden_layers, source);
  read_int(j, "num_attention_heads", c.num_attention_heads, source);
  read_int(j, "intermediate_size", c.intermediate_size, source);
  read_string(j, "hidden_act", c.hidden_act, source);
  read_double(j, "hidden_dropout_prob", c.hidden_dropout_prob, source);
  read_double(j, "attention_probs_dropout_prob", c.attention_probs_dropout_prob, source);
  read_int(j, "max_position_embeddings", c.max_position_embeddings, source);
  read_int(j, "type_vocab_size", c.type_vocab_size, source);
  read_double(j, "initializer_range", c.initializer_range, source);
  read_double(j, "layer_norm_eps", c.layer_norm_eps, source);
  read_labels(j, c, source);
  // transformers' BertConfig also has position_embedding_type; bertrain implements only "absolute".
  if (auto it = j.find("position_embedding_type"); it != j.end()) {
    BERTRAIN_CHECK(it->is_string(), source, ": \"position_embedding_type\" must be a string, got ", it->dump());
    BERTRAIN_CHECK(it->get<std::string>() == "absolute", source, ": position_embedding_type ", it->dump(),
                   " is not supported (bertrain implements \"absolute\")");
  }
  if (auto it = j.find("architectures"); it != j.end() && !it->is_null()) {
    BERTRAIN_CHECK(it->is_array() && std::all_of(it->begin(), it->end(), [](const json& a) { return a.is_string(); }),
                   source, ": \"architectures\" must be a list of strings, got ", it->dump());
    if (!it->empty()) c.architecture = it->front().get<std::string>();
  }
  if (auto it = j.find("finetuning_task"); it != j.end() && !it->is_null()) {
    BERTRAIN_CHECK(it->is_string(), source, ": \"finetuning_task\" must be a string or null, got ", it->dump());
    c.finetuning_task = it->get<std::string>();
  }
  for (const auto& [k, v] : j.items())
    if (!kKnownKeys.count(k)) c.extra[k] = v.dump();
  try {
    c.validate();
  } catch (const Error& e) {
    throw Error(source + ": " + e.what());
  }
  return c;
}

BertConfig load_bert_config(const std::string& path) {
  std::error_code ec;
  BERTRAIN_CHECK(std::filesystem::is_regular_file(path, ec), "config file '", path, "' does not exist or is not a file");
  return parse_bert_config(read_text_file(path), "config file '" + path + "'");
}

std::string bert_config_to_json(const BertConfig& c) {
  json j = json::object();  // std::map underneath: keys come out sorted, as json.dumps(sort_keys=True)
  j["architectures"] = json::array({c.architecture.empty() ? std::string("BertForPreTraining") : c.architecture});
  j["attention_probs_dropout_prob"] = c.attention_probs_dropout_prob;
  j["classifier_dropout"] = nullptr;
  if (!c.finetuning_task.empty()) j["finetuning_task"] = c.finetuning_task;
  j["hidden_act"] = c.hidden_act;
  j["hidden_dropout_prob"] = c.hidden_dropout_prob;
  j["hidden_size"] = c.hidden_size;
  j["initializer_range"] = c.initializer_range;
  j["intermediate_size"] = c.intermediate_size;
  j["layer_norm_eps"] = c.layer_norm_eps;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["model_type"] = "bert";
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["pad_token_id"] = 0;
  j["position_embedding_type"] = "absolute";
  j["torch_dtype"] = "float32";
  j["type_vocab_size"] = c.type_vocab_size;
  j["use_cache"] = true;
  j["vocab_size"] = c.vocab_size;
  // transformers writes the labels unless they are PretrainedConfig's defaults (LABEL_0, LABEL_1).
  if (c.num_labels != 2 || c.has_label_names()) {
    json id2label = json::object(), label2id = json::object();
    for (int64_t i = 0; i < c.num_labels; ++i) {
      id2label[std::to_string(i)] = c.label_name(i);
      label2id[c.label_name(i)] = i;
    }
    j["id2label"] = std::move(id2label);
    j["label2id"] = std::move(label2id);
  }
  add_extras(j, c);
  return j.dump(2) + "\n";
}

std::string bert_config_to_google_json(const BertConfig& c) {
  json j = json::object();
  j["attention_probs_dropout_prob"] = c.attention_probs_dropout_prob;
  j["hidden_act"] = c.hidden_act;
  j["hidden_dropout_prob"] = c.hidden_dropout_prob;
  j["hidden_size"] = c.hidden_size;
  j["initializer_range"] = c.initializer_range;
  j["intermediate_size"] = c.intermediate_size;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["type_vocab_size"] = c.type_vocab_size;
  j["vocab_size"] = c.vocab_size;
  // google-research/bert's layer norm epsilon is fixed at 1e-12 (modeling.py layer_norm); a different value is
  // information the file must keep even though that code would not read it.
  if (c.layer_norm_eps != 1e-12) j["layer_norm_eps"] = c.layer_norm_eps;
  // What the checkpoint holds, in Hugging Face's keys, unless it is google's own pretraining model (the default
  // when the key is absent), so that bertrain -> TF -> bertrain keeps a finetuned model self-describing.
  if (!c.architecture.empty() && c.architecture != "BertForPreTraining") j["architectures"] = json::array({c.architecture});
  if (!c.finetuning_task.empty()) j["finetuning_task"] = c.finetuning_task;
  // A classifier's label names (CASES.md C43) in Hugging Face's form, so that bertrain -> TF -> bertrain keeps
  // them; google-research/bert's BertConfig.from_dict stores unknown keys as attributes and ignores them.
  if (c.has_label_names()) {
    json id2label = json::object(), label2id = json::object();
    for (int64_t i = 0; i < c.num_labels; ++i) {
      id2label[std::to_string(i)] = c.label_name(i);
      label2id[c.label_name(i)] = i;
    }
    j["id2label"] = std::move(id2label);
    j["label2id"] = std::move(label2id);
  }
  add_extras(j, c);
  return j.dump(2) + "\n";
}

void save_bert_config(const std::string& path, const BertConfig& config) {
  config.validate();
  write_text_atomic(path, bert_config_to_json(config));
}

}  // namespace bertrain
