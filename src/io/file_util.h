// file_util.h: POSIX file helpers private to the io layer: the streaming atomic writer (behind write_text_atomic
// and the safetensors writer) and exact positioned reads. Every failure throws bertrain::Error naming the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace bertrain {

/// Writes a file atomically: data goes to "<path>.tmp.<pid>" in the same directory; commit() fsyncs it,
/// renames it over `path` and fsyncs the directory. Destroyed without commit() (an exception on the way),
/// it removes the temporary file and leaves any previous `path` untouched.
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

/// Reads exactly `n` bytes at `offset`; throws when the file ends early or the read fails.
void read_exact(int fd, void* dst, uint64_t n, uint64_t offset, const std::string& path);
/// The whole file as a string; throws naming the file when it cannot be read.
std::string read_text_file(const std::string& path);

}  // namespace bertrain
