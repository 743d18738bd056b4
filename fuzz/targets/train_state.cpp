// train_state.cpp (fuzz target): a checkpoint's trainer_state.json (TrainState::from_json, the body of
// TrainState::read, which --resume calls); an accepted state must survive to_json -> from_json unchanged.
#include "bertrain/train/train_state.h"
#include "fuzz_util.h"

using namespace bertrain;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string source = "fuzz/checkpoint-1/trainer_state.json";
  fuzz::expect_refusal_or_success(source, [&] {
    const TrainState s = TrainState::from_json(text, source);
    const std::string once = s.to_json();
    const std::string twice = TrainState::from_json(once, "round trip").to_json();
    if (once != twice) {
      std::fprintf(stderr, "FINDING: trainer state does not round-trip:\n%s\n%s\n", once.c_str(), twice.c_str());
      std::abort();
    }
  });
  return 0;
}
