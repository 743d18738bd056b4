// tf_checkpoint.cpp (fuzz target): a TensorFlow tensor-bundle checkpoint (PREFIX.index, a LevelDB table of
// BundleHeaderProto / BundleEntryProto messages, and PREFIX.data-00000-of-00001) as the commands read it: with flag
// bit 0 clear, TfCheckpointReader::open (what `bertrain inspect` and `convert` do) and every entry loaded as stored,
// converted to f32, and as strings where it is DT_STRING, then read_tf_bert_weights (the BERT name mapping of
// `convert`); with bit 0 set, load_model() of the prefix into a tiny BertForPreTraining (what --init_checkpoint
// PREFIX does; bit 1 require_backbone, bit 2 strict).
// Input: one flags byte, two bytes (little-endian) giving the index's length L, L bytes of PREFIX.index (fewer when
// the input ends first), then the bytes of PREFIX.data-00000-of-00001.
#include "bertrain/core/rng.h"
#include "bertrain/io/checkpoint.h"
#include "bertrain/io/tf_bert.h"
#include "bertrain/io/tf_checkpoint.h"
#include "bertrain/models/bert.h"
#include "fuzz_util.h"

using namespace bertrain;

namespace {

BertForPreTraining& tiny_model() {
  // keras_bert_tiny's shape (tests/fixtures/tf_checkpoints): L2 H4 A4 I16, vocab 15.
  static BertForPreTraining* model = [] {
    BertConfig c;
    c.vocab_size = 15;
    c.hidden_size = 4;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 4;
    c.intermediate_size = 16;
    c.max_position_embeddings = 16;
    Rng rng(1);
    return new BertForPreTraining(c, rng);
  }();
  return *model;
}

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "FINDING: %s\n", what.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto in = fuzz::split_flags(data, size);
  std::string_view rest = in.bytes;
  size_t index_len = 0;
  if (rest.size() >= 2) {
    index_len = static_cast<uint8_t>(rest[0]) | (static_cast<size_t>(static_cast<uint8_t>(rest[1])) << 8);
    rest.remove_prefix(2);
  }
  index_len = std::min(index_len, rest.size());
  const std::string prefix = fuzz::scratch_dir() + "/model.ckpt";
  fuzz::write_scratch("model.ckpt.index", rest.substr(0, index_len));
  fuzz::write_scratch("model.ckpt.data-00000-of-00001", rest.substr(index_len));

  if (in.flags & 1) {
    fuzz::expect_refusal_or_success(prefix, [&] {
      LoadReport report;
      LoadOptions options;
      options.require_backbone = in.flags & 2;
      options.strict = in.flags & 4;
      load_model(prefix, tiny_model(), report, options);
      (void)report.summary();
    });
    return 0;
  }
  fuzz::expect_refusal_or_success(prefix, [&] {
    const TfCheckpointReader reader = TfCheckpointReader::open(prefix);
    for (const TfTensorInfo& e : reader.entries()) {
      (void)e.shape_str();
      fuzz::expect_refusal_or_success(prefix, [&] {
        if (e.dtype == static_cast<int>(TfDType::string)) {
          const auto strings = reader.load_strings(e.name);
          if (static_cast<int64_t>(strings.size()) != e.numel())
            finding("DT_STRING '" + e.name + "' gave " + std::to_string(strings.size()) + " strings for " + e.shape_str());
          return;
        }
        const Tensor t = reader.load(e.name);
        if (t.numel() != e.numel())
          finding("tensor '" + e.name + "' " + e.shape_str() + " loaded with " + std::to_string(t.numel()) + " elements");
        (void)reader.load(e.name, DType::f32);
      });
    }
    TfMappingReport report;
    fuzz::expect_refusal_or_success(prefix, [&] {
      const auto tensors = read_tf_bert_weights(reader, &tiny_model().bert().config(), "fuzz/bert_config.json", report);
      (void)report.summary();
      (void)tensors.size();
    });
  });
  return 0;
}
