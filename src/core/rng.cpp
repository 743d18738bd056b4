// rng.cpp: Philox-4x32-10 with the constants of Salmon et al. 2011 (Random123).
#include "bertrain/core/rng.h"

#include <cmath>

#include "bertrain/core/error.h"

namespace bertrain {

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  constexpr uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  for (int r = 0; r < 10; ++r) {
    uint64_t p0 = static_cast<uint64_t>(M0) * c[0];
    uint64_t p1 = static_cast<uint64_t>(M1) * c[2];
    uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
    k[0] += W0;
    k[1] += W1;
  }
  return c;
}

Rng::Rng(uint64_t seed, uint64_t stream) {
  s_.seed = seed;
  s_.stream = stream;
}

uint32_t Rng::next_u32() {
  if (s_.used >= 4) {
    buf_ = philox_keyed(s_.seed, s_.stream, s_.counter++);
    s_.used = 0;
  }
  return buf_[s_.used++];
}

uint64_t Rng::next_u64() {
  uint64_t hi = next_u32();
  return (hi << 32) | next_u32();
}

double Rng::uniform() { return u64_to_unit_double(next_u64()); }

double Rng::normal() {
  double u1 = uniform();
  double u2 = uniform();
  if (u1 < 1e-300) u1 = 1e-300;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

uint64_t Rng::randint(uint64_t n) {
  BERTRAIN_CHECK(n > 0, "randint: n must be positive");
  // Lemire 2019, "Fast random integer generation in an interval", with rejection for exactness.
  uint64_t x = next_u64();
  __uint128_t m = static_cast<__uint128_t>(x) * n;
  uint64_t l = static_cast<uint64_t>(m);
  if (l < n) {
    uint64_t t = (0 - n) % n;
    while (l < t) {
      x = next_u64();
      m = static_cast<__uint128_t>(x) * n;
      l = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

RngState Rng::state() const { return s_; }

void Rng::set_state(const RngState& s) {
  BERTRAIN_CHECK(s.used <= 4, "invalid RngState: used=", s.used);
  s_ = s;
  if (s_.used < 4) buf_ = philox_keyed(s_.seed, s_.stream, s_.counter - 1);
}

}  // namespace bertrain
