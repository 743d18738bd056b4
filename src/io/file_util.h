// file_util.h: POSIX file helpers private to the io layer: exact positioned reads and whole-file reads (the atomic
// writers, write_text_atomic and the streaming AtomicFileWriter, are public in bertrain/io/atomic_file.h). Every
// failure throws bertrain::Error naming the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "bertrain/io/atomic_file.h"

namespace bertrain {

/// Reads exactly `n` bytes at `offset`; throws when the file ends early or the read fails.
void read_exact(int fd, void* dst, uint64_t n, uint64_t offset, const std::string& path);
/// The whole file as a string; throws naming the file when it cannot be read.
std::string read_text_file(const std::string& path);

}  // namespace bertrain
