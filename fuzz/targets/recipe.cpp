// recipe.cpp (fuzz target): a pretraining recipe through load_pretrain_recipe (what `bertrain pretrain --config`
// calls, here with flag overrides when flag bit 0 is set) and pretrain_recipe_from_json; an accepted recipe must
// survive pretrain_recipe_to_json -> pretrain_recipe_from_json unchanged. Input: one flags byte, then the file.
#include "bertrain/io/recipe.h"
#include "fuzz_util.h"

using namespace bertrain;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto in = fuzz::split_flags(data, size);
  const std::string path = fuzz::write_scratch("recipe.json", in.bytes);
  std::vector<std::pair<std::string, std::string>> overrides;
  if (in.flags & 1) overrides = {{"learning_rate", "2e-3"}, {"phases.1.max_seq_length", "64"}, {"optimizer.name", "adamw"}};
  // Override errors name the flag, not the file (the flag is what the user typed).
  const std::string expect = overrides.empty() ? path : "";
  fuzz::expect_refusal_or_success(expect, [&] {
    const PretrainRecipe r = load_pretrain_recipe(path, overrides);
    const std::string once = pretrain_recipe_to_json(r);
    const std::string twice = pretrain_recipe_to_json(pretrain_recipe_from_json(once, "round trip"));
    if (once != twice) {
      std::fprintf(stderr, "FINDING: recipe does not round-trip:\n%s\n%s\n", once.c_str(), twice.c_str());
      std::abort();
    }
  });
  fuzz::expect_refusal_or_success("fuzz/recipe.json",
                                  [&] { (void)pretrain_recipe_from_json(std::string(in.bytes), "fuzz/recipe.json"); });
  return 0;
}
