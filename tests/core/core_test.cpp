// core_test.cpp: Tensor views and copies, bf16 rounding, the Philox generator and the caching allocator.
#include <gtest/gtest.h>

#include <cmath>

#include "bertrain/core/allocator.h"
#include "bertrain/core/rng.h"
#include "bertrain/core/tensor.h"

using namespace bertrain;

TEST(Philox, KnownAnswer) {
  // Random123 kat_vectors: philox4x32 10 rounds, counter 0, key 0.
  auto r = philox4x32({0, 0, 0, 0}, {0, 0});
  EXPECT_EQ(r[0], 0x6627e8d5u);
  EXPECT_EQ(r[1], 0xe169c58du);
  EXPECT_EQ(r[2], 0xbc57ac4cu);
  EXPECT_EQ(r[3], 0x9b00dbd8u);
  // counter all ones, key all ones.
  auto s = philox4x32({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu});
  EXPECT_EQ(s[0], 0x408f276du);
  EXPECT_EQ(s[1], 0x41c83b0eu);
  EXPECT_EQ(s[2], 0xa20bc7c6u);
  EXPECT_EQ(s[3], 0x6d5451fdu);
}

TEST(Rng, StateRoundTripContinuesExactly) {
  Rng a(42, 7);
  for (int i = 0; i < 5; ++i) a.next_u32();  // leave a partly used block
  RngState st = a.state();
  std::vector<uint32_t> want;
  for (int i = 0; i < 11; ++i) want.push_back(a.next_u32());
  Rng b(0);
  b.set_state(st);
  for (int i = 0; i < 11; ++i) EXPECT_EQ(b.next_u32(), want[i]);
}

TEST(Rng, UniformAndNormalMoments) {
  Rng r(1);
  double s = 0, s2 = 0, n = 200000;
  for (int i = 0; i < n; ++i) {
    double z = r.normal();
    s += z;
    s2 += z * z;
  }
  EXPECT_NEAR(s / n, 0.0, 0.01);
  EXPECT_NEAR(s2 / n, 1.0, 0.01);
  for (int i = 0; i < 1000; ++i) {
    double u = r.uniform();
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
    EXPECT_LT(r.randint(10), 10u);
  }
}

TEST(Rng, TruncatedNormalStaysWithinTwoStd) {
  Rng r(3);
  Tensor t = Tensor::truncated_normal({1000}, 0.0, 0.02, r);
  for (int64_t i = 0; i < t.numel(); ++i) EXPECT_LE(std::fabs(t.get(i)), 0.04);
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(bf16(1.0f).bits, 0x3f80);
  // 1 + 2^-8 is exactly halfway between two bf16 values: ties to even (down to 1.0).
  EXPECT_EQ(bf16(1.0f + 1.0f / 256).bits, 0x3f80);
  // 1 + 3*2^-8 is halfway too: ties to even (up).
  EXPECT_EQ(bf16(1.0f + 3.0f / 256).bits, 0x3f82);
  EXPECT_TRUE(std::isnan(static_cast<float>(bf16(NAN))));
}

TEST(Tensor, ViewsShareStorageAndCopiesDoNot) {
  Tensor t = Tensor::from_vector({0, 1, 2, 3, 4, 5}, {3, 2});
  Tensor r = t.reshape({2, -1});
  EXPECT_EQ(r.shape(), Shape({2, 3}));
  EXPECT_TRUE(r.shares_storage(t));
  Tensor s = t.slice(1, 3);
  EXPECT_EQ(s.shape(), Shape({2, 2}));
  EXPECT_EQ(s.get(0), 2.0);
  Tensor row = t.select(2);
  EXPECT_EQ(row.shape(), Shape({2}));
  EXPECT_EQ(row.get(1), 5.0);
  Tensor c = t.clone();
  EXPECT_FALSE(c.shares_storage(t));
  c.set(0, 9);
  EXPECT_EQ(t.get(0), 0.0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 64, 0u);
}

TEST(Tensor, BadReshapeAndSliceThrowWithShapes) {
  Tensor t = Tensor::zeros({3, 2});
  try {
    t.reshape({4, 2});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(3, 2)"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("(4, 2)"), std::string::npos);
  }
  EXPECT_THROW(t.slice(2, 4), Error);
  EXPECT_THROW(t.data<double>(), Error);
}

TEST(Tensor, DtypeConversion) {
  Tensor t = Tensor::from_vector({1.5, -2.25}, {2}, DType::f64);
  Tensor f = t.to(DType::f32);
  EXPECT_EQ(f.data<float>()[1], -2.25f);
  Tensor b = f.to(DType::bf16);
  EXPECT_EQ(b.to(DType::f32).data<float>()[0], 1.5f);
}

TEST(CachingAllocator, ReusesFreedBlocks) {
  auto& a = CachingAllocator::instance();
  { Tensor warm = Tensor::empty({1000, 100}); }
  AllocatorStats before = a.stats();
  for (int i = 0; i < 10; ++i) {
    Tensor t = Tensor::empty({1000, 100});
  }
  AllocatorStats after = a.stats();
  EXPECT_EQ(after.system_allocs, before.system_allocs);
  EXPECT_GE(after.cache_hits, before.cache_hits + 10);
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
  EXPECT_GE(after.peak_bytes_in_use, 400000);
  EXPECT_EQ(CachingAllocator::size_class(5000), 5120u);
  EXPECT_EQ(CachingAllocator::size_class(64), 64u);
}

TEST(Error, IsOneLineWhateverTheInputQuoted) {
  // A file's bytes quoted in a message (a tensor name with a newline, a carriage return, an escape sequence) cannot
  // split the error or rewrite the terminal line; a tab stays.
  const std::string name = std::string("beta\nadam_m\r\x1b[2J\x7f") + '\0' + "x\ty";
  EXPECT_EQ(std::string(Error("tensor '" + name + "' is bad").what()), "tensor 'beta\\nadam_m\\r\\x1b[2J\\x7f\\x00x\ty' is bad");
  try {
    BERTRAIN_CHECK(false, "file 'a\nb': line 3");
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "file 'a\\nb': line 3");
  }
  EXPECT_STREQ(Error("plain").what(), "plain");
  // printable(): the same escapes (tabs too), cut at whole UTF-8 characters.
  EXPECT_EQ(printable("a\tb\n\xc3\xa9\xc3\xa9", 5), "a\\tb\\n...");
  EXPECT_EQ(printable("a\tb\n\xc3\xa9\xc3\xa9", 6), "a\\tb\\n\xc3\xa9...");
}
