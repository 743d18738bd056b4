// json_number.h (private, header-only; for the layers that link nlohmann/json): the one rule by which bertrain's
// JSON readers turn a JSON number into a C++ integer. nlohmann's get<int64_t>() converts whatever number it holds
// with a static_cast: a float beyond the integer's range (a seed of 6.3e19, a batch size of 1e30) is undefined
// behaviour (fuzz finding in trainer_state.json, UBSan float-cast-overflow), and 2.5 or 2^40 read into an int are
// silently truncated or wrapped. Here an integer is accepted when it is exactly representable in T; a float only
// when it is finite, integral and in range (2048.0, 1e6: what Python's json and int() accept, as transformers
// writes sizes as integers but people write 1e6 by hand).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <type_traits>

namespace bertrain::detail {

/// Stores `v` in `out` and returns true when `v` is a JSON number exactly representable in the integer type T
/// (bool excluded); returns false (and leaves `out` alone) for any other value: strings, non-integral or
/// out-of-range numbers. Never throws.
template <class T>
bool json_to_integer(const nlohmann::json& v, T& out) {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>, "json_to_integer reads integers");
  using L = std::numeric_limits<T>;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(L::max())) return false;
    out = static_cast<T>(u);
    return true;
  }
  if (v.is_number_integer()) {
    const int64_t s = v.get<int64_t>();
    if constexpr (std::is_unsigned_v<T>) {
      if (s < 0 || static_cast<uint64_t>(s) > static_cast<uint64_t>(L::max())) return false;
    } else {
      if (s < static_cast<int64_t>(L::min()) || s > static_cast<int64_t>(L::max())) return false;
    }
    out = static_cast<T>(s);
    return true;
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    // 2^digits is exactly representable as a double and is one past T's largest value; -2^digits is T's smallest.
    const double hi = std::ldexp(1.0, L::digits);
    const double lo = std::is_signed_v<T> ? -hi : 0.0;
    if (!std::isfinite(d) || d != std::floor(d) || d < lo || d >= hi) return false;
    out = static_cast<T>(d);
    return true;
  }
  return false;
}

}  // namespace bertrain::detail
