// safetensors.h: reading and writing Hugging Face safetensors files (huggingface/safetensors, README "Format").
// Layout: 8-byte little-endian header length N, N bytes of JSON header, then the data buffer; each header
// entry is {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]} with offsets relative to the buffer.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bertrain/core/tensor.h"

namespace bertrain {

/// Safetensors dtype name of a bertrain dtype: f32 "F32", f64 "F64", bf16 "BF16", i32 "I32", i64 "I64",
/// i8 "I8".
const char* safetensors_dtype_name(DType t);

/// Writes `tensors` to `path` as the reference implementation's serialize_to_file does: the header is compact
/// JSON with "__metadata__" first (omitted when `metadata` is empty), the tensors sorted by descending dtype
/// alignment and then by name, laid out contiguously from offset 0, and the header padded with spaces to a
/// multiple of 8 bytes so every tensor starts 8-byte aligned. The write is atomic: a temporary file in the
/// same directory is written, fsync'ed and renamed over `path` (a crash leaves any previous file whole).
/// Throws bertrain::Error naming the file on a duplicate or empty name, the reserved name "__metadata__",
/// an undefined tensor, or an I/O failure.
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

/// One tensor's header entry.
struct SafetensorsInfo {
  std::string dtype;   // safetensors name: "F32", "BF16", "F16", "F64", "I32", "I64", "I8", "U8", ...
  Shape shape;
  uint64_t begin = 0;  // byte offsets relative to the data buffer
  uint64_t end = 0;
};

/// A safetensors file opened for reading. open() reads and validates the whole header; load() reads one
/// tensor's bytes with positioned reads (the file stays open while any copy of this object lives).
class SafetensorsFile {
 public:
  /// Opens and validates `path`. Throws bertrain::Error naming the file (and the tensor, where one is at
  /// fault) when: the file cannot be opened; it is shorter than 8 bytes; the header length runs past the end
  /// of the file or exceeds 100,000,000 bytes (the reference's limit); the header is not a JSON object;
  /// "__metadata__" is not an object of strings; a name appears twice; an entry lacks dtype/shape/
  /// data_offsets or has wrong types or negative dimensions; a dtype is unknown; an entry's byte length
  /// differs from dtype size x numel; or the entries, sorted by offset, do not tile the data buffer exactly
  /// (overlap, gap, or out of range), which is the reference's validate() rule.
  static SafetensorsFile open(const std::string& path);
  /// open() on the bytes of a whole safetensors file already in memory (kept in the object; load() copies out
  /// of them). `source` names it in errors as open() names its path, and is what path() returns. Same throws.
  static SafetensorsFile from_memory(std::string bytes, const std::string& source);

  const std::string& path() const { return path_; }
  /// Tensor names in file (offset) order.
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const;
  /// The header entry of `name`; throws bertrain::Error naming file and tensor when absent.
  const SafetensorsInfo& info(const std::string& name) const;
  /// The "__metadata__" map (empty when the file has none).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  /// Reads tensor `name`. Without `convert_to` the tensor keeps its file dtype (F32 f32, F64 f64, BF16 bf16,
  /// I32 i32, I64 i64, I8 i8); F16 becomes f32 and U8 becomes i32, which bertrain has no dtype for. With
  /// `convert_to` floating values are converted (F16 and BF16 exactly widened to f32/f64; narrowing to bf16
  /// rounds to nearest even). Throws bertrain::Error naming file and tensor when it is absent, the dtype
  /// cannot be read (BOOL, U16, F8_*, ...), or the read fails.
  Tensor load(const std::string& name, std::optional<DType> convert_to = std::nullopt) const;
  /// Reads every tensor (in file order) with load(name, convert_to).
  std::vector<std::pair<std::string, Tensor>> load_all(std::optional<DType> convert_to = std::nullopt) const;

 private:
  struct Source;  // an open file or the bytes of one
  static SafetensorsFile parse(std::shared_ptr<const Source> src, const std::string& path, uint64_t size);
  std::string path_;
  std::shared_ptr<const Source> src_;
  uint64_t data_start_ = 0;  // 8 + N
  std::vector<std::pair<std::string, SafetensorsInfo>> entries_;  // sorted by offset
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

/// IEEE half (binary16) to float, exact for every value including subnormals, infinities and NaN.
float f16_to_f32(uint16_t h);

}  // namespace bertrain
