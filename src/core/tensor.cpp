// tensor.cpp: Tensor construction, views and element-wise conversions.
#include "bertrain/core/tensor.h"

#include <cmath>
#include <cstring>

#include "bertrain/core/allocator.h"
#include "bertrain/core/rng.h"

namespace bertrain {

Storage::Storage(size_t n) : bytes(n) { ptr = CachingAllocator::instance().allocate(n); }
Storage::~Storage() { CachingAllocator::instance().deallocate(ptr); }

namespace {
template <class F>
void dispatch_store(DType t, void* p, int64_t i, double v, F) {
  switch (t) {
    case DType::f32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case DType::f64: static_cast<double*>(p)[i] = v; break;
    case DType::bf16: static_cast<bf16*>(p)[i] = bf16(static_cast<float>(v)); break;
    case DType::i32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); break;
    case DType::i64: static_cast<int64_t*>(p)[i] = static_cast<int64_t>(v); break;
    case DType::i8: static_cast<int8_t*>(p)[i] = static_cast<int8_t>(v); break;
  }
}
double load(DType t, const void* p, int64_t i) {
  switch (t) {
    case DType::f32: return static_cast<const float*>(p)[i];
    case DType::f64: return static_cast<const double*>(p)[i];
    case DType::bf16: return static_cast<float>(static_cast<const bf16*>(p)[i]);
    case DType::i32: return static_cast<const int32_t*>(p)[i];
    case DType::i64: return static_cast<double>(static_cast<const int64_t*>(p)[i]);
    case DType::i8: return static_cast<const int8_t*>(p)[i];
  }
  return 0;
}
void store(DType t, void* p, int64_t i, double v) { dispatch_store(t, p, i, v, 0); }
}  // namespace

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  for (int64_t d : shape) BERTRAIN_CHECK(d >= 0, "negative dimension in shape ", shape.str());
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.storage_ = std::make_shared<Storage>(t.nbytes());
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  t.zero();
  return t;
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype) {
  Tensor t = empty(shape, dtype);
  t.fill(value);
  return t;
}

Tensor Tensor::from_vector(const std::vector<double>& values, const Shape& shape, DType dtype) {
  BERTRAIN_CHECK(static_cast<int64_t>(values.size()) == shape.numel(), "from_vector: ", values.size(),
                 " values do not fill shape ", shape.str());
  Tensor t = empty(shape, dtype);
  for (size_t i = 0; i < values.size(); ++i) store(dtype, t.raw_data(), static_cast<int64_t>(i), values[i]);
  return t;
}

Tensor Tensor::uniform(const Shape& shape, double lo, double hi, Rng& rng, DType dtype) {
  BERTRAIN_CHECK(dtype_is_float(dtype), "uniform: needs a float dtype, got ", dtype_name(dtype));
  Tensor t = empty(shape, dtype);
  for (int64_t i = 0; i < t.numel(); ++i) store(dtype, t.raw_data(), i, lo + (hi - lo) * rng.uniform());
  return t;
}

Tensor Tensor::truncated_normal(const Shape& shape, double mean, double std, Rng& rng, DType dtype) {
  BERTRAIN_CHECK(dtype_is_float(dtype), "truncated_normal: needs a float dtype, got ", dtype_name(dtype));
  Tensor t = empty(shape, dtype);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double z;
    do z = rng.normal();
    while (std::fabs(z) > 2.0);
    store(dtype, t.raw_data(), i, mean + std * z);
  }
  return t;
}

Tensor Tensor::reshape(const Shape& shape) const {
  BERTRAIN_CHECK(defined(), "reshape of an undefined tensor");
  Shape s = shape;
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      BERTRAIN_CHECK(infer < 0, "reshape: at most one -1 in ", shape.str());
      infer = i;
    } else {
      BERTRAIN_CHECK(s[i] >= 0, "reshape: negative dimension in ", shape.str());
      known *= s[i];
    }
  }
  if (infer >= 0) {
    BERTRAIN_CHECK(known > 0 && numel() % known == 0, "reshape: cannot view ", shape_.str(), " as ", shape.str());
    s[infer] = numel() / known;
  }
  BERTRAIN_CHECK(s.numel() == numel(), "reshape: cannot view ", shape_.str(), " (", numel(), " elements) as ",
                 shape.str());
  Tensor t = *this;
  t.shape_ = s;
  return t;
}

Tensor Tensor::slice(int64_t begin, int64_t end) const {
  BERTRAIN_CHECK(dim() >= 1, "slice of a scalar");
  BERTRAIN_CHECK(0 <= begin && begin <= end && end <= shape_[0], "slice [", begin, ", ", end,
                 ") out of range for shape ", shape_.str());
  Tensor t = *this;
  int64_t row = numel() / std::max<int64_t>(shape_[0], 1) * static_cast<int64_t>(dtype_size(dtype_));
  t.offset_ += static_cast<size_t>(begin * row);
  t.shape_[0] = end - begin;
  return t;
}

Tensor Tensor::select(int64_t i) const {
  Tensor s = slice(i, i + 1);
  std::vector<int64_t> d(shape_.begin() + 1, shape_.end());
  s.shape_ = Shape(d);
  return s;
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape_, dtype_);
  if (nbytes()) std::memcpy(t.raw_data(), raw_data(), nbytes());
  return t;
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_) return clone();
  Tensor t = empty(shape_, dtype);
  t.copy_from(*this);
  return t;
}

void Tensor::copy_from(const Tensor& src) {
  BERTRAIN_CHECK(src.numel() == numel(), "copy_from: ", src.desc(), " into ", desc());
  if (src.dtype_ == dtype_) {
    if (nbytes()) std::memmove(raw_data(), src.raw_data(), nbytes());
    return;
  }
  if (dtype_ == DType::f32 && src.dtype_ == DType::bf16) {
    const bf16* s = src.data<bf16>();
    float* d = data<float>();
    for (int64_t i = 0; i < numel(); ++i) d[i] = static_cast<float>(s[i]);
    return;
  }
  if (dtype_ == DType::bf16 && src.dtype_ == DType::f32) {
    const float* s = src.data<float>();
    bf16* d = data<bf16>();
    for (int64_t i = 0; i < numel(); ++i) d[i] = bf16(s[i]);
    return;
  }
  for (int64_t i = 0; i < numel(); ++i) store(dtype_, raw_data(), i, load(src.dtype_, src.raw_data(), i));
}

void Tensor::fill(double value) {
  if (value == 0.0) {
    zero();
    return;
  }
  for (int64_t i = 0; i < numel(); ++i) store(dtype_, raw_data(), i, value);
}

void Tensor::zero() {
  if (nbytes()) std::memset(raw_data(), 0, nbytes());
}

double Tensor::get(int64_t i) const {
  BERTRAIN_CHECK(i >= 0 && i < numel(), "index ", i, " out of range for ", desc());
  return load(dtype_, raw_data(), i);
}

void Tensor::set(int64_t i, double v) {
  BERTRAIN_CHECK(i >= 0 && i < numel(), "index ", i, " out of range for ", desc());
  store(dtype_, raw_data(), i, v);
}

double Tensor::item() const {
  BERTRAIN_CHECK(numel() == 1, "item() needs one element, got ", desc());
  return get(0);
}

std::vector<double> Tensor::to_vector() const {
  std::vector<double> v(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) v[static_cast<size_t>(i)] = load(dtype_, raw_data(), i);
  return v;
}

std::string Tensor::desc() const {
  if (!defined()) return "undefined";
  return std::string(dtype_name(dtype_)) + shape_.str();
}

void check_same_shape(const char* op, const Tensor& a, const Tensor& b) {
  BERTRAIN_CHECK(a.shape() == b.shape(), op, ": shapes differ: ", a.shape().str(), " and ", b.shape().str());
}

}  // namespace bertrain
