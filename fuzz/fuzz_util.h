// fuzz_util.h: what every fuzz target checks besides the sanitizers: bad input is refused only with
// bertrain::Error (DESIGN.md section 4), in one line that names the file; and a private scratch directory for
// the readers that the commands call with a path.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "bertrain/core/error.h"

// The allocation policy of every target (read by AddressSanitizer at start-up; run_fuzz.sh and scripts/fuzz.sh
// add nothing): malloc() of more than 512 MiB fails with NULL, as glibc's fails for the impossible sizes a corrupt
// file claims, which the C dependencies (libhdf5) handle as errors; operator new of more than 512 MiB is still a
// finding (ASan reports it), so bertrain allocating what a file claims is caught, as is any dependency's C++ code.
// libFuzzer's own -malloc_limit_mb=512 sees only allocations that succeeded. See README "Reliability".
extern "C" const char* __asan_default_options() {
  return "allocator_may_return_null=1:max_allocation_size_mb=512";
}

// Leaks inside libhdf5 are HDF5's own (dependency finding H2: a corrupt free-space section leaks two blocks on
// an error path): an HDF5 object bertrain forgets to close stays reachable from HDF5's id tables, so LeakSanitizer
// never reports it as a leak, and this suppression hides nothing of bertrain's.
extern "C" const char* __lsan_default_suppressions() { return "leak:libhdf5_serial.so\n"; }

namespace bertrain::fuzz {

/// Aborts (a libFuzzer finding) when an error message does not name `source` or spans several lines.
inline void check_message(const char* what, std::string_view source) {
  const std::string_view msg(what);
  if (!source.empty() && msg.find(source) == std::string_view::npos) {
    std::fprintf(stderr, "FINDING: error message does not name '%.*s': %s\n", static_cast<int>(source.size()),
                 source.data(), what);
    std::abort();
  }
  if (msg.find('\n') != std::string_view::npos || msg.empty()) {
    std::fprintf(stderr, "FINDING: error message is not one line: [%s]\n", what);
    std::abort();
  }
}

/// Runs `fn`. A bertrain::Error is the expected refusal of bad input and must name `source` (when not empty)
/// in one line; any other exception is left to escape, which libFuzzer reports as a crash (deadly signal from
/// std::terminate): bertrain promises bertrain::Error and nothing else.
template <class Fn>
void expect_refusal_or_success(std::string_view source, Fn&& fn) {
  try {
    fn();
  } catch (const bertrain::Error& e) {
    check_message(e.what(), source);
  }
}

/// A directory of this process for the readers that take a path (GLUE data_dir, recipe files): in /dev/shm
/// when it exists (no disk traffic at thousands of inputs a second), removed at exit.
inline const std::string& scratch_dir() {
  // Never destroyed: the exit handler that removes the directory runs after static destructors would have.
  static const std::string* dir = [] {
    std::string base = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path().string();
    auto* d = new std::string(base + "/bertrain-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(*d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch_dir(), ec);
    });
    return d;
  }();
  return *dir;
}

/// Writes `bytes` to scratch_dir()/name and returns the path.
inline std::string write_scratch(const std::string& name, std::string_view bytes) {
  const std::string path = scratch_dir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "fuzz harness: cannot write %s\n", path.c_str());
    std::abort();
  }
  return path;
}

/// Splits a fuzz input into its first byte (the target's options) and the rest (the file).
struct Input {
  uint8_t flags = 0;
  std::string_view bytes;
};
inline Input split_flags(const uint8_t* data, size_t size) {
  if (size == 0) return {0, {}};
  return {data[0], std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1)};
}

}  // namespace bertrain::fuzz
