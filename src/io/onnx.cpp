// onnx.cpp: `bertrain export-onnx`: the BERT graph of models/bert.cpp's padded path in standard ONNX operators,
// serialised as onnx/onnx.proto's messages by hand (protobuf's wire format: varints, tags = field << 3 | wire
// type, length-delimited submessages, fixed32 floats) and streamed to the file, so the weights are not copied
// into one big message buffer first.
#include "bertrain/io/onnx.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <numbers>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>

#include "bertrain/core/error.h"
#include "bertrain/core/version.h"
#include "bertrain/io/atomic_file.h"
#include "bertrain/io/checkpoint.h"
#include "bertrain/io/checkpoint_files.h"
#include "bertrain/io/config.h"
#include "bertrain/io/safetensors.h"
#include "bertrain/io/tf_bert.h"
#include "bertrain/io/tf_checkpoint.h"
#include "bertrain/io/tokenizer_files.h"
#include "bertrain/models/bert.h"
#include "io/file_util.h"

namespace bertrain {

namespace {

static_assert(std::endian::native == std::endian::little, "TensorProto.raw_data is little-endian");

namespace fs = std::filesystem;

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

// ---- protobuf wire format ------------------------------------------------------------------------------------

enum WireType : uint32_t { kVarint = 0, kLength = 2, kFixed32 = 5 };

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}
size_t varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}
void put_tag(std::string& out, uint32_t field, uint32_t wire) { put_varint(out, (uint64_t{field} << 3) | wire); }
// onnx.proto is proto2: a field set is written even when it holds 0 (it has presence). int64 and int32 values are
// sign-extended to 64 bits on the wire.
void put_int(std::string& out, uint32_t field, int64_t v) {
  put_tag(out, field, kVarint);
  put_varint(out, static_cast<uint64_t>(v));
}
void put_bytes(std::string& out, uint32_t field, std::string_view s) {
  put_tag(out, field, kLength);
  put_varint(out, s.size());
  out.append(s);
}
void put_float(std::string& out, uint32_t field, float v) {
  put_tag(out, field, kFixed32);
  char b[4];
  std::memcpy(b, &v, 4);
  out.append(b, 4);
}

// Field numbers of onnx/onnx.proto (IR version 8).
namespace pb {
// ModelProto
constexpr uint32_t kModelIrVersion = 1, kModelProducerName = 2, kModelProducerVersion = 3, kModelDocString = 6,
                   kModelGraph = 7, kModelOpsetImport = 8, kModelMetadataProps = 14;
// OperatorSetIdProto, StringStringEntryProto
constexpr uint32_t kOpsetDomain = 1, kOpsetVersion = 2, kEntryKey = 1, kEntryValue = 2;
// GraphProto
constexpr uint32_t kGraphNode = 1, kGraphName = 2, kGraphInitializer = 5, kGraphInput = 11, kGraphOutput = 12;
// NodeProto
constexpr uint32_t kNodeInput = 1, kNodeOutput = 2, kNodeName = 3, kNodeOpType = 4, kNodeAttribute = 5;
// AttributeProto and its AttributeType values
constexpr uint32_t kAttrName = 1, kAttrF = 2, kAttrI = 3, kAttrInts = 8, kAttrType = 20;
constexpr int kAttrTypeFloat = 1, kAttrTypeInt = 2, kAttrTypeInts = 7;
// TensorProto and its DataType values
constexpr uint32_t kTensorDims = 1, kTensorDataType = 2, kTensorName = 8, kTensorRawData = 9, kTensorDocString = 12;
constexpr int kFloat = 1, kInt64 = 7;
// ValueInfoProto, TypeProto, TypeProto.Tensor, TensorShapeProto, TensorShapeProto.Dimension
constexpr uint32_t kValueName = 1, kValueType = 2, kTypeTensor = 1, kTensorTypeElem = 1, kTensorTypeShape = 2,
                   kShapeDim = 1, kDimValue = 1, kDimParam = 2;
}  // namespace pb

constexpr int64_t kIrVersion = 8;  // onnx.proto's IR_VERSION for opsets up to 17 (ONNX 1.12)

struct Attr {
  std::string bytes;  // an encoded AttributeProto
};
Attr attr_int(const std::string& name, int64_t v) {
  Attr a;
  put_bytes(a.bytes, pb::kAttrName, name);
  put_int(a.bytes, pb::kAttrI, v);
  put_int(a.bytes, pb::kAttrType, pb::kAttrTypeInt);
  return a;
}
Attr attr_float(const std::string& name, float v) {
  Attr a;
  put_bytes(a.bytes, pb::kAttrName, name);
  put_float(a.bytes, pb::kAttrF, v);
  put_int(a.bytes, pb::kAttrType, pb::kAttrTypeFloat);
  return a;
}
Attr attr_ints(const std::string& name, const std::vector<int64_t>& v) {
  Attr a;
  put_bytes(a.bytes, pb::kAttrName, name);
  for (int64_t x : v) put_int(a.bytes, pb::kAttrInts, x);  // repeated int64, unpacked in proto2
  put_int(a.bytes, pb::kAttrType, pb::kAttrTypeInts);
  return a;
}

/// A dimension of a graph input or output: a fixed size, or a named dynamic axis (dim_param).
struct Dim {
  int64_t value = 0;
  std::string param;
};

std::string value_info(const std::string& name, int elem_type, const std::vector<Dim>& dims) {
  std::string shape;
  for (const Dim& d : dims) {
    std::string dim;
    if (d.param.empty())
      put_int(dim, pb::kDimValue, d.value);
    else
      put_bytes(dim, pb::kDimParam, d.param);
    put_bytes(shape, pb::kShapeDim, dim);
  }
  std::string tensor;
  put_int(tensor, pb::kTensorTypeElem, elem_type);
  put_bytes(tensor, pb::kTensorTypeShape, shape);
  std::string type;
  put_bytes(type, pb::kTypeTensor, tensor);
  std::string v;
  put_bytes(v, pb::kValueName, name);
  put_bytes(v, pb::kValueType, type);
  return v;
}

// ---- the graph -----------------------------------------------------------------------------------------------

/// Nodes and initializers of one GraphProto. Initializers keep their data where it is (a Tensor or an owned
/// buffer) until the file is written.
class Graph {
 public:
  explicit Graph(int opset) : opset_(opset) {}
  int opset() const { return opset_; }

  /// A float tensor as an initializer named `name`; returns the name.
  std::string add_tensor(const std::string& name, const Tensor& t, const std::string& doc = "") {
    BERTRAIN_ASSERT(t.dtype() == DType::f32, "onnx initializer ", name, " must be f32, got ", t.desc());
    const bool fresh = names_.insert(name).second;
    BERTRAIN_ASSERT(fresh, "onnx initializer ", name, " added twice");
    Init in;
    put_header(in.header, name, pb::kFloat, t.shape().vec(), doc);
    in.keep = t;
    in.data = static_cast<const char*>(t.raw_data());
    in.size = t.nbytes();
    inits_.push_back(std::move(in));
    return name;
  }
  /// A constant, named after its values: float scalar, int64 scalar or int64 vector.
  std::string scalar(float v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "const_f32_%.9g", static_cast<double>(v));
    const std::string name = buf;
    if (!names_.count(name)) add_owned(name, pb::kFloat, {}, std::string(reinterpret_cast<const char*>(&v), 4));
    return name;
  }
  std::string scalar_i64(int64_t v) { return i64(v, true); }
  std::string ints(const std::vector<int64_t>& v) {
    std::string name = "const_i64";
    for (int64_t x : v) {
      name += '_';  // appended piece by piece: GCC 12's -Wrestrict misfires on "_" + std::to_string(x)
      name += std::to_string(x);
    }
    if (!names_.count(name))
      add_owned(name, pb::kInt64, {static_cast<int64_t>(v.size())},
                std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(int64_t)));
    return name;
  }

  /// A node with one output, named `name` + "_output_0" (as PyTorch's exporter names values) unless `out` is
  /// given; returns the output's name.
  std::string node(const std::string& op, const std::string& name, const std::vector<std::string>& inputs,
                   const std::vector<Attr>& attrs = {}, const std::string& out = "") {
    const std::string output = out.empty() ? name + "_output_0" : out;
    std::string n;
    for (const auto& i : inputs) put_bytes(n, pb::kNodeInput, i);
    put_bytes(n, pb::kNodeOutput, output);
    put_bytes(n, pb::kNodeName, name);
    put_bytes(n, pb::kNodeOpType, op);
    for (const auto& a : attrs) put_bytes(n, pb::kNodeAttribute, a.bytes);
    put_bytes(nodes_, pb::kGraphNode, n);
    ++num_nodes_;
    return output;
  }

  int64_t num_nodes() const { return num_nodes_; }
  int64_t num_initializers() const { return static_cast<int64_t>(inits_.size()); }

  /// Size of the GraphProto with `name` (its encoded name field) and `tail` (inputs, outputs).
  uint64_t encoded_size(const std::string& name, const std::string& tail) const {
    uint64_t n = nodes_.size() + name.size() + tail.size();
    for (const Init& in : inits_) {
      const uint64_t tp = tensor_size(in);
      n += varint_size((uint64_t{pb::kGraphInitializer} << 3) | kLength) + varint_size(tp) + tp;
    }
    return n;
  }
  /// Streams the GraphProto's body in field order: nodes, `name`, initializers, then `tail`.
  void write(AtomicFileWriter& w, const std::string& name, const std::string& tail) const {
    w.write(nodes_.data(), nodes_.size());
    w.write(name.data(), name.size());
    for (const Init& in : inits_) {
      std::string head;
      put_tag(head, pb::kGraphInitializer, kLength);
      put_varint(head, tensor_size(in));
      head += in.header;
      put_tag(head, pb::kTensorRawData, kLength);
      put_varint(head, in.size);
      w.write(head.data(), head.size());
      w.write(in.data, in.size);
    }
    w.write(tail.data(), tail.size());
  }

 private:
  struct Init {
    std::string header;  // TensorProto fields before raw_data
    Tensor keep;
    std::shared_ptr<const std::string> owned;
    const char* data = nullptr;
    size_t size = 0;
  };
  static void put_header(std::string& h, const std::string& name, int type, const std::vector<int64_t>& dims,
                         const std::string& doc) {
    for (int64_t d : dims) put_int(h, pb::kTensorDims, d);
    put_int(h, pb::kTensorDataType, type);
    put_bytes(h, pb::kTensorName, name);
    if (!doc.empty()) put_bytes(h, pb::kTensorDocString, doc);
  }
  static uint64_t tensor_size(const Init& in) {
    return in.header.size() + varint_size((uint64_t{pb::kTensorRawData} << 3) | kLength) + varint_size(in.size) +
           in.size;
  }
  void add_owned(const std::string& name, int type, const std::vector<int64_t>& dims, std::string bytes) {
    names_.insert(name);
    Init in;
    put_header(in.header, name, type, dims, "");
    in.owned = std::make_shared<const std::string>(std::move(bytes));
    in.data = in.owned->data();
    in.size = in.owned->size();
    inits_.push_back(std::move(in));
  }
  std::string i64(int64_t v, bool scalar) {
    const std::string name = std::string(scalar ? "const_i64_scalar_" : "const_i64_") + std::to_string(v);
    if (!names_.count(name))
      add_owned(name, pb::kInt64, scalar ? std::vector<int64_t>{} : std::vector<int64_t>{1},
                std::string(reinterpret_cast<const char*>(&v), sizeof v));
    return name;
  }

 private:
  int opset_;
  std::string nodes_;
  int64_t num_nodes_ = 0;
  std::vector<Init> inits_;
  std::set<std::string> names_;
};

/// (out, in) -> (in, out): Hugging Face's Linear weight as MatMul's right operand.
Tensor transposed(const Tensor& w) {
  BERTRAIN_ASSERT(w.dim() == 2 && w.dtype() == DType::f32, "transposed: expected a f32 matrix, got ", w.desc());
  const int64_t r = w.size(0), c = w.size(1);
  Tensor t = Tensor::empty({c, r}, DType::f32);
  const float* s = w.data<float>();
  float* d = t.data<float>();
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) d[j * r + i] = s[i * c + j];
  return t;
}

/// Builds the BERT graph from Hugging Face-named parameters (with the "bert." prefix).
class BertGraph {
 public:
  BertGraph(Graph& g, const std::map<std::string, Tensor>& params, const BertConfig& c) : g_(g), p_(params), c_(c) {}

  const Tensor& param(const std::string& name) const {
    auto it = p_.find(name);
    BERTRAIN_ASSERT(it != p_.end(), "onnx export: parameter ", name, " missing after load");
    return it->second;
  }
  std::string weight(const std::string& name) { return added(name) ? name : g_.add_tensor(name, param(name)); }
  /// A Linear's weight transposed to (in, out) for MatMul, under its Hugging Face name.
  std::string weight_t(const std::string& name) {
    return added(name) ? name : g_.add_tensor(name, transposed(param(name)), "transposed: (in, out), MatMul's B");
  }

  /// x (.., in) -> (.., out): MatMul with the transposed weight, then Add the bias (the pattern ONNX Runtime
  /// fuses).
  std::string linear(const std::string& x, const std::string& prefix) {
    const std::string path = "/" + prefix;
    std::string y = g_.node("MatMul", path + "/MatMul", {x, weight_t(prefix + ".weight")});
    return g_.node("Add", path + "/Add", {y, weight(prefix + ".bias")});
  }
  /// x (N, in) -> (N, out) with Gemm, the weight as stored (transB = 1).
  std::string gemm(const std::string& x, const std::string& prefix, const std::string& out = "") {
    return g_.node("Gemm", "/" + prefix + "/Gemm", {x, weight(prefix + ".weight"), weight(prefix + ".bias")},
                   {attr_float("alpha", 1.f), attr_float("beta", 1.f), attr_int("transB", 1)}, out);
  }

  /// LayerNormalization over the last axis (opset 17), or its decomposition below 17.
  std::string layer_norm(const std::string& x, const std::string& prefix) {
    const std::string path = "/" + prefix;
    const float eps = static_cast<float>(c_.layer_norm_eps);
    const std::string gamma = weight(prefix + ".weight"), beta = weight(prefix + ".bias");
    if (g_.opset() >= 17)
      return g_.node("LayerNormalization", path + "/LayerNormalization", {x, gamma, beta},
                     {attr_int("axis", -1), attr_float("epsilon", eps)});
    const std::vector<Attr> mean_attrs{attr_ints("axes", {-1}), attr_int("keepdims", 1)};
    std::string mean = g_.node("ReduceMean", path + "/ReduceMean", {x}, mean_attrs);
    std::string d = g_.node("Sub", path + "/Sub", {x, mean});
    std::string sq = g_.node("Mul", path + "/Mul", {d, d});
    std::string var = g_.node("ReduceMean", path + "/ReduceMean_1", {sq}, mean_attrs);
    std::string sd = g_.node("Sqrt", path + "/Sqrt", {g_.node("Add", path + "/Add", {var, g_.scalar(eps)})});
    std::string y = g_.node("Div", path + "/Div", {d, sd});
    return g_.node("Add", path + "/Add_1", {g_.node("Mul", path + "/Mul_1", {y, gamma}), beta});
  }

  /// The config's hidden_act, as Hugging Face's ACT2FN writes it.
  std::string activation(const std::string& x, const std::string& path) {
    const std::string& act = c_.hidden_act;
    if (act == "gelu") {  // x * 0.5 * (1 + erf(x / sqrt 2))
      std::string e = g_.node("Erf", path + "/Erf", {g_.node("Div", path + "/Div", {x, g_.scalar(std::sqrt(2.f))})});
      std::string s = g_.node("Add", path + "/Add", {e, g_.scalar(1.f)});
      return g_.node("Mul", path + "/Mul_1", {g_.node("Mul", path + "/Mul", {x, s}), g_.scalar(0.5f)});
    }
    if (act == "gelu_new" || act == "gelu_pytorch_tanh") {  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
      std::string cube = g_.node("Pow", path + "/Pow", {x, g_.scalar(3.f)});
      std::string inner = g_.node("Add", path + "/Add", {x, g_.node("Mul", path + "/Mul", {cube, g_.scalar(0.044715f)})});
      std::string th = g_.node("Tanh", path + "/Tanh",
                               {g_.node("Mul", path + "/Mul_1", {inner, g_.scalar(static_cast<float>(std::sqrt(2.0 / std::numbers::pi)))})});
      std::string s = g_.node("Add", path + "/Add_1", {th, g_.scalar(1.f)});
      return g_.node("Mul", path + "/Mul_3", {g_.node("Mul", path + "/Mul_2", {x, g_.scalar(0.5f)}), s});
    }
    if (act == "relu") return g_.node("Relu", path + "/Relu", {x});
    BERTRAIN_CHECK(act == "tanh", "onnx export: hidden_act '", act, "' has no ONNX form here");
    return g_.node("Tanh", path + "/Tanh", {x});
  }

  struct Encoded {
    std::string sequence;  // (B, T, H)
    std::string pooled;    // (B, H), empty without a pooler
  };

  /// Embeddings, mask, encoder layers and (with_pooler) the pooler.
  Encoded encoder(bool with_pooler, const std::string& sequence_name, const std::string& pooled_name) {
    const int64_t h = c_.hidden_size, nh = c_.num_attention_heads, hs = c_.head_size();
    // Embeddings: word + position (rows 0..T-1) + token type, then LayerNorm.
    std::string we = g_.node("Gather", "/bert/embeddings/word_embeddings/Gather",
                             {weight("bert.embeddings.word_embeddings.weight"), "input_ids"}, {attr_int("axis", 0)});
    shape_ = g_.node("Shape", "/bert/Shape", {"input_ids"});  // [B, T]
    std::string t = g_.node("Slice", "/bert/Slice", {shape_, g_.ints({1}), g_.ints({2}), g_.ints({0})});
    std::string pe = g_.node("Slice", "/bert/embeddings/position_embeddings/Slice",
                             {weight("bert.embeddings.position_embeddings.weight"), g_.ints({0}), t, g_.ints({0})});
    std::string te = g_.node("Gather", "/bert/embeddings/token_type_embeddings/Gather",
                             {weight("bert.embeddings.token_type_embeddings.weight"), "token_type_ids"},
                             {attr_int("axis", 0)});
    std::string e = g_.node("Add", "/bert/embeddings/Add_1",
                            {g_.node("Add", "/bert/embeddings/Add", {we, pe}), te});
    std::string x = layer_norm(e, "bert.embeddings.LayerNorm");
    // The additive mask (1 - mask) * -10000 (google-research/bert's create_attention_mask), (B, 1, 1, T).
    std::string mf = g_.node("Cast", "/bert/Cast", {"attention_mask"}, {attr_int("to", pb::kFloat)});
    std::string inv = g_.node("Sub", "/bert/Sub", {g_.scalar(1.f), mf});
    ext_mask_ = g_.node("Mul", "/bert/Mul", {inv, g_.scalar(-10000.f)});  // (B, T)
    std::string mask4 = g_.node("Unsqueeze", "/bert/Unsqueeze", {ext_mask_, g_.ints({1, 2})});
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs)));
    for (int64_t l = 0; l < c_.num_hidden_layers; ++l) {
      const std::string pre = "bert.encoder.layer." + std::to_string(l), path = "/" + pre;
      auto heads = [&](const std::string& which, const std::vector<int64_t>& perm) {
        std::string y = linear(x, pre + ".attention.self." + which);
        y = g_.node("Reshape", path + "/attention/self/" + which + "/Reshape", {y, g_.ints({0, 0, nh, hs})});
        return g_.node("Transpose", path + "/attention/self/" + which + "/Transpose", {y}, {attr_ints("perm", perm)});
      };
      std::string q = heads("query", {0, 2, 1, 3});  // (B, NH, T, HS)
      std::string k = heads("key", {0, 2, 3, 1});    // (B, NH, HS, T)
      std::string v = heads("value", {0, 2, 1, 3});  // (B, NH, T, HS)
      const std::string ap = path + "/attention/self";
      std::string s = g_.node("MatMul", ap + "/MatMul", {q, k});
      s = g_.node("Mul", ap + "/Mul", {s, g_.scalar(scale)});
      s = g_.node("Add", ap + "/Add", {s, mask4});
      std::string probs = g_.node("Softmax", ap + "/Softmax", {s}, {attr_int("axis", -1)});
      std::string ctx = g_.node("MatMul", ap + "/MatMul_1", {probs, v});
      ctx = g_.node("Transpose", ap + "/Transpose", {ctx}, {attr_ints("perm", {0, 2, 1, 3})});
      ctx = g_.node("Reshape", ap + "/Reshape", {ctx, g_.ints({0, 0, h})});
      std::string a = linear(ctx, pre + ".attention.output.dense");
      std::string h1 = layer_norm(g_.node("Add", path + "/attention/output/Add", {a, x}),
                                  pre + ".attention.output.LayerNorm");
      std::string f = activation(linear(h1, pre + ".intermediate.dense"), path + "/intermediate/intermediate_act_fn");
      std::string o = linear(f, pre + ".output.dense");
      x = layer_norm(g_.node("Add", path + "/output/Add", {o, h1}), pre + ".output.LayerNorm");
    }
    Encoded out;
    out.sequence = sequence_name.empty() ? x : g_.node("Identity", "/bert/last_hidden_state/Identity", {x}, {}, sequence_name);
    if (with_pooler) {
      std::string first = g_.node("Gather", "/bert/pooler/Gather", {x, g_.scalar_i64(0)}, {attr_int("axis", 1)});
      out.pooled = g_.node("Tanh", "/bert/pooler/activation/Tanh", {gemm(first, "bert.pooler.dense")}, {}, pooled_name);
    }
    return out;
  }

  const std::string& shape() const { return shape_; }
  const std::string& ext_mask() const { return ext_mask_; }

 private:
  bool added(const std::string& name) { return !added_.insert(name).second; }

  Graph& g_;
  const std::map<std::string, Tensor>& p_;
  const BertConfig& c_;
  std::set<std::string> added_;
  std::string shape_, ext_mask_;
};

struct Output {
  std::string name;
  std::vector<Dim> dims;
};

/// Adds the task's head; returns the graph outputs.
std::vector<Output> build_graph(Graph& g, const std::map<std::string, Tensor>& params, const BertConfig& c,
                                OnnxTask task, bool encoder_pooler) {
  BertGraph b(g, params, c);
  const Dim batch{0, "batch_size"}, seq{0, "sequence_length"};
  const int64_t h = c.hidden_size;
  switch (task) {
    case OnnxTask::encoder: {
      b.encoder(encoder_pooler, "last_hidden_state", "pooler_output");
      std::vector<Output> out{{"last_hidden_state", {batch, seq, {h, ""}}}};
      if (encoder_pooler) out.push_back({"pooler_output", {batch, {h, ""}}});
      return out;
    }
    case OnnxTask::sequence_classification: {
      auto e = b.encoder(true, "", "");
      b.gemm(e.pooled, "classifier", "logits");
      return {{"logits", {batch, {c.num_labels, ""}}}};
    }
    case OnnxTask::token_classification: {
      auto e = b.encoder(false, "", "");
      g.node("Identity", "/classifier/Identity", {b.linear(e.sequence, "classifier")}, {}, "logits");
      return {{"logits", {batch, seq, {c.num_labels, ""}}}};
    }
    case OnnxTask::question_answering: {
      auto e = b.encoder(false, "", "");
      std::string logits = b.linear(e.sequence, "qa_outputs");  // (B, T, 2)
      for (int i = 0; i < 2; ++i) {
        const std::string name = i == 0 ? "start_logits" : "end_logits";
        std::string s = g.node("Gather", "/qa_outputs/Gather_" + std::to_string(i), {logits, g.scalar_i64(i)},
                               {attr_int("axis", 2)});
        g.node("Add", "/qa_outputs/Add_" + std::to_string(i), {s, b.ext_mask()}, {}, name);  // padding: -10000
      }
      return {{"start_logits", {batch, seq}}, {"end_logits", {batch, seq}}};
    }
    case OnnxTask::pretraining: {
      auto e = b.encoder(true, "", "");
      std::string t = b.linear(e.sequence, "cls.predictions.transform.dense");
      t = b.activation(t, "/cls/predictions/transform/transform_act_fn");
      t = b.layer_norm(t, "cls.predictions.transform.LayerNorm");
      // The decoder is the word embeddings (V, H): Gemm with transB on (B*T, H) shares the Gather's initializer.
      std::string flat = g.node("Reshape", "/cls/predictions/Reshape", {t, g.ints({-1, h})});
      std::string logits = g.node("Gemm", "/cls/predictions/decoder/Gemm",
                                  {flat, b.weight("bert.embeddings.word_embeddings.weight"), b.weight("cls.predictions.bias")},
                                  {attr_float("alpha", 1.f), attr_float("beta", 1.f), attr_int("transB", 1)});
      std::string shape3 = g.node("Concat", "/cls/predictions/Concat", {b.shape(), g.ints({c.vocab_size})},
                                  {attr_int("axis", 0)});
      g.node("Reshape", "/cls/predictions/Reshape_1", {logits, shape3}, {}, "prediction_logits");
      b.gemm(e.pooled, "cls.seq_relationship", "seq_relationship_logits");
      return {{"prediction_logits", {batch, seq, {c.vocab_size, ""}}}, {"seq_relationship_logits", {batch, {2, ""}}}};
    }
    case OnnxTask::automatic: break;
  }
  BERTRAIN_ASSERT(false, "build_graph: task not resolved");
  return {};
}

// ---- checkpoint inspection -----------------------------------------------------------------------------------

/// Hugging Face names with the "bert." prefix (a BertModel's files have none).
std::string with_bert_prefix(const std::string& n) {
  for (const char* p : {"embeddings.", "encoder.", "pooler."})
    if (starts_with(n, p)) return "bert." + n;
  return n;
}

/// The Hugging Face names of a checkpoint's tensors, without reading their values.
std::vector<std::string> checkpoint_names(const std::string& path) {
  std::vector<std::string> out;
  if (auto prefix = find_tf_checkpoint(path)) {
    const TfCheckpointReader r = TfCheckpointReader::open(*prefix);
    for (const auto& e : r.entries()) {
      if (is_tf_optimizer_variable(e.name)) continue;
      if (auto m = tf_to_hf_name(e.name)) out.push_back(with_bert_prefix(m->name));
    }
    return out;
  }
  const SafetensorsFile f = SafetensorsFile::open(resolve_weights_file(path));
  for (const auto& n : f.names()) out.push_back(with_bert_prefix(n));
  return out;
}

bool has_name(const std::vector<std::string>& names, const std::string& n) {
  return std::find(names.begin(), names.end(), n) != names.end();
}
bool has_prefix(const std::vector<std::string>& names, const std::string& p) {
  return std::any_of(names.begin(), names.end(), [&](const std::string& n) { return starts_with(n, p); });
}

/// The heads a checkpoint carries, for messages.
std::string heads_present(const std::vector<std::string>& names) {
  std::vector<std::string> h;
  if (has_prefix(names, "bert.pooler.")) h.push_back("pooler (bert.pooler.*)");
  if (has_prefix(names, "cls.predictions.")) h.push_back("masked-LM (cls.predictions.*)");
  if (has_prefix(names, "cls.seq_relationship.")) h.push_back("next-sentence (cls.seq_relationship.*)");
  if (has_prefix(names, "classifier.")) h.push_back("classifier (classifier.*)");
  if (has_prefix(names, "qa_outputs.")) h.push_back("question answering (qa_outputs.*)");
  if (h.empty()) return "none (an encoder only)";
  std::string s;
  for (const auto& x : h) s += (s.empty() ? "" : ", ") + x;
  return s;
}

/// The tensors a task's head needs, each with the spellings a file may use.
std::vector<std::vector<std::string>> required_head(OnnxTask task) {
  switch (task) {
    case OnnxTask::sequence_classification:
      return {{"classifier.weight"}, {"classifier.bias"}, {"bert.pooler.dense.weight"}, {"bert.pooler.dense.bias"}};
    case OnnxTask::token_classification: return {{"classifier.weight"}, {"classifier.bias"}};
    case OnnxTask::question_answering: return {{"qa_outputs.weight"}, {"qa_outputs.bias"}};
    case OnnxTask::pretraining:
      return {{"cls.predictions.transform.dense.weight"},
              {"cls.predictions.transform.LayerNorm.weight", "cls.predictions.transform.LayerNorm.gamma"},
              {"cls.predictions.bias", "cls.predictions.decoder.bias"},
              {"cls.seq_relationship.weight"},
              {"cls.seq_relationship.bias"},
              {"bert.pooler.dense.weight"}};
    default: return {};
  }
}

bool is_tag_label(const std::string& l) {
  return l == "O" || (l.size() > 2 && l[1] == '-' && std::string("BIESLU").find(l[0]) != std::string::npos);
}

/// config.json's "architectures" (empty when absent or not a list of strings; bert_config.json has none).
std::vector<std::string> read_architectures(const std::string& config_file) {
  std::vector<std::string> out;
  const nlohmann::json j = nlohmann::json::parse(read_text_file(config_file), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("architectures") || !j["architectures"].is_array()) return out;
  for (const auto& a : j["architectures"])
    if (a.is_string()) out.push_back(a.get<std::string>());
  return out;
}

/// Throws unless `dir` exists, is a directory and a file can be created in it.
void check_output_dir(const std::string& output) {
  BERTRAIN_CHECK(!output.empty(), "--output: the .onnx file to write is required");
  const fs::path out(output);
  fs::path dir = out.parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  BERTRAIN_CHECK(fs::exists(dir, ec), "--output ", output, ": directory ", dir.string(), " does not exist");
  BERTRAIN_CHECK(fs::is_directory(dir, ec), "--output ", output, ": ", dir.string(), " is not a directory");
  BERTRAIN_CHECK(!fs::is_directory(out, ec), "--output ", output, " is a directory; give the .onnx file's name");
  // access(W_OK) says yes to root on a read-only file system: create (and remove) a probe file instead.
  const std::string probe = (dir / (".export-onnx.probe." + std::to_string(::getpid()))).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  BERTRAIN_CHECK(fd >= 0, "--output ", output, ": directory ", dir.string(), " is not writable (",
                 std::strerror(errno), ")");
  ::close(fd);
  ::unlink(probe.c_str());
}

/// The directory a checkpoint path lives in (the directory itself, or the parent of a file or TF prefix).
fs::path checkpoint_dir(const std::string& checkpoint) {
  std::error_code ec;
  if (fs::is_directory(checkpoint, ec)) return fs::path(checkpoint);
  fs::path p = fs::path(checkpoint).parent_path();
  return p.empty() ? fs::path(".") : p;
}

int64_t count_lines(const std::string& text) {
  int64_t n = std::count(text.begin(), text.end(), '\n');
  if (!text.empty() && text.back() != '\n') ++n;
  return n;
}

}  // namespace

std::string onnx_task_name(OnnxTask task) {
  switch (task) {
    case OnnxTask::automatic: return "auto";
    case OnnxTask::encoder: return "encoder";
    case OnnxTask::sequence_classification: return "sequence-classification";
    case OnnxTask::question_answering: return "question-answering";
    case OnnxTask::token_classification: return "token-classification";
    case OnnxTask::pretraining: return "pretraining";
  }
  return "?";
}

OnnxTask parse_onnx_task(const std::string& name) {
  for (OnnxTask t : {OnnxTask::automatic, OnnxTask::encoder, OnnxTask::sequence_classification,
                     OnnxTask::question_answering, OnnxTask::token_classification, OnnxTask::pretraining})
    if (onnx_task_name(t) == name) return t;
  throw Error("--task: unknown task '" + name +
              "'; expected auto, encoder, sequence-classification, question-answering, token-classification or "
              "pretraining");
}

std::string onnx_task_architecture(OnnxTask task) {
  switch (task) {
    case OnnxTask::encoder: return "BertModel";
    case OnnxTask::sequence_classification: return "BertForSequenceClassification";
    case OnnxTask::question_answering: return "BertForQuestionAnswering";
    case OnnxTask::token_classification: return "BertForTokenClassification";
    case OnnxTask::pretraining: return "BertForPreTraining";
    case OnnxTask::automatic: break;
  }
  return "";
}

OnnxTask resolve_onnx_task(const std::vector<std::string>& architectures, const std::vector<std::string>& names,
                           const std::vector<std::string>& id2label, std::string* why) {
  auto say = [&](OnnxTask t, const std::string& reason) {
    if (why) *why = reason;
    return t;
  };
  const bool qa = has_name(names, "qa_outputs.weight"), classifier = has_name(names, "classifier.weight"),
             pooler = has_name(names, "bert.pooler.dense.weight");
  for (const auto& a : architectures) {
    if (a == "BertForQuestionAnswering" && qa) return say(OnnxTask::question_answering, "config.json architectures " + a);
    if (a == "BertForTokenClassification" && classifier)
      return say(OnnxTask::token_classification, "config.json architectures " + a);
    if (a == "BertForSequenceClassification" && classifier && pooler)
      return say(OnnxTask::sequence_classification, "config.json architectures " + a);
    if (a == "BertModel") return say(OnnxTask::encoder, "config.json architectures " + a);
  }
  // BertForPreTraining (which finetuned checkpoints may carry too) or nothing: the parameters decide.
  if (qa) return say(OnnxTask::question_answering, "the checkpoint has qa_outputs.weight");
  if (classifier) {
    if (!pooler) return say(OnnxTask::token_classification, "the checkpoint has classifier.weight and no pooler");
    if (!id2label.empty() && std::all_of(id2label.begin(), id2label.end(), is_tag_label))
      return say(OnnxTask::token_classification, "the checkpoint has classifier.weight and its id2label are tags");
    return say(OnnxTask::sequence_classification, "the checkpoint has classifier.weight and a pooler");
  }
  if (has_prefix(names, "cls.predictions.") && has_prefix(names, "cls.seq_relationship."))
    return say(OnnxTask::pretraining, "the checkpoint has cls.predictions.* and cls.seq_relationship.*");
  return say(OnnxTask::encoder, "the checkpoint has no head");
}

OnnxExportResult export_onnx(const OnnxExportOptions& o) {
  BERTRAIN_CHECK(o.opset >= kOnnxMinOpset && o.opset <= kOnnxMaxOpset, "--opset: expected ", kOnnxMinOpset, " to ",
                 kOnnxMaxOpset, ", got ", o.opset);
  BERTRAIN_CHECK(!o.checkpoint.empty(), "--checkpoint: a checkpoint directory, .safetensors file or TF prefix is required");
  {
    std::error_code ec;
    BERTRAIN_CHECK(fs::exists(o.checkpoint, ec) || find_tf_checkpoint(o.checkpoint), "--checkpoint ", o.checkpoint,
                   ": no checkpoint directory, file or TF checkpoint prefix there");
  }
  check_output_dir(o.output);
  OnnxExportResult r;

  // Config, names, task.
  const std::string config_file = o.bert_config_file.empty() ? default_config_file(o.checkpoint) : o.bert_config_file;
  BertConfig cfg = load_bert_config(config_file);
  const std::vector<std::string> names = checkpoint_names(o.checkpoint);
  r.task = o.task;
  r.task_reason = "--task";
  if (o.task == OnnxTask::automatic)
    r.task = resolve_onnx_task(read_architectures(config_file), names, cfg.id2label, &r.task_reason);
  for (const auto& spellings : required_head(r.task)) {
    const bool found = std::any_of(spellings.begin(), spellings.end(), [&](const std::string& n) { return has_name(names, n); });
    BERTRAIN_CHECK(found, o.checkpoint, " has no ", onnx_task_name(r.task), " head: ", spellings.front(),
                   " is missing (its heads: ", heads_present(names), ")");
  }

  // The task's model, loaded.
  Rng rng(0);
  std::shared_ptr<Module> model;
  const bool pooler = has_name(names, "bert.pooler.dense.weight");
  switch (r.task) {
    case OnnxTask::encoder:
      model = std::make_shared<BertModel>(cfg, rng, DType::f32, pooler);
      if (!pooler) r.warnings.push_back("the checkpoint has no pooler: the model has no pooler_output");
      break;
    case OnnxTask::sequence_classification: model = std::make_shared<BertForSequenceClassification>(cfg, rng); break;
    case OnnxTask::token_classification: model = std::make_shared<BertForTokenClassification>(cfg, rng); break;
    case OnnxTask::question_answering: model = std::make_shared<BertForQuestionAnswering>(cfg, rng); break;
    case OnnxTask::pretraining: model = std::make_shared<BertForPreTraining>(cfg, rng); break;
    case OnnxTask::automatic: BERTRAIN_ASSERT(false, "task not resolved");
  }
  LoadReport rep;
  load_model(o.checkpoint, *model, rep);
  BERTRAIN_CHECK(rep.missing.empty(), o.checkpoint, " has no ", rep.missing.front(), ", which the ",
                 onnx_task_name(r.task), " model needs (its heads: ", heads_present(names), ")");
  r.load_summary = rep.summary();
  std::map<std::string, Tensor> params;
  for (auto& [name, v] : model->named_parameters()) {
    const Tensor& t = v.value();
    BERTRAIN_ASSERT(t.dtype() == DType::f32, "onnx export: ", name, " is not f32: ", t.desc());
    params.emplace(with_bert_prefix(name), t);
  }

  // Tokenizer settings, checked before anything is written.
  const fs::path cdir = checkpoint_dir(o.checkpoint);
  std::string vocab = o.vocab_file;
  if (vocab.empty()) {
    vocab = (cdir / "vocab.txt").string();
    std::error_code ec;
    BERTRAIN_CHECK(fs::is_regular_file(vocab, ec), "no vocab.txt beside the checkpoint ", o.checkpoint,
                   " (looked for ", vocab, "): give --vocab_file");
  }
  const int64_t vocab_lines = count_lines(read_text_file(vocab));
  BERTRAIN_CHECK(vocab_lines <= cfg.vocab_size, vocab, ": ", vocab_lines, " tokens, more than the model's vocab_size ",
                 cfg.vocab_size, " (", config_file, ")");
  BertTokenizerFiles tok;
  tok.vocab_file = vocab;
  tok.model_max_length = cfg.max_position_embeddings;
  if (o.do_lower_case) {
    tok.do_lower_case = *o.do_lower_case;
  } else {
    const fs::path tc = cdir / "tokenizer_config.json";
    std::error_code ec;
    if (fs::is_regular_file(tc, ec)) {
      const nlohmann::json j = nlohmann::json::parse(read_text_file(tc.string()), nullptr, false);
      BERTRAIN_CHECK(j.is_object() && (!j.contains("do_lower_case") || j["do_lower_case"].is_boolean()), tc.string(),
                     ": expected a JSON object whose do_lower_case is true or false");
      tok.do_lower_case = j.value("do_lower_case", true);
      if (j.contains("strip_accents") && j["strip_accents"].is_boolean()) tok.strip_accents = j["strip_accents"].get<bool>();
      if (j.contains("tokenize_chinese_chars") && j["tokenize_chinese_chars"].is_boolean())
        tok.tokenize_chinese_chars = j["tokenize_chinese_chars"].get<bool>();
    } else {
      // The checkpoint's casing as the finetuning commands decide it (its TF model name, else its vocabulary).
      const CheckpointFiles cf = read_checkpoint_files(o.checkpoint, o.bert_config_file);
      if (cf.do_lower_case) {
        tok.do_lower_case = *cf.do_lower_case;
      } else {
        r.warnings.push_back("no tokenizer_config.json beside the checkpoint and its vocabulary does not tell its "
                             "casing: do_lower_case true assumed (--do_lower_case sets it)");
      }
    }
  }

  // The model: graph, metadata, sizes.
  Graph g(o.opset);
  const std::vector<Output> outputs = build_graph(g, params, cfg, r.task, pooler);
  std::string graph_name, tail;  // GraphProto name; inputs, outputs
  put_bytes(graph_name, pb::kGraphName, "bertrain_" + onnx_task_architecture(r.task));
  for (const char* in : {"input_ids", "attention_mask", "token_type_ids"})
    put_bytes(tail, pb::kGraphInput, value_info(in, pb::kInt64, {{0, "batch_size"}, {0, "sequence_length"}}));
  for (const Output& out : outputs) {
    put_bytes(tail, pb::kGraphOutput, value_info(out.name, pb::kFloat, out.dims));
    r.outputs.push_back(out.name);
  }
  const uint64_t graph_size = g.encoded_size(graph_name, tail);

  nlohmann::json config_json = nlohmann::json::parse(bert_config_to_json(cfg));
  config_json["architectures"] = nlohmann::json::array({onnx_task_architecture(r.task)});
  std::vector<std::pair<std::string, std::string>> meta{
      {"task", onnx_task_name(r.task)}, {"architecture", onnx_task_architecture(r.task)}, {"config", config_json.dump(2)}};
  if (r.task == OnnxTask::sequence_classification || r.task == OnnxTask::token_classification) {
    nlohmann::json labels = nlohmann::json::object();
    for (int64_t i = 0; i < cfg.num_labels; ++i) labels[std::to_string(i)] = cfg.label_name(i);
    meta.emplace_back("id2label", labels.dump());
  }
  std::string head;  // ModelProto fields before the graph's body
  put_int(head, pb::kModelIrVersion, kIrVersion);
  put_bytes(head, pb::kModelProducerName, "bertrain");
  put_bytes(head, pb::kModelProducerVersion, BERTRAIN_VERSION);
  put_bytes(head, pb::kModelDocString, onnx_task_architecture(r.task) + " exported by bertrain export-onnx");
  put_tag(head, pb::kModelGraph, kLength);
  put_varint(head, graph_size);
  std::string model_tail;
  {
    std::string opset;
    put_bytes(opset, pb::kOpsetDomain, "");
    put_int(opset, pb::kOpsetVersion, o.opset);
    put_bytes(model_tail, pb::kModelOpsetImport, opset);
    for (const auto& [k, v] : meta) {
      std::string e;
      put_bytes(e, pb::kEntryKey, k);
      put_bytes(e, pb::kEntryValue, v);
      put_bytes(model_tail, pb::kModelMetadataProps, e);
    }
  }
  const uint64_t total = head.size() + graph_size + model_tail.size();
  BERTRAIN_CHECK(total < (uint64_t{1} << 31), "onnx export: the model would take ", total,
                 " bytes, beyond protobuf's 2 GiB limit for one message (external data is not written)");
  r.nodes = g.num_nodes();
  r.initializers = g.num_initializers();
  r.bytes = static_cast<int64_t>(total);

  // Write: tokenizer files, then the model (atomically) last.
  const fs::path out_dir = fs::path(o.output).parent_path().empty() ? fs::path(".") : fs::path(o.output).parent_path();
  save_tokenizer_files(out_dir.string(), tok);
  for (const char* f : {"vocab.txt", "tokenizer_config.json", "special_tokens_map.json"})
    r.written.push_back((out_dir / f).string());
  AtomicFileWriter w(o.output);
  w.write(head.data(), head.size());
  g.write(w, graph_name, tail);
  w.write(model_tail.data(), model_tail.size());
  w.commit();
  r.written.push_back(o.output);
  return r;
}

}  // namespace bertrain
