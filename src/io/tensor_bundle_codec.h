// tensor_bundle_codec.h: the protobuf wire encoding of TensorFlow's BundleHeaderProto and BundleEntryProto
// (io/tensor_bundle.proto; protobuf's encoding spec, developers.google.com/protocol-buffers/docs/encoding),
// private to the io layer. Written by hand because protobuf's C++ runtime cannot share a process with Debian's
// libsentencepiece (see io/layer.cmake); tests check it against protoc-generated code byte for byte.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace bertrain::tfbundle {

/// BundleHeaderProto: num_shards = 1, endianness = 2 (0 LITTLE, 1 BIG), version = 3 (VersionDef: producer = 1,
/// min_consumer = 2, bad_consumers = 3).
struct Header {
  int32_t num_shards = 0;
  int32_t endianness = 0;
  bool has_version = false;
  int32_t producer = 0, min_consumer = 0;
  std::vector<int32_t> bad_consumers;
};

/// BundleEntryProto: dtype = 1, shape = 2 (TensorShapeProto: dim = 2 {size = 1, name = 2}, unknown_rank = 3),
/// shard_id = 3, offset = 4, size = 5, crc32c = 6 (fixed32), slices = 7 (TensorSliceProto, only counted here).
struct Entry {
  int32_t dtype = 0;
  bool has_shape = false;
  std::vector<int64_t> shape;
  bool unknown_rank = false;
  int32_t shard_id = 0;
  int64_t offset = 0, size = 0;
  uint32_t crc32c = 0;
  int num_slices = 0;
};

/// Parse as protobuf does: fields in any order, the last value of a repeated scalar wins, unknown fields and
/// fields of an unexpected wire type skipped, packed and unpacked repeated varints both accepted. False when the
/// bytes are not a well-formed message (a truncated varint or length, a group, a bad wire type).
bool parse_header(std::string_view bytes, Header& out);
bool parse_entry(std::string_view bytes, Entry& out);

/// Serialise as protobuf's C++ runtime does: fields in number order, proto3 scalars only when non-zero,
/// submessages when present (has_version, has_shape), bad_consumers packed.
std::string serialize_header(const Header& h);
std::string serialize_entry(const Entry& e);

}  // namespace bertrain::tfbundle
