// atomic_file.h: the one atomic writer of the project. Checkpoints, configs, predictions, results and features
// all go through it, so a crash or a full disk never leaves half a file where a whole one was (DESIGN.md
// section 4).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace bertrain {

/// Writes `text` to `path` atomically: the bytes go to "<path>.tmp.<pid>" in the same directory, which is
/// fsynced, renamed over `path` (replacing any previous file in one step) and the directory fsynced, so after a
/// crash `path` holds either the old or the new text, never a mix. The directory must exist.
/// Throws bertrain::Error naming `path` when the temporary file cannot be created or written, or the rename
/// fails; the temporary file is removed and any previous `path` is left untouched.
void write_text_atomic(const std::string& path, std::string_view text);

/// The same for output written piece by piece (tensor data, one line per example): data goes to
/// "<path>.tmp.<pid>"; commit() fsyncs it, renames it over `path` and fsyncs the directory. Destroyed without
/// commit() (an exception on the way), it removes the temporary file and leaves any previous `path` untouched.
/// Throws bertrain::Error naming the file when the temporary file cannot be created, a write fails, or the
/// rename fails.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(const std::string& path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  void write(const void* data, size_t n);
  void commit();

 private:
  std::string path_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace bertrain
