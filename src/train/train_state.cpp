// train_state.cpp: TrainState <-> trainer_state.json (nlohmann/json).
#include "bertrain/train/train_state.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <type_traits>

#include "bertrain/core/error.h"
#include "bertrain/core/json_limits.h"
#include "core/json_number.h"

namespace bertrain {

using json = nlohmann::json;

std::string TrainState::to_json() const {
  json j{{"global_step", global_step},
         {"phase", phase + 1},
         {"phase_step", phase_step},
         {"phase_initialized", phase_initialized},
         {"data_cursor", json::parse(data_cursor.to_json())},
         {"optimizer_step", optimizer_step},
         {"skipped_steps", skipped_steps},
         {"consecutive_skipped_steps", consecutive_skipped_steps},
         {"micro_batch_index", micro_batch_index},
         {"partial_losses", partial_losses},
         {"step_masked_tokens", step_masked_tokens},
         {"best_metric", best_metric ? json(*best_metric) : json(nullptr)},
         {"best_step", best_step},
         {"primary_metric", primary_metric},
         {"epoch", epoch},
         {"learning_rate", learning_rate},
         {"seed", seed},
         {"world_size", world_size},
         {"grad_accum_steps", grad_accum_steps},
         {"vocab_sha256", vocab_sha256}};
  if (!recipe_json.empty()) j["recipe"] = json::parse(recipe_json);
  return j.dump(2);
}

namespace {

template <class T>
void get(const json& j, const char* key, T& out, const std::string& what) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    // not get<T>(): a float out of T's range would be undefined behaviour there (core/json_number.h)
    BERTRAIN_CHECK(detail::json_to_integer(*it, out), what, ": \"", key, "\" must be an integer from ",
                   +std::numeric_limits<T>::min(), " to ", +std::numeric_limits<T>::max(), ", got ", it->dump());
  } else {
    out = it->get<T>();
  }
}

}  // namespace

TrainState TrainState::from_json(const std::string& text, const std::string& what) {
  TrainState s;
  check_json_depth(text, what);
  try {
    const json j = json::parse(text);
    BERTRAIN_CHECK(j.is_object(), what, ": expected a JSON object");
    BERTRAIN_CHECK(j.contains("global_step") && !j.at("global_step").is_null(), what, ": no \"global_step\"");
    get(j, "global_step", s.global_step, what);
    int phase1 = 1;
    get(j, "phase", phase1, what);
    BERTRAIN_CHECK(phase1 >= 1, what, ": phase must be >= 1, got ", phase1);
    s.phase = phase1 - 1;
    get(j, "phase_step", s.phase_step, what);
    get(j, "phase_initialized", s.phase_initialized, what);
    if (j.contains("data_cursor")) {
      try {
        s.data_cursor = data::LoaderCursor::from_json(j.at("data_cursor").dump());
      } catch (const Error& e) {  // the cursor's reader knows no file name
        throw Error(what + ": data_cursor: " + e.what());
      }
    }
    get(j, "optimizer_step", s.optimizer_step, what);
    get(j, "skipped_steps", s.skipped_steps, what);
    get(j, "consecutive_skipped_steps", s.consecutive_skipped_steps, what);
    get(j, "micro_batch_index", s.micro_batch_index, what);
    get(j, "partial_losses", s.partial_losses, what);
    get(j, "step_masked_tokens", s.step_masked_tokens, what);
    if (j.contains("best_metric") && !j.at("best_metric").is_null()) s.best_metric = j.at("best_metric").get<double>();
    get(j, "best_step", s.best_step, what);
    get(j, "primary_metric", s.primary_metric, what);
    get(j, "epoch", s.epoch, what);
    get(j, "learning_rate", s.learning_rate, what);
    get(j, "seed", s.seed, what);
    get(j, "dropout_seed", s.seed, what);  // written by bertrain before 2026-12
    get(j, "world_size", s.world_size, what);
    get(j, "grad_accum_steps", s.grad_accum_steps, what);
    get(j, "vocab_sha256", s.vocab_sha256, what);
    if (j.contains("recipe")) s.recipe_json = j.at("recipe").dump(2);
  } catch (const json::exception& e) {
    throw Error(what + ": " + e.what());
  }
  BERTRAIN_CHECK(s.global_step >= 0 && s.phase_step >= 0 && s.micro_batch_index >= 0, what,
                 ": negative step counters (global_step ", s.global_step, ", phase_step ", s.phase_step,
                 ", micro_batch_index ", s.micro_batch_index, ")");
  return s;
}

TrainState TrainState::read(const std::string& checkpoint_dir) {
  const std::string path = (std::filesystem::path(checkpoint_dir) / "trainer_state.json").string();
  std::ifstream f(path);
  BERTRAIN_CHECK(f.good(), "cannot read ", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return from_json(ss.str(), path);
}

}  // namespace bertrain
