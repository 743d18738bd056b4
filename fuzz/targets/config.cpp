// config.cpp (fuzz target): a model config.json / bert_config.json (parse_bert_config, the body of
// load_bert_config); an accepted config must survive bert_config_to_json -> parse_bert_config unchanged, and
// google-research/bert's form (bert_config_to_google_json, what `convert` writes) must read back to the same config
// (num_labels aside when the labels have no names: google's file has no such key).
#include "bertrain/io/config.h"
#include "fuzz_util.h"

using namespace bertrain;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string source = "config file 'fuzz/config.json'";
  fuzz::expect_refusal_or_success("fuzz/config.json", [&] {
    const BertConfig c = parse_bert_config(text, source);
    const std::string once = bert_config_to_json(c);
    const std::string twice = bert_config_to_json(parse_bert_config(once, "round trip"));
    if (once != twice) {
      std::fprintf(stderr, "FINDING: config does not round-trip:\n%s\n%s\n", once.c_str(), twice.c_str());
      std::abort();
    }
    // google's file has no num_labels (its classifier takes it from the task), so it comes back only with names.
    const std::string google = bert_config_to_google_json(c);
    BertConfig back = parse_bert_config(google, "google round trip");
    if (!c.has_label_names()) back.num_labels = c.num_labels;
    if (bert_config_to_json(back) != once) {
      std::fprintf(stderr, "FINDING: google form does not round-trip:\n%s\n%s\n", once.c_str(), google.c_str());
      std::abort();
    }
  });
  return 0;
}
