// config.cpp: BertConfig <-> config.json (Hugging Face) / bert_config.json (google-research/bert).
#include "bertrain/io/config.h"

#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "bertrain/core/error.h"
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

}  // namespace

BertConfig parse_bert_config(const std::string& json_text, const std::string& source) {
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
  if (j.contains("num_labels")) {
    read_int(j, "num_labels", c.num_labels, source);
  } else if (auto it = j.find("id2label"); it != j.end()) {
    BERTRAIN_CHECK(it->is_object(), source, ": \"id2label\" must be an object, got ", it->type_name());
    c.num_labels = static_cast<int64_t>(it->size());
  }
  // transformers' BertConfig also has position_embedding_type; bertrain implements only "absolute".
  if (auto it = j.find("position_embedding_type"); it != j.end()) {
    BERTRAIN_CHECK(it->is_string(), source, ": \"position_embedding_type\" must be a string, got ", it->dump());
    BERTRAIN_CHECK(it->get<std::string>() == "absolute", source, ": position_embedding_type ", it->dump(),
                   " is not supported (bertrain implements \"absolute\")");
  }
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
  j["architectures"] = json::array({"BertForPreTraining"});
  j["attention_probs_dropout_prob"] = c.attention_probs_dropout_prob;
  j["classifier_dropout"] = nullptr;
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
  if (c.num_labels != 2) {
    json id2label = json::object(), label2id = json::object();
    for (int64_t i = 0; i < c.num_labels; ++i) {
      id2label[std::to_string(i)] = "LABEL_" + std::to_string(i);
      label2id["LABEL_" + std::to_string(i)] = i;
    }
    j["id2label"] = std::move(id2label);
    j["label2id"] = std::move(label2id);
  }
  return j.dump(2) + "\n";
}

void save_bert_config(const std::string& path, const BertConfig& config) {
  config.validate();
  write_text_atomic(path, bert_config_to_json(config));
}

}  // namespace bertrain
