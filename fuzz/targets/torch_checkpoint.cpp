// torch_checkpoint.cpp (fuzz target): PyTorch zip checkpoints (TorchCheckpoint::from_memory: libzip's reading of
// the container, the restricted unpickler, the bounds checks) with every tensor loaded as stored and converted.
// Input: one flags byte, then the body.
//   bit 1 (2): the body is a data.pkl alone, packed here into a stored zip beside archive/version and eight
//              64-byte storage records archive/data/0 ... archive/data/7, so mutations reach the unpickler
//              instead of failing the zip's CRC checks;
//   bit 0 (1): the zip goes through load_model() into a tiny BertForPreTraining (--init_checkpoint's path).
#include <array>

#include "bertrain/core/rng.h"
#include "bertrain/io/checkpoint.h"
#include "bertrain/io/torch_checkpoint.h"
#include "bertrain/models/bert.h"
#include "fuzz_util.h"

using namespace bertrain;

namespace {

BertForPreTraining& tiny_model() {
  static BertForPreTraining* model = [] {
    BertConfig c;
    c.vocab_size = 16;
    c.hidden_size = 4;
    c.num_hidden_layers = 1;
    c.num_attention_heads = 2;
    c.intermediate_size = 8;
    c.max_position_embeddings = 8;
    Rng rng(1);
    return new BertForPreTraining(c, rng);
  }();
  return *model;
}

// CRC-32 (ISO-HDLC, zip's), table-driven.
uint32_t crc32(std::string_view s) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t c = 0xffffffffu;
  for (char ch : s) c = table[(c ^ static_cast<unsigned char>(ch)) & 0xffu] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

void put16(std::string& o, uint32_t v) {
  o += static_cast<char>(v & 0xff);
  o += static_cast<char>((v >> 8) & 0xff);
}
void put32(std::string& o, uint32_t v) {
  put16(o, v & 0xffff);
  put16(o, v >> 16);
}

// A stored (uncompressed) zip of `entries`, as PKWARE's APPNOTE.TXT 4.3 lays it out (no zip64: inputs are small).
std::string make_zip(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::string out, central;
  for (const auto& [name, data] : entries) {
    const uint32_t offset = static_cast<uint32_t>(out.size()), crc = crc32(data);
    const auto size = static_cast<uint32_t>(data.size());
    put32(out, 0x04034b50);
    put16(out, 20), put16(out, 0), put16(out, 0), put16(out, 0), put16(out, 0);
    put32(out, crc), put32(out, size), put32(out, size);
    put16(out, static_cast<uint32_t>(name.size())), put16(out, 0);
    out += name;
    out += data;
    put32(central, 0x02014b50);
    put16(central, 20), put16(central, 20), put16(central, 0), put16(central, 0), put16(central, 0), put16(central, 0);
    put32(central, crc), put32(central, size), put32(central, size);
    put16(central, static_cast<uint32_t>(name.size())), put16(central, 0), put16(central, 0), put16(central, 0),
        put16(central, 0);
    put32(central, 0), put32(central, offset);
    central += name;
  }
  const auto cd_offset = static_cast<uint32_t>(out.size());
  out += central;
  put32(out, 0x06054b50);
  put16(out, 0), put16(out, 0), put16(out, static_cast<uint32_t>(entries.size())),
      put16(out, static_cast<uint32_t>(entries.size()));
  put32(out, static_cast<uint32_t>(central.size())), put32(out, cd_offset), put16(out, 0);
  return out;
}

std::string pack_pickle(std::string_view pkl) {
  std::vector<std::pair<std::string, std::string>> entries = {{"archive/data.pkl", std::string(pkl)},
                                                              {"archive/version", "3\n"}};
  for (int k = 0; k < 8; ++k) {
    std::string rec(64, '\0');
    for (size_t i = 0; i < rec.size(); ++i) rec[i] = static_cast<char>(i * 7 + k);
    entries.emplace_back("archive/data/" + std::to_string(k), rec);
  }
  return make_zip(entries);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto in = fuzz::split_flags(data, size);
  std::string body = (in.flags & 2) ? pack_pickle(in.bytes) : std::string(in.bytes);
  // Limits small enough for the fuzzer's 512 MiB, large enough for every seed.
  TorchCheckpointLimits limits;
  limits.max_pickle_bytes = 1 << 20;
  limits.max_record_bytes = 16 << 20;
  limits.max_total_bytes = 64 << 20;
  limits.max_objects = 100'000;
  limits.max_expanded_bytes = 16 << 20;
  if (in.flags & 1) {
    const std::string path = fuzz::write_scratch("pytorch_model.bin", body);
    fuzz::expect_refusal_or_success(path, [&] {
      LoadReport report;
      LoadOptions options;
      options.require_backbone = in.flags & 4;
      load_model(path, tiny_model(), report, options);
      (void)report.summary();
    });
    return 0;
  }
  const std::string source = "fuzz/pytorch_model.bin";
  fuzz::expect_refusal_or_success(source, [&] {
    const TorchCheckpoint c = TorchCheckpoint::from_memory(std::move(body), source, limits);
    for (const auto& name : c.names()) {
      fuzz::expect_refusal_or_success(source, [&] {
        const Tensor t = c.load(name);
        (void)c.load(name, DType::f32);
        (void)c.sharing_storage(name);
        const TorchTensorInfo& info = c.info(name);
        if (t.shape() != info.shape) {
          std::fprintf(stderr, "FINDING: tensor '%s' loaded as %s, the pickle gave %s\n", name.c_str(),
                       t.shape().str().c_str(), info.shape.str().c_str());
          std::abort();
        }
      });
    }
  });
  return 0;
}
