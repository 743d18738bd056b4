// tensorboard.h: TensorBoard event files (events.out.tfevents.*): TFRecord framing around tensorflow.Event
// protobuf messages holding scalar summaries, as TensorFlow's EventsWriter and TensorBoard's own writer produce
// them, so `tensorboard --logdir` shows a bertrain run as it shows a google-research/bert or Hugging Face one.
//
// Formats (tensorflow/core/lib/io/record_writer.cc; tensorboard/compat/proto/event.proto, summary.proto):
//   record  = uint64 length (little-endian) | uint32 masked CRC-32C of those 8 bytes | data | uint32 masked CRC-32C
//             of data; mask(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8 (bertrain/core/crc32c.h).
//   Event   = wall_time (1, double) | step (2, int64) | oneof what { file_version (3, string) | summary (5) }
//   Summary = repeated Value value (1);  Value = tag (1, string) | oneof value { simple_value (2, float) }
// The protobuf wire encoding is written by hand (libprotobuf cannot share the process with libsentencepiece's copy,
// see io/layer.cmake), serialised as protobuf's C++ runtime does: fields in number order, proto3 scalars only when
// non-zero, oneof members always.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace bertrain::tensorboard {

/// The file_version of the first record of every event file. Version 2 tells TensorBoard not to purge data on
/// out-of-order steps (tensorboard/backend/event_processing/event_accumulator.py): steps written twice would show
/// as a zig-zag, which is why a resumed run rewrites the older files (truncate_event_files) instead.
inline constexpr std::string_view kFileVersion = "brain.Event:2";

/// One scalar of a summary: TensorBoard tag ("train/loss") and its value (float32, as simple_value holds it).
struct Scalar {
  std::string tag;
  float value = 0;
};

/// A decoded Event (only the fields bertrain writes; others are skipped when parsing).
struct Event {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;     ///< set in the first record of a file
  bool has_summary = false;
  std::vector<Scalar> scalars;  ///< values of the summary that hold a simple_value
};

/// `data` framed as one TFRecord (12-byte header, data, 4-byte footer).
std::string frame_record(std::string_view data);

/// Serialised Event messages: the file_version record, and a summary of `scalars` at `step`.
/// wall_time: seconds since the Unix epoch.
std::string encode_file_version_event(double wall_time);
std::string encode_scalars_event(double wall_time, int64_t step, std::span<const Scalar> scalars);

/// Parses an Event as protobuf does (fields in any order, unknown fields skipped). False when the bytes are not a
/// well-formed message (a truncated varint or length, a group, an unknown wire type).
bool parse_event(std::string_view bytes, Event& out);

/// The whole records at the start of `bytes` (an event file's contents). Reading stops at the first record that
/// is incomplete (a file being written, or cut by a crash) or whose CRC does not match; `consumed` is the byte
/// length of the whole, checked records and `error` says why reading stopped early ("" when all bytes were read).
struct RecordScan {
  std::vector<std::string_view> records;  ///< views into `bytes`
  size_t consumed = 0;
  std::string error;
};
RecordScan scan_records(std::string_view bytes);

/// True for a TensorBoard event file's name ("events.out.tfevents." prefix), as TensorBoard's loader selects them.
bool is_event_file_name(std::string_view file_name);

/// The event files directly in `dir`, sorted by name (the order TensorBoard reads them in). None when `dir` does
/// not exist.
std::vector<std::string> list_event_files(const std::string& dir);

/// Makes every event file in `dir` hold only records whose step is <= `step` (the file_version record, step 0,
/// stays): a file that loses records is rewritten atomically (bertrain/io/atomic_file.h) without them, one left
/// with no summary is removed. An incomplete last record (a run cut by a crash) is dropped the same way; a file
/// whose reading stops at a CRC mismatch or an unparsable Event keeps the records before it, and `notes` names the
/// file, the offset and the records lost. `step` < 0 removes every event file (a new run in the directory).
/// Throws bertrain::Error naming the file when one cannot be read, rewritten or removed.
struct TruncateReport {
  int64_t dropped = 0;             ///< summary records dropped (steps past `step`)
  int64_t files_rewritten = 0, files_removed = 0;
  std::vector<std::string> notes;  ///< one line per damaged file, for the caller's log
};
TruncateReport truncate_event_files(const std::string& dir, int64_t step);

/// Writes one new event file in a directory: created (with the directory) on construction as
/// "events.out.tfevents.<unix seconds, 10 digits>.<hostname>.<pid>.<n>" (TensorBoard's own writer's name: n counts
/// the files this process opened, so names stay unique), starting with the file_version record. Every add() goes
/// to the file at once as whole records in one write(2), so TensorBoard sees a live run and a reader never meets a
/// record the writer has given up on; sync() makes the file durable (fsync), e.g. with each checkpoint.
/// Throws bertrain::Error naming the file when it cannot be created or a write fails.
class EventFileWriter {
 public:
  explicit EventFileWriter(const std::string& dir);
  ~EventFileWriter();
  EventFileWriter(const EventFileWriter&) = delete;
  EventFileWriter& operator=(const EventFileWriter&) = delete;

  /// One Event with a summary of `scalars` at `step`, stamped with the current wall time. Nothing is written
  /// for an empty list.
  void add_scalars(int64_t step, std::span<const Scalar> scalars);
  /// Writes already serialised Event bytes as one record (tests; other summary kinds).
  void add_event(std::string_view event_bytes);
  void sync();
  const std::string& path() const { return path_; }

 private:
  void write_all(std::string_view bytes);
  std::string path_;
  int fd_ = -1;
};

}  // namespace bertrain::tensorboard
