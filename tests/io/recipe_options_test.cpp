// recipe_options_test.cpp: every field of LambOptions, AdamWOptions and LrScheduleOptions can be set through a
// recipe key and through a `bertrain pretrain` flag, and the resolved recipe.json a run writes holds it.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include "bertrain/core/error.h"
#include "bertrain/io/recipe.h"
#include "test_util.h"

using namespace bertrain;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// A value different from every default for each key (phase keys, then optimizer keys).
const std::vector<std::pair<std::string, std::string>> kPhase = {
    {"learning_rate", "0.00123"}, {"num_train_steps", "40"}, {"num_warmup_steps", "7"}, {"warmup_proportion", "0.25"},
    {"decay", "cosine"}, {"decay_power", "0.75"}, {"end_learning_rate", "0.0001"}, {"lr_convention", "hugging_face"}};
const std::vector<std::pair<std::string, std::string>> kLamb = {
    {"name", "lamb"}, {"beta1", "0.8"}, {"beta2", "0.95"}, {"eps", "1e-07"}, {"weight_decay", "0.02"},
    {"bias_correction", "false"}, {"weight_decay_mode", "l2"}, {"layer_adaptation", "decayed_only"},
    {"max_grad_norm", "2.5"}, {"trust_clamp", "true"}, {"trust_clamp_min", "0.01"}, {"trust_clamp_max", "5"},
    {"exclude_from_weight_decay", R"(["bias"])"}, {"exclude_from_layer_adaptation", R"(["LayerNorm"])"}};
const std::vector<std::pair<std::string, std::string>> kAdamW = {
    {"name", "adamw"}, {"beta1", "0.85"}, {"beta2", "0.98"}, {"eps", "1e-08"}, {"weight_decay", "0.03"},
    {"bias_correction", "false"}, {"weight_decay_mode", "l2"}, {"exclude_from_weight_decay", R"(["LayerNorm"])"}};

void expect_phase(const LrScheduleOptions& s) {
  EXPECT_EQ(s.learning_rate, 0.00123);
  EXPECT_EQ(s.num_train_steps, 40);
  EXPECT_EQ(s.num_warmup_steps, 7);
  EXPECT_EQ(s.warmup_proportion, 0.25);
  EXPECT_EQ(s.decay, LrDecay::cosine);
  EXPECT_EQ(s.power, 0.75);
  EXPECT_EQ(s.end_learning_rate, 0.0001);
  EXPECT_EQ(s.convention, LrConvention::hugging_face);
}

void expect_lamb(const OptimizerRecipe& o) {
  const LambOptions& l = o.lamb;
  EXPECT_EQ(o.name, OptimizerName::lamb);
  EXPECT_EQ(l.beta1, 0.8);
  EXPECT_EQ(l.beta2, 0.95);
  EXPECT_EQ(l.eps, 1e-7);
  EXPECT_EQ(l.weight_decay, 0.02);
  EXPECT_FALSE(l.bias_correction);
  EXPECT_EQ(l.weight_decay_mode, WeightDecayMode::l2);
  EXPECT_EQ(l.adaptation, LambAdaptation::decayed_only);
  EXPECT_EQ(l.max_grad_norm, 2.5);
  EXPECT_TRUE(l.trust_clamp);
  EXPECT_EQ(l.trust_clamp_min, 0.01);
  EXPECT_EQ(l.trust_clamp_max, 5.0);
  EXPECT_EQ(l.rules.exclude_from_weight_decay, std::vector<std::string>{"bias"});
  ASSERT_TRUE(l.rules.exclude_from_layer_adaptation.has_value());
  EXPECT_EQ(*l.rules.exclude_from_layer_adaptation, std::vector<std::string>{"LayerNorm"});
}

void expect_adamw(const OptimizerRecipe& o) {
  const AdamWOptions& a = o.adamw;
  EXPECT_EQ(o.name, OptimizerName::adamw);
  EXPECT_EQ(a.beta1, 0.85);
  EXPECT_EQ(a.beta2, 0.98);
  EXPECT_EQ(a.eps, 1e-8);
  EXPECT_EQ(a.weight_decay, 0.03);
  EXPECT_FALSE(a.bias_correction);
  EXPECT_EQ(a.weight_decay_mode, WeightDecayMode::l2);
  EXPECT_EQ(a.rules.exclude_from_weight_decay, std::vector<std::string>{"LayerNorm"});
}

/// A recipe file with every key of `opt` and kPhase.
std::string recipe_file(const fs::path& dir, const std::vector<std::pair<std::string, std::string>>& opt) {
  json o = json::object(), p = json::object();
  for (const auto& [k, v] : opt) o[k] = k == "name" || k == "weight_decay_mode" || k == "layer_adaptation" ? json(v) : json::parse(v);
  for (const auto& [k, v] : kPhase) p[k] = k == "decay" || k == "lr_convention" ? json(v) : json::parse(v);
  p["input_dir"] = "shards";
  const fs::path path = dir / ("recipe_" + opt.front().second + ".json");
  test::write_file(path, json{{"output_dir", "out"}, {"bert_config_file", "c.json"}, {"optimizer", o},
                              {"phases", json::array({p})}}.dump(2));
  return path.string();
}

/// The same settings as `--key=value` flags (what `bertrain pretrain` turns its extra arguments into).
std::vector<std::pair<std::string, std::string>> flags(const std::vector<std::pair<std::string, std::string>>& opt) {
  std::vector<std::pair<std::string, std::string>> f = {{"output_dir", "out"}, {"bert_config_file", "c.json"},
                                                        {"input_dir", "shards"}};
  for (const auto& [k, v] : opt) f.emplace_back("optimizer." + k, v);
  for (const auto& kv : kPhase) f.push_back(kv);
  return f;
}

}  // namespace

TEST(RecipeOptions, EveryLambAndScheduleFieldThroughAKeyAndAFlag) {
  const fs::path dir = test::temp_dir("recipe_options");
  const PretrainRecipe a = load_pretrain_recipe(recipe_file(dir, kLamb), {});
  expect_lamb(a.optimizer);
  expect_phase(a.phases.at(0).schedule);
  const PretrainRecipe b = load_pretrain_recipe("", flags(kLamb));
  expect_lamb(b.optimizer);
  expect_phase(b.phases.at(0).schedule);
  // The resolved recipe every run writes reads back to the same options.
  const PretrainRecipe c = pretrain_recipe_from_json(pretrain_recipe_to_json(b), "resolved");
  expect_lamb(c.optimizer);
  expect_phase(c.phases.at(0).schedule);
}

TEST(RecipeOptions, EveryAdamWFieldThroughAKeyAndAFlag) {
  const fs::path dir = test::temp_dir("recipe_options");
  expect_adamw(load_pretrain_recipe(recipe_file(dir, kAdamW), {}).optimizer);
  const PretrainRecipe b = load_pretrain_recipe("", flags(kAdamW));
  expect_adamw(b.optimizer);
  expect_adamw(pretrain_recipe_from_json(pretrain_recipe_to_json(b), "resolved").optimizer);
}

TEST(RecipeOptions, BadValuesNameTheKey) {
  auto error_of = [](const std::vector<std::pair<std::string, std::string>>& f) {
    try {
      load_pretrain_recipe("", f).validate();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of({{"lr_convention", "tensorflow"}}).find("lr_convention 'tensorflow' is not one of google_bert, nvidia, hugging_face"),
            std::string::npos);
  EXPECT_NE(error_of({{"optimizer.layer_adaptation", "some"}}).find("layer_adaptation 'some' is not one of"),
            std::string::npos);
  EXPECT_NE(error_of({{"unpad", "sometimes"}}).find("unpad 'sometimes' is not one of auto, always, never"),
            std::string::npos);
  EXPECT_NE(error_of({{"optimizer.name", "adagrad"}}).find("name 'adagrad' is not one of lamb, adamw, adam, lars, sgd"),
            std::string::npos);
  EXPECT_NE(error_of({{"output_dir", "o"}, {"bert_config_file", "c"}, {"input_dir", "s"}, {"num_train_steps", "10"},
                      {"num_warmup_steps", "11"}})
                .find("phases.1. LrScheduleOptions.num_warmup_steps (11) must not exceed num_train_steps (10)"),
            std::string::npos);
}

// Through the real command: flags on `bertrain pretrain` reach OUTPUT_DIR/recipe.json (2 tiny steps).
TEST(RecipeOptions, PretrainFlagsReachTheResolvedRecipe) {
  const fs::path dir = test::temp_dir("recipe_options_cli");
  const std::string bin = std::string(BERTRAIN_BINARY_DIR) + "/bertrain";
  const std::string vocab = std::string(BERTRAIN_SOURCE_DIR) + "/data/vocab/bert-base-uncased-vocab.txt";
  test::write_file(dir / "tiny.json", R"({"vocab_size": 30522, "hidden_size": 8, "num_hidden_layers": 1,
      "num_attention_heads": 2, "intermediate_size": 16, "max_position_embeddings": 64})");
  std::string text;
  for (int i = 0; i < 60; ++i) text += "the quick brown fox number " + std::to_string(i) + " jumps .\n" + (i % 6 == 5 ? "\n" : "");
  test::write_file(dir / "corpus.txt", text);
  auto sh = [](const std::string& cmd) {
    const int rc = std::system((cmd + " > /dev/null 2>&1").c_str());
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  };
  ASSERT_EQ(sh(bin + " create-pretraining-data --input_file " + (dir / "corpus.txt").string() + " --output_dir " +
               (dir / "shards").string() + " --vocab_file " + vocab +
               " --do_lower_case=true --max_seq_length 32 --max_predictions_per_seq 5 --dupe_factor 2"),
            0);
  for (const auto* opt : {&kLamb, &kAdamW}) {
    std::string cmd = bin + " --num_threads 1 pretrain --no_progress --bert_config_file=" + (dir / "tiny.json").string() +
                      " --vocab_file=" + vocab + " --input_file=" + (dir / "shards").string() +
                      " --max_seq_length=32 --max_predictions_per_seq=5 --train_batch_size=4 --output_dir=" +
                      (dir / ("out_" + opt->front().second)).string();
    for (const auto& [k, v] : *opt) cmd += " '--optimizer." + k + "=" + v + "'";
    for (const auto& [k, v] : kPhase) cmd += " '--" + k + "=" + (k == "num_train_steps" ? std::string("2") : v) + "'";
    cmd += " --num_warmup_steps=1";
    // The unpadded encoder forced: the shards' short sequences (short_seq_prob, document ends) run packed.
    cmd += " --unpad=always";
    ASSERT_EQ(sh(cmd), 0) << cmd;
    const PretrainRecipe r = pretrain_recipe_from_json(
        test::read_file((dir / ("out_" + opt->front().second) / "recipe.json").string()), "recipe.json");
    if (opt == &kLamb) expect_lamb(r.optimizer);
    else expect_adamw(r.optimizer);
    const LrScheduleOptions& s = r.phases.at(0).schedule;
    EXPECT_EQ(s.learning_rate, 0.00123);
    EXPECT_EQ(s.decay, LrDecay::cosine);
    EXPECT_EQ(s.power, 0.75);
    EXPECT_EQ(s.end_learning_rate, 0.0001);
    EXPECT_EQ(s.convention, LrConvention::hugging_face);
    EXPECT_EQ(s.warmup_proportion, 0.25);
    EXPECT_EQ(r.unpad, Unpad::always);
  }
}

TEST(RecipeOptions, UnpadKeyDefaultsToAutoAndRoundTrips) {
  EXPECT_EQ(PretrainRecipe{}.unpad, Unpad::automatic);
  for (const char* v : {"auto", "always", "never"}) {
    PretrainRecipe r = load_pretrain_recipe("", {{"unpad", v}});
    EXPECT_EQ(to_string(r.unpad), v);
    EXPECT_EQ(pretrain_recipe_from_json(pretrain_recipe_to_json(r), "recipe.json").unpad, r.unpad);
  }
}

// Without micro_batch_size, each of R ranks runs train_batch_size / R sequences per step (google-research/bert's
// and NVIDIA's flags mean the global batch); a given micro_batch_size must divide train_batch_size / R.
TEST(RecipeOptions, MicroBatchDefaultsToTheGlobalBatchOverTheRanks) {
  const std::vector<std::pair<std::string, std::string>> base = {
      {"output_dir", "o"}, {"bert_config_file", "c"}, {"input_dir", "s"}, {"num_train_steps", "10"},
      {"train_batch_size", "32"}};
  PretrainRecipe r = load_pretrain_recipe("", base);
  EXPECT_EQ(r.phases[0].micro_batch_size, 0);
  EXPECT_EQ(r.phases[0].micro_batch_for(1), 32);
  EXPECT_EQ(r.phases[0].micro_batch_for(4), 8);
  r.validate(2);
  r.validate(32);
  try {
    r.validate(3);
    FAIL() << "32 sequences over 3 ranks accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train_batch_size (32) must be a multiple of the 3 ranks"), std::string::npos)
        << e.what();
  }
  PretrainRecipe resolved = r;
  resolved.resolve_micro_batch_size(4);
  EXPECT_EQ(resolved.phases[0].micro_batch_size, 8);
  EXPECT_NE(pretrain_recipe_to_json(resolved).find("\"micro_batch_size\": 8"), std::string::npos);
  auto with_micro = base;
  with_micro.emplace_back("micro_batch_size", "32");
  PretrainRecipe m = load_pretrain_recipe("", with_micro);
  EXPECT_EQ(m.phases[0].micro_batch_for(2), 32);
  try {
    m.validate(2);
    FAIL() << "an explicit micro-batch of 32 x 2 ranks accepted for a global batch of 32";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("must be a multiple of micro_batch_size (32) x 2 ranks"), std::string::npos)
        << e.what();
  }
}

TEST(RecipeOptions, AllreduceDtypeIsF32OrBf16AndRoundTrips) {
  EXPECT_EQ(PretrainRecipe{}.allreduce_dtype, DType::f32);
  PretrainRecipe r = load_pretrain_recipe("", {{"allreduce_dtype", "bf16"}});
  EXPECT_EQ(r.allreduce_dtype, DType::bf16);
  EXPECT_EQ(pretrain_recipe_from_json(pretrain_recipe_to_json(r), "recipe.json").allreduce_dtype, DType::bf16);
  try {
    load_pretrain_recipe("", {{"allreduce_dtype", "fp16"}});
    FAIL() << "fp16 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'allreduce_dtype' must be \"f32\" or \"bf16\", got \"fp16\""),
              std::string::npos)
        << e.what();
  }
}
