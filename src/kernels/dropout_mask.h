// dropout_mask.h: keyed dropout keep-masks from Philox-4x32-10, 16 blocks at a time in a loop the compiler
// vectorises (AVX-512 / AVX2 widening 32x32->64 multiplies), 16 bits per keep/drop decision, so one Philox
// block decides 8 elements. Bit-identical to core's scalar philox4x32 (tests/ops_test.cpp checks it).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace bertrain::kernels {

/// Philox blocks computed per batch by philox_keyed_16.
constexpr int64_t kPhiloxLanes = 16;
/// Elements decided per Philox block (4 words x 2 halves of 16 bits).
constexpr int64_t kDropPerBlock = 8;

/// out[4 * l + w] = word w of philox_keyed(seed, stream, index0 + l) for l in [0, 16).
inline void philox_keyed_16(uint64_t seed, uint64_t stream, uint64_t index0, uint32_t* out) {
  constexpr uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  uint32_t c0[kPhiloxLanes], c1[kPhiloxLanes], c2[kPhiloxLanes], c3[kPhiloxLanes];
#pragma omp simd
  for (int l = 0; l < kPhiloxLanes; ++l) {
    const uint64_t idx = index0 + static_cast<uint64_t>(l);
    c0[l] = static_cast<uint32_t>(idx);
    c1[l] = static_cast<uint32_t>(idx >> 32);
    c2[l] = static_cast<uint32_t>(stream);
    c3[l] = static_cast<uint32_t>(stream >> 32);
  }
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int r = 0; r < 10; ++r) {
#pragma omp simd
    for (int l = 0; l < kPhiloxLanes; ++l) {
      const uint64_t p0 = static_cast<uint64_t>(M0) * c0[l];
      const uint64_t p1 = static_cast<uint64_t>(M1) * c2[l];
      const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1[l] ^ k0;
      const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3[l] ^ k1;
      c1[l] = static_cast<uint32_t>(p1);
      c3[l] = static_cast<uint32_t>(p0);
      c0[l] = n0;
      c2[l] = n2;
    }
    k0 += W0;
    k1 += W1;
  }
  for (int l = 0; l < kPhiloxLanes; ++l) {
    out[4 * l] = c0[l];
    out[4 * l + 1] = c1[l];
    out[4 * l + 2] = c2[l];
    out[4 * l + 3] = c3[l];
  }
}

/// Drop threshold on 16-bit draws: an element is dropped when its draw is below round(p * 65536), so the
/// drop probability is p to within 2^-17.
inline uint32_t dropout_threshold16(double p) {
  return static_cast<uint32_t>(std::min(65536.0, std::floor(p * 65536.0 + 0.5)));
}

/// keep[i] = 1 or 0 for elements [j0, j0 + n) of sample `sample` at one dropout site: element j uses the 16-bit
/// half (j % 2, low half first) of word (j / 2) % 4 of Philox block (seed, stream, sample * 2^32 + j / 8).
inline void dropout_keep(uint64_t seed, uint64_t stream, int64_t sample, int64_t j0, int64_t n, uint32_t thr16,
                         uint8_t* keep) {
  const uint64_t base = static_cast<uint64_t>(sample) << 32;
  constexpr int64_t kSpan = kPhiloxLanes * kDropPerBlock;  // 128 elements per batch of blocks
  uint32_t words[4 * kPhiloxLanes];
  int64_t j = j0;
  const int64_t end = j0 + n;
  while (j < end) {
    const int64_t blk = j / kDropPerBlock;
    philox_keyed_16(seed, stream, base + static_cast<uint64_t>(blk), words);
    uint16_t h[2 * 4 * kPhiloxLanes];
#pragma omp simd
    for (int w = 0; w < 4 * kPhiloxLanes; ++w) {
      h[2 * w] = static_cast<uint16_t>(words[w]);
      h[2 * w + 1] = static_cast<uint16_t>(words[w] >> 16);
    }
    const int64_t first = blk * kDropPerBlock, last = std::min(end, first + kSpan);
    uint8_t* o = keep + (j - j0);
    const int64_t off = j - first, cnt = last - j;
#pragma omp simd
    for (int64_t i = 0; i < cnt; ++i) o[i] = h[off + i] >= thr16;
    j = last;
  }
}

/// Elements per parallel work unit of dropout_forward (a multiple of 128, so units start on a batch of blocks).
constexpr int64_t kDropChunk = 8192;

/// Inverted dropout in one pass over x (rows, per_row): keep[i] from dropout_keep for sample first_row + r,
/// y[i] = keep[i] ? x[i] * scale : 0. x and y may alias. One parallel region over (row, chunk) units.
/// Packed tokens (row_sample and row_position given): row r is decided as elements
/// [row_position[r] * per_row, + per_row) of sample first_row + row_sample[r].
template <class T>
void dropout_forward(const T* x, T* y, uint8_t* keep, int64_t rows, int64_t per_row, uint64_t seed,
                     uint64_t stream, int64_t first_row, uint32_t thr16, T scale, const int32_t* row_sample = nullptr,
                     const int32_t* row_position = nullptr) {
  const int64_t chunks = (per_row + kDropChunk - 1) / kDropChunk, units = rows * chunks;
#pragma omp parallel for schedule(static) if (units > 1 && rows * per_row > 32768)
  for (int64_t u = 0; u < units; ++u) {
    const int64_t r = u / chunks, j0 = (u % chunks) * kDropChunk, cnt = std::min(per_row - j0, kDropChunk);
    const int64_t off = r * per_row + j0;
    uint8_t* k = keep + off;
    if (row_sample)
      dropout_keep(seed, stream, first_row + row_sample[r], row_position[r] * per_row + j0, cnt, thr16, k);
    else
      dropout_keep(seed, stream, first_row + r, j0, cnt, thr16, k);
    const T* xs = x + off;
    T* ys = y + off;
#pragma omp simd
    for (int64_t i = 0; i < cnt; ++i) ys[i] = k[i] ? xs[i] * scale : T(0);
  }
}

}  // namespace bertrain::kernels
