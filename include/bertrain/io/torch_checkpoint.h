// torch_checkpoint.h: reading PyTorch checkpoints (`torch.save(model.state_dict())`, Hugging Face's
// pytorch_model.bin) without Python and without running the pickle. Format: PyTorch's zip serialization (PyTorch
// >= 1.6; torch/serialization.py `_save`, caffe2/serialize/inline_container.h): a zip archive whose records lie
// under one top-level directory NAME (`archive`, or the file's stem in PyTorch < 2.0): NAME/data.pkl (the pickled
// state dict), NAME/data/<key> (one record per storage, raw little-endian elements), NAME/version and, in newer
// versions, NAME/byteorder. data.pkl is read by a restricted unpickler that knows the pickle opcodes torch.save
// writes (CPython Lib/pickletools.py documents them) and the few globals a state dict needs; any other global or
// opcode is refused before anything is built, so a hostile file cannot run code.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bertrain/core/tensor.h"

namespace bertrain {

/// Bounds on what a file may make the reader allocate or walk (a corrupt or hostile file is refused with one
/// line before they are exceeded). The defaults hold any real state dict; the fuzz target uses smaller ones.
struct TorchCheckpointLimits {
  uint64_t max_pickle_bytes = 64ull << 20;   ///< NAME/data.pkl, decompressed (BERT-large's is about 60 KB)
  uint64_t max_record_bytes = 64ull << 30;   ///< one NAME/data/<key> record, decompressed
  uint64_t max_total_bytes = 256ull << 30;   ///< all records together, as declared by the zip directory
  uint64_t max_entries = 1'000'000;          ///< zip entries
  uint64_t max_objects = 4'000'000;          ///< objects the unpickler creates (memo, tuples, ints, ...)
  int max_depth = 32;                        ///< nesting of MARKs and of containers
  /// A view may address fewer elements than it has (stride 0, as `expand`); materialised it may not exceed
  /// max(its storage's bytes, this).
  uint64_t max_expanded_bytes = 256ull << 20;
};

/// One tensor of the state dict as the pickle describes it (validated against its storage at open()).
struct TorchTensorInfo {
  std::string dtype;             ///< safetensors names: F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL
  Shape shape;
  std::vector<int64_t> stride;   ///< in elements, one per dimension (0 allowed: expanded views)
  int64_t storage_offset = 0;    ///< in elements
  std::string storage_key;       ///< the record NAME/data/<key>
  int64_t storage_numel = 0;     ///< elements in the storage
  /// True when the tensor is the row-major layout of its shape (it may still start at an offset).
  bool contiguous() const;
};

/// A PyTorch zip checkpoint holding a state dict (an OrderedDict or dict of name -> tensor), opened for reading.
/// open() reads the zip directory and data.pkl and validates every tensor against its storage; load() reads
/// one tensor's storage record (the archive stays open while any copy of this object lives).
class TorchCheckpoint {
 public:
  /// Opens and validates `path`. Throws bertrain::Error, one line naming the file (and, for the pickle, the
  /// data.pkl offset; for a tensor, its name), when: the file cannot be opened or is no zip archive (a legacy
  /// pre-1.6 torch.save file is named as such); the zip is inconsistent or truncated (libzip's checks); there is
  /// not exactly one NAME/data.pkl; NAME/version is missing or not a number; NAME/byteorder is not "little";
  /// an entry is encrypted, compressed with a method other than store/deflate, or declares a size over the
  /// limits or beyond what deflate can produce from its compressed size (a zip bomb); data.pkl uses an opcode
  /// outside the subset or a global other than collections.OrderedDict, torch._utils._rebuild_tensor_v2,
  /// torch._utils._rebuild_parameter(_with_state) and the typed storages torch.{Float,Half,BFloat16,Double,Long,
  /// Int,Short,Char,Byte,Bool}Storage; the pickle is malformed (stack underflow, a missing MARK, a truncated
  /// argument, a wrong argument type, limits exceeded); the result is not a dict of string -> tensor; a
  /// persistent id is not ('storage', type, key, location, numel); a storage record is missing or its byte
  /// length is not numel x element size; or a tensor's size, stride or offset addresses an element outside its
  /// storage.
  static TorchCheckpoint open(const std::string& path, const TorchCheckpointLimits& limits = {});
  /// open() on the bytes of a whole file in memory; `source` names it in errors and is what path() returns.
  static TorchCheckpoint from_memory(std::string bytes, const std::string& source,
                                     const TorchCheckpointLimits& limits = {});

  const std::string& path() const;
  /// NAME, the directory every record lies under ("archive", or the file's stem in older PyTorch versions).
  const std::string& archive_name() const;
  /// NAME/version's number (3 for PyTorch 1.10 - 2.x).
  int64_t version() const;
  /// Tensor names in the state dict's order.
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const;
  /// Throws bertrain::Error naming the file and tensor when absent.
  const TorchTensorInfo& info(const std::string& name) const;
  /// Names of tensors sharing `name`'s storage record (tied weights), `name` excluded.
  std::vector<std::string> sharing_storage(const std::string& name) const;

  /// Reads tensor `name` into a new contiguous tensor (views and shared storages are copied out). Without
  /// `convert_to` the dtype is the file's (F32 f32, F64 f64, BF16 bf16, I64 i64, I32 i32, I8 i8); F16 becomes
  /// f32 (exactly, f16_to_f32 of safetensors.h, as the safetensors reader does), I16, U8 and BOOL become i32.
  /// With `convert_to` the values are then converted (Tensor::to). Throws bertrain::Error naming file and
  /// tensor when the record cannot be read (CRC error, truncated or over-long compressed data).
  Tensor load(const std::string& name, std::optional<DType> convert_to = std::nullopt) const;
  /// Every tensor in names() order, load(name, convert_to).
  std::vector<std::pair<std::string, Tensor>> load_all(std::optional<DType> convert_to = std::nullopt) const;

  struct Impl;  // the archive and the parsed state dict, defined in torch_checkpoint.cpp

 private:
  std::shared_ptr<Impl> impl_;
};

/// True when `path` is a file whose first bytes are a zip local header ("PK\x03\x04") or the pickled magic number
/// of the legacy torch.save format (which open() then refuses by name); false for safetensors files and anything
/// unreadable. Checkpoint loading dispatches on this (content, not the file name).
bool is_torch_checkpoint_file(const std::string& path);

}  // namespace bertrain
