// tensor.h: Tensor, a dense row-major n-d array on 64-byte aligned storage from the caching allocator.
// A Tensor is always contiguous. Views (reshape, slices along the first axis) share storage; anything
// that would need strides (transpose, permute, a slice along a later axis) is an explicit copy made by
// an op, so every kernel can assume contiguous data.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bertrain/core/dtype.h"
#include "bertrain/core/error.h"
#include "bertrain/core/shape.h"

namespace bertrain {

class Rng;

/// Raw buffer owned by the caching allocator; shared by a tensor and its views.
struct Storage {
  void* ptr = nullptr;
  size_t bytes = 0;
  explicit Storage(size_t n);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

class Tensor {
 public:
  /// An undefined tensor (defined() is false).
  Tensor() = default;

  /// Uninitialised tensor of `shape`. Throws bertrain::Error on a negative dimension.
  static Tensor empty(const Shape& shape, DType dtype = DType::f32);
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32);
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32);
  /// Copies `values` (converted to `dtype`); throws when values.size() != shape.numel().
  static Tensor from_vector(const std::vector<double>& values, const Shape& shape, DType dtype = DType::f32);
  template <class T>
  static Tensor from_data(const T* values, const Shape& shape) {
    Tensor t = empty(shape, dtype_of<T>);
    std::memcpy(t.raw_data(), values, t.nbytes());
    return t;
  }
  /// Values uniform in [lo, hi) from `rng` (f32 or f64).
  static Tensor uniform(const Shape& shape, double lo, double hi, Rng& rng, DType dtype = DType::f32);
  /// Normal(mean, std) truncated to mean +- 2 std by redrawing, as TensorFlow's truncated_normal that
  /// google-research/bert uses for initialisation.
  static Tensor truncated_normal(const Shape& shape, double mean, double std, Rng& rng, DType dtype = DType::f32);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int dim() const { return shape_.size(); }
  /// Size of dimension `d` (negative counts from the end).
  int64_t size(int d) const { return shape_.at(d); }
  int64_t numel() const { return shape_.numel(); }
  DType dtype() const { return dtype_; }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }

  void* raw_data() const { return static_cast<char*>(storage_->ptr) + offset_; }
  /// Typed pointer; throws bertrain::Error when T does not match dtype().
  template <class T>
  T* data() const {
    BERTRAIN_CHECK(defined(), "data() on an undefined tensor");
    BERTRAIN_CHECK(dtype_of<T> == dtype_, "tensor of dtype ", dtype_name(dtype_), " accessed as ",
                   dtype_name(dtype_of<T>));
    return static_cast<T*>(raw_data());
  }

  /// View with a new shape of the same numel; one dimension may be -1.
  Tensor reshape(const Shape& shape) const;
  /// View of rows [begin, end) along the first axis.
  Tensor slice(int64_t begin, int64_t end) const;
  /// View of row i along the first axis (one dimension fewer).
  Tensor select(int64_t i) const;
  /// Deep copy.
  Tensor clone() const;
  /// Copy converted to `dtype` (a clone when it is the same).
  Tensor to(DType dtype) const;
  /// Copies `src` (same numel, any dtype: converted) into this tensor's storage.
  void copy_from(const Tensor& src);
  void fill(double value);
  void zero();
  /// Element `i` of the flattened tensor, as double.
  double get(int64_t i) const;
  void set(int64_t i, double v);
  /// The single value of a one-element tensor.
  double item() const;
  std::vector<double> to_vector() const;
  /// True when both share one storage block.
  bool shares_storage(const Tensor& o) const { return storage_ == o.storage_; }
  /// "f32(2, 3)".
  std::string desc() const;

 private:
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;  // bytes
  Shape shape_;
  DType dtype_ = DType::f32;
};

/// Throws bertrain::Error "<op>: expected <what>, got <shape>" when the shapes differ.
void check_same_shape(const char* op, const Tensor& a, const Tensor& b);

}  // namespace bertrain
