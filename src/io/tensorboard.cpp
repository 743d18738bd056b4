// tensorboard.cpp: TFRecord framing and the hand-written protobuf encoding of tensorflow.Event (see tensorboard.h).
#include "bertrain/io/tensorboard.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "bertrain/core/crc32c.h"
#include "bertrain/core/error.h"
#include "bertrain/io/atomic_file.h"
#include "io/file_util.h"

namespace bertrain::tensorboard {

namespace fs = std::filesystem;

namespace {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLength = 2, kFixed32 = 5 };

// ---------------------------------------------------------------- encoding
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}
void put_tag(std::string& out, uint32_t field, WireType w) { put_varint(out, (static_cast<uint64_t>(field) << 3) | w); }
void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}
void put_bytes(std::string& out, uint32_t field, std::string_view s) {
  put_tag(out, field, kLength);
  put_varint(out, s.size());
  out.append(s);
}
void put_double(std::string& out, uint32_t field, double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, 8);
  put_tag(out, field, kFixed64);
  put_le(out, bits, 8);
}
// Event fields 1 and 2, proto3 style: left out when zero (0.0 here means +0.0 only, as protobuf compares bits).
void put_event_head(std::string& out, double wall_time, int64_t step) {
  uint64_t bits;
  std::memcpy(&bits, &wall_time, 8);
  if (bits != 0) put_double(out, 1, wall_time);
  if (step != 0) {
    put_tag(out, 2, kVarint);
    put_varint(out, static_cast<uint64_t>(step));  // negative int64: ten bytes, two's complement (protobuf's rule)
  }
}

uint32_t le32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}
uint64_t le64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

// ---------------------------------------------------------------- decoding
class Reader {
 public:
  explicit Reader(std::string_view b) : p_(b.data()), end_(b.data() + b.size()) {}
  bool done() const { return p_ == end_; }
  bool varint(uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) return false;
      const auto b = static_cast<uint8_t>(*p_++);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  }
  bool fixed(int n, uint64_t& v) {
    if (end_ - p_ < n) return false;
    v = n == 8 ? le64(p_) : le32(p_);
    p_ += n;
    return true;
  }
  bool bytes(std::string_view& s) {
    uint64_t n;
    if (!varint(n) || n > static_cast<uint64_t>(end_ - p_)) return false;
    s = std::string_view(p_, static_cast<size_t>(n));
    p_ += n;
    return true;
  }
  bool skip(uint32_t wire) {
    uint64_t v;
    std::string_view s;
    switch (wire) {
      case kVarint: return varint(v);
      case kFixed64: return fixed(8, v);
      case kLength: return bytes(s);
      case kFixed32: return fixed(4, v);
      default: return false;  // groups: never in these messages
    }
  }
  // Calls on_field(field, wire) per field; it consumes the value (or skips it) and returns false on bad data.
  template <class F>
  bool fields(F&& on_field) {
    while (!done()) {
      uint64_t tag;
      if (!varint(tag) || (tag >> 3) == 0 || (tag >> 3) > 0x1fffffff) return false;
      if (!on_field(static_cast<uint32_t>(tag >> 3), static_cast<uint32_t>(tag & 7))) return false;
    }
    return true;
  }

 private:
  const char* p_;
  const char* end_;
};

bool parse_value(std::string_view bytes, Event& ev) {
  Reader r(bytes);
  Scalar s;
  bool has_simple = false;
  const bool ok = r.fields([&](uint32_t field, uint32_t wire) {
    std::string_view v;
    uint64_t x;
    if (field == 1 && wire == kLength) {
      if (!r.bytes(v)) return false;
      s.tag.assign(v);
      return true;
    }
    if (field == 2 && wire == kFixed32) {
      if (!r.fixed(4, x)) return false;
      const auto bits = static_cast<uint32_t>(x);
      std::memcpy(&s.value, &bits, 4);
      has_simple = true;
      return true;
    }
    return r.skip(wire);
  });
  if (ok && has_simple) ev.scalars.push_back(std::move(s));
  return ok;
}

bool parse_summary(std::string_view bytes, Event& ev) {
  Reader r(bytes);
  return r.fields([&](uint32_t field, uint32_t wire) {
    if (field == 1 && wire == kLength) {
      std::string_view v;
      return r.bytes(v) && parse_value(v, ev);
    }
    return r.skip(wire);
  });
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  std::string h(buf);
  std::replace(h.begin(), h.end(), '/', '_');
  return h;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::atomic<int64_t> g_files_opened{0};

}  // namespace

// ---------------------------------------------------------------- records and events
std::string frame_record(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 16);
  put_le(out, data.size(), 8);
  put_le(out, crc32c::mask(crc32c::value(out.data(), 8)), 4);
  out.append(data);
  put_le(out, crc32c::mask(crc32c::value(data)), 4);
  return out;
}

std::string encode_file_version_event(double wall_time) {
  std::string out;
  put_event_head(out, wall_time, 0);
  put_bytes(out, 3, kFileVersion);
  return out;
}

std::string encode_scalars_event(double wall_time, int64_t step, std::span<const Scalar> scalars) {
  std::string summary;
  for (const Scalar& s : scalars) {
    std::string value;
    if (!s.tag.empty()) put_bytes(value, 1, s.tag);
    uint32_t bits;
    std::memcpy(&bits, &s.value, 4);
    put_tag(value, 2, kFixed32);  // a oneof member: written even when 0
    put_le(value, bits, 4);
    put_bytes(summary, 1, value);
  }
  std::string out;
  put_event_head(out, wall_time, step);
  put_bytes(out, 5, summary);  // a oneof member: written even when empty
  return out;
}

bool parse_event(std::string_view bytes, Event& out) {
  out = Event{};
  Reader r(bytes);
  return r.fields([&](uint32_t field, uint32_t wire) {
    uint64_t x;
    std::string_view v;
    if (field == 1 && wire == kFixed64) {
      if (!r.fixed(8, x)) return false;
      std::memcpy(&out.wall_time, &x, 8);
      return true;
    }
    if (field == 2 && wire == kVarint) {
      if (!r.varint(x)) return false;
      out.step = static_cast<int64_t>(x);
      return true;
    }
    if (field == 3 && wire == kLength) {
      if (!r.bytes(v)) return false;
      out.file_version.assign(v);
      return true;
    }
    if (field == 5 && wire == kLength) {
      if (!r.bytes(v)) return false;
      out.has_summary = true;
      return parse_summary(v, out);
    }
    return r.skip(wire);
  });
}

RecordScan scan_records(std::string_view bytes) {
  RecordScan s;
  size_t pos = 0;
  char buf[64];
  while (pos < bytes.size()) {
    if (bytes.size() - pos < 12) {
      s.error = "incomplete record header";
      break;
    }
    const char* h = bytes.data() + pos;
    if (crc32c::mask(crc32c::value(h, 8)) != le32(h + 8)) {
      std::snprintf(buf, sizeof buf, "length CRC-32C mismatch at byte %zu", pos);
      s.error = buf;
      break;
    }
    const uint64_t n = le64(h);
    if (n > bytes.size() - pos - 12 || bytes.size() - pos - 12 - n < 4) {
      s.error = "incomplete record";
      break;
    }
    const std::string_view data(h + 12, static_cast<size_t>(n));
    if (crc32c::mask(crc32c::value(data)) != le32(h + 12 + n)) {
      std::snprintf(buf, sizeof buf, "data CRC-32C mismatch at byte %zu", pos);
      s.error = buf;
      break;
    }
    s.records.push_back(data);
    pos += 12 + static_cast<size_t>(n) + 4;
    s.consumed = pos;
  }
  return s;
}

// ---------------------------------------------------------------- files
bool is_event_file_name(std::string_view name) { return name.starts_with("events.out.tfevents."); }

std::vector<std::string> list_event_files(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (is_event_file_name(name) && name.find(".tmp.") == std::string::npos && e.is_regular_file())
      out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TruncateReport truncate_event_files(const std::string& dir, int64_t step) {
  TruncateReport rep;
  for (const std::string& path : list_event_files(dir)) {
    if (step < 0) {
      const std::string bytes = read_text_file(path);
      for (std::string_view rec : scan_records(bytes).records) {
        Event ev;
        if (parse_event(rec, ev) && ev.has_summary) ++rep.dropped;
      }
      std::error_code ec;
      fs::remove(path, ec);
      BERTRAIN_CHECK(!ec, "cannot remove the event file ", path, ": ", ec.message());
      ++rep.files_removed;
      continue;
    }
    const std::string bytes = read_text_file(path);
    const RecordScan scan = scan_records(bytes);
    std::string kept;
    int64_t summaries = 0, dropped = 0, bad = 0;
    size_t bad_at = 0;
    for (std::string_view rec : scan.records) {
      Event ev;
      if (!parse_event(rec, ev)) {  // a record that is not an Event: stop here, as TensorBoard's loader would fail
        bad = 1;
        bad_at = static_cast<size_t>(rec.data() - bytes.data()) - 12;
        break;
      }
      if (ev.step > step) {
        if (ev.has_summary) ++dropped;
        continue;
      }
      if (ev.has_summary) ++summaries;
      kept += frame_record(rec);
    }
    const bool cut_tail = scan.consumed < bytes.size();
    if (bad || (cut_tail && scan.error.find("incomplete") == std::string::npos)) {
      rep.notes.push_back(path + ": " + (bad ? "a record that is not a tensorflow.Event at byte " + std::to_string(bad_at)
                                             : scan.error) +
                          "; the records before it are kept, the rest of the file is dropped");
    }
    rep.dropped += dropped;
    if (dropped == 0 && !bad && !cut_tail) continue;  // unchanged
    if (summaries == 0) {
      std::error_code ec;
      fs::remove(path, ec);
      BERTRAIN_CHECK(!ec, "cannot remove the event file ", path, ": ", ec.message());
      ++rep.files_removed;
    } else {
      write_text_atomic(path, kept);
      ++rep.files_rewritten;
    }
  }
  return rep;
}

EventFileWriter::EventFileWriter(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  BERTRAIN_CHECK(!ec, "cannot create the TensorBoard directory ", dir, ": ", ec.message());
  const double t = now_seconds();
  char stamp[32];
  std::snprintf(stamp, sizeof stamp, "%010lld", static_cast<long long>(t));
  const std::string base = (fs::path(dir) / "events.out.tfevents.").string() + stamp + "." + host_name() + "." +
                           std::to_string(getpid()) + ".";
  // The counter makes names unique within the process; O_EXCL guards against another process (a pid reused on
  // another host writing to a shared file system within the same second).
  for (int attempt = 0; fd_ < 0; ++attempt) {
    path_ = base + std::to_string(g_files_opened++);
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    BERTRAIN_CHECK(fd_ >= 0 || (errno == EEXIST && attempt < 1000), "cannot create the TensorBoard event file ", path_,
                   ": ", std::strerror(errno));
  }
  write_all(frame_record(encode_file_version_event(t)));
}

EventFileWriter::~EventFileWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void EventFileWriter::add_scalars(int64_t step, std::span<const Scalar> scalars) {
  if (scalars.empty()) return;
  write_all(frame_record(encode_scalars_event(now_seconds(), step, scalars)));
}

void EventFileWriter::add_event(std::string_view event_bytes) { write_all(frame_record(event_bytes)); }

void EventFileWriter::sync() {
  BERTRAIN_CHECK(::fsync(fd_) == 0, "cannot sync the TensorBoard event file ", path_, ": ", std::strerror(errno));
}

void EventFileWriter::write_all(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    BERTRAIN_CHECK(n > 0, "cannot write the TensorBoard event file ", path_, ": ", std::strerror(errno));
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace bertrain::tensorboard
