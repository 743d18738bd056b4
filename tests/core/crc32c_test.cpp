// crc32c_test.cpp: CRC-32C (Castagnoli) against RFC 3720's published vectors, both implementations against each
// other, and TensorFlow's / LevelDB's mask.
#include <gtest/gtest.h>

#include <string>

#include "bertrain/core/crc32c.h"

using namespace bertrain;

TEST(Crc32c, Rfc3720Vectors) {
  // RFC 3720 appendix B.4 (iSCSI): 32 bytes of 0x00, of 0xFF, ascending, descending, and a SCSI read PDU.
  std::string zeros(32, '\0'), ones(32, '\xff'), up(32, '\0'), down(32, '\0');
  for (int i = 0; i < 32; ++i) {
    up[i] = static_cast<char>(i);
    down[i] = static_cast<char>(31 - i);
  }
  const unsigned char pdu[48] = {0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
                                 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
                                 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  EXPECT_EQ(crc32c::value(zeros), 0x8a9136aau);
  EXPECT_EQ(crc32c::value(ones), 0x62a8ab43u);
  EXPECT_EQ(crc32c::value(up), 0x46dd794eu);
  EXPECT_EQ(crc32c::value(down), 0x113fdb5cu);
  EXPECT_EQ(crc32c::value(pdu, sizeof pdu), 0xd9963a56u);
  EXPECT_EQ(crc32c::value("123456789"), 0xe3069283u);  // the catalogue check value of CRC-32C
  EXPECT_EQ(crc32c::value(""), 0u);
  EXPECT_EQ(crc32c::detail::extend_portable(0, zeros.data(), 32), 0x8a9136aau);
  EXPECT_EQ(crc32c::detail::extend_portable(0, pdu, sizeof pdu), 0xd9963a56u);
}

TEST(Crc32c, ExtendAndPathsAgree) {
  std::string s;
  for (int i = 0; i < 1000; ++i) s.push_back(static_cast<char>((i * 131 + 7) & 0xff));
  for (size_t cut : {0, 1, 7, 8, 9, 500, 999, 1000}) {
    const uint32_t a = crc32c::extend(crc32c::value(s.data(), cut), s.data() + cut, s.size() - cut);
    EXPECT_EQ(a, crc32c::value(s));
    EXPECT_EQ(crc32c::detail::extend_portable(crc32c::detail::extend_portable(0, s.data(), cut), s.data() + cut,
                                              s.size() - cut),
              a);
  }
  for (size_t n = 0; n < 40; ++n) EXPECT_EQ(crc32c::value(s.data() + 3, n), crc32c::detail::extend_portable(0, s.data() + 3, n));
}

TEST(Crc32c, TensorFlowMask) {
  // mask = rotate right by 15, plus 0xa282ead8 (tensorflow/core/lib/hash/crc32c.h); the keras checkpoint stores
  // 0x55ccab62 for bert/embeddings/LayerNorm/beta (SOURCE.md), checked against its bytes in the reader tests.
  for (uint32_t c : {0u, 1u, 0x8a9136aau, 0xffffffffu, 0x12345678u}) {
    EXPECT_EQ(crc32c::unmask(crc32c::mask(c)), c);
    EXPECT_NE(crc32c::mask(c), c);
  }
  EXPECT_EQ(crc32c::mask(0), 0xa282ead8u);
  EXPECT_EQ(crc32c::mask(0x00008000u), 0xa282ead9u);  // bit 15 rotates to bit 0
}
