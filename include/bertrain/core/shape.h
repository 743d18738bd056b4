// shape.h: Shape, a small inline list of dimension sizes (at most 8), row-major.
// Shape letters used across bertrain: B batch, T sequence length, H hidden, NH heads, HS head size,
// I intermediate, V vocab, P masked positions per sequence.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace bertrain {

class Shape {
 public:
  static constexpr int kMaxDims = 8;
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(const std::vector<int64_t>& dims);

  int size() const { return n_; }
  bool empty() const { return n_ == 0; }
  int64_t operator[](int i) const { return d_[i]; }
  int64_t& operator[](int i) { return d_[i]; }
  /// Dimension `i`, negative counts from the end. Throws bertrain::Error when out of range.
  int64_t at(int i) const;
  int64_t back() const { return d_[n_ - 1]; }
  void push_back(int64_t v);
  /// Product of all dimensions (1 for a scalar shape).
  int64_t numel() const;
  const int64_t* begin() const { return d_.data(); }
  const int64_t* end() const { return d_.data() + n_; }
  std::vector<int64_t> vec() const { return {begin(), end()}; }
  /// "(2, 3)"; a scalar is "()".
  std::string str() const;
  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }

 private:
  std::array<int64_t, kMaxDims> d_{};
  int n_ = 0;
};

}  // namespace bertrain
