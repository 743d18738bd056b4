// weights_file.cpp: dispatch between the safetensors and the PyTorch checkpoint readers.
#include "bertrain/io/weights_file.h"

#include "bertrain/io/safetensors.h"
#include "bertrain/io/torch_checkpoint.h"

namespace bertrain {

namespace {

bool has_torch_suffix(const std::string& p) {
  for (const std::string x : {".bin", ".pt", ".pth"})
    if (p.size() >= x.size() && p.compare(p.size() - x.size(), x.size(), x) == 0) return true;
  return false;
}

}  // namespace

WeightsFile WeightsFile::open(const std::string& path) {
  WeightsFile w;
  if (is_torch_checkpoint_file(path) || has_torch_suffix(path)) w.torch_ = std::make_shared<const TorchCheckpoint>(TorchCheckpoint::open(path));
  else w.st_ = std::make_shared<const SafetensorsFile>(SafetensorsFile::open(path));
  return w;
}

const char* WeightsFile::format_name() const { return torch_ ? "PyTorch" : "safetensors"; }
const std::string& WeightsFile::path() const { return torch_ ? torch_->path() : st_->path(); }
std::vector<std::string> WeightsFile::names() const { return torch_ ? torch_->names() : st_->names(); }
bool WeightsFile::contains(const std::string& name) const {
  return torch_ ? torch_->contains(name) : st_->contains(name);
}

WeightsTensorInfo WeightsFile::info(const std::string& name) const {
  if (torch_) {
    const TorchTensorInfo& i = torch_->info(name);
    return {i.dtype, i.shape};
  }
  const SafetensorsInfo& i = st_->info(name);
  return {i.dtype, i.shape};
}

Tensor WeightsFile::load(const std::string& name, std::optional<DType> convert_to) const {
  return torch_ ? torch_->load(name, convert_to) : st_->load(name, convert_to);
}

bool is_float_dtype_name(const std::string& d) { return d == "F32" || d == "F64" || d == "BF16" || d == "F16"; }

}  // namespace bertrain
