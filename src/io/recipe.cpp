// recipe.cpp: recipe JSON <-> typed option structs, overrides and validation (nlohmann/json).
#include "bertrain/io/recipe.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <type_traits>

#include "bertrain/core/error.h"
#include "bertrain/core/json_limits.h"
#include "core/json_number.h"

namespace bertrain {

using json = nlohmann::json;

// ---------------------------------------------------------------- enums <-> strings
namespace {

template <class E>
const std::vector<std::pair<E, const char*>>& names();
template <>
const std::vector<std::pair<OptimizerName, const char*>>& names() {
  static const std::vector<std::pair<OptimizerName, const char*>> v = {{OptimizerName::lamb, "lamb"},
      {OptimizerName::adamw, "adamw"}, {OptimizerName::adam, "adam"}, {OptimizerName::lars, "lars"},
      {OptimizerName::sgd, "sgd"}};
  return v;
}
template <>
const std::vector<std::pair<LrConvention, const char*>>& names() {
  static const std::vector<std::pair<LrConvention, const char*>> v = {{LrConvention::google_bert, "google_bert"},
      {LrConvention::nvidia, "nvidia"}, {LrConvention::hugging_face, "hugging_face"}};
  return v;
}
template <>
const std::vector<std::pair<LrDecay, const char*>>& names() {
  static const std::vector<std::pair<LrDecay, const char*>> v = {{LrDecay::poly, "poly"}, {LrDecay::linear, "linear"},
      {LrDecay::cosine, "cosine"}, {LrDecay::constant, "constant"}};
  return v;
}
template <>
const std::vector<std::pair<LambAdaptation, const char*>>& names() {
  static const std::vector<std::pair<LambAdaptation, const char*>> v = {{LambAdaptation::by_pattern, "by_pattern"},
      {LambAdaptation::all, "all"}, {LambAdaptation::decayed_only, "decayed_only"}};
  return v;
}
template <>
const std::vector<std::pair<WeightDecayMode, const char*>>& names() {
  static const std::vector<std::pair<WeightDecayMode, const char*>> v = {{WeightDecayMode::decoupled, "decoupled"},
      {WeightDecayMode::l2, "l2"}};
  return v;
}

template <>
const std::vector<std::pair<Unpad, const char*>>& names() {
  static const std::vector<std::pair<Unpad, const char*>> v = {{Unpad::automatic, "auto"}, {Unpad::always, "always"},
      {Unpad::never, "never"}};
  return v;
}

template <class E>
std::string name_of(E e) {
  for (const auto& [v, n] : names<E>())
    if (v == e) return n;
  BERTRAIN_ASSERT(false, "enum value without a name");
  return "";
}

template <class E>
E parse_enum(const std::string& s, const std::string& what) {
  std::string all;
  for (const auto& [v, n] : names<E>()) {
    if (s == n) return v;
    all += (all.empty() ? "" : ", ") + std::string(n);
  }
  throw Error(what + " '" + s + "' is not one of " + all);
}

}  // namespace

std::string to_string(OptimizerName v) { return name_of(v); }
std::string to_string(LrConvention v) { return name_of(v); }
std::string to_string(LrDecay v) { return name_of(v); }
std::string to_string(LambAdaptation v) { return name_of(v); }
std::string to_string(WeightDecayMode v) { return name_of(v); }
std::string to_string(Unpad v) { return name_of(v); }
Unpad parse_unpad(const std::string& s, const std::string& what) { return parse_enum<Unpad>(s, what); }
OptimizerName parse_optimizer_name(const std::string& s, const std::string& what) { return parse_enum<OptimizerName>(s, what); }
LrConvention parse_lr_convention(const std::string& s, const std::string& what) { return parse_enum<LrConvention>(s, what); }
LrDecay parse_lr_decay(const std::string& s, const std::string& what) { return parse_enum<LrDecay>(s, what); }

OptimizerRecipe OptimizerRecipe::google_bert_finetuning() {
  OptimizerRecipe o;
  o.name = OptimizerName::adamw;
  o.adamw.bias_correction = o.lamb.bias_correction = false;  // the same settings if --optimizer=lamb is chosen
  o.adamw.eps = o.lamb.eps = 1e-6;
  o.adamw.weight_decay = o.lamb.weight_decay = 0.01;
  o.clip_grad_norm = 1.0;
  return o;
}

// ---------------------------------------------------------------- keys
namespace {

const std::set<std::string> kPhaseKeys = {"max_seq_length", "max_predictions_per_seq", "input_dir",
                                          "train_batch_size", "micro_batch_size", "learning_rate",
                                          "num_warmup_steps", "warmup_proportion", "decay", "decay_power",
                                          "end_learning_rate", "lr_convention", "num_train_steps"};
const std::set<std::string> kTopKeys = {"bert_config_file", "vocab_file", "do_lower_case", "output_dir",
                                        "init_checkpoint", "seed", "optimizer", "save_checkpoints_steps",
                                        "save_total_limit", "eval_dir", "eval_every_steps", "max_eval_steps",
                                        "next_sentence", "max_consecutive_skipped_steps", "log_every_steps",
                                        "activation_checkpointing", "dynamic_masking", "shuffle_window_shards",
                                        "bf16", "unpad", "allreduce_dtype", "do_train", "do_eval", "tensorboard", "tensorboard_dir",
                                        "phases"};
const std::set<std::string> kOptimizerKeys = {
    "name", "beta1", "beta2", "eps", "weight_decay", "bias_correction", "weight_decay_mode", "layer_adaptation",
    "max_grad_norm", "trust_clamp", "trust_clamp_min", "trust_clamp_max", "momentum", "dampening", "nesterov",
    "trust_coefficient", "clip_grad_norm", "exclude_from_weight_decay", "exclude_from_layer_adaptation"};

template <class T>
bool get(const json& j, const char* key, T& out, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return false;
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    // not get<T>(): a float out of T's range would be undefined behaviour there (core/json_number.h)
    BERTRAIN_CHECK(detail::json_to_integer(*it, out), where, ": key '", key, "' must be an integer from ",
                   +std::numeric_limits<T>::min(), " to ", +std::numeric_limits<T>::max(), ", got ", it->dump());
    return true;
  }
  try {
    out = it->get<T>();
  } catch (const json::exception&) {
    throw Error(where + ": key '" + key + "' has the wrong type (" + it->dump() + ")");
  }
  return true;
}

template <class E>
void get_enum(const json& j, const char* key, E& out, const std::string& where) {
  std::string s;
  if (get(j, key, s, where)) out = parse_enum<E>(s, where + ": " + key);
}

void check_keys(const json& j, const std::set<std::string>& known, const std::string& where) {
  BERTRAIN_CHECK(j.is_object(), where, ": expected a JSON object, got ", j.dump());
  for (auto& [k, v] : j.items()) BERTRAIN_CHECK(known.count(k), where, ": unknown key '", printable(k), "'");
}

PhaseRecipe phase_from(const json& j, const std::string& where) {
  check_keys(j, kPhaseKeys, where);
  PhaseRecipe p;
  LrScheduleOptions& s = p.schedule;
  get(j, "max_seq_length", p.max_seq_length, where);
  get(j, "max_predictions_per_seq", p.max_predictions_per_seq, where);
  get(j, "input_dir", p.input_dir, where);
  get(j, "train_batch_size", p.train_batch_size, where);
  get(j, "micro_batch_size", p.micro_batch_size, where);  // absent: 0, train_batch_size / ranks
  get(j, "learning_rate", s.learning_rate, where);
  get(j, "num_warmup_steps", s.num_warmup_steps, where);
  get(j, "warmup_proportion", s.warmup_proportion, where);
  get_enum(j, "decay", s.decay, where);
  get(j, "decay_power", s.power, where);
  get(j, "end_learning_rate", s.end_learning_rate, where);
  get_enum(j, "lr_convention", s.convention, where);
  get(j, "num_train_steps", s.num_train_steps, where);
  return p;
}

json phase_to(const PhaseRecipe& p) {
  const LrScheduleOptions& s = p.schedule;
  return json{{"max_seq_length", p.max_seq_length}, {"max_predictions_per_seq", p.max_predictions_per_seq},
              {"input_dir", p.input_dir}, {"train_batch_size", p.train_batch_size},
              {"micro_batch_size", p.micro_batch_size}, {"learning_rate", s.learning_rate},
              {"num_warmup_steps", s.num_warmup_steps}, {"warmup_proportion", s.warmup_proportion},
              {"decay", to_string(s.decay)}, {"decay_power", s.power}, {"end_learning_rate", s.end_learning_rate},
              {"lr_convention", to_string(s.convention)}, {"num_train_steps", s.num_train_steps}};
}

/// Sets the options a key names in every struct that has the field.
void optimizer_from(const json& o, OptimizerRecipe& op, const std::string& w) {
  check_keys(o, kOptimizerKeys, w);
  get_enum(o, "name", op.name, w);
  LambOptions& l = op.lamb;
  AdamWOptions& a = op.adamw;
  double d;
  bool b;
  if (get(o, "beta1", d, w)) l.beta1 = a.beta1 = d;
  if (get(o, "beta2", d, w)) l.beta2 = a.beta2 = d;
  if (get(o, "eps", d, w)) l.eps = a.eps = op.lars.eps = d;
  if (get(o, "weight_decay", d, w)) l.weight_decay = a.weight_decay = op.lars.weight_decay = op.sgd.weight_decay = d;
  if (get(o, "bias_correction", b, w)) l.bias_correction = a.bias_correction = b;
  WeightDecayMode m = WeightDecayMode::decoupled;
  if (o.contains("weight_decay_mode")) {
    get_enum(o, "weight_decay_mode", m, w);
    l.weight_decay_mode = a.weight_decay_mode = m;
  }
  get_enum(o, "layer_adaptation", l.adaptation, w);
  get(o, "max_grad_norm", l.max_grad_norm, w);
  get(o, "trust_clamp", l.trust_clamp, w);
  get(o, "trust_clamp_min", l.trust_clamp_min, w);
  get(o, "trust_clamp_max", l.trust_clamp_max, w);
  if (get(o, "momentum", d, w)) op.lars.momentum = op.sgd.momentum = d;
  get(o, "dampening", op.sgd.dampening, w);
  get(o, "nesterov", op.sgd.nesterov, w);
  get(o, "trust_coefficient", op.lars.trust_coefficient, w);
  get(o, "clip_grad_norm", op.clip_grad_norm, w);
  std::vector<std::string> ex;
  if (get(o, "exclude_from_weight_decay", ex, w))
    l.rules.exclude_from_weight_decay = a.rules.exclude_from_weight_decay = op.lars.rules.exclude_from_weight_decay =
        op.sgd.rules.exclude_from_weight_decay = ex;
  if (o.contains("exclude_from_layer_adaptation")) {
    std::optional<std::vector<std::string>> la;  // null: follow exclude_from_weight_decay
    if (get(o, "exclude_from_layer_adaptation", ex, w)) la = ex;
    l.rules.exclude_from_layer_adaptation = op.lars.rules.exclude_from_layer_adaptation = la;
  }
}

json rules_to(const ParamRules& r, bool with_layer_adaptation) {
  json j{{"exclude_from_weight_decay", r.exclude_from_weight_decay}};
  if (with_layer_adaptation)
    j["exclude_from_layer_adaptation"] =
        r.exclude_from_layer_adaptation ? json(*r.exclude_from_layer_adaptation) : json(nullptr);
  return j;
}

/// The options of the optimizer `name` selects, under the recipe's key names.
json optimizer_to(const OptimizerRecipe& o) {
  json j{{"name", to_string(o.name)}, {"clip_grad_norm", o.clip_grad_norm}};
  switch (o.name) {
    case OptimizerName::lamb: {
      const LambOptions& l = o.lamb;
      j.update(json{{"beta1", l.beta1}, {"beta2", l.beta2}, {"eps", l.eps}, {"weight_decay", l.weight_decay},
                    {"bias_correction", l.bias_correction}, {"weight_decay_mode", to_string(l.weight_decay_mode)},
                    {"layer_adaptation", to_string(l.adaptation)}, {"max_grad_norm", l.max_grad_norm},
                    {"trust_clamp", l.trust_clamp}, {"trust_clamp_min", l.trust_clamp_min},
                    {"trust_clamp_max", l.trust_clamp_max}});
      j.update(rules_to(l.rules, true));
      break;
    }
    case OptimizerName::adamw:
    case OptimizerName::adam: {
      const AdamWOptions& a = o.adamw;
      j.update(json{{"beta1", a.beta1}, {"beta2", a.beta2}, {"eps", a.eps}, {"weight_decay", a.weight_decay},
                    {"bias_correction", a.bias_correction}});
      if (o.name == OptimizerName::adamw) j["weight_decay_mode"] = to_string(a.weight_decay_mode);
      j.update(rules_to(a.rules, false));
      break;
    }
    case OptimizerName::lars: {
      const LarsOptions& l = o.lars;
      j.update(json{{"momentum", l.momentum}, {"weight_decay", l.weight_decay},
                    {"trust_coefficient", l.trust_coefficient}, {"eps", l.eps}});
      j.update(rules_to(l.rules, true));
      break;
    }
    case OptimizerName::sgd: {
      const SgdOptions& s = o.sgd;
      j.update(json{{"momentum", s.momentum}, {"dampening", s.dampening}, {"weight_decay", s.weight_decay},
                    {"nesterov", s.nesterov}});
      j.update(rules_to(s.rules, false));
      break;
    }
  }
  return j;
}

PretrainRecipe recipe_from(const json& j, const std::string& where) {
  check_keys(j, kTopKeys, where);
  PretrainRecipe r;
  get(j, "bert_config_file", r.bert_config_file, where);
  get(j, "vocab_file", r.vocab_file, where);
  r.do_lower_case_given = get(j, "do_lower_case", r.do_lower_case, where);
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
  get(j, "shuffle_window_shards", r.shuffle_window_shards, where);
  get(j, "bf16", r.bf16, where);
  get_enum(j, "unpad", r.unpad, where);
  if (std::string ad; get(j, "allreduce_dtype", ad, where)) {
    BERTRAIN_CHECK(ad == "f32" || ad == "bf16", where, ": key 'allreduce_dtype' must be \"f32\" or \"bf16\", got \"",
                   printable(ad), "\"");
    r.allreduce_dtype = ad == "bf16" ? DType::bf16 : DType::f32;
  }
  get(j, "do_train", r.do_train, where);
  get(j, "do_eval", r.do_eval, where);
  get(j, "tensorboard", r.tensorboard, where);
  get(j, "tensorboard_dir", r.tensorboard_dir, where);
  if (j.contains("optimizer")) optimizer_from(j["optimizer"], r.optimizer, where + ": optimizer");
  if (j.contains("phases")) {
    BERTRAIN_CHECK(j["phases"].is_array(), where, ": 'phases' must be a list");
    int i = 1;
    for (const json& p : j["phases"]) r.phases.push_back(phase_from(p, where + ": phases." + std::to_string(i++)));
  }
  return r;
}

json recipe_to(const PretrainRecipe& r) {
  json phases = json::array();
  for (const PhaseRecipe& p : r.phases) phases.push_back(phase_to(p));
  return json{{"bert_config_file", r.bert_config_file},
              {"vocab_file", r.vocab_file},
              {"do_lower_case", r.do_lower_case},
              {"output_dir", r.output_dir},
              {"init_checkpoint", r.init_checkpoint},
              {"seed", r.seed},
              {"optimizer", optimizer_to(r.optimizer)},
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
              {"shuffle_window_shards", r.shuffle_window_shards},
              {"bf16", r.bf16},
              {"unpad", to_string(r.unpad)},
              {"allreduce_dtype", dtype_name(r.allreduce_dtype)},
              {"do_train", r.do_train},
              {"do_eval", r.do_eval},
              {"tensorboard", r.tensorboard},
              {"tensorboard_dir", r.tensorboard_dir},
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

// `where` names the recipe file (or "flags") for errors about its shape; `j` is a JSON object.
void apply_override(json& j, const std::string& raw_key, const std::string& value, const std::string& where) {
  const std::string key = alias(raw_key);
  check_json_depth(value, "override --" + raw_key);
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
    const size_t phases = j.contains("phases") && j["phases"].is_array() ? j["phases"].size() : 0;
    BERTRAIN_CHECK(n >= 1 && static_cast<size_t>(n) <= phases, "override --", raw_key, ": the recipe has ", phases,
                   " phases (numbered from 1)");
    const std::string sub = key.substr(dot + 1);
    BERTRAIN_CHECK(kPhaseKeys.count(sub), "override --", raw_key, ": unknown phase key '", sub, "'");
    BERTRAIN_CHECK(j["phases"][n - 1].is_object(), where, ": phases.", n, " must be an object to take --", raw_key);
    j["phases"][n - 1][sub] = v;
    return;
  }
  if (key.rfind("optimizer.", 0) == 0) {
    const std::string sub = key.substr(10);
    BERTRAIN_CHECK(kOptimizerKeys.count(sub), "override --", raw_key, ": unknown optimizer key '", sub, "'");
    BERTRAIN_CHECK(!j.contains("optimizer") || j["optimizer"].is_object(), where,
                   ": 'optimizer' must be an object to take --", raw_key);
    j["optimizer"][sub] = v;
    return;
  }
  if (kPhaseKeys.count(key)) {
    if (!j.contains("phases") || (j["phases"].is_array() && j["phases"].empty()))
      j["phases"] = json::array({json::object()});
    BERTRAIN_CHECK(j["phases"].is_array(), where, ": 'phases' must be a list to take --", raw_key);
    for (json& p : j["phases"]) {
      BERTRAIN_CHECK(p.is_object(), where, ": every phase must be an object to take --", raw_key);
      p[key] = v;
    }
    return;
  }
  BERTRAIN_CHECK(kTopKeys.count(key) && key != "phases", "unknown flag --", raw_key);
  j[key] = v;
}

}  // namespace

void PretrainRecipe::validate(int world_size) const {
  BERTRAIN_CHECK(!output_dir.empty(), "recipe: output_dir is required");
  BERTRAIN_CHECK(!bert_config_file.empty() || !init_checkpoint.empty(),
                 "recipe: bert_config_file is required (or an init_checkpoint with a config.json beside it)");
  BERTRAIN_CHECK(save_checkpoints_steps >= 0, "recipe: save_checkpoints_steps must be >= 0");
  BERTRAIN_CHECK(save_total_limit >= 0, "recipe: save_total_limit must be >= 0");
  BERTRAIN_CHECK(max_consecutive_skipped_steps >= 1, "recipe: max_consecutive_skipped_steps must be >= 1");
  BERTRAIN_CHECK(log_every_steps >= 1, "recipe: log_every_steps must be >= 1");
  BERTRAIN_CHECK(shuffle_window_shards >= 1, "recipe: shuffle_window_shards must be >= 1, got ", shuffle_window_shards);
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
    BERTRAIN_CHECK(p.schedule.num_train_steps > 0, w, "num_train_steps must be positive, got ",
                   p.schedule.num_train_steps);
    BERTRAIN_CHECK(p.schedule.learning_rate > 0 && std::isfinite(p.schedule.learning_rate), w,
                   "learning_rate must be positive");
    BERTRAIN_CHECK(p.micro_batch_size >= 0 && p.train_batch_size > 0, w, "batch sizes must be positive");
    if (p.micro_batch_size == 0)
      BERTRAIN_CHECK(p.train_batch_size % world_size == 0, w, "train_batch_size (", p.train_batch_size,
                     ") must be a multiple of the ", world_size, " ranks (without micro_batch_size each rank runs "
                     "train_batch_size / ranks sequences per step)");
    else
      BERTRAIN_CHECK(p.train_batch_size % (p.micro_batch_size * world_size) == 0, w, "train_batch_size (",
                     p.train_batch_size, ") must be a multiple of micro_batch_size (", p.micro_batch_size, ") x ",
                     world_size, " ranks");
    try {
      LrSchedule check(p.schedule);  // the schedule's own validation, with the phase named
    } catch (const Error& e) {
      throw Error(w + " " + e.what());
    }
  }
}

void PretrainRecipe::resolve_micro_batch_size(int world_size) {
  BERTRAIN_ASSERT(world_size >= 1, "world_size ", world_size);
  for (PhaseRecipe& p : phases) p.micro_batch_size = p.micro_batch_for(world_size);
}

PretrainRecipe load_pretrain_recipe(const std::string& path,
                                    const std::vector<std::pair<std::string, std::string>>& overrides) {
  json j = json::object();
  if (!path.empty()) {
    std::ifstream f(path);
    BERTRAIN_CHECK(f.good(), "cannot read recipe file ", path);
    std::ostringstream text;
    text << f.rdbuf();
    check_json_depth(text.str(), "recipe " + path);
    try {
      j = json::parse(text.str());
    } catch (const json::parse_error& e) {
      throw Error("recipe " + path + ": invalid JSON at byte " + std::to_string(e.byte) + ": " + e.what());
    } catch (const json::exception& e) {  // the parser's other errors (406: a number beyond double, 1e400)
      throw Error("recipe " + path + ": invalid JSON: " + e.what());
    }
  }
  const std::string where = path.empty() ? "flags" : "recipe " + path;
  BERTRAIN_CHECK(j.is_object(), where, ": expected a JSON object, got ", j.type_name());
  for (const auto& [k, v] : overrides) apply_override(j, k, v, where);
  return recipe_from(j, path.empty() ? "flags" : path);
}

std::string pretrain_recipe_to_json(const PretrainRecipe& r) { return recipe_to(r).dump(2); }

PretrainRecipe pretrain_recipe_from_json(const std::string& text, const std::string& what) {
  check_json_depth(text, what);
  try {
    return recipe_from(json::parse(text), what);
  } catch (const json::parse_error& e) {
    throw Error(what + ": invalid JSON at byte " + std::to_string(e.byte));
  } catch (const json::out_of_range& e) {  // 406: a number beyond double (1e400)
    throw Error(what + ": invalid JSON: " + e.what());
  }
}

std::vector<std::pair<std::string, std::string>> parse_flag_overrides(const std::vector<std::string>& args,
                                                                      const std::string& command) {
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    BERTRAIN_CHECK(a.rfind("--", 0) == 0 && a.size() > 2 && a[2] != '=', command, ": unexpected argument '", a,
                   "' (flags look like --key=value, --key value or --flag)");
    const size_t eq = a.find('=');
    if (eq != std::string::npos) {
      out.emplace_back(a.substr(2, eq - 2), a.substr(eq + 1));
    } else if (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) {
      out.emplace_back(a.substr(2), args[i + 1]);
      ++i;
    } else {
      out.emplace_back(a.substr(2), "true");
    }
  }
  return out;
}

}  // namespace bertrain
