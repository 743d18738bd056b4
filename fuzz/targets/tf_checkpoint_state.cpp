// tf_checkpoint_state.cpp (fuzz target): a TF training directory's `checkpoint` file (CheckpointState in protobuf's
// text format) as `--init_checkpoint DIR` and `convert DIR` read it: read_tf_checkpoint_state, then
// find_tf_checkpoint of the directory (which holds no checkpoint, so a path that was read must be refused naming
// the `checkpoint` file). An accepted path is never empty, and a relative one is joined to the directory.
// Input: the file's bytes.
#include "bertrain/io/tf_bert.h"
#include "bertrain/io/tf_checkpoint.h"
#include "fuzz_util.h"

using namespace bertrain;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = [] {
    const std::string d = fuzz::scratch_dir() + "/state";
    std::filesystem::create_directories(d);
    return d;
  }();
  const std::string file = fuzz::write_scratch("state/checkpoint", std::string_view(reinterpret_cast<const char*>(data), size));
  fuzz::expect_refusal_or_success(file, [&] {
    const std::optional<std::string> path = read_tf_checkpoint_state(dir);
    if (!path || path->empty() || ((*path)[0] != '/' && path->compare(0, dir.size() + 1, dir + "/") != 0)) {
      std::fprintf(stderr, "FINDING: read_tf_checkpoint_state gave '%s'\n", path ? path->c_str() : "nullopt");
      std::abort();
    }
    find_tf_checkpoint(dir);
    std::fprintf(stderr, "FINDING: find_tf_checkpoint accepted '%s', which does not exist\n", path->c_str());
    std::abort();
  });
  return 0;
}
