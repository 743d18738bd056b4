// hdf5_shard.cpp (fuzz target): a pretraining shard (read_pretraining_shard_image and
// inspect_pretraining_shard_image: HDF5's file-image API on the bytes, then the checks read_pretraining_shard
// makes on files). Accepted features must be consistent with the shape inspect reported.
#include "bertrain/data/hdf5_shard.h"
#include "fuzz_util.h"

using namespace bertrain;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const std::string source = "fuzz/part-00000-training.hdf5";
  fuzz::expect_refusal_or_success(source, [&] {
    const data::ShardInfo info = data::inspect_pretraining_shard_image(bytes, source);
    const data::PretrainingFeatures f = data::read_pretraining_shard_image(bytes, source);
    if (f.size() != info.num_samples || f.max_seq_length != info.max_seq_length ||
        f.max_predictions_per_seq != info.max_predictions_per_seq) {
      std::fprintf(stderr, "FINDING: read and inspect disagree on the shape\n");
      std::abort();
    }
    f.check_consistent(source);
  });
  return 0;
}
