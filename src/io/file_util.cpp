// file_util.cpp: atomic file writes and exact positioned reads (POSIX).
#include "io/file_util.h"

#include "bertrain/io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bertrain/core/error.h"

namespace bertrain {

AtomicFileWriter::AtomicFileWriter(const std::string& path)
    : path_(path), tmp_(path + ".tmp." + std::to_string(::getpid())) {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  BERTRAIN_CHECK(fd_ >= 0, "cannot create '", tmp_, "' to write '", path_, "': ", std::strerror(errno));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

void AtomicFileWriter::write(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    BERTRAIN_CHECK(w > 0, "writing '", path_, "' failed: ", std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void AtomicFileWriter::commit() {
  BERTRAIN_CHECK(::fsync(fd_) == 0, "fsync of '", tmp_, "' failed: ", std::strerror(errno));
  int rc = ::close(fd_);
  fd_ = -1;
  BERTRAIN_CHECK(rc == 0, "closing '", tmp_, "' failed: ", std::strerror(errno));
  BERTRAIN_CHECK(::rename(tmp_.c_str(), path_.c_str()) == 0, "renaming '", tmp_, "' to '", path_,
                 "' failed: ", std::strerror(errno));
  committed_ = true;
  // Make the rename itself durable.
  // (Constructed, not assigned from a literal: GCC 12 reports a false -Wrestrict on string = "." at -O3, bug 105329.)
  const std::string parent = std::filesystem::path(path_).parent_path().string();
  const std::string dir = parent.empty() ? std::string(".") : parent;
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void write_text_atomic(const std::string& path, std::string_view text) {
  AtomicFileWriter w(path);
  w.write(text.data(), text.size());
  w.commit();
}

void read_exact(int fd, void* dst, uint64_t n, uint64_t offset, const std::string& path) {
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    ssize_t r = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    BERTRAIN_CHECK(r >= 0, "reading '", path, "' failed: ", std::strerror(errno));
    BERTRAIN_CHECK(r > 0, "reading '", path, "': the file ended early (it changed while being read?)");
    p += r;
    n -= static_cast<uint64_t>(r);
    offset += static_cast<uint64_t>(r);
  }
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  BERTRAIN_CHECK(in.good(), "cannot open '", path, "': ", std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  BERTRAIN_CHECK(!in.bad(), "reading '", path, "' failed");
  return ss.str();
}

}  // namespace bertrain
