// train_state.cpp: TrainState <-> trainer_state.json (nlohmann/json).
#include "bertrain/train/train_state.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bertrain/core/error.h"
#include "bertrain/core/json_limits.h"

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
void get(const json& j, const char* key, T& out) {
  auto it = j.find(key);
  if (it != j.end() && !it->is_null()) out = it->get<T>();
}

}  // namespace

TrainState TrainState::from_json(const std::string& text, const std::string& what) {
  TrainState s;
  check_json_depth(text, what);
  try {
    const json j = json::parse(text);
    BERTRAIN_CHECK(j.is_object(), what, ": expected a JSON object");
    s.global_step = j.at("global_step").get<int64_t>();
    int phase1 = 1;
    get(j, "phase", phase1);
    BERTRAIN_CHECK(phase1 >= 1, what, ": phase must be >= 1, got ", phase1);
    s.phase = phase1 - 1;
    get(j, "phase_step", s.phase_step);
    get(j, "phase_initialized", s.phase_initialized);
    if (j.contains("data_cursor")) {
      try {
        s.data_cursor = data::LoaderCursor::from_json(j.at("data_cursor").dump());
      } catch (const Error& e) {  // the cursor's reader knows no file name
        throw Error(what + ": data_cursor: " + e.what());
      }
    }
    get(j, "optimizer_step", s.optimizer_step);
    get(j, "skipped_steps", s.skipped_steps);
    get(j, "consecutive_skipped_steps", s.consecutive_skipped_steps);
    get(j, "micro_batch_index", s.micro_batch_index);
    get(j, "partial_losses", s.partial_losses);
    get(j, "step_masked_tokens", s.step_masked_tokens);
    if (j.contains("best_metric") && !j.at("best_metric").is_null()) s.best_metric = j.at("best_metric").get<double>();
    get(j, "best_step", s.best_step);
    get(j, "primary_metric", s.primary_metric);
    get(j, "epoch", s.epoch);
    get(j, "learning_rate", s.learning_rate);
    get(j, "seed", s.seed);
    get(j, "dropout_seed", s.seed);  // written by bertrain before 2026-12
    get(j, "world_size", s.world_size);
    get(j, "grad_accum_steps", s.grad_accum_steps);
    get(j, "vocab_sha256", s.vocab_sha256);
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
