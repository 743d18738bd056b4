// tensorboard_test.cpp: TensorBoard event files (bertrain/io/tensorboard.h): exact bytes of the TFRecord framing and
// of Event messages worked out by hand from the protobuf wire format, CRC-32C check values, the writer's files and
// the truncation a resumed run applies. tests/train/tensorboard_test.sh reads whole runs with an independent reader.
#include "bertrain/io/tensorboard.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "bertrain/core/crc32c.h"
#include "bertrain/core/error.h"
#include "test_util.h"

namespace tb = bertrain::tensorboard;
namespace fs = std::filesystem;

namespace {

std::string hex(std::string_view s) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}

std::string unhex(std::string_view h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) out += static_cast<char>(std::stoi(std::string(h.substr(i, 2)), nullptr, 16));
  return out;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void spit(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The events of a file, all of whose records must be whole.
std::vector<tb::Event> events_of(const std::string& path) {
  const std::string bytes = slurp(path);
  const tb::RecordScan scan = tb::scan_records(bytes);
  EXPECT_EQ(scan.error, "") << path;
  EXPECT_EQ(scan.consumed, bytes.size()) << path;
  std::vector<tb::Event> out;
  for (std::string_view r : scan.records) {
    tb::Event e;
    EXPECT_TRUE(tb::parse_event(r, e)) << path;
    out.push_back(e);
  }
  return out;
}

std::string temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("bertrain_tb_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

}  // namespace

TEST(TensorBoard, Crc32cCheckValues) {
  // RFC 3720 appendix B.4: 32 zero bytes; the CRC catalogue's check value of "123456789".
  EXPECT_EQ(bertrain::crc32c::value(std::string(32, '\0')), 0x8a9136aau);
  EXPECT_EQ(bertrain::crc32c::value("123456789"), 0xe3069283u);
  EXPECT_EQ(bertrain::crc32c::mask(0), 0xa282ead8u);  // the mask of TensorFlow's record_writer.cc
}

TEST(TensorBoard, RecordFramingExactBytes) {
  // length 9 (uint64 LE) | masked CRC-32C of those 8 bytes | data | masked CRC-32C of data (mask(0xe3069283)).
  EXPECT_EQ(hex(tb::frame_record("123456789")), "0900000000000000" "37f97139" "313233343536373839" "e5b08ac7");
  // An empty record: the masked CRC of no bytes is mask(0) = 0xa282ead8.
  EXPECT_EQ(hex(tb::frame_record("")).substr(24), "d8ea82a2");
}

TEST(TensorBoard, EventEncodingExactBytes) {
  // wall_time 1.5: tag 0x09 (field 1, fixed64) + IEEE 754 LE; file_version: tag 0x1a (field 3, bytes), length 13.
  EXPECT_EQ(hex(tb::encode_file_version_event(1.5)), "09000000000000f83f" "1a0d" + hex("brain.Event:2"));
  // step 3: 0x10 0x03; summary: 0x2a (field 5) len 10 { 0x0a (value) len 8 { 0x0a 01 'a', 0x15 (simple_value,
  // fixed32) 1.0f = 0000803f } }.
  const tb::Scalar one[] = {{"a", 1.0f}};
  EXPECT_EQ(hex(tb::encode_scalars_event(1.5, 3, one)), "09000000000000f83f" "1003" "2a0a" "0a08" "0a0161" "150000803f");
  // Step 300 is the varint ac 02; a simple_value of 0 is still written (a oneof member); step 0 is left out.
  const tb::Scalar zero[] = {{"b", 0.0f}};
  EXPECT_EQ(hex(tb::encode_scalars_event(1.5, 300, zero)), "09000000000000f83f" "10ac02" "2a0a0a080a016215" "00000000");
  EXPECT_EQ(hex(tb::encode_scalars_event(1.5, 0, zero)), "09000000000000f83f" "2a0a0a080a01621500000000");
  // A negative step takes ten bytes (two's complement varint, as protobuf writes int64).
  EXPECT_EQ(hex(tb::encode_scalars_event(1.5, -1, zero)).substr(18, 22), "10ffffffffffffffffff01");
}

TEST(TensorBoard, ParseRoundTripAndUnknownFields) {
  const tb::Scalar s[] = {{"train/loss", 2.25f}, {"train/learning_rate", 1e-4f}};
  tb::Event e;
  ASSERT_TRUE(tb::parse_event(tb::encode_scalars_event(1234.5, 77, s), e));
  EXPECT_EQ(e.wall_time, 1234.5);
  EXPECT_EQ(e.step, 77);
  ASSERT_TRUE(e.has_summary);
  ASSERT_EQ(e.scalars.size(), 2u);
  EXPECT_EQ(e.scalars[0].tag, "train/loss");
  EXPECT_EQ(e.scalars[0].value, 2.25f);
  EXPECT_EQ(e.scalars[1].tag, "train/learning_rate");
  EXPECT_EQ(e.scalars[1].value, 1e-4f);
  // An unknown field (9, bytes) before the step is skipped; a truncated message is rejected.
  std::string with_unknown = unhex("4a03616263") + tb::encode_scalars_event(1, 5, s);
  ASSERT_TRUE(tb::parse_event(with_unknown, e));
  EXPECT_EQ(e.step, 5);
  const std::string full = tb::encode_scalars_event(1, 5, s);
  EXPECT_FALSE(tb::parse_event(std::string_view(full).substr(0, full.size() - 3), e));
}

TEST(TensorBoard, ScanStopsAtIncompleteOrCorruptRecords) {
  const std::string a = tb::frame_record("first"), b = tb::frame_record("second");
  const std::string both = a + b;  // the scan returns views into it
  tb::RecordScan s = tb::scan_records(both);
  ASSERT_EQ(s.records.size(), 2u);
  EXPECT_EQ(s.records[1], "second");
  EXPECT_EQ(s.consumed, a.size() + b.size());
  EXPECT_EQ(s.error, "");
  for (size_t cut = 1; cut < b.size(); ++cut) {  // a record being written: every prefix reads as one whole record
    const std::string cut_bytes = a + b.substr(0, cut);
    s = tb::scan_records(cut_bytes);
    ASSERT_EQ(s.records.size(), 1u) << cut;
    EXPECT_EQ(s.consumed, a.size());
    EXPECT_NE(s.error.find("incomplete"), std::string::npos) << s.error;
  }
  std::string bad = a + b;
  bad[a.size() + 13] ^= 1;  // a byte of "second"
  s = tb::scan_records(bad);
  EXPECT_EQ(s.records.size(), 1u);
  EXPECT_EQ(s.error, "data CRC-32C mismatch at byte " + std::to_string(a.size()));
  bad = a + b;
  bad[a.size()] ^= 1;  // the length
  EXPECT_EQ(tb::scan_records(bad).error, "length CRC-32C mismatch at byte " + std::to_string(a.size()));
}

TEST(TensorBoard, WriterFileNameAndContents) {
  const std::string dir = temp_dir("writer") + "/sub";  // created by the writer
  std::string p1, p2;
  {
    tb::EventFileWriter w(dir), w2(dir);
    p1 = w.path();
    p2 = w2.path();
    const std::vector<tb::Scalar> s = {{"train/loss", 3.5f}};
    w.add_scalars(1, s);
    w.add_scalars(2, s);
    w.add_scalars(3, {});  // nothing
    w.sync();
  }
  EXPECT_NE(p1, p2);
  const std::string name = fs::path(p1).filename().string();
  ASSERT_TRUE(tb::is_event_file_name(name)) << name;
  // events.out.tfevents.<10 digits>.<host>.<pid>.<n>
  const std::string stamp = name.substr(std::strlen("events.out.tfevents."), 10);
  EXPECT_EQ(stamp.find_first_not_of("0123456789"), std::string::npos) << name;
  std::string pid_part = ".";
  pid_part.append(std::to_string(getpid())).append(".");
  EXPECT_NE(name.find(pid_part), std::string::npos) << name;
  const std::vector<tb::Event> ev = events_of(p1);
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].file_version, "brain.Event:2");
  EXPECT_FALSE(ev[0].has_summary);
  EXPECT_GT(ev[0].wall_time, 1.5e9);
  EXPECT_EQ(ev[2].step, 2);
  EXPECT_EQ(ev[2].scalars.at(0).value, 3.5f);
  EXPECT_EQ(tb::list_event_files(dir), (std::vector<std::string>{std::min(p1, p2), std::max(p1, p2)}));
  fs::remove_all(fs::path(dir).parent_path());
}

TEST(TensorBoard, TruncateKeepsEachStepOnce) {
  const std::string dir = temp_dir("truncate");
  const std::vector<tb::Scalar> s = {{"train/loss", 1.0f}};
  std::string first, second;
  {
    tb::EventFileWriter w(dir);
    for (int64_t step = 1; step <= 6; ++step) w.add_scalars(step, s);
    first = w.path();
  }
  {
    tb::EventFileWriter w(dir);  // a second file wholly after the step resumed from: removed
    for (int64_t step = 7; step <= 8; ++step) w.add_scalars(step, s);
    second = w.path();
  }
  // A crash cut the first file's last record in half.
  const std::string bytes = slurp(first);
  spit(first, bytes + tb::frame_record(tb::encode_scalars_event(1, 9, s)).substr(0, 11));

  tb::TruncateReport r = tb::truncate_event_files(dir, 4);
  EXPECT_EQ(r.dropped, 4);  // steps 5, 6 (first file), 7, 8 (second file)
  EXPECT_EQ(r.files_rewritten, 1);
  EXPECT_EQ(r.files_removed, 1);
  EXPECT_TRUE(r.notes.empty());
  EXPECT_FALSE(fs::exists(second));
  std::vector<tb::Event> ev = events_of(first);
  ASSERT_EQ(ev.size(), 5u);  // file_version + steps 1..4
  EXPECT_EQ(ev.back().step, 4);
  // Nothing to drop: the file is left as it is (same bytes).
  const std::string kept = slurp(first);
  r = tb::truncate_event_files(dir, 4);
  EXPECT_EQ(r.dropped + r.files_rewritten + r.files_removed, 0);
  EXPECT_EQ(slurp(first), kept);
  // A corrupt record: the records before it stay, the note names the file and the byte.
  std::string corrupt = kept;
  corrupt[corrupt.size() - 2] ^= 1;
  spit(first, corrupt);
  r = tb::truncate_event_files(dir, 100);
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find(first), std::string::npos) << r.notes[0];
  EXPECT_NE(r.notes[0].find("data CRC-32C mismatch"), std::string::npos) << r.notes[0];
  EXPECT_EQ(events_of(first).size(), 4u);
  // A new run (step < 0) removes every event file.
  r = tb::truncate_event_files(dir, -1);
  EXPECT_EQ(r.files_removed, 1);
  EXPECT_TRUE(tb::list_event_files(dir).empty());
  fs::remove_all(dir);
}

TEST(TensorBoard, WriterErrorsNameTheFile) {
  const std::string dir = temp_dir("errors");
  spit(dir + "/file", "x");
  try {
    tb::EventFileWriter w(dir + "/file/sub");  // a directory below a regular file
    FAIL() << "no error";
  } catch (const bertrain::Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/file/sub"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}
