// safetensors.cpp: safetensors reader and atomic writer, matching the reference implementation
// (huggingface/safetensors, safetensors/src/tensor.rs: prepare/serialize_to_file and Metadata::validate).
#include "bertrain/io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "bertrain/core/json_limits.h"
#include "io/file_util.h"

namespace bertrain {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian; big-endian hosts are not supported");

namespace {

using json = nlohmann::json;

// The reference's Dtype enum, in its declaration order: serialization sorts by descending position.
struct StDType {
  const char* name;
  uint64_t size;
};
constexpr StDType kStDTypes[] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
    {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"F64", 8},     {"I64", 8}, {"U64", 8},
};
constexpr uint64_t kMaxHeader = 100'000'000;  // the reference's MAX_HEADER_SIZE

int st_rank(const std::string& name) {
  for (size_t i = 0; i < std::size(kStDTypes); ++i)
    if (name == kStDTypes[i].name) return static_cast<int>(i);
  return -1;
}

std::string where(const std::string& path) { return "safetensors file '" + path + "'"; }
std::string where(const std::string& path, const std::string& tensor) {
  return "safetensors file '" + path + "', tensor '" + printable(tensor) + "'";  // names come from the file
}

uint64_t read_u64_le(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

const char* safetensors_dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::f64: return "F64";
    case DType::bf16: return "BF16";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
    case DType::i8: return "I8";
  }
  BERTRAIN_ASSERT(false, "unhandled dtype");
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf or NaN (payload kept)
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);  // rebias 15 -> 127
  } else if (mant == 0) {
    bits = sign;
  } else {
    // Subnormal half: mant * 2^-24; normalise it for float.
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    bits = sign | ((112u - static_cast<uint32_t>(e)) << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// ---------------------------------------------------------------------------------------------------------
// Writing

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::set<std::string> seen;
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, t] = tensors[i];
    BERTRAIN_CHECK(!name.empty(), "writing ", where(path), ": empty tensor name");
    BERTRAIN_CHECK(name != "__metadata__", "writing ", where(path), ": '__metadata__' is reserved");
    BERTRAIN_CHECK(seen.insert(name).second, "writing ", where(path, name), ": name given twice");
    BERTRAIN_CHECK(t.defined(), "writing ", where(path, name), ": undefined tensor");
    order[i] = i;
  }
  // Descending dtype alignment, then by name: the reference's prepare().
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    int ra = st_rank(safetensors_dtype_name(tensors[a].second.dtype()));
    int rb = st_rank(safetensors_dtype_name(tensors[b].second.dtype()));
    if (ra != rb) return ra > rb;
    return tensors[a].first < tensors[b].first;
  });

  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = std::move(m);
  }
  uint64_t offset = 0;
  for (size_t i : order) {
    const auto& [name, t] = tensors[i];
    nlohmann::ordered_json e = nlohmann::ordered_json::object();
    e["dtype"] = safetensors_dtype_name(t.dtype());
    nlohmann::ordered_json shape = nlohmann::ordered_json::array();
    for (int64_t d : t.shape()) shape.push_back(d);
    e["shape"] = std::move(shape);
    e["data_offsets"] = {offset, offset + t.nbytes()};
    offset += t.nbytes();
    header[name] = std::move(e);
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>((static_cast<uint64_t>(text.size()) >> (8 * i)) & 0xffu);

  AtomicFileWriter w(path);
  w.write(len, 8);
  w.write(text.data(), text.size());
  for (size_t i : order) w.write(tensors[i].second.raw_data(), tensors[i].second.nbytes());
  w.commit();
}

// ---------------------------------------------------------------------------------------------------------
// Reading

struct SafetensorsFile::Source {
  int fd = -1;        // a file, read with positioned reads...
  std::string bytes;  // ...or its bytes in memory (fd < 0)
  Source() = default;
  Source(const Source&) = delete;
  Source& operator=(const Source&) = delete;
  ~Source() {
    if (fd >= 0) ::close(fd);
  }
  void read(void* dst, uint64_t n, uint64_t offset, const std::string& path) const {
    if (fd >= 0) return read_exact(fd, dst, n, offset, path);
    BERTRAIN_ASSERT(offset <= bytes.size() && n <= bytes.size() - offset, "read past the end of ", path);
    if (n > 0) std::memcpy(dst, bytes.data() + offset, n);
  }
};

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  auto src = std::make_shared<Source>();
  src->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  BERTRAIN_CHECK(src->fd >= 0, "cannot open ", where(path), ": ", std::strerror(errno));
  struct stat st {};
  BERTRAIN_CHECK(::fstat(src->fd, &st) == 0, "cannot stat ", where(path), ": ", std::strerror(errno));
  BERTRAIN_CHECK(S_ISREG(st.st_mode), where(path), " is not a regular file");
  return parse(std::move(src), path, static_cast<uint64_t>(st.st_size));
}

SafetensorsFile SafetensorsFile::from_memory(std::string bytes, const std::string& source) {
  auto src = std::make_shared<Source>();
  src->bytes = std::move(bytes);
  const uint64_t size = src->bytes.size();
  return parse(std::move(src), source, size);
}

SafetensorsFile SafetensorsFile::parse(std::shared_ptr<const Source> src, const std::string& path, uint64_t size) {
  SafetensorsFile f;
  f.path_ = path;
  f.src_ = std::move(src);
  BERTRAIN_CHECK(size >= 8, where(path), " is truncated: ", size,
                 " bytes, shorter than the 8-byte header length that starts every safetensors file");
  unsigned char len[8];
  f.src_->read(len, 8, 0, path);
  const uint64_t n = read_u64_le(len);
  BERTRAIN_CHECK(n <= kMaxHeader, where(path), ": header length ", n, " exceeds the limit of ", kMaxHeader,
                 " bytes (not a safetensors file?)");
  BERTRAIN_CHECK(n <= size - 8, where(path), ": header length ", n, " runs past the end of the file (", size,
                 " bytes; at most ", size - 8, " available): truncated or not a safetensors file");
  std::string text(n, '\0');
  f.src_->read(text.data(), n, 8, path);
  check_json_depth(text, where(path) + ": header");
  f.data_start_ = 8 + n;
  const uint64_t buffer_size = size - 8 - n;

  // Duplicate names: nlohmann keeps the last of equal keys, so catch them while parsing.
  std::string duplicate;
  std::set<std::string> keys;
  json::parser_callback_t cb = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && parsed.is_string()) {
      const auto& k = parsed.get_ref<const std::string&>();
      if (!keys.insert(k).second && duplicate.empty()) duplicate = k;
    }
    return true;
  };
  json header = json::parse(text, cb, /*allow_exceptions=*/false);
  BERTRAIN_CHECK(!header.is_discarded(), where(path), ": the ", n, "-byte header is not valid JSON");
  BERTRAIN_CHECK(header.is_object(), where(path), ": the header is JSON but not an object");
  BERTRAIN_CHECK(duplicate.empty(), where(path, duplicate), ": name appears more than once in the header");

  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      BERTRAIN_CHECK(v.is_object(), where(path), ": \"__metadata__\" must be an object of strings");
      for (auto m = v.begin(); m != v.end(); ++m) {
        BERTRAIN_CHECK(m.value().is_string(), where(path), ": \"__metadata__\" value of '", printable(m.key()),
                       "' is not a string");
        f.metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    BERTRAIN_CHECK(v.is_object(), where(path, name), ": header entry is not an object");
    BERTRAIN_CHECK(v.contains("dtype") && v["dtype"].is_string(), where(path, name), ": missing or non-string \"dtype\"");
    BERTRAIN_CHECK(v.contains("shape") && v["shape"].is_array(), where(path, name), ": missing or non-array \"shape\"");
    BERTRAIN_CHECK(v.contains("data_offsets") && v["data_offsets"].is_array() && v["data_offsets"].size() == 2,
                   where(path, name), ": \"data_offsets\" must be an array [begin, end]");
    SafetensorsInfo info;
    info.dtype = v["dtype"].get<std::string>();
    const int rank = st_rank(info.dtype);
    BERTRAIN_CHECK(rank >= 0, where(path, name), ": unknown dtype '", info.dtype,
                   "' (expected one of BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, F64, "
                   "I64, U64)");
    const json& shape = v["shape"];
    BERTRAIN_CHECK(shape.size() <= static_cast<size_t>(Shape::kMaxDims), where(path, name), ": ", shape.size(),
                   " dimensions; bertrain supports at most ", Shape::kMaxDims);
    uint64_t numel = 1;
    bool overflow = false;
    for (const json& d : shape) {
      BERTRAIN_CHECK(d.is_number_unsigned(), where(path, name), ": shape ", shape.dump(),
                     " must hold non-negative integers");
      const uint64_t x = d.get<uint64_t>();
      BERTRAIN_CHECK(x <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), where(path, name),
                     ": dimension ", x, " is too large");
      info.shape.push_back(static_cast<int64_t>(x));
      if (x != 0 && numel > std::numeric_limits<uint64_t>::max() / x) overflow = true;
      numel *= x;
    }
    const uint64_t esize = kStDTypes[rank].size;
    if (numel > std::numeric_limits<uint64_t>::max() / esize) overflow = true;
    BERTRAIN_CHECK(!overflow, where(path, name), ": shape ", shape.dump(), " overflows the byte count");
    const json& off = v["data_offsets"];
    BERTRAIN_CHECK(off[0].is_number_unsigned() && off[1].is_number_unsigned(), where(path, name),
                   ": data_offsets ", off.dump(), " must be non-negative integers");
    info.begin = off[0].get<uint64_t>();
    info.end = off[1].get<uint64_t>();
    BERTRAIN_CHECK(info.begin <= info.end, where(path, name), ": data_offsets ", off.dump(), " end before they begin");
    BERTRAIN_CHECK(info.end - info.begin == numel * esize, where(path, name), ": data_offsets ", off.dump(),
                   " span ", info.end - info.begin, " bytes but dtype ", info.dtype, " x shape ",
                   info.shape.str(), " needs ", numel * esize, " bytes");
    BERTRAIN_CHECK(info.end <= buffer_size, where(path, name), ": data_offsets ", off.dump(),
                   " run past the end of the data buffer (", buffer_size, " bytes): file truncated?");
    f.entries_.emplace_back(name, std::move(info));
  }
  // Sorted by offsets the entries must tile [0, buffer_size) exactly (the reference's validate()).
  std::stable_sort(f.entries_.begin(), f.entries_.end(), [](const auto& a, const auto& b) {
    return std::pair(a.second.begin, a.second.end) < std::pair(b.second.begin, b.second.end);
  });
  uint64_t pos = 0;
  for (const auto& [name, info] : f.entries_) {
    BERTRAIN_CHECK(info.begin == pos, where(path, name), ": data_offsets [", info.begin, ", ", info.end, "] ",
                   info.begin < pos ? "overlap the previous tensor" : "leave a gap after the previous tensor",
                   " (expected to begin at ", pos, ")");
    pos = info.end;
  }
  BERTRAIN_CHECK(pos == buffer_size, where(path), ": the tensors cover ", pos, " bytes of a ", buffer_size,
                 "-byte data buffer (trailing bytes or a corrupt header)");
  for (size_t i = 0; i < f.entries_.size(); ++i) f.index_[f.entries_[i].first] = i;
  return f;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& e : entries_) out.push_back(e.first);
  return out;
}

bool SafetensorsFile::contains(const std::string& name) const { return index_.count(name) != 0; }

const SafetensorsInfo& SafetensorsFile::info(const std::string& name) const {
  auto it = index_.find(name);
  BERTRAIN_CHECK(it != index_.end(), where(path_, name), ": no such tensor");
  return entries_[it->second].second;
}

Tensor SafetensorsFile::load(const std::string& name, std::optional<DType> convert_to) const {
  const SafetensorsInfo& in = info(name);
  const uint64_t nbytes = in.end - in.begin;
  const uint64_t at = data_start_ + in.begin;
  Tensor t;
  auto direct = [&](DType d) {
    t = Tensor::empty(in.shape, d);
    BERTRAIN_ASSERT(t.nbytes() == nbytes, "byte count");
    src_->read(t.raw_data(), nbytes, at, path_);
  };
  if (in.dtype == "F32") direct(DType::f32);
  else if (in.dtype == "F64") direct(DType::f64);
  else if (in.dtype == "BF16") direct(DType::bf16);
  else if (in.dtype == "I32") direct(DType::i32);
  else if (in.dtype == "I64") direct(DType::i64);
  else if (in.dtype == "I8") direct(DType::i8);
  else if (in.dtype == "F16" || in.dtype == "U8") {
    std::vector<unsigned char> raw(nbytes);
    src_->read(raw.data(), nbytes, at, path_);
    const int64_t n = in.shape.numel();
    if (in.dtype == "F16") {
      t = Tensor::empty(in.shape, DType::f32);
      float* d = t.data<float>();
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, raw.data() + 2 * i, 2);
        d[i] = f16_to_f32(h);
      }
    } else {
      t = Tensor::empty(in.shape, DType::i32);
      int32_t* d = t.data<int32_t>();
      for (int64_t i = 0; i < n; ++i) d[i] = raw[i];
    }
  } else {
    throw Error(where(path_, name) + ": dtype " + in.dtype + " cannot be read by bertrain (it reads F32, F64, BF16, "
                "F16, I32, I64, I8 and U8)");
  }
  if (convert_to && *convert_to != t.dtype()) t = t.to(*convert_to);
  return t;
}

std::vector<std::pair<std::string, Tensor>> SafetensorsFile::load_all(std::optional<DType> convert_to) const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& e : entries_) out.emplace_back(e.first, load(e.first, convert_to));
  return out;
}

}  // namespace bertrain
