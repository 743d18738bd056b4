// tf_checkpoint.cpp: TensorFlow tensor bundles through LevelDB's Table / TableBuilder (the index format is
// LevelDB's table format, snappy blocks included) holding the messages of io/tensor_bundle.proto
// (io/tensor_bundle_codec.h encodes them).
#include "bertrain/io/tf_checkpoint.h"

#include <fcntl.h>
#include <leveldb/comparator.h>
#include <leveldb/env.h>
#include <leveldb/iterator.h>
#include <leveldb/options.h>
#include <leveldb/table.h>
#include <leveldb/table_builder.h>
#include <snappy.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <map>
#include <set>
#include <sstream>

#include "bertrain/core/crc32c.h"
#include "bertrain/core/error.h"
#include "bertrain/io/safetensors.h"
#include "io/file_util.h"
#include "io/tensor_bundle_codec.h"

namespace bertrain {

namespace fs = std::filesystem;
namespace pb = bertrain::tfbundle;

// types.proto DataType names, indexed by number.
const char* const kDTypeNames[] = {"DT_INVALID", "DT_FLOAT", "DT_DOUBLE", "DT_INT32", "DT_UINT8", "DT_INT16",
                                   "DT_INT8", "DT_STRING", "DT_COMPLEX64", "DT_INT64", "DT_BOOL", "DT_QINT8",
                                   "DT_QUINT8", "DT_QINT32", "DT_BFLOAT16", "DT_QINT16", "DT_QUINT16", "DT_UINT16",
                                   "DT_COMPLEX128", "DT_HALF", "DT_RESOURCE", "DT_VARIANT", "DT_UINT32", "DT_UINT64"};

namespace {

// TensorFlow's kTensorBundleVersion: a bundle whose version.min_consumer exceeds it needs a newer reader.
constexpr int kBundleVersion = 1;
// tensorflow/core/lib/io/table_options.h: TensorFlow writes bundle indexes with these table options
// (BundleWriter::Finish sets kNoCompression; the block size and restart interval are the table defaults).
constexpr size_t kTfTableBlockSize = 262144;
constexpr int kTfTableRestartInterval = 16;
// Fuzz builds (FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION, libFuzzer's convention, set by -DBERTRAIN_FUZZ=ON) skip
// the CRC-32C comparisons of index blocks and tensors, so that mutated files reach the parsers behind them instead
// of stopping at the first checksum; every other check stays. Every other build verifies every checksum.
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
constexpr bool kVerifyChecksums = false;
#else
constexpr bool kVerifyChecksums = true;
#endif
// An index is a few bytes per tensor: a larger "index" is a wrong file, not a checkpoint.
constexpr uint64_t kMaxIndexBytes = uint64_t{1} << 30;

// leveldb::RandomAccessFile over the index bytes held in memory (the whole index is read once anyway).
class StringSource final : public leveldb::RandomAccessFile {
 public:
  explicit StringSource(const std::string& bytes) : bytes_(bytes) {}
  leveldb::Status Read(uint64_t offset, size_t n, leveldb::Slice* result, char*) const override {
    if (offset > bytes_.size()) {
      *result = leveldb::Slice();
      return leveldb::Status::Corruption("read past the end of the index");
    }
    *result = leveldb::Slice(bytes_.data() + offset, std::min<uint64_t>(n, bytes_.size() - offset));
    return leveldb::Status::OK();
  }

 private:
  const std::string& bytes_;
};

// leveldb::WritableFile appending to a string (the index is written atomically once complete).
class StringSink final : public leveldb::WritableFile {
 public:
  leveldb::Status Append(const leveldb::Slice& d) override {
    bytes.append(d.data(), d.size());
    return leveldb::Status::OK();
  }
  leveldb::Status Close() override { return leveldb::Status::OK(); }
  leveldb::Status Flush() override { return leveldb::Status::OK(); }
  leveldb::Status Sync() override { return leveldb::Status::OK(); }
  std::string bytes;
};

int element_size(int dtype) {
  switch (dtype) {
    case 1: case 3: case 22: return 4;                     // float, int32, uint32
    case 2: case 9: case 8: case 23: return 8;             // double, int64, complex64, uint64
    case 4: case 6: case 10: case 11: case 12: return 1;   // uint8, int8, bool, qint8, quint8
    case 5: case 14: case 15: case 16: case 17: case 19: return 2;  // int16, bfloat16, qint16, quint16, uint16, half
    case 13: return 4;                                     // qint32
    case 18: return 16;                                    // complex128
    default: return 0;                                     // string, resource, variant, unknown
  }
}

bool read_varint64(const char*& p, const char* end, uint64_t& v) {
  v = 0;
  for (int shift = 0; shift <= 63 && p < end; shift += 7) {
    const auto b = static_cast<uint8_t>(*p++);
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

uint32_t le32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

struct StringLayout {
  std::vector<uint64_t> lengths;
  size_t lengths_end = 0;   // offset of the 4-byte lengths checksum
  uint32_t lengths_crc = 0; // as stored (masked)
};

// Splits a DT_STRING entry's bytes (tensor_bundle.cc WriteStringTensor): numel varint64 lengths, the masked
// CRC-32C of those lengths (each as uint32, or uint64 above 2^32-1), then the bytes.
std::optional<StringLayout> parse_string_layout(const std::string& bytes, int64_t numel) {
  StringLayout s;
  const char* p = bytes.data();
  const char* end = p + bytes.size();
  uint64_t total = 0;
  for (int64_t i = 0; i < numel; ++i) {
    uint64_t len;
    if (!read_varint64(p, end, len)) return std::nullopt;
    s.lengths.push_back(len);
    total += len;
  }
  if (end - p < 4) return std::nullopt;
  s.lengths_end = static_cast<size_t>(p - bytes.data());
  s.lengths_crc = le32(p);
  if (total != static_cast<uint64_t>(end - p - 4)) return std::nullopt;
  return s;
}

uint32_t extend_length(uint32_t crc, uint64_t len) {
  if (len <= 0xffffffffu) {
    const auto l32 = static_cast<uint32_t>(len);
    return crc32c::extend(crc, &l32, 4);
  }
  return crc32c::extend(crc, &len, 8);
}

// ---------------------------------------------------------------------------------------------------------
// Block bounds, checked before LevelDB sees the index.
//
// LevelDB 1.23's table reader allocates each block at the size its handle claims before reading it
// (table/format.cc ReadBlock: new char[size + 5]), and a snappy block's output at the size the block's header
// claims before decompressing (new char[uncompressed length]). A corrupt index can claim 2^63 bytes (fuzz finding
// L1, README "Reliability"): std::bad_alloc out of leveldb::Table::Open, or gigabytes allocated for a few bytes of
// file. So every block the reader will read (the footer's index block, then each data block its entries name) is
// checked against the file first; format rules: LevelDB's doc/table_format.md and table/block.cc.

constexpr size_t kFooterSize = 48;       // two BlockHandles (varint64 x 2 each), padding, 8-byte magic
constexpr size_t kBlockTrailerSize = 5;  // compression type byte + masked CRC-32C
// Snappy's largest expansion: a 3-byte copy element emits at most 64 bytes (format_description.txt), so no block
// decompresses to more than 22 times its stored size.
constexpr uint64_t kMaxSnappyRatio = 22;

bool read_varint32(const char*& p, const char* end, uint32_t& v) {
  uint64_t w;
  const char* q = p;
  if (!read_varint64(q, end, w) || w > 0xffffffffu || q - p > 5) return false;
  p = q;
  v = static_cast<uint32_t>(w);
  return true;
}

struct BlockHandle {
  uint64_t offset = 0, size = 0;
};

// Throws unless the block of `h` and its trailer lie inside the file and, when the block is snappy-compressed, its
// claimed uncompressed size is one snappy can produce from it. With `contents`, returns the block's contents
// (decompressed; empty where LevelDB will find the block corrupt itself).
std::string checked_block(const std::string& file, const BlockHandle& h, const std::string& ip, const char* what,
                          bool contents) {
  const uint64_t limit = file.size() >= kFooterSize ? file.size() - kFooterSize : 0;
  BERTRAIN_CHECK(h.size <= limit && h.size + kBlockTrailerSize <= limit && h.offset <= limit - h.size - kBlockTrailerSize,
                 "TF checkpoint index '", ip, "': the ", what, " claims ", h.size, " bytes at offset ", h.offset,
                 " but the table holds ", limit, ": corrupt (nothing allocated)");
  const char* data = file.data() + h.offset;
  const auto size = static_cast<size_t>(h.size);
  if (data[size] != 1) return contents ? std::string(data, size) : std::string();  // 0: stored; others: LevelDB refuses
  size_t ulength = 0;
  if (!snappy::GetUncompressedLength(data, size, &ulength)) return {};  // LevelDB reports the corruption
  BERTRAIN_CHECK(ulength <= kMaxSnappyRatio * h.size, "TF checkpoint index '", ip, "': the snappy-compressed ",
                 what, " at offset ", h.offset, " claims ", ulength, " bytes from ", h.size, ": corrupt (nothing allocated)");
  std::string out;
  if (contents && !snappy::Uncompress(data, size, &out)) return {};
  return out;
}

bool decode_handle(const char*& p, const char* end, BlockHandle& h) {
  return read_varint64(p, end, h.offset) && read_varint64(p, end, h.size);
}

// The footer's index block and every data block it names, as LevelDB's two-level iterator walks them (from the
// first restart point, entry after entry: table/block.cc DecodeEntry).
void check_table_blocks(const std::string& file, const std::string& ip) {
  if (file.size() < kFooterSize) return;  // LevelDB: "file is too short to be an sstable"
  const char* p = file.data() + file.size() - kFooterSize;
  const char* end = file.data() + file.size() - 8;
  BlockHandle meta, index;
  if (!decode_handle(p, end, meta) || !decode_handle(p, end, index)) return;  // LevelDB: bad block handle
  const std::string block = checked_block(file, index, ip, "index block", true);
  if (block.size() < 4) return;
  const uint32_t num_restarts = le32(block.data() + block.size() - 4);
  if (num_restarts == 0 || num_restarts > (block.size() - 4) / 4) return;  // LevelDB: an empty or corrupt block
  const char* entries_end = block.data() + block.size() - 4 - 4 * static_cast<size_t>(num_restarts);
  const uint32_t first = le32(entries_end);
  if (first >= static_cast<size_t>(entries_end - block.data())) return;
  for (const char* q = block.data() + first; q < entries_end;) {
    uint32_t shared, non_shared, value_length;
    if (!read_varint32(q, entries_end, shared) || !read_varint32(q, entries_end, non_shared) ||
        !read_varint32(q, entries_end, value_length) ||
        static_cast<uint64_t>(entries_end - q) < uint64_t{non_shared} + value_length)
      return;  // LevelDB stops here with a corruption status
    q += non_shared;
    const char* v = q;
    BlockHandle h;
    if (decode_handle(v, q + value_length, h)) (void)checked_block(file, h, ip, "data block", false);
    q += value_length;
  }
}

}  // namespace

std::string tf_dtype_name(int d) {
  if (d >= 0 && d < static_cast<int>(std::size(kDTypeNames))) return kDTypeNames[d];
  return "DT_" + std::to_string(d);
}

std::optional<DType> tf_dtype_to_bertrain(int d) {
  switch (static_cast<TfDType>(d)) {
    case TfDType::float32: return DType::f32;
    case TfDType::float64: return DType::f64;
    case TfDType::bfloat16: return DType::bf16;
    case TfDType::int32: return DType::i32;
    case TfDType::int64: return DType::i64;
    case TfDType::int8: return DType::i8;
    case TfDType::half: return DType::f32;
    default: return std::nullopt;
  }
}

int64_t TfTensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TfTensorInfo::shape_str() const {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

std::string tf_checkpoint_prefix(const std::string& path) {
  // ".data-NNNNN-of-NNNNN" checked by hand: std::regex's "(.*)" recurses once per character (a long path from a
  // `checkpoint` file would overflow the stack).
  static constexpr char kData[] = ".data-#####-of-#####";
  constexpr size_t kDataLen = sizeof kData - 1;
  if (path.size() > 6 && path.compare(path.size() - 6, 6, ".index") == 0) return path.substr(0, path.size() - 6);
  if (path.size() > 5 && path.compare(path.size() - 5, 5, ".meta") == 0) return path.substr(0, path.size() - 5);
  if (path.size() >= kDataLen) {
    const size_t at = path.size() - kDataLen;
    bool data = true;
    for (size_t k = 0; k < kDataLen && data; ++k)
      data = kData[k] == '#' ? std::isdigit(static_cast<unsigned char>(path[at + k])) != 0 : path[at + k] == kData[k];
    if (data) return path.substr(0, at);
  }
  return path;
}

bool is_tf_checkpoint(const std::string& path) {
  std::error_code ec;
  if (path.empty()) return false;
  return fs::is_regular_file(tf_checkpoint_prefix(path) + ".index", ec);
}

std::string tf_data_file_name(const std::string& prefix, int shard, int num_shards) {
  char buf[40];
  std::snprintf(buf, sizeof buf, ".data-%05d-of-%05d", shard, num_shards);
  return prefix + buf;
}

// ---------------------------------------------------------------------------------------------------------
// Reader

struct TfCheckpointReader::Impl {
  std::string prefix, index_path;
  int num_shards = 0;
  int producer = 0;
  std::vector<TfTensorInfo> entries;
  std::map<std::string, size_t> by_name;
  struct Shard {
    std::string path;
    int fd = -1;
    uint64_t size = 0;
  };
  std::vector<Shard> shards;
  ~Impl() {
    for (auto& s : shards)
      if (s.fd >= 0) ::close(s.fd);
  }
};

TfCheckpointReader TfCheckpointReader::open(const std::string& path) {
  auto impl = std::make_shared<Impl>();
  impl->prefix = tf_checkpoint_prefix(path);
  impl->index_path = impl->prefix + ".index";
  const std::string& ip = impl->index_path;
  std::error_code ec;
  BERTRAIN_CHECK(fs::is_regular_file(ip, ec), "TF checkpoint '", impl->prefix, "': index file '", ip,
                 "' does not exist");
  const uint64_t index_size = fs::file_size(ip, ec);
  BERTRAIN_CHECK(!ec && index_size <= kMaxIndexBytes, "TF checkpoint index '", ip, "': cannot read it (",
                 ec ? ec.message() : "larger than 1 GiB", ")");
  const std::string bytes = read_text_file(ip);
  check_table_blocks(bytes, ip);

  leveldb::Options options;
  options.paranoid_checks = kVerifyChecksums;  // verify the index block's CRC when opening
  options.compression = leveldb::kNoCompression;
  StringSource source(bytes);
  leveldb::Table* raw_table = nullptr;
  leveldb::Status st = leveldb::Table::Open(options, &source, bytes.size(), &raw_table);
  BERTRAIN_CHECK(st.ok(), "TF checkpoint index '", ip, "' is not a LevelDB table (", st.ToString(), ")");
  std::unique_ptr<leveldb::Table> table(raw_table);
  leveldb::ReadOptions ro;
  ro.verify_checksums = kVerifyChecksums;
  ro.fill_cache = false;
  std::unique_ptr<leveldb::Iterator> it(table->NewIterator(ro));
  it->SeekToFirst();
  BERTRAIN_CHECK(it->status().ok(), "TF checkpoint index '", ip, "' is not a readable LevelDB table (",
                 it->status().ToString(), ")");
  BERTRAIN_CHECK(it->Valid() && it->key().empty(), "TF checkpoint index '", ip,
                 "' has no bundle header under the empty key: not a TensorFlow checkpoint index");
  pb::Header header;
  BERTRAIN_CHECK(pb::parse_header(std::string_view(it->value().data(), it->value().size()), header),
                 "TF checkpoint index '", ip, "': the header is not a BundleHeaderProto");
  BERTRAIN_CHECK(header.endianness == 0, "TF checkpoint index '", ip,
                 "': the bundle is big-endian; bertrain reads little-endian bundles only");
  BERTRAIN_CHECK(header.min_consumer <= kBundleVersion, "TF checkpoint index '", ip,
                 "': the bundle needs a reader of version >= ", header.min_consumer, " (bertrain reads version ",
                 kBundleVersion, ")");
  for (int bad : header.bad_consumers)
    BERTRAIN_CHECK(bad != kBundleVersion, "TF checkpoint index '", ip, "': the bundle excludes readers of version ",
                   kBundleVersion);
  BERTRAIN_CHECK(header.num_shards >= 1 && header.num_shards <= 99999, "TF checkpoint index '", ip,
                 "': num_shards is ", header.num_shards);
  impl->num_shards = header.num_shards;
  impl->producer = header.producer;

  for (it->Next(); it->Valid(); it->Next()) {
    TfTensorInfo e;
    e.name = it->key().ToString();
    pb::Entry p;
    BERTRAIN_CHECK(pb::parse_entry(std::string_view(it->value().data(), it->value().size()), p),
                   "TF checkpoint index '", ip, "', tensor '", e.name, "': the entry is not a BundleEntryProto");
    e.dtype = p.dtype;
    for (int64_t d : p.shape) {
      BERTRAIN_CHECK(d >= 0, "TF checkpoint index '", ip, "', tensor '", e.name, "': negative dimension ", d);
      e.shape.push_back(d);
    }
    BERTRAIN_CHECK(!p.unknown_rank, "TF checkpoint index '", ip, "', tensor '", e.name,
                   "': the shape has unknown rank");
    e.shard_id = p.shard_id;
    e.offset = p.offset;
    e.size = p.size;
    e.crc32c = p.crc32c;
    BERTRAIN_CHECK(!e.name.empty(), "TF checkpoint index '", ip, "': a second entry under the empty key");
    e.sliced = p.num_slices > 0 || e.name[0] == '\0';
    BERTRAIN_CHECK(e.offset >= 0 && e.size >= 0, "TF checkpoint index '", ip, "', tensor '", e.name,
                   "': negative offset or size");
    BERTRAIN_CHECK(e.shard_id >= 0 && e.shard_id < impl->num_shards, "TF checkpoint index '", ip, "', tensor '",
                   e.name, "': shard ", e.shard_id, " outside the ", impl->num_shards, " shards of the header");
    const int es = element_size(e.dtype);
    if (es > 0 && !e.sliced) {
      BERTRAIN_CHECK(e.numel() * es == e.size, "TF checkpoint index '", ip, "', tensor '", e.name, "': ",
                     tf_dtype_name(e.dtype), " ", e.shape_str(), " needs ", e.numel() * es, " bytes, the entry says ",
                     e.size);
    }
    // LevelDB keys are unique in a well-formed table; a corrupt one can repeat a key, and then load() would read
    // the later entry under the earlier one's shape (fuzz finding).
    BERTRAIN_CHECK(!impl->by_name.count(e.name), "TF checkpoint index '", ip, "': tensor '", e.name, "' appears twice");
    impl->by_name[e.name] = impl->entries.size();
    impl->entries.push_back(std::move(e));
  }
  BERTRAIN_CHECK(it->status().ok(), "TF checkpoint index '", ip, "' is corrupt (", it->status().ToString(), ")");

  // Data shards: every shard an entry uses must exist and hold its bytes.
  impl->shards.resize(static_cast<size_t>(impl->num_shards));
  for (int s = 0; s < impl->num_shards; ++s) impl->shards[s].path = tf_data_file_name(impl->prefix, s, impl->num_shards);
  for (const auto& e : impl->entries) {
    auto& sh = impl->shards[static_cast<size_t>(e.shard_id)];
    if (sh.fd < 0) {
      sh.fd = ::open(sh.path.c_str(), O_RDONLY | O_CLOEXEC);
      BERTRAIN_CHECK(sh.fd >= 0, "TF checkpoint '", impl->prefix, "': data file '", sh.path, "' (tensor '", e.name,
                     "') cannot be opened: ", std::strerror(errno));
      struct stat sb;
      BERTRAIN_CHECK(::fstat(sh.fd, &sb) == 0, "TF checkpoint data file '", sh.path, "': ", std::strerror(errno));
      sh.size = static_cast<uint64_t>(sb.st_size);
    }
    BERTRAIN_CHECK(static_cast<uint64_t>(e.offset) + static_cast<uint64_t>(e.size) <= sh.size,
                   "TF checkpoint data file '", sh.path, "' is truncated: tensor '", e.name, "' needs bytes ",
                   e.offset, "..", e.offset + e.size, " but the file has ", sh.size);
  }
  TfCheckpointReader r;
  r.impl_ = std::move(impl);
  return r;
}

const std::string& TfCheckpointReader::prefix() const { return impl_->prefix; }
const std::string& TfCheckpointReader::index_path() const { return impl_->index_path; }
int TfCheckpointReader::num_shards() const { return impl_->num_shards; }
int TfCheckpointReader::version_producer() const { return impl_->producer; }
const std::vector<TfTensorInfo>& TfCheckpointReader::entries() const { return impl_->entries; }
bool TfCheckpointReader::contains(const std::string& name) const { return impl_->by_name.count(name) > 0; }

const TfTensorInfo& TfCheckpointReader::info(const std::string& name) const {
  auto it = impl_->by_name.find(name);
  BERTRAIN_CHECK(it != impl_->by_name.end(), "TF checkpoint '", impl_->prefix, "' has no tensor '", name, "'");
  return impl_->entries[it->second];
}

std::string TfCheckpointReader::data_path(const TfTensorInfo& e) const {
  return impl_->shards.at(static_cast<size_t>(e.shard_id)).path;
}

std::string TfCheckpointReader::read_bytes(const std::string& name) const {
  const TfTensorInfo& e = info(name);
  const auto& sh = impl_->shards.at(static_cast<size_t>(e.shard_id));
  BERTRAIN_CHECK(e.dtype != 20 && e.dtype != 21, "TF checkpoint '", impl_->prefix, "', tensor '", name, "': ",
                 tf_dtype_name(e.dtype), " entries cannot be read by bertrain");
  std::string bytes(static_cast<size_t>(e.size), '\0');
  if (e.size > 0) read_exact(sh.fd, bytes.data(), static_cast<uint64_t>(e.size), static_cast<uint64_t>(e.offset), sh.path);
  uint32_t crc;
  if (e.dtype == static_cast<int>(TfDType::string)) {
    auto layout = parse_string_layout(bytes, e.numel());
    BERTRAIN_CHECK(layout.has_value(), "TF checkpoint data file '", sh.path, "', tensor '", name,
                   "': the DT_STRING element lengths do not add up to the entry's ", e.size, " bytes");
    uint32_t lcrc = 0;
    for (uint64_t len : layout->lengths) lcrc = extend_length(lcrc, len);
    BERTRAIN_CHECK(!kVerifyChecksums || crc32c::mask(lcrc) == layout->lengths_crc, "TF checkpoint data file '", sh.path, "', tensor '",
                   name, "': CRC-32C mismatch of the string lengths");
    crc = 0;
    for (uint64_t len : layout->lengths) crc = extend_length(crc, len);
    crc = crc32c::extend(crc, bytes.data() + layout->lengths_end, 4);
    crc = crc32c::extend(crc, bytes.data() + layout->lengths_end + 4, bytes.size() - layout->lengths_end - 4);
  } else {
    crc = crc32c::value(bytes.data(), bytes.size());
  }
  if (kVerifyChecksums && crc32c::mask(crc) != e.crc32c) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "stored 0x%08x, computed 0x%08x", e.crc32c, crc32c::mask(crc));
    throw Error("TF checkpoint data file '" + sh.path + "', tensor '" + name + "': CRC-32C mismatch (" + buf +
                "): the file is corrupt");
  }
  return bytes;
}

Tensor TfCheckpointReader::load(const std::string& name, std::optional<DType> convert_to) const {
  const TfTensorInfo& e = info(name);
  BERTRAIN_CHECK(!e.sliced, "TF checkpoint '", impl_->prefix, "', tensor '", name,
                 "' is a slice of a partitioned variable; bertrain reads whole (unpartitioned) tensors only");
  const auto dt = tf_dtype_to_bertrain(e.dtype);
  BERTRAIN_CHECK(dt.has_value(), "TF checkpoint '", impl_->prefix, "', tensor '", name, "': ",
                 tf_dtype_name(e.dtype), " is not convertible to a bertrain tensor");
  BERTRAIN_CHECK(e.shape.size() <= static_cast<size_t>(Shape::kMaxDims), "TF checkpoint '", impl_->prefix,
                 "', tensor '", name, "': rank ", e.shape.size(), " exceeds bertrain's ", Shape::kMaxDims);
  const std::string bytes = read_bytes(name);
  Tensor t = Tensor::empty(Shape(e.shape), *dt);
  if (e.dtype == static_cast<int>(TfDType::half)) {
    float* d = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      uint16_t h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      d[i] = f16_to_f32(h);
    }
  } else if (!bytes.empty()) {
    std::memcpy(t.raw_data(), bytes.data(), bytes.size());
  }
  if (convert_to && *convert_to != t.dtype()) {
    Tensor c = Tensor::empty(t.shape(), *convert_to);
    c.copy_from(t);
    return c;
  }
  return t;
}

std::vector<std::string> TfCheckpointReader::load_strings(const std::string& name) const {
  const TfTensorInfo& e = info(name);
  BERTRAIN_CHECK(e.dtype == static_cast<int>(TfDType::string), "TF checkpoint '", impl_->prefix, "', tensor '", name,
                 "' is ", tf_dtype_name(e.dtype), ", not DT_STRING");
  const std::string bytes = read_bytes(name);
  auto layout = parse_string_layout(bytes, e.numel());
  std::vector<std::string> out;
  size_t pos = layout->lengths_end + 4;
  for (uint64_t len : layout->lengths) {
    out.push_back(bytes.substr(pos, static_cast<size_t>(len)));
    pos += static_cast<size_t>(len);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// Writer

void save_tf_checkpoint(const std::string& prefix, const std::vector<std::pair<std::string, Tensor>>& tensors) {
  BERTRAIN_CHECK(!prefix.empty(), "save_tf_checkpoint: empty prefix");
  std::vector<const std::pair<std::string, Tensor>*> sorted;
  std::set<std::string> names;
  for (const auto& nt : tensors) {
    BERTRAIN_CHECK(!nt.first.empty(), "TF checkpoint '", prefix, "': a tensor has an empty name (the empty key "
                   "holds the bundle header)");
    BERTRAIN_CHECK(names.insert(nt.first).second, "TF checkpoint '", prefix, "': tensor '", nt.first,
                   "' appears twice");
    BERTRAIN_CHECK(nt.second.defined(), "TF checkpoint '", prefix, "': tensor '", nt.first, "' is undefined");
    sorted.push_back(&nt);
  }
  // Bytewise order: LevelDB's default comparator, and the order TensorFlow lays the data out in.
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->first < b->first; });

  std::error_code ec;
  const fs::path parent = fs::path(prefix).parent_path();
  if (!parent.empty()) {
    fs::create_directories(parent, ec);
    BERTRAIN_CHECK(!ec && fs::is_directory(parent), "cannot create directory '", parent.string(), "': ", ec.message());
  }
  const std::string data_path = tf_data_file_name(prefix, 0, 1);
  AtomicFileWriter data(data_path);

  leveldb::Options options;
  options.compression = leveldb::kNoCompression;
  options.block_size = kTfTableBlockSize;
  options.block_restart_interval = kTfTableRestartInterval;
  options.comparator = leveldb::BytewiseComparator();
  StringSink sink;
  leveldb::TableBuilder builder(options, &sink);
  pb::Header header;
  header.num_shards = 1;
  header.has_version = true;
  header.producer = kBundleVersion;
  builder.Add(leveldb::Slice(), pb::serialize_header(header));

  int64_t offset = 0;
  try {
  for (const auto* nt : sorted) {
    const Tensor& t = nt->second;
    pb::Entry e;
    switch (t.dtype()) {
      case DType::f32: e.dtype = static_cast<int>(TfDType::float32); break;
      case DType::f64: e.dtype = static_cast<int>(TfDType::float64); break;
      case DType::bf16: e.dtype = static_cast<int>(TfDType::bfloat16); break;
      case DType::i32: e.dtype = static_cast<int>(TfDType::int32); break;
      case DType::i64: e.dtype = static_cast<int>(TfDType::int64); break;
      case DType::i8: e.dtype = static_cast<int>(TfDType::int8); break;
    }
    // Always present, also empty for a scalar: TensorFlow serialises TensorShape::AsProto() unconditionally.
    e.has_shape = true;
    e.shape = t.shape().vec();
    const auto n = static_cast<int64_t>(t.nbytes());
    e.offset = offset;
    e.size = n;
    e.crc32c = crc32c::mask(crc32c::value(t.raw_data(), t.nbytes()));
    data.write(t.raw_data(), t.nbytes());
    offset += n;
    builder.Add(nt->first, pb::serialize_entry(e));
  }
  } catch (...) {
    builder.Abandon();  // TableBuilder must be finished or abandoned before it is destroyed
    throw;
  }
  leveldb::Status st = builder.Finish();
  BERTRAIN_CHECK(st.ok(), "TF checkpoint index '", prefix, ".index': building the table failed: ", st.ToString());
  data.commit();
  write_text_atomic(prefix + ".index", sink.bytes);
}

}  // namespace bertrain
