// tf_checkpoint.h: TensorFlow tensor-bundle ("V2") checkpoints read and written without TensorFlow: the files
// PREFIX.index (a LevelDB table: the BundleHeaderProto under the empty key, then one BundleEntryProto per
// tensor name) and PREFIX.data-NNNNN-of-NNNNN (the tensors' little-endian bytes). References: TensorFlow's
// tensorflow/core/protobuf/tensor_bundle.proto and util/tensor_bundle/tensor_bundle.cc, LevelDB's
// doc/table_format.md. The BERT name mapping on top of this is in bertrain/io/tf_bert.h.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bertrain/core/tensor.h"

namespace bertrain {

/// TensorFlow DataType numbers (tensorflow/core/framework/types.proto) that bertrain names in code.
enum class TfDType : int {
  invalid = 0, float32 = 1, float64 = 2, int32 = 3, uint8 = 4, int16 = 5, int8 = 6, string = 7, int64 = 9,
  boolean = 10, bfloat16 = 14, half = 19
};

/// "DT_FLOAT", "DT_STRING", ...: the types.proto name of a DataType number, or "DT_<n>" for an unknown one.
std::string tf_dtype_name(int dtype);
/// The bertrain dtype a TF dtype loads as: DT_FLOAT f32, DT_DOUBLE f64, DT_BFLOAT16 bf16, DT_INT32 i32,
/// DT_INT64 i64, DT_INT8 i8, DT_HALF f32 (widened exactly); nullopt for the others (DT_STRING, DT_BOOL, ...),
/// which are "not convertible": listed and CRC-checked, but not loadable as a Tensor.
std::optional<DType> tf_dtype_to_bertrain(int dtype);

/// One index entry (BundleEntryProto), in the file's own terms.
struct TfTensorInfo {
  std::string name;
  int dtype = 0;                ///< TensorFlow DataType number (see TfDType)
  std::vector<int64_t> shape;   ///< empty for a scalar
  int32_t shard_id = 0;
  int64_t offset = 0;           ///< byte offset in the data shard
  int64_t size = 0;             ///< bytes in the data shard (for DT_STRING: varint lengths + checksum + bytes)
  uint32_t crc32c = 0;          ///< masked CRC-32C of the bytes, as stored (see bertrain/core/crc32c.h)
  /// Part of a partitioned variable: the entry lists slices (BundleEntryProto.slices) or is itself a slice
  /// (its key is TensorFlow's binary slice encoding, starting with a 0 byte). Such entries are refused by load().
  bool sliced = false;
  int64_t numel() const;
  /// "[2, 4]" as TensorFlow prints shapes ("[]" for a scalar).
  std::string shape_str() const;
};

/// True when `path` names a TF checkpoint: PATH.index exists (PATH is the prefix, as google-research/bert's
/// --init_checkpoint), or PATH itself is a prefix's ".index", ".data-NNNNN-of-NNNNN" or ".meta" file (the graph
/// that Google's zips ship beside the bundle; bertrain does not read it, but it names the prefix).
bool is_tf_checkpoint(const std::string& path);
/// The prefix of such a path: PATH without a trailing ".index", ".meta" or ".data-NNNNN-of-NNNNN".
std::string tf_checkpoint_prefix(const std::string& path);

/// The checkpoint a TF training directory's `checkpoint` file names, as tf.train.latest_checkpoint reads it: the
/// model_checkpoint_path of the text-format CheckpointState proto (tensorflow/core/protobuf/checkpoint_state.proto;
/// TF writes it after every save, with non-ASCII bytes as octal escapes), joined to `dir` when relative. Other
/// fields (all_model_checkpoint_paths, timestamps) are skipped. nullopt when `dir` holds no `checkpoint` file.
/// Throws bertrain::Error naming the file and line when the text is not `field: value` pairs, a string is
/// unterminated or has an unknown escape, or model_checkpoint_path is missing or empty.
std::optional<std::string> read_tf_checkpoint_state(const std::string& dir);
/// PREFIX.data-SSSSS-of-NNNNN (five digits each, from 0), as TensorFlow names shards.
std::string tf_data_file_name(const std::string& prefix, int shard, int num_shards);

/// A TF checkpoint opened for reading. open() reads the whole index and checks its structure; load() reads
/// one tensor with a positioned read and verifies its CRC-32C. Copies share the open files.
class TfCheckpointReader {
 public:
  /// Opens PATH (a prefix, or its .index / .data file; see tf_checkpoint_prefix). Reads every index block with
  /// its CRC verified (snappy-compressed blocks included, through LevelDB), the header and every entry.
  /// Throws bertrain::Error, one line naming the file (and the tensor where one is at fault), when: the index
  /// is missing or unreadable; it is not a LevelDB table (bad footer magic, truncated, a block CRC mismatch);
  /// the empty-key header is absent or not a BundleHeaderProto; the bundle is big-endian or needs a newer
  /// reader (version.min_consumer > 1, as TensorFlow's kTensorBundleVersion); an entry is not a
  /// BundleEntryProto, has a negative dimension, a shard id outside [0, num_shards), or a byte size that
  /// differs from numel x element size (fixed-size dtypes); a data shard an entry needs is missing; or an
  /// entry runs past the end of its shard (a truncated data file).
  static TfCheckpointReader open(const std::string& path);

  const std::string& prefix() const;
  const std::string& index_path() const;
  int num_shards() const;
  /// BundleHeaderProto.version.producer (1 for files TensorFlow writes).
  int version_producer() const;
  /// Every entry but the header, in key (name) order.
  const std::vector<TfTensorInfo>& entries() const;
  bool contains(const std::string& name) const;
  /// Throws bertrain::Error naming the checkpoint and tensor when absent.
  const TfTensorInfo& info(const std::string& name) const;
  /// The data shard file of an entry.
  std::string data_path(const TfTensorInfo& info) const;

  /// The entry's bytes as stored, after checking their CRC-32C (for DT_STRING the rule of TensorFlow's
  /// WriteStringTensor: each length as a little-endian uint32 (uint64 above 2^32-1), then the stored masked
  /// checksum of the lengths, then the string bytes; the lengths' own checksum is checked too). Throws
  /// bertrain::Error naming the data file and tensor on a read failure or a CRC mismatch (stored and
  /// computed values), and for DT_VARIANT/DT_RESOURCE entries, whose bytes bertrain cannot check.
  std::string read_bytes(const std::string& name) const;
  /// The tensor, in its tf_dtype_to_bertrain() dtype or converted to `convert_to` (Tensor::copy_from's
  /// conversion). Same-dtype loads are bit-exact. Throws what read_bytes() throws, and bertrain::Error naming
  /// the tensor when it is sliced, not convertible (DT_STRING, DT_BOOL, ...) or has more than
  /// Shape::kMaxDims dimensions.
  Tensor load(const std::string& name, std::optional<DType> convert_to = std::nullopt) const;
  /// The elements of a DT_STRING tensor, row-major. Throws what read_bytes() throws, and bertrain::Error
  /// when the tensor is not DT_STRING or its varint lengths do not add up to its size.
  std::vector<std::string> load_strings(const std::string& name) const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

/// Writes a TF checkpoint as TensorFlow's BundleWriter does (one shard): the tensors back to back, without
/// padding, in name (byte) order in PREFIX.data-00000-of-00001; PREFIX.index a LevelDB table built by
/// LevelDB's TableBuilder with TensorFlow's table options (bytewise comparator, 256 KiB blocks, a restart
/// point every 16 keys, no compression) holding the header {num_shards 1, little endian, version
/// {producer 1}} under the empty key and one BundleEntryProto (dtype, shape, offset, size, masked CRC-32C)
/// per tensor. Tensors f32, f64, bf16, i32, i64, i8 become DT_FLOAT, DT_DOUBLE, DT_BFLOAT16, DT_INT32,
/// DT_INT64, DT_INT8. The parent directory is created if needed; both files are written atomically (temporary
/// file, fsync, rename; data first), so a failure leaves no partial output. Throws bertrain::Error naming the
/// file or tensor on an empty or duplicate name, an undefined tensor, or an I/O failure.
void save_tf_checkpoint(const std::string& prefix, const std::vector<std::pair<std::string, Tensor>>& tensors);

}  // namespace bertrain
