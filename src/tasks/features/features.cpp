// features.cpp: extract_features.py in C++: reading lines, features, batched encoder runs in input order, and
// its JSON output byte for byte (Python's round(x, 6), repr and json.dumps conventions), plus pooling and .npy.
#include "bertrain/tasks/features/features.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <numeric>

#include "bertrain/autograd/variable.h"
#include "bertrain/core/error.h"
#include "bertrain/core/rng.h"
#include "bertrain/io/atomic_file.h"
#include "bertrain/io/checkpoint.h"
#include "bertrain/io/checkpoint_files.h"
#include "bertrain/io/config.h"
#include "bertrain/tasks/finetune_command.h"
#include "bertrain/text/utf8.h"

namespace bertrain::features {

namespace {

std::string strip_ascii(const std::string& s) {
  const char* ws = " \t\n\r\v\f";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// Python's repr of a finite, non-zero double: the shortest round-trip digits, laid out as float_repr_style
// 'short' does (exponent form when the decimal exponent is < -4 or >= 16, else positional with ".0" added).
std::string python_repr(double v) {
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string out;
  size_t i = 0;
  if (sci[0] == '-') {
    out = "-";
    i = 1;
  }
  const size_t e = sci.find('e');
  std::string digits;
  for (size_t k = i; k < e; ++k)
    if (sci[k] != '.') digits += sci[k];
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  const int exp10 = std::stoi(sci.substr(e + 1));
  const int decpt = exp10 + 1;  // value = 0.DIGITS x 10^decpt
  const int n = static_cast<int>(digits.size());
  if (decpt <= -4 || decpt > 16) {
    out += digits.substr(0, 1);
    if (n > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    return out + eb;
  }
  if (decpt <= 0) return out + "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
  if (decpt < n) return out + digits.substr(0, static_cast<size_t>(decpt)) + "." + digits.substr(static_cast<size_t>(decpt));
  return out + digits + std::string(static_cast<size_t>(decpt - n), '0') + ".0";
}

// json.dumps(s) with ensure_ascii=True: printable ASCII as is, the short escapes, everything else \uXXXX
// (lowercase hex, UTF-16 surrogate pairs above the BMP).
void append_json_string(std::string& out, const std::string& s) {
  std::vector<char32_t> cps;
  text::utf8_decode_append(s, cps);
  out += '"';
  char buf[16];
  auto u = [&](uint32_t c) {
    std::snprintf(buf, sizeof buf, "\\u%04x", c);
    out += buf;
  };
  for (char32_t c : cps) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c >= 0x20 && c <= 0x7e) {
          out += static_cast<char>(c);
        } else if (c > 0xffff) {
          const uint32_t v = static_cast<uint32_t>(c) - 0x10000;
          u(0xd800 + (v >> 10));
          u(0xdc00 + (v & 0x3ff));
        } else {
          u(static_cast<uint32_t>(c));
        }
    }
  }
  out += '"';
}

void append_values(std::string& out, const float* v, int64_t n) {
  out += '[';
  for (int64_t i = 0; i < n; ++i) {
    if (i) out += ", ";
    out += python_round6_repr(v[i]);
  }
  out += ']';
}

// google-research/bert's layer index -> position in BertModel::Output::all_encoder_layers.
size_t layer_position(int index, int64_t num_layers) {
  BERTRAIN_CHECK(index >= -num_layers && index < num_layers, "layer index ", index, " is outside [", -num_layers,
                 ", ", num_layers - 1, "] for a model of ", num_layers, " layers; give --layers within that range (the "
                 "default -1,-2,-3,-4 needs 4 layers)");
  return static_cast<size_t>(index < 0 ? num_layers + index : index);
}

// A .npy file (NumPy format version 1.0): magic, header length, a Python-literal header padded with spaces to
// a multiple of 64 bytes (NumPy's own alignment), then the rows in C order.
class NpyWriter {
 public:
  NpyWriter(const std::string& path, int64_t rows, int64_t cols) : file_(path) {
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(rows) + ", " +
                         std::to_string(cols) + "), }";
    const size_t total = 10 + header.size() + 1;
    header += std::string((64 - total % 64) % 64, ' ') + "\n";
    std::string pre = "\x93NUMPY";
    pre += '\x01';
    pre += '\x00';
    pre += static_cast<char>(header.size() & 0xff);
    pre += static_cast<char>(header.size() >> 8);
    file_.write(pre.data(), pre.size());
    file_.write(header.data(), header.size());
  }
  void row(const std::vector<float>& v) { file_.write(v.data(), v.size() * sizeof(float)); }
  void commit() { file_.commit(); }

 private:
  AtomicFileWriter file_;
};

}  // namespace

std::string python_round6_repr(float x) {
  const double d = x;
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  // round(d, 6): the correctly rounded 6-decimal string of the exact binary value (ties to even, as dtoa's
  // mode 3), read back as a double.
  char buf[400];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::fixed, 6);
  double r = 0;
  std::from_chars(buf, res.ptr, r);
  return python_repr(r);
}

std::vector<InputExample> read_examples(std::istream& in, const std::string& source) {
  std::vector<InputExample> out;
  std::string line;
  int64_t id = 0;
  while (std::getline(in, line)) {
    InputExample e;
    e.unique_id = id++;
    line = strip_ascii(line);
    // The reference's regex ^(.*) \|\|\| (.*)$ is greedy: it splits at the last separator.
    const size_t sep = line.rfind(" ||| ");
    if (sep == std::string::npos) {
      e.text_a = line;
    } else {
      e.text_a = line.substr(0, sep);
      e.text_b = line.substr(sep + 5);
      e.has_b = true;
    }
    out.push_back(std::move(e));
  }
  BERTRAIN_CHECK(!in.bad(), source, ": read error");
  return out;
}

std::vector<InputFeatures> convert_examples_to_features(const std::vector<InputExample>& examples, int64_t seq_length,
                                                        const text::FullTokenizer& tokenizer) {
  BERTRAIN_CHECK(seq_length >= 3, "max_seq_length must be at least 3 ([CLS] and two [SEP]), got ", seq_length);
  std::vector<InputFeatures> out;
  out.reserve(examples.size());
  for (const InputExample& ex : examples) {
    std::vector<std::string> a, b;
    try {
      a = tokenizer.tokenize(ex.text_a);
      if (ex.has_b) b = tokenizer.tokenize(ex.text_b);
    } catch (const Error& err) {
      throw Error("line " + std::to_string(ex.unique_id + 1) + ": " + err.what());
    }
    InputFeatures f;
    f.unique_id = ex.unique_id;
    if (ex.has_b) {
      // _truncate_seq_pair: one token at a time from the end of the longer sequence.
      const size_t max_len = static_cast<size_t>(seq_length - 3);
      while (a.size() + b.size() > max_len) {
        f.truncated = true;
        (a.size() > b.size() ? a : b).pop_back();
      }
    } else if (a.size() > static_cast<size_t>(seq_length - 2)) {
      f.truncated = true;
      a.resize(static_cast<size_t>(seq_length - 2));
    }
    f.tokens.push_back("[CLS]");
    f.input_type_ids.push_back(0);
    for (auto& t : a) {
      f.tokens.push_back(std::move(t));
      f.input_type_ids.push_back(0);
    }
    f.tokens.push_back("[SEP]");
    f.input_type_ids.push_back(0);
    if (ex.has_b) {
      for (auto& t : b) {
        f.tokens.push_back(std::move(t));
        f.input_type_ids.push_back(1);
      }
      f.tokens.push_back("[SEP]");
      f.input_type_ids.push_back(1);
    }
    f.input_ids = tokenizer.convert_tokens_to_ids(f.tokens);
    out.push_back(std::move(f));
  }
  return out;
}

void compute_layers(const BertModel& model, const std::vector<InputFeatures>& features, const std::vector<int>& layers,
                    int64_t batch_size,
                    const std::function<void(size_t index, const std::vector<Tensor>& outputs)>& sink) {
  BERTRAIN_CHECK(batch_size >= 1, "batch_size must be at least 1, got ", batch_size);
  BERTRAIN_CHECK(!layers.empty(), "no layers requested");
  BERTRAIN_CHECK(!model.is_training(), "compute_layers: the model must be in eval mode (model.eval())");
  const int64_t num_layers = model.config().num_hidden_layers, h = model.config().hidden_size;
  std::vector<size_t> pos;
  for (int l : layers) pos.push_back(layer_position(l, num_layers));
  NoGradGuard no_grad;
  // Windows of 64 batches: sorting inside a window keeps padding low while the outputs held for reordering
  // stay bounded.
  const size_t window = static_cast<size_t>(batch_size) * 64;
  for (size_t w0 = 0; w0 < features.size(); w0 += window) {
    const size_t w1 = std::min(features.size(), w0 + window);
    std::vector<size_t> order(w1 - w0);
    std::iota(order.begin(), order.end(), w0);
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
      return features[x].input_ids.size() < features[y].input_ids.size();
    });
    std::vector<std::vector<Tensor>> results(w1 - w0);
    for (size_t b0 = 0; b0 < order.size(); b0 += static_cast<size_t>(batch_size)) {
      const size_t b1 = std::min(order.size(), b0 + static_cast<size_t>(batch_size));
      const auto nb = static_cast<int64_t>(b1 - b0);
      int64_t t = 1;
      for (size_t k = b0; k < b1; ++k) t = std::max<int64_t>(t, static_cast<int64_t>(features[order[k]].input_ids.size()));
      BertInputs in;
      in.input_ids = Tensor::zeros({nb, t}, DType::i32);
      in.token_type_ids = Tensor::zeros({nb, t}, DType::i32);
      in.attention_mask = Tensor::zeros({nb, t}, DType::i32);
      for (int64_t r = 0; r < nb; ++r) {
        const InputFeatures& f = features[order[b0 + static_cast<size_t>(r)]];
        for (size_t j = 0; j < f.input_ids.size(); ++j) {
          in.input_ids.data<int32_t>()[r * t + static_cast<int64_t>(j)] = f.input_ids[j];
          in.token_type_ids.data<int32_t>()[r * t + static_cast<int64_t>(j)] = f.input_type_ids[j];
          in.attention_mask.data<int32_t>()[r * t + static_cast<int64_t>(j)] = 1;
        }
      }
      BertModel::Output o = model.forward(in, /*all_encoder_layers=*/true);
      for (int64_t r = 0; r < nb; ++r) {
        const size_t idx = order[b0 + static_cast<size_t>(r)];
        const auto n = static_cast<int64_t>(features[idx].input_ids.size());
        std::vector<Tensor> outs;
        for (size_t p : pos) {
          const Tensor& all = o.all_encoder_layers[p].value();  // (B, T, H)
          BERTRAIN_CHECK(all.dtype() == DType::f32, "compute_layers: the model must be f32, got ", dtype_name(all.dtype()));
          Tensor rows = Tensor::empty({n, h}, DType::f32);
          std::memcpy(rows.data<float>(), all.data<float>() + r * t * h, static_cast<size_t>(n * h) * sizeof(float));
          outs.push_back(std::move(rows));
        }
        results[idx - w0] = std::move(outs);
      }
    }
    for (size_t i = w0; i < w1; ++i) sink(i, results[i - w0]);
  }
}

std::vector<float> pool(const std::vector<Tensor>& outputs, Pooling pooling) {
  BERTRAIN_CHECK(pooling != Pooling::none, "pool: no pooling given");
  std::vector<float> out;
  for (const Tensor& t : outputs) {
    const int64_t n = t.size(0), h = t.size(1);
    const float* d = t.data<float>();
    for (int64_t j = 0; j < h; ++j) {
      if (pooling == Pooling::cls) {
        out.push_back(d[j]);
      } else {
        double s = 0;
        for (int64_t i = 0; i < n; ++i) s += d[i * h + j];
        out.push_back(static_cast<float>(s / static_cast<double>(n)));
      }
    }
  }
  return out;
}

std::string features_json_line(const InputFeatures& f, const std::vector<int>& layers, const std::vector<Tensor>& outputs) {
  BERTRAIN_CHECK(outputs.size() == layers.size(), "features_json_line: ", outputs.size(), " outputs for ",
                 layers.size(), " layers");
  std::string s = "{\"linex_index\": " + std::to_string(f.unique_id) + ", \"features\": [";
  for (size_t i = 0; i < f.tokens.size(); ++i) {
    if (i) s += ", ";
    s += "{\"token\": ";
    append_json_string(s, f.tokens[i]);
    s += ", \"layers\": [";
    for (size_t k = 0; k < layers.size(); ++k) {
      if (k) s += ", ";
      const int64_t h = outputs[k].size(1);
      s += "{\"index\": " + std::to_string(layers[k]) + ", \"values\": ";
      append_values(s, outputs[k].data<float>() + static_cast<int64_t>(i) * h, h);
      s += "}";
    }
    s += "]}";
  }
  return s + "]}";
}

std::string pooled_json_line(int64_t unique_id, const std::vector<float>& values) {
  std::string s = "{\"linex_index\": " + std::to_string(unique_id) + ", \"values\": ";
  append_values(s, values.data(), static_cast<int64_t>(values.size()));
  return s + "}";
}

Summary extract_features(const Options& options) {
  BERTRAIN_CHECK(!options.input_file.empty(), "extract-features: --input_file is required");
  BERTRAIN_CHECK(!options.init_checkpoint.empty(), "extract-features: --init_checkpoint is required");
  Options o = options;
  // The checkpoint's own vocab, casing and length unless given (a contradicting flag is refused).
  const CheckpointFiles ck = read_checkpoint_files(o.init_checkpoint, o.bert_config_file);
  tasks::take_tokenizer_defaults(ck, o.vocab_file, o.do_lower_case);
  BERTRAIN_CHECK(!o.vocab_file.empty(), "extract-features: give --vocab_file (", o.init_checkpoint,
                 " has no vocab.txt beside it)");
  if (o.max_seq_length == 0)
    o.max_seq_length = ck.model_max_length.value_or(std::min<int64_t>(128, ck.config.max_position_embeddings));
  const bool npy = o.output_file.size() > 4 && o.output_file.compare(o.output_file.size() - 4, 4, ".npy") == 0;
  BERTRAIN_CHECK(!npy || o.pooling != Pooling::none, "extract-features: a .npy output (", o.output_file,
                 ") holds one vector per line: give --pooling cls or mean");
  const std::string cfg_path = o.bert_config_file.empty() ? default_config_file(o.init_checkpoint) : o.bert_config_file;
  const BertConfig cfg = load_bert_config(cfg_path);
  BERTRAIN_CHECK(o.max_seq_length <= cfg.max_position_embeddings, "extract-features: max_seq_length ",
                 o.max_seq_length, " exceeds max_position_embeddings ", cfg.max_position_embeddings, " of ", cfg_path);
  BERTRAIN_CHECK(!o.layers.empty(), "extract-features: --layers is empty");
  try {
    for (int l : o.layers) layer_position(l, cfg.num_hidden_layers);
  } catch (const Error& e) {
    throw Error(std::string("extract-features: --layers: ") + e.what() + " (" + cfg_path + ")");
  }
  text::FullTokenizer tok = text::FullTokenizer::from_vocab_file(o.vocab_file, o.do_lower_case.value_or(true));
  BERTRAIN_CHECK(static_cast<int64_t>(tok.vocab().size()) <= cfg.vocab_size, "vocab file ", o.vocab_file, " has ",
                 tok.vocab().size(), " entries but vocab_size in ", cfg_path, " is ", cfg.vocab_size);

  std::vector<InputExample> examples;
  if (o.input_file == "-") {
    examples = read_examples(std::cin, "<stdin>");
  } else {
    std::ifstream in(o.input_file, std::ios::binary);
    BERTRAIN_CHECK(in.good(), "extract-features: cannot open input file '", o.input_file, "'");
    examples = read_examples(in, o.input_file);
  }
  std::vector<InputFeatures> feats;
  try {
    feats = convert_examples_to_features(examples, o.max_seq_length, tok);
  } catch (const Error& e) {
    throw Error(o.input_file + ", " + e.what());
  }

  Rng rng(0, 0);
  BertModel model(cfg, rng);
  LoadReport rep;
  load_model(o.init_checkpoint, model, rep);
  model.eval();
  pack_linears_for_prediction(model);  // constant weights: packed once for every batch

  Summary sum;
  sum.examples = static_cast<int64_t>(feats.size());
  for (const auto& f : feats) sum.truncated += f.truncated ? 1 : 0;
  sum.max_seq_length = o.max_seq_length;
  sum.load_report = std::to_string(rep.loaded.size()) + " tensors loaded from " + o.init_checkpoint;
  if (!rep.unexpected.empty())
    sum.load_report += ", " + std::to_string(rep.unexpected.size()) + " not used by the encoder (heads)";
  if (!rep.optimizer_state.empty())
    sum.load_report += ", " + std::to_string(rep.optimizer_state.size()) + " optimizer variables skipped";
  if (!rep.missing.empty()) sum.load_report += ", " + std::to_string(rep.missing.size()) + " missing (pooler)";
  sum.dim = o.pooling == Pooling::none ? cfg.hidden_size : cfg.hidden_size * static_cast<int64_t>(o.layers.size());
  const bool to_stdout = o.output_file.empty() || o.output_file == "-";
  sum.output = to_stdout ? "<stdout>" : o.output_file;

  std::unique_ptr<NpyWriter> npy_out;
  std::unique_ptr<AtomicFileWriter> text_out;
  if (npy) npy_out = std::make_unique<NpyWriter>(o.output_file, sum.examples, sum.dim);
  else if (!to_stdout) text_out = std::make_unique<AtomicFileWriter>(o.output_file);
  compute_layers(model, feats, o.layers, o.batch_size, [&](size_t i, const std::vector<Tensor>& outs) {
    if (npy_out) {
      npy_out->row(pool(outs, o.pooling));
      return;
    }
    std::string line = o.pooling == Pooling::none ? features_json_line(feats[i], o.layers, outs)
                                                  : pooled_json_line(feats[i].unique_id, pool(outs, o.pooling));
    line += '\n';
    if (text_out) text_out->write(line.data(), line.size());
    else std::cout << line;
  });
  if (npy_out) npy_out->commit();
  if (text_out) text_out->commit();
  if (to_stdout) std::cout.flush();
  return sum;
}

}  // namespace bertrain::features
