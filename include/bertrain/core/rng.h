// rng.h: counter-based random numbers (Philox-4x32-10, Salmon et al. 2011, "Parallel random numbers:
// as easy as 1, 2, 3"; the generator of cuRAND and PyTorch's CUDA RNG). There is no global RNG: each
// user (init, dropout, masking, shuffling) holds an explicit Rng or computes keyed draws, so results
// depend only on the seed and the key, never on threads, ranks or call order elsewhere.
#pragma once

#include <array>
#include <cstdint>

namespace bertrain {

/// One Philox-4x32-10 block: 4 random 32-bit words for counter `ctr` under key `key`.
std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> ctr, std::array<uint32_t, 2> key);

/// A uniform float in [0, 1) from 24 random bits.
inline float u32_to_unit_float(uint32_t x) { return static_cast<float>(x >> 8) * (1.0f / 16777216.0f); }
/// A uniform double in [0, 1) from 53 random bits.
inline double u64_to_unit_double(uint64_t x) { return static_cast<double>(x >> 11) * (1.0 / 9007199254740992.0); }

/// Keyed draw: 4 words for (seed, stream, index). Equal arguments give equal words, on any thread.
inline std::array<uint32_t, 4> philox_keyed(uint64_t seed, uint64_t stream, uint64_t index) {
  return philox4x32({static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32),
                     static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)},
                    {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
}

/// The whole state of an Rng: enough to continue the exact same sequence after a restart.
struct RngState {
  uint64_t seed = 0;
  uint64_t stream = 0;
  uint64_t counter = 0;  // next Philox block
  uint32_t used = 4;     // words of the buffered block already consumed (4 = none buffered)
  bool operator==(const RngState&) const = default;
};

/// A sequential stream of random numbers over Philox blocks (seed, stream, counter).
class Rng {
 public:
  explicit Rng(uint64_t seed = 0, uint64_t stream = 0);
  uint32_t next_u32();
  uint64_t next_u64();
  /// Uniform in [0, 1).
  double uniform();
  /// Standard normal, Box-Muller on two uniforms (no cached second value, so state stays small).
  double normal();
  /// Uniform integer in [0, n); throws bertrain::Error when n <= 0. Unbiased (Lemire's method).
  uint64_t randint(uint64_t n);
  RngState state() const;
  /// Restores a state from state(); a different seed or stream is allowed (it is part of the state).
  void set_state(const RngState& s);

 private:
  RngState s_;
  std::array<uint32_t, 4> buf_{};
};

}  // namespace bertrain
