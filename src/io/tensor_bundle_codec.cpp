// tensor_bundle_codec.cpp: protobuf wire format (varints, tags = field << 3 | wire type, length-delimited
// submessages, fixed32) for the two tensor-bundle messages.
#include "io/tensor_bundle_codec.h"

namespace bertrain::tfbundle {

namespace {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLength = 2, kFixed32 = 5 };

class Reader {
 public:
  explicit Reader(std::string_view b) : p_(b.data()), end_(b.data() + b.size()) {}
  bool done() const { return p_ == end_; }
  bool varint(uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) return false;
      const auto b = static_cast<uint8_t>(*p_++);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;  // more than 10 bytes
  }
  bool fixed32(uint32_t& v) {
    if (end_ - p_ < 4) return false;
    v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(p_[i])) << (8 * i);
    p_ += 4;
    return true;
  }
  bool bytes(std::string_view& s) {
    uint64_t n;
    if (!varint(n) || n > static_cast<uint64_t>(end_ - p_)) return false;
    s = std::string_view(p_, static_cast<size_t>(n));
    p_ += n;
    return true;
  }
  // Skips one field's value. Groups (wire types 3/4, deprecated, never written by TensorFlow) are skipped up to
  // their matching end tag, as protobuf's parser does with unknown groups.
  bool skip(uint32_t wire, uint32_t field = 0, int depth = 0) {
    uint64_t v;
    uint32_t f;
    std::string_view s;
    switch (wire) {
      case 3: {
        if (depth > 64) return false;
        for (;;) {
          uint64_t tag;
          if (!varint(tag) || (tag >> 3) == 0 || (tag >> 3) > 0x1fffffff) return false;
          const auto t = static_cast<uint32_t>(tag & 7);
          if (t == 4) return static_cast<uint32_t>(tag >> 3) == field;
          if (!skip(t, static_cast<uint32_t>(tag >> 3), depth + 1)) return false;
        }
      }
      case kVarint: return varint(v);
      case kFixed64:
        if (end_ - p_ < 8) return false;
        p_ += 8;
        return true;
      case kLength: return bytes(s);
      case kFixed32: return fixed32(f);
      default: return false;  // an end-group tag without its start, invalid types 6 and 7
    }
  }
  // Calls on_field(field, wire) for each field; on_field consumes the value and returns false on malformed data.
  template <class F>
  bool fields(F&& on_field) {
    while (!done()) {
      uint64_t tag;
      if (!varint(tag) || (tag >> 3) == 0 || (tag >> 3) > 0x1fffffff) return false;
      const auto field = static_cast<uint32_t>(tag >> 3), wire = static_cast<uint32_t>(tag & 7);
      if (wire == 3) {
        if (!skip(3, field)) return false;  // no field of these messages is a group
        continue;
      }
      if (!on_field(field, wire)) return false;
    }
    return true;
  }

 private:
  const char* p_;
  const char* end_;
};

// A varint field read into an int32 or int64 (protobuf keeps the low bits of an over-long value).
bool read_int(Reader& r, uint32_t wire, int64_t& out) {
  if (wire != kVarint) return r.skip(wire);
  uint64_t v;
  if (!r.varint(v)) return false;
  out = static_cast<int64_t>(v);
  return true;
}
bool read_int32(Reader& r, uint32_t wire, int32_t& out) {
  int64_t v = out;
  if (!read_int(r, wire, v)) return false;
  out = static_cast<int32_t>(static_cast<uint32_t>(v));
  return true;
}

bool parse_version(std::string_view b, Header& h) {
  Reader r(b);
  return r.fields([&](uint32_t f, uint32_t w) {
    if (f == 1) return read_int32(r, w, h.producer);
    if (f == 2) return read_int32(r, w, h.min_consumer);
    if (f == 3) {
      if (w == kLength) {  // packed
        std::string_view s;
        if (!r.bytes(s)) return false;
        Reader p(s);
        while (!p.done()) {
          uint64_t v;
          if (!p.varint(v)) return false;
          h.bad_consumers.push_back(static_cast<int32_t>(static_cast<uint32_t>(v)));
        }
        return true;
      }
      int32_t v = 0;
      if (w != kVarint) return r.skip(w);
      if (!read_int32(r, w, v)) return false;
      h.bad_consumers.push_back(v);
      return true;
    }
    return r.skip(w);
  });
}

bool parse_shape(std::string_view b, Entry& e) {
  Reader r(b);
  return r.fields([&](uint32_t f, uint32_t w) {
    if (f == 2 && w == kLength) {
      std::string_view dim;
      if (!r.bytes(dim)) return false;
      int64_t size = 0;
      Reader d(dim);
      if (!d.fields([&](uint32_t df, uint32_t dw) { return df == 1 ? read_int(d, dw, size) : d.skip(dw); }))
        return false;
      e.shape.push_back(size);
      return true;
    }
    if (f == 3) {
      int64_t v = 0;
      if (!read_int(r, w, v)) return false;
      if (w == kVarint) e.unknown_rank = v != 0;
      return true;
    }
    return r.skip(w);
  });
}

// Writer side.
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}
void put_tag(std::string& out, uint32_t field, uint32_t wire) { put_varint(out, (static_cast<uint64_t>(field) << 3) | wire); }
// int32 and int64 are both sign-extended to 64 bits on the wire (negative values take 10 bytes).
void put_int(std::string& out, uint32_t field, int64_t v) {
  if (v == 0) return;
  put_tag(out, field, kVarint);
  put_varint(out, static_cast<uint64_t>(v));
}
void put_message(std::string& out, uint32_t field, const std::string& body) {
  put_tag(out, field, kLength);
  put_varint(out, body.size());
  out += body;
}

}  // namespace

bool parse_header(std::string_view bytes, Header& h) {
  h = Header{};
  Reader r(bytes);
  return r.fields([&](uint32_t f, uint32_t w) {
    if (f == 1) return read_int32(r, w, h.num_shards);
    if (f == 2) return read_int32(r, w, h.endianness);
    if (f == 3 && w == kLength) {
      std::string_view s;
      if (!r.bytes(s)) return false;
      h.has_version = true;
      return parse_version(s, h);  // a repeated submessage field merges, as protobuf does
    }
    return r.skip(w);
  });
}

bool parse_entry(std::string_view bytes, Entry& e) {
  e = Entry{};
  Reader r(bytes);
  return r.fields([&](uint32_t f, uint32_t w) {
    switch (f) {
      case 1: return read_int32(r, w, e.dtype);
      case 2: {
        if (w != kLength) return r.skip(w);
        std::string_view s;
        if (!r.bytes(s)) return false;
        e.has_shape = true;
        return parse_shape(s, e);
      }
      case 3: return read_int32(r, w, e.shard_id);
      case 4: return read_int(r, w, e.offset);
      case 5: return read_int(r, w, e.size);
      case 6: return w == kFixed32 ? r.fixed32(e.crc32c) : r.skip(w);
      case 7:
        if (w == kLength) ++e.num_slices;
        return r.skip(w);
      default: return r.skip(w);
    }
  });
}

std::string serialize_header(const Header& h) {
  std::string out;
  put_int(out, 1, h.num_shards);
  put_int(out, 2, h.endianness);
  if (h.has_version) {
    std::string v;
    put_int(v, 1, h.producer);
    put_int(v, 2, h.min_consumer);
    if (!h.bad_consumers.empty()) {
      std::string packed;
      for (int32_t b : h.bad_consumers) put_varint(packed, static_cast<uint64_t>(static_cast<int64_t>(b)));
      put_message(v, 3, packed);
    }
    put_message(out, 3, v);
  }
  return out;
}

std::string serialize_entry(const Entry& e) {
  std::string out;
  put_int(out, 1, e.dtype);
  if (e.has_shape || !e.shape.empty() || e.unknown_rank) {
    std::string s;
    for (int64_t d : e.shape) {
      std::string dim;
      put_int(dim, 1, d);
      put_message(s, 2, dim);
    }
    if (e.unknown_rank) put_int(s, 3, 1);
    put_message(out, 2, s);
  }
  put_int(out, 3, e.shard_id);
  put_int(out, 4, e.offset);
  put_int(out, 5, e.size);
  if (e.crc32c != 0) {
    put_tag(out, 6, kFixed32);
    for (int i = 0; i < 4; ++i) out += static_cast<char>((e.crc32c >> (8 * i)) & 0xff);
  }
  return out;
}

}  // namespace bertrain::tfbundle
