// recipe.cpp: recipe JSON <-> structs, overrides and validation (nlohmann/json).
#include "bertrain/io/recipe.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "bertrain/core/error.h"

namespace bertrain {

using json = nlohmann::json;

namespace {

const std::set<std::string> kPhaseKeys = {"max_seq_length", "max_predictions_per_seq", "input_dir",
                                          "train_batch_size", "micro_batch_size", "learning_rate",
                                          "num_warmup_steps", "warmup_proportion", "decay", "decay_power",
                                          "num_train_steps"};
const std::set<std::string> kTopKeys = {"bert_config_file", "vocab_file", "do_lower_case", "output_dir",
                                        "init_checkpoint", "seed", "optimizer", "save_checkpoints_steps",
                                        "save_total_limit", "eval_dir", "eval_every_steps", "max_eval_steps",
                                        "next_sentence", "max_consecutive_skipped_steps", "log_every_steps",
                                        "activation_checkpointing", "dynamic_masking", "bf16", "do_train",
                                        "do_eval", "phases"};
const std::set<std::string> kOptimizerKeys = {"name", "beta1", "beta2", "eps", "weight_decay", "momentum",
                                              "bias_correction", "layer_adaptation", "max_grad_norm",
                                              "clip_grad_norm", "exclude_from_weight_decay"};

template <class T>
void get(const json& j, const char* key, T& out, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  try {
    out = it->get<T>();
  } catch (const json::exception&) {
    throw Error(where + ": key '" + key + "' has the wrong type (" + it->dump() + ")");
  }
}

void check_keys(const json& j, const std::set<std::string>& known, const std::string& where) {
  BERTRAIN_CHECK(j.is_object(), where, ": expected a JSON object, got ", j.dump());
  for (auto& [k, v] : j.items())
    BERTRAIN_CHECK(known.count(k), where, ": unknown key '", k, "'");
}

PhaseRecipe phase_from(const json& j, const std::string& where) {
  check_keys(j, kPhaseKeys, where);
  PhaseRecipe p;
  get(j, "max_seq_length", p.max_seq_length, where);
  get(j, "max_predictions_per_seq", p.max_predictions_per_seq, where);
  get(j, "input_dir", p.input_dir, where);
  get(j, "train_batch_size", p.train_batch_size, where);
  p.micro_batch_size = p.train_batch_size;
  get(j, "micro_batch_size", p.micro_batch_size, where);
  get(j, "learning_rate", p.learning_rate, where);
  get(j, "num_warmup_steps", p.num_warmup_steps, where);
  get(j, "warmup_proportion", p.warmup_proportion, where);
  get(j, "decay", p.decay, where);
  get(j, "decay_power", p.decay_power, where);
  get(j, "num_train_steps", p.num_train_steps, where);
  return p;
}

json phase_to(const PhaseRecipe& p) {
  return json{{"max_seq_length", p.max_seq_length}, {"max_predictions_per_seq", p.max_predictions_per_seq},
              {"input_dir", p.input_dir}, {"train_batch_size", p.train_batch_size},
              {"micro_batch_size", p.micro_batch_size}, {"learning_rate", p.learning_rate},
              {"num_warmup_steps", p.num_warmup_steps}, {"warmup_proportion", p.warmup_proportion},
              {"decay", p.decay}, {"decay_power", p.decay_power}, {"num_train_steps", p.num_train_steps}};
}

PretrainRecipe recipe_from(const json& j, const std::string& where) {
  check_keys(j, kTopKeys, where);
  PretrainRecipe r;
  get(j, "bert_config_file", r.bert_config_file, where);
  get(j, "vocab_file", r.vocab_file, where);
  get(j, "do_lower_case", r.do_lower_case, where);
  get(j, "output_dir", r.output_dir, where);
  get(j, "init_checkpoint", r.init_checkpoint, where);
  get(j, "seed", r.seed, where);
  get(j, "save_checkpoints_steps", r.save_checkpoints_steps, where);
  get(j, "save_total_limit", r.save_total_limit, where);
  get(j, "eval_dir", r.eval_dir, where);
  get(j, "eval_every_steps", r.eval_every_steps, where);
  get(j, "max_eval_steps", r.max_eval_steps, where);
  get(j, "next_sentence", r.next_sentence, where);
  get(j, "max_consecutive_skipped_steps", r.max_consecutive_skipped_steps, where);
  get(j, "log_every_steps", r.log_every_steps, where);
  get(j, "activation_checkpointing", r.activation_checkpointing, where);
  get(j, "dynamic_masking", r.dynamic_masking, where);
  get(j, "bf16", r.bf16, where);
  get(j, "do_train", r.do_train, where);
  get(j, "do_eval", r.do_eval, where);
  if (j.contains("optimizer")) {
    const json& o = j["optimizer"];
    const std::string w = where + ": optimizer";
    check_keys(o, kOptimizerKeys, w);
    OptimizerRecipe& op = r.optimizer;
    get(o, "name", op.name, w);
    get(o, "beta1", op.beta1, w);
    get(o, "beta2", op.beta2, w);
    get(o, "eps", op.eps, w);
    get(o, "weight_decay", op.weight_decay, w);
    get(o, "momentum", op.momentum, w);
    get(o, "bias_correction", op.bias_correction, w);
    get(o, "layer_adaptation", op.layer_adaptation, w);
    get(o, "max_grad_norm", op.max_grad_norm, w);
    get(o, "clip_grad_norm", op.clip_grad_norm, w);
    get(o, "exclude_from_weight_decay", op.exclude_from_weight_decay, w);
  }
  if (j.contains("phases")) {
    BERTRAIN_CHECK(j["phases"].is_array(), where, ": 'phases' must be a list");
    int i = 1;
    for (const json& p : j["phases"]) r.phases.push_back(phase_from(p, where + ": phases." + std::to_string(i++)));
  }
  return r;
}

json recipe_to(const PretrainRecipe& r) {
  const OptimizerRecipe& o = r.optimizer;
  json phases = json::array();
  for (const PhaseRecipe& p : r.phases) phases.push_back(phase_to(p));
  return json{{"bert_config_file", r.bert_config_file},
              {"vocab_file", r.vocab_file},
              {"do_lower_case", r.do_lower_case},
              {"output_dir", r.output_dir},
              {"init_checkpoint", r.init_checkpoint},
              {"seed", r.seed},
              {"optimizer",
               {{"name", o.name}, {"beta1", o.beta1}, {"beta2", o.beta2}, {"eps", o.eps},
                {"weight_decay", o.weight_decay}, {"momentum", o.momentum}, {"bias_correction", o.bias_correction},
                {"layer_adaptation", o.layer_adaptation}, {"max_grad_norm", o.max_grad_norm},
                {"clip_grad_norm", o.clip_grad_norm}, {"exclude_from_weight_decay", o.exclude_from_weight_decay}}},
              {"save_checkpoints_steps", r.save_checkpoints_steps},
              {"save_total_limit", r.save_total_limit},
              {"eval_dir", r.eval_dir},
              {"eval_every_steps", r.eval_every_steps},
              {"max_eval_steps", r.max_eval_steps},
              {"next_sentence", r.next_sentence},
              {"max_consecutive_skipped_steps", r.max_consecutive_skipped_steps},
              {"log_every_steps", r.log_every_steps},
              {"activation_checkpointing", r.activation_checkpointing},
              {"dynamic_masking", r.dynamic_masking},
              {"bf16", r.bf16},
              {"do_train", r.do_train},
              {"do_eval", r.do_eval},
              {"phases", phases}};
}

json parse_value(const std::string& v) {
  try {
    return json::parse(v);
  } catch (const json::exception&) {
    return json(v);  // a bare string such as a path
  }
}

// google-research/bert run_pretraining.py flags that name something else here.
std::string alias(const std::string& key) {
  if (key == "input_file") return "input_dir";
  return key;
}

void apply_override(json& j, const std::string& raw_key, const std::string& value) {
  const std::string key = alias(raw_key);
  const json v = parse_value(value);
  if (key.rfind("phases.", 0) == 0) {
    const size_t dot = key.find('.', 7);
    BERTRAIN_CHECK(dot != std::string::npos, "override --", raw_key, ": expected phases.N.key");
    int n = 0;
    try {
      n = std::stoi(key.substr(7, dot - 7));
    } catch (...) {
      throw Error("override --" + raw_key + ": phase number is not an integer");
    }
    BERTRAIN_CHECK(n >= 1 && j.contains("phases") && n <= static_cast<int>(j["phases"].size()), "override --",
                   raw_key, ": the recipe has ", j.contains("phases") ? j["phases"].size() : 0,
                   " phases (numbered from 1)");
    const std::string sub = key.substr(dot + 1);
    BERTRAIN_CHECK(kPhaseKeys.count(sub), "override --", raw_key, ": unknown phase key '", sub, "'");
    j["phases"][n - 1][sub] = v;
    return;
  }
  if (key.rfind("optimizer.", 0) == 0) {
    const std::string sub = key.substr(10);
    BERTRAIN_CHECK(kOptimizerKeys.count(sub), "override --", raw_key, ": unknown optimizer key '", sub, "'");
    j["optimizer"][sub] = v;
    return;
  }
  if (kPhaseKeys.count(key)) {
    if (!j.contains("phases") || j["phases"].empty()) j["phases"] = json::array({json::object()});
    for (json& p : j["phases"]) p[key] = v;
    return;
  }
  BERTRAIN_CHECK(kTopKeys.count(key) && key != "phases", "unknown flag --", raw_key);
  j[key] = v;
}

}  // namespace

int64_t PretrainRecipe::warmup_steps(const PhaseRecipe& p) {
  if (p.num_warmup_steps >= 0) return p.num_warmup_steps;
  return static_cast<int64_t>(std::llround(p.warmup_proportion * static_cast<double>(p.num_train_steps)));
}

void PretrainRecipe::validate(int world_size) const {
  BERTRAIN_CHECK(!output_dir.empty(), "recipe: output_dir is required");
  BERTRAIN_CHECK(!bert_config_file.empty() || !init_checkpoint.empty(),
                 "recipe: bert_config_file is required (or an init_checkpoint with a config.json beside it)");
  BERTRAIN_CHECK(save_checkpoints_steps >= 0, "recipe: save_checkpoints_steps must be >= 0");
  BERTRAIN_CHECK(save_total_limit >= 0, "recipe: save_total_limit must be >= 0");
  BERTRAIN_CHECK(max_consecutive_skipped_steps >= 1, "recipe: max_consecutive_skipped_steps must be >= 1");
  BERTRAIN_CHECK(log_every_steps >= 1, "recipe: log_every_steps must be >= 1");
  const std::set<std::string> opts = {"lamb", "adamw", "adam", "lars", "sgd"};
  BERTRAIN_CHECK(opts.count(optimizer.name), "recipe: optimizer.name '", optimizer.name,
                 "' is not one of lamb, adamw, adam, lars, sgd");
  BERTRAIN_CHECK(optimizer.clip_grad_norm >= 0, "recipe: optimizer.clip_grad_norm must be >= 0");
  BERTRAIN_CHECK(do_train || do_eval, "recipe: nothing to do (do_train and do_eval are both false)");
  if (!do_train) return;
  BERTRAIN_CHECK(!phases.empty(), "recipe: 'phases' is empty: nothing to train");
  for (size_t i = 0; i < phases.size(); ++i) {
    const PhaseRecipe& p = phases[i];
    const std::string w = "recipe: phases." + std::to_string(i + 1) + ".";
    BERTRAIN_CHECK(!p.input_dir.empty(), w, "input_dir is required");
    BERTRAIN_CHECK(p.max_seq_length > 0, w, "max_seq_length must be positive");
    BERTRAIN_CHECK(p.max_predictions_per_seq > 0, w, "max_predictions_per_seq must be positive");
    BERTRAIN_CHECK(p.num_train_steps > 0, w, "num_train_steps must be positive, got ", p.num_train_steps);
    BERTRAIN_CHECK(p.learning_rate > 0 && std::isfinite(p.learning_rate), w, "learning_rate must be positive");
    BERTRAIN_CHECK(p.micro_batch_size > 0 && p.train_batch_size > 0, w, "batch sizes must be positive");
    BERTRAIN_CHECK(p.train_batch_size % (p.micro_batch_size * world_size) == 0, w, "train_batch_size (",
                   p.train_batch_size, ") must be a multiple of micro_batch_size (", p.micro_batch_size, ") x ",
                   world_size, " ranks");
    BERTRAIN_CHECK(p.warmup_proportion >= 0 && p.warmup_proportion <= 1, w, "warmup_proportion must be in [0, 1]");
    BERTRAIN_CHECK(p.decay == "poly" || p.decay == "linear" || p.decay == "cosine" || p.decay == "constant", w,
                   "decay '", p.decay, "' is not one of poly, linear, cosine, constant");
    BERTRAIN_CHECK(warmup_steps(p) <= p.num_train_steps, w, "warmup (", warmup_steps(p),
                   " steps) is longer than num_train_steps (", p.num_train_steps, ")");
  }
}

PretrainRecipe load_pretrain_recipe(const std::string& path,
                                    const std::vector<std::pair<std::string, std::string>>& overrides) {
  json j = json::object();
  if (!path.empty()) {
    std::ifstream f(path);
    BERTRAIN_CHECK(f.good(), "cannot read recipe file ", path);
    try {
      j = json::parse(f);
    } catch (const json::parse_error& e) {
      throw Error("recipe " + path + ": invalid JSON at byte " + std::to_string(e.byte) + ": " + e.what());
    }
  }
  for (const auto& [k, v] : overrides) apply_override(j, k, v);
  PretrainRecipe r = recipe_from(j, path.empty() ? "flags" : path);
  return r;
}

std::string pretrain_recipe_to_json(const PretrainRecipe& r) { return recipe_to(r).dump(2); }

PretrainRecipe pretrain_recipe_from_json(const std::string& text, const std::string& what) {
  try {
    return recipe_from(json::parse(text), what);
  } catch (const json::parse_error& e) {
    throw Error(what + ": invalid JSON at byte " + std::to_string(e.byte));
  }
}

}  // namespace bertrain
