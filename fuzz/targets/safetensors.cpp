// safetensors.cpp (fuzz target): a safetensors file (SafetensorsFile::from_memory, the body of open) with every
// tensor loaded as stored and converted; or, with flag bit 0, the same bytes through load_model() into a tiny
// BertForPreTraining (what --init_checkpoint does: name matching, aliases, shape and dtype checks).
// Input: one flags byte, then the file.
#include "bertrain/core/rng.h"
#include "bertrain/io/checkpoint.h"
#include "bertrain/io/safetensors.h"
#include "bertrain/models/bert.h"
#include "fuzz_util.h"

using namespace bertrain;

namespace {

BertForPreTraining& tiny_model() {
  static BertForPreTraining* model = [] {
    BertConfig c;
    c.vocab_size = 16;
    c.hidden_size = 4;
    c.num_hidden_layers = 1;
    c.num_attention_heads = 2;
    c.intermediate_size = 8;
    c.max_position_embeddings = 8;
    Rng rng(1);
    return new BertForPreTraining(c, rng);
  }();
  return *model;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto in = fuzz::split_flags(data, size);
  if (in.flags & 1) {
    const std::string path = fuzz::write_scratch("model.safetensors", in.bytes);
    fuzz::expect_refusal_or_success(path, [&] {
      LoadReport report;
      LoadOptions options;
      options.require_backbone = in.flags & 2;
      options.strict = in.flags & 4;
      load_model(path, tiny_model(), report, options);
      (void)report.summary();
    });
    return 0;
  }
  const std::string source = "fuzz/model.safetensors";
  fuzz::expect_refusal_or_success(source, [&] {
    const SafetensorsFile f = SafetensorsFile::from_memory(std::string(in.bytes), source);
    for (const auto& name : f.names()) {
      fuzz::expect_refusal_or_success(source, [&] {
        const Tensor t = f.load(name);
        (void)f.load(name, DType::f32);
        (void)f.load(name, DType::bf16);
        const SafetensorsInfo& info = f.info(name);
        if (info.dtype != "F16" && info.dtype != "U8" && t.nbytes() != info.end - info.begin) {
          std::fprintf(stderr, "FINDING: tensor '%s' has %zu bytes, the file gave it %llu\n", name.c_str(),
                       static_cast<size_t>(t.nbytes()), static_cast<unsigned long long>(info.end - info.begin));
          std::abort();
        }
      });
    }
  });
  return 0;
}
