// sha256.h: SHA-256 (FIPS 180-4) of a byte string, used to fingerprint vocab files in dataset metadata.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace bertrain {

/// SHA-256 digest of `bytes`, as specified in NIST FIPS 180-4 (2015), section 6.2.
std::array<uint8_t, 32> sha256(std::string_view bytes);

/// The same digest as 64 lowercase hex digits (what `sha256sum` prints).
std::string sha256_hex(std::string_view bytes);

}  // namespace bertrain
