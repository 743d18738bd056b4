// weights_file.h: one reader over the weights files bertrain takes by name: safetensors and PyTorch zip checkpoints
// (pytorch_model.bin). Checkpoint loading (load_model), `bertrain inspect` and `bertrain convert` go through it, so
// every command that accepts a checkpoint accepts both.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bertrain/core/tensor.h"

namespace bertrain {

class SafetensorsFile;
class TorchCheckpoint;

/// File name of a PyTorch checkpoint inside a Hugging Face checkpoint directory (transformers' WEIGHTS_NAME).
inline constexpr const char* kTorchWeightsFileName = "pytorch_model.bin";

/// A tensor's header entry, in safetensors dtype names ("F32", "F16", "BF16", "F64", "I64", "I32", "I16", "I8",
/// "U8", "BOOL", ...).
struct WeightsTensorInfo {
  std::string dtype;
  Shape shape;
};

class WeightsFile {
 public:
  enum class Format { safetensors, torch };
  /// Opens a weights file (not a directory; resolve_weights_file() in checkpoint.h finds the file of a
  /// directory): a PyTorch checkpoint when is_torch_checkpoint_file() says so (content), or when the name ends in
  /// .bin, .pt or .pth (so a broken one is named as a broken PyTorch file); else safetensors.
  /// Throws what SafetensorsFile::open() or TorchCheckpoint::open() throw.
  static WeightsFile open(const std::string& path);

  Format format() const { return torch_ ? Format::torch : Format::safetensors; }
  /// "safetensors" or "PyTorch", for messages.
  const char* format_name() const;
  const std::string& path() const;
  /// Tensor names in file order (safetensors: by offset; PyTorch: the state dict's order).
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const;
  /// Throws bertrain::Error naming the file and tensor when absent.
  WeightsTensorInfo info(const std::string& name) const;
  /// As SafetensorsFile::load / TorchCheckpoint::load (F16 widened exactly to f32 by both).
  Tensor load(const std::string& name, std::optional<DType> convert_to = std::nullopt) const;

  /// The underlying reader; null for the other format.
  const SafetensorsFile* safetensors() const { return st_.get(); }
  const TorchCheckpoint* torch() const { return torch_.get(); }

 private:
  std::shared_ptr<const SafetensorsFile> st_;
  std::shared_ptr<const TorchCheckpoint> torch_;
};

/// True for the floating-point safetensors dtype names: F32, F64, BF16, F16.
bool is_float_dtype_name(const std::string& dtype);

}  // namespace bertrain
