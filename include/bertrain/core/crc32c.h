// crc32c.h: CRC-32C (Castagnoli polynomial 0x1EDC6F41, reflected 0x82F63B78; RFC 3720 section 12.1 and
// appendix B.4) and the "masked" form TensorFlow and LevelDB store in checkpoint entries and table blocks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace bertrain::crc32c {

/// The CRC-32C of `data` continued from `crc` (the CRC of the bytes before it; 0 to start), so that
/// extend(extend(0, a), b) == value(a + b). Initial value and final xor 0xFFFFFFFF are applied inside, as
/// iSCSI and LevelDB's crc32c::Extend do. Uses the SSE4.2 crc32 instruction when the build targets it,
/// else a slicing-by-8 table; both give the same bits (tested).
uint32_t extend(uint32_t crc, const void* data, size_t n);
inline uint32_t value(const void* data, size_t n) { return extend(0, data, n); }
inline uint32_t value(std::string_view s) { return extend(0, s.data(), s.size()); }

/// TensorFlow's and LevelDB's mask (tensorflow/core/lib/hash/crc32c.h, leveldb util/crc32c.h): a CRC stored
/// next to the data it covers is rotated right by 15 bits and offset by 0xa282ead8, because computing the
/// CRC of a string that itself contains embedded CRCs is problematic.
inline uint32_t mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
/// The inverse of mask().
inline uint32_t unmask(uint32_t masked) {
  const uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

namespace detail {
/// The portable table implementation of extend(), exposed so tests can check it against the hardware path.
uint32_t extend_portable(uint32_t crc, const void* data, size_t n);
}  // namespace detail

}  // namespace bertrain::crc32c
