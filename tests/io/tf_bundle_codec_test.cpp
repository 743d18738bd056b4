// tf_bundle_codec_test.cpp: io/tensor_bundle_codec.cpp (the hand-written protobuf encoding of the bundle
// messages) against protoc-generated code from src/io/tensor_bundle.proto and protobuf-lite: every real index
// entry, synthetic messages with every field, and corrupted bytes. This test links the io layer only: with the
// text layer's libsentencepiece in the process, protobuf's runtime would clash with its bundled copy.
#include <gtest/gtest.h>
#include <leveldb/iterator.h>
#include <leveldb/options.h>
#include <leveldb/table.h>
#include <leveldb/env.h>

#include <fstream>
#include <memory>
#include <random>
#include <sstream>

#include <google/protobuf/stubs/logging.h>

#include "io/tensor_bundle_codec.h"
#include "tensor_bundle.pb.h"

namespace codec = bertrain::tfbundle;
namespace pb = bertrain::tfproto;

namespace {

const std::string kData = std::string(BERTRAIN_TEST_DATA_DIR) + "/tf_checkpoints";

// The raw (key, value) pairs of an index table, read with LevelDB directly.
std::vector<std::pair<std::string, std::string>> index_values(const std::string& path) {
  std::vector<std::pair<std::string, std::string>> out;
  leveldb::Env* env = leveldb::Env::Default();
  leveldb::RandomAccessFile* raw = nullptr;
  uint64_t size = 0;
  EXPECT_TRUE(env->GetFileSize(path, &size).ok()) << path;
  EXPECT_TRUE(env->NewRandomAccessFile(path, &raw).ok()) << path;
  std::unique_ptr<leveldb::RandomAccessFile> file(raw);
  leveldb::Table* t = nullptr;
  leveldb::Options options;
  EXPECT_TRUE(leveldb::Table::Open(options, file.get(), size, &t).ok()) << path;
  std::unique_ptr<leveldb::Table> table(t);
  std::unique_ptr<leveldb::Iterator> it(table->NewIterator(leveldb::ReadOptions()));
  for (it->SeekToFirst(); it->Valid(); it->Next()) out.emplace_back(it->key().ToString(), it->value().ToString());
  return out;
}

void expect_same(const codec::Entry& e, const pb::BundleEntryProto& p) {
  EXPECT_EQ(e.dtype, static_cast<int>(p.dtype()));
  EXPECT_EQ(e.has_shape, p.has_shape());
  ASSERT_EQ(e.shape.size(), static_cast<size_t>(p.shape().dim_size()));
  for (int i = 0; i < p.shape().dim_size(); ++i) EXPECT_EQ(e.shape[i], p.shape().dim(i).size());
  EXPECT_EQ(e.unknown_rank, p.shape().unknown_rank());
  EXPECT_EQ(e.shard_id, p.shard_id());
  EXPECT_EQ(e.offset, p.offset());
  EXPECT_EQ(e.size, p.size());
  EXPECT_EQ(e.crc32c, p.crc32c());
  EXPECT_EQ(e.num_slices, p.slices_size());
}

void expect_same(const codec::Header& h, const pb::BundleHeaderProto& p) {
  EXPECT_EQ(h.num_shards, p.num_shards());
  EXPECT_EQ(h.endianness, static_cast<int>(p.endianness()));
  EXPECT_EQ(h.has_version, p.has_version());
  EXPECT_EQ(h.producer, p.version().producer());
  EXPECT_EQ(h.min_consumer, p.version().min_consumer());
  ASSERT_EQ(h.bad_consumers.size(), static_cast<size_t>(p.version().bad_consumers_size()));
  for (int i = 0; i < p.version().bad_consumers_size(); ++i) EXPECT_EQ(h.bad_consumers[i], p.version().bad_consumers(i));
}

codec::Entry to_codec(const pb::BundleEntryProto& p) {
  codec::Entry e;
  e.dtype = p.dtype();
  e.has_shape = p.has_shape();
  for (const auto& d : p.shape().dim()) e.shape.push_back(d.size());
  e.unknown_rank = p.shape().unknown_rank();
  e.shard_id = p.shard_id();
  e.offset = p.offset();
  e.size = p.size();
  e.crc32c = p.crc32c();
  return e;
}

}  // namespace

// Every entry TensorFlow wrote in the test checkpoints: same fields as protobuf reads, and re-encoded to the
// same bytes as protobuf (and TensorFlow) wrote.
TEST(TfBundleCodec, RealIndexEntries) {
  int entries = 0;
  for (std::string idx : {"/keras_bert_tiny/bert_model.ckpt.index", "/tf_serving/saved_model_counter/variables.index",
                          "/tf_serving/saved_model_half_plus_two_cpu/variables.index",
                          "/tf_serving/saved_model_half_plus_two_mkl/variables.index",
                          "/tf_serving/saved_model_half_plus_two_tf2_cpu/variables.index",
                          "/tf_serving/tf_text_regression/variables.index"}) {
    auto kv = index_values(kData + idx);
    ASSERT_FALSE(kv.empty()) << idx;
    ASSERT_EQ(kv[0].first, "");
    pb::BundleHeaderProto ph;
    ASSERT_TRUE(ph.ParseFromString(kv[0].second));
    codec::Header h;
    ASSERT_TRUE(codec::parse_header(kv[0].second, h));
    expect_same(h, ph);
    EXPECT_EQ(codec::serialize_header(h), kv[0].second) << idx;
    for (size_t i = 1; i < kv.size(); ++i) {
      SCOPED_TRACE(idx + " " + kv[i].first);
      pb::BundleEntryProto pe;
      ASSERT_TRUE(pe.ParseFromString(kv[i].second));
      codec::Entry e;
      ASSERT_TRUE(codec::parse_entry(kv[i].second, e));
      expect_same(e, pe);
      EXPECT_EQ(codec::serialize_entry(e), kv[i].second);
      EXPECT_EQ(codec::serialize_entry(e), pe.SerializeAsString());
      ++entries;
    }
  }
  EXPECT_EQ(entries, 159);
}

// Random messages over every field, extreme values included: protobuf's bytes parse to the same fields, and
// ours serialise to protobuf's bytes.
TEST(TfBundleCodec, RandomMessagesAgreeWithProtobuf) {
  std::mt19937_64 rng(20);
  const int64_t extremes[] = {0, 1, -1, 127, 128, 16383, 16384, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN};
  auto value = [&](bool is32) -> int64_t {
    int64_t v = (rng() % 3 == 0) ? extremes[rng() % std::size(extremes)] : static_cast<int64_t>(rng() >> (rng() % 64));
    return is32 ? static_cast<int32_t>(v) : v;
  };
  for (int trial = 0; trial < 2000; ++trial) {
    pb::BundleEntryProto pe;
    if (rng() % 4) pe.set_dtype(static_cast<pb::DataType>(rng() % 24));
    if (rng() % 4) {
      auto* s = pe.mutable_shape();
      const int rank = static_cast<int>(rng() % 6);
      for (int d = 0; d < rank; ++d) s->add_dim()->set_size(rng() % 5 ? static_cast<int64_t>(rng() % 5000) : value(false));
      if (rng() % 10 == 0) s->set_unknown_rank(true);
    }
    if (rng() % 3) pe.set_shard_id(static_cast<int32_t>(value(true)));
    if (rng() % 3) pe.set_offset(value(false));
    if (rng() % 3) pe.set_size(value(false));
    if (rng() % 3) pe.set_crc32c(static_cast<uint32_t>(rng()));
    const std::string bytes = pe.SerializeAsString();
    codec::Entry e;
    ASSERT_TRUE(codec::parse_entry(bytes, e));
    expect_same(e, pe);
    EXPECT_EQ(codec::serialize_entry(to_codec(pe)), bytes);

    pb::BundleHeaderProto ph;
    if (rng() % 3) ph.set_num_shards(static_cast<int32_t>(value(true)));
    if (rng() % 3) ph.set_endianness(rng() % 2 ? pb::BundleHeaderProto::BIG : pb::BundleHeaderProto::LITTLE);
    if (rng() % 4) {
      auto* v = ph.mutable_version();
      if (rng() % 2) v->set_producer(static_cast<int32_t>(value(true)));
      if (rng() % 2) v->set_min_consumer(static_cast<int32_t>(value(true)));
      for (int k = static_cast<int>(rng() % 3); k > 0; --k) v->add_bad_consumers(static_cast<int32_t>(value(true)));
    }
    const std::string hb = ph.SerializeAsString();
    codec::Header h;
    ASSERT_TRUE(codec::parse_header(hb, h));
    expect_same(h, ph);
    EXPECT_EQ(codec::serialize_header(h), hb);
  }
}

// Slices, unknown fields and unpacked repeated values parse as protobuf parses them.
TEST(TfBundleCodec, SlicesUnknownFieldsAndUnpacked) {
  pb::BundleEntryProto pe;
  pe.set_dtype(pb::DT_FLOAT);
  pe.mutable_shape()->add_dim()->set_size(8);
  pe.mutable_shape()->mutable_dim(0)->set_name("rows");
  auto* sl = pe.add_slices();
  sl->add_extent()->set_start(0);
  sl->mutable_extent(0)->set_length(4);
  pe.add_slices()->add_extent()->set_start(4);
  std::string bytes = pe.SerializeAsString();
  bytes += std::string("\xa0\x06\x07", 3);                 // unknown field 100, varint 7
  bytes += std::string("\xab\x06\x08\x01\xac\x06", 6);     // unknown group 101 holding field 1 = 1
  codec::Entry e;
  ASSERT_TRUE(codec::parse_entry(bytes, e));
  pb::BundleEntryProto back;
  ASSERT_TRUE(back.ParseFromString(bytes));
  expect_same(e, back);
  EXPECT_EQ(e.num_slices, 2);
  // bad_consumers written unpacked (proto2 style) are accepted as protobuf accepts them.
  const std::string unpacked("\x1a\x06\x08\x01\x18\x05\x18\x06", 8);
  codec::Header h;
  ASSERT_TRUE(codec::parse_header(unpacked, h));
  pb::BundleHeaderProto ph;
  ASSERT_TRUE(ph.ParseFromString(unpacked));
  expect_same(h, ph);
}

// Corrupted bytes: whatever protobuf accepts, ours accepts with the same fields; nothing crashes.
TEST(TfBundleCodec, CorruptedBytes) {
  google::protobuf::SetLogHandler(nullptr);  // protobuf logs every invalid UTF-8 dimension name it rejects
  std::mt19937_64 rng(7);
  auto kv = index_values(kData + "/keras_bert_tiny/bert_model.ckpt.index");
  int rejected_by_both = 0, compared = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::string b = kv[1 + rng() % (kv.size() - 1)].second;
    const int op = static_cast<int>(rng() % 3);
    if (op == 0) b.resize(rng() % (b.size() + 1));
    else if (op == 1) b[rng() % b.size()] = static_cast<char>(rng());
    else b.insert(rng() % (b.size() + 1), 1, static_cast<char>(rng()));
    pb::BundleEntryProto pe;
    const bool pb_ok = pe.ParseFromString(b);
    codec::Entry e;
    const bool ours_ok = codec::parse_entry(b, e);
    if (pb_ok) {
      EXPECT_TRUE(ours_ok);
      if (ours_ok) expect_same(e, pe);
      ++compared;
    } else if (!ours_ok) {
      ++rejected_by_both;
    }
  }
  EXPECT_GT(compared, 1000);
  EXPECT_GT(rejected_by_both, 1000);
}
