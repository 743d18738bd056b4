// shape.cpp: Shape helpers and the dtype table.
#include "bertrain/core/shape.h"

#include "bertrain/core/dtype.h"
#include "bertrain/core/error.h"

namespace bertrain {

Shape::Shape(std::initializer_list<int64_t> dims) {
  BERTRAIN_CHECK(dims.size() <= kMaxDims, "a shape has at most ", kMaxDims, " dimensions, got ", dims.size());
  for (int64_t v : dims) d_[n_++] = v;
}

Shape::Shape(const std::vector<int64_t>& dims) {
  BERTRAIN_CHECK(dims.size() <= kMaxDims, "a shape has at most ", kMaxDims, " dimensions, got ", dims.size());
  for (int64_t v : dims) d_[n_++] = v;
}

int64_t Shape::at(int i) const {
  int j = i < 0 ? i + n_ : i;
  BERTRAIN_CHECK(j >= 0 && j < n_, "dimension ", i, " is out of range for shape ", str());
  return d_[j];
}

void Shape::push_back(int64_t v) {
  BERTRAIN_CHECK(n_ < kMaxDims, "a shape has at most ", kMaxDims, " dimensions");
  d_[n_++] = v;
}

int64_t Shape::numel() const {
  int64_t p = 1;
  for (int i = 0; i < n_; ++i) p *= d_[i];
  return p;
}

std::string Shape::str() const {
  std::string s = "(";
  for (int i = 0; i < n_; ++i) {
    if (i) s += ", ";
    s += std::to_string(d_[i]);
  }
  return s + ")";
}

bool Shape::operator==(const Shape& o) const {
  if (n_ != o.n_) return false;
  for (int i = 0; i < n_; ++i)
    if (d_[i] != o.d_[i]) return false;
  return true;
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::bf16: return 2;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::i8: return 1;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::i8: return "i8";
  }
  return "?";
}

bool dtype_is_float(DType t) { return t == DType::f32 || t == DType::f64 || t == DType::bf16; }

}  // namespace bertrain
