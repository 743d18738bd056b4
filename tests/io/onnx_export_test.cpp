// onnx_export_test.cpp: `export-onnx` checked by the real ONNX Runtime. Each exported model passes the ONNX checker
// (python3-onnx, full_check: shape inference), then runs in ONNX Runtime (onnxruntime-node, driven by ort_run.js)
// on batches of varied lengths with padding, and its outputs are compared with bertrain's own forward pass on the
// same checkpoint: the padded computation at every position, and the unpadded encoder (bertrain's prediction path)
// at the real positions. Relative error per output tensor: max |ort - bertrain| / max |bertrain|, measured
// separately over the real positions and over the padding positions, at most 1e-5 (f32).
// Skips, naming the reason, only when node or the runtime (scripts/setup.sh puts it in .deps/onnxruntime) is missing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <random>

#include "bertrain/autograd/variable.h"
#include "bertrain/io/checkpoint.h"
#include "bertrain/io/config.h"
#include "bertrain/io/onnx.h"
#include "bertrain/io/tf_bert.h"
#include "bertrain/models/bert.h"
#include "test_util.h"

using namespace bertrain;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string kGolden = std::string(BERTRAIN_TEST_DATA_DIR) + "/golden/";
const std::string kSource = BERTRAIN_SOURCE_DIR;
constexpr double kTolerance = 1e-5;

std::string runtime_dir() { return kSource + "/.deps/onnxruntime/node_modules/onnxruntime-node"; }

/// Why the ONNX Runtime checks cannot run here, or "" when they can.
std::string ort_missing() {
  if (std::system("command -v node >/dev/null 2>&1") != 0) return "node (Node.js) is not installed";
  if (!fs::exists(runtime_dir() + "/package.json"))
    return "ONNX Runtime (onnxruntime-node) is not in .deps/onnxruntime: run scripts/setup.sh";
  return "";
}
#define SKIP_WITHOUT_ORT()                                   \
  do {                                                       \
    const std::string why = ort_missing();                   \
    if (!why.empty()) GTEST_SKIP() << "skipped: " << why;    \
  } while (0)

fs::path tmp() { return test::temp_dir("onnx_export"); }

int run(const std::string& cmd, const fs::path& log) {
  return std::system((cmd + " > '" + log.string() + "' 2>&1").c_str());
}

/// One batch: token ids of the given lengths, padded to the longest (ids 0, mask 0, token type 0 at padding).
struct Batch {
  std::vector<int64_t> lengths;
  int64_t b = 0, t = 0;
  Tensor ids, mask, types;  // i32 (B, T)
};

Batch make_batch(const std::vector<int64_t>& lengths, int64_t vocab, uint32_t seed) {
  Batch x;
  x.lengths = lengths;
  x.b = static_cast<int64_t>(lengths.size());
  x.t = *std::max_element(lengths.begin(), lengths.end());
  x.ids = Tensor::zeros({x.b, x.t}, DType::i32);
  x.mask = Tensor::zeros({x.b, x.t}, DType::i32);
  x.types = Tensor::zeros({x.b, x.t}, DType::i32);
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int64_t> tok(std::min<int64_t>(5, vocab - 1), vocab - 1);
  for (int64_t i = 0; i < x.b; ++i)
    for (int64_t j = 0; j < lengths[i]; ++j) {
      x.ids.data<int32_t>()[i * x.t + j] = static_cast<int32_t>(j == 0 ? 2 : tok(gen));
      x.mask.data<int32_t>()[i * x.t + j] = 1;
      x.types.data<int32_t>()[i * x.t + j] = j >= (lengths[i] + 1) / 2 ? 1 : 0;  // segment B: the second half
    }
  return x;
}

BertInputs inputs(const Batch& x) {
  BertInputs in;
  in.input_ids = x.ids;
  in.attention_mask = x.mask;
  in.token_type_ids = x.types;
  return in;
}

using Outputs = std::map<std::string, Tensor>;

/// bertrain's model for `task`, loaded from the checkpoint `ckpt` once; outputs() runs it on a batch and gives its
/// outputs under the ONNX output names and shapes.
class Reference {
 public:
  Reference(OnnxTask task, const std::string& ckpt) : task_(task), cfg_(load_bert_config(default_config_file(ckpt))) {
    Rng rng(1);
    switch (task) {
      case OnnxTask::encoder: {
        auto m = std::make_shared<BertModel>(cfg_, rng);
        bert_ = m.get();
        m_ = m;
        break;
      }
      case OnnxTask::sequence_classification: m_ = with_bert(std::make_shared<BertForSequenceClassification>(cfg_, rng)); break;
      case OnnxTask::token_classification: m_ = with_bert(std::make_shared<BertForTokenClassification>(cfg_, rng)); break;
      case OnnxTask::question_answering: m_ = with_bert(std::make_shared<BertForQuestionAnswering>(cfg_, rng)); break;
      case OnnxTask::pretraining: m_ = with_bert(std::make_shared<BertForPreTraining>(cfg_, rng)); break;
      case OnnxTask::automatic: ADD_FAILURE() << "task not resolved"; return;
    }
    LoadReport rep;
    load_model(ckpt, *m_, rep);
    EXPECT_TRUE(rep.missing.empty()) << rep.summary();
    m_->eval();
  }

  Outputs outputs(const Batch& x, Unpad unpad) const {
    NoGradGuard ng;
    const BertInputs in = inputs(x);
    bert_->set_unpad(unpad);
    Outputs o;
    switch (task_) {
      case OnnxTask::encoder: {
        auto r = bert_->forward(in);
        o["last_hidden_state"] = r.sequence_output.value();
        o["pooler_output"] = r.pooled_output.value();
        break;
      }
      case OnnxTask::sequence_classification:
        o["logits"] = static_cast<BertForSequenceClassification&>(*m_).forward(in).value();
        break;
      case OnnxTask::token_classification:
        o["logits"] = static_cast<BertForTokenClassification&>(*m_).forward(in).value();
        break;
      case OnnxTask::question_answering: {
        auto r = static_cast<BertForQuestionAnswering&>(*m_).forward(in);
        o["start_logits"] = r.start_logits.value();
        o["end_logits"] = r.end_logits.value();
        break;
      }
      case OnnxTask::pretraining: {
        // The masked-LM head at every position: each position is a prediction slot (weight 0 at padding).
        PretrainingTargets tg;
        tg.masked_lm_positions = Tensor::zeros({x.b, x.t}, DType::i32);
        tg.masked_lm_ids = Tensor::zeros({x.b, x.t}, DType::i32);
        tg.masked_lm_weights = Tensor::zeros({x.b, x.t}, DType::f32);
        tg.next_sentence_labels = Tensor::zeros({x.b}, DType::i32);
        for (int64_t i = 0; i < x.b; ++i)
          for (int64_t j = 0; j < x.t; ++j) {
            tg.masked_lm_positions.data<int32_t>()[i * x.t + j] = static_cast<int32_t>(j);
            tg.masked_lm_weights.data<float>()[i * x.t + j] = static_cast<float>(x.mask.data<int32_t>()[i * x.t + j]);
          }
        auto r = static_cast<BertForPreTraining&>(*m_).forward(in, tg);
        o["prediction_logits"] = r.mlm_logits.reshape({x.b, x.t, cfg_.vocab_size});
        o["seq_relationship_logits"] = r.nsp_logits;
        break;
      }
      case OnnxTask::automatic: break;
    }
    return o;
  }

 private:
  template <class M>
  std::shared_ptr<Module> with_bert(std::shared_ptr<M> m) {
    bert_ = &m->bert();
    return m;
  }
  OnnxTask task_;
  BertConfig cfg_;
  std::shared_ptr<Module> m_;
  BertModel* bert_ = nullptr;
};

/// What ort_run.js returned for one batch.
struct OrtOutput {
  std::vector<int64_t> dims;
  std::vector<float> values;
};

/// Runs `model` in ONNX Runtime on `batches`; one map of outputs per batch.
std::vector<std::map<std::string, OrtOutput>> run_ort(const fs::path& model, const std::vector<Batch>& batches,
                                                      const fs::path& work) {
  fs::create_directories(work);
  json manifest{{"runtime", runtime_dir()}, {"model", model.string()}, {"threads", 1}, {"out_dir", work.string()}};
  manifest["batches"] = json::array();
  for (size_t k = 0; k < batches.size(); ++k) {
    const Batch& x = batches[k];
    std::string bytes;
    for (const Tensor* t : {&x.ids, &x.mask, &x.types})
      for (int64_t i = 0; i < t->numel(); ++i) {
        const int64_t v = t->data<int32_t>()[i];
        bytes.append(reinterpret_cast<const char*>(&v), sizeof v);
      }
    const fs::path f = work / ("batch" + std::to_string(k) + ".bin");
    test::write_file(f, bytes);
    manifest["batches"].push_back({{"batch", x.b}, {"length", x.t}, {"file", f.string()}});
  }
  test::write_file(work / "manifest.json", manifest.dump());
  const fs::path log = work / "ort.log";
  const int rc = run("node '" + kSource + "/tests/io/ort_run.js' '" + (work / "manifest.json").string() + "'", log);
  EXPECT_EQ(rc, 0) << test::read_file(log.string());
  std::vector<std::map<std::string, OrtOutput>> out(batches.size());
  if (rc != 0) return out;
  const json result = json::parse(test::read_file((work / "result.json").string()));
  for (size_t k = 0; k < batches.size(); ++k)
    for (const auto& o : result["outputs"][k]) {
      OrtOutput r;
      r.dims = o["dims"].get<std::vector<int64_t>>();
      const std::string bytes =
          test::read_file((work / ("b" + std::to_string(k) + "_" + o["name"].get<std::string>() + ".bin")).string());
      r.values.resize(bytes.size() / sizeof(float));
      std::memcpy(r.values.data(), bytes.data(), r.values.size() * sizeof(float));
      out[k][o["name"].get<std::string>()] = std::move(r);
    }
  return out;
}

/// The largest relative error seen per label, for the summary printed at the end.
std::map<std::string, double>& worst() {
  static std::map<std::string, double> w;
  return w;
}

/// Compares one output: per-position outputs (dim 1 is T) over the real positions and, when `padding` is set,
/// over the padding positions, each as max |a - b| / max |b|.
void compare(const std::string& label, const std::string& name, const OrtOutput& got, const Tensor& want,
             const Batch& x, bool padding) {
  ASSERT_EQ(got.dims, want.shape().vec()) << label << " " << name;
  const Tensor w = want.to(DType::f64);
  const double* wv = w.data<double>();
  const bool per_position = want.dim() >= 2 && want.size(0) == x.b && want.size(1) == x.t;
  const int64_t inner = per_position ? want.numel() / (x.b * x.t) : 0;
  for (int group = 0; group < (per_position && padding ? 2 : 1); ++group) {
    double max_err = 0, max_ref = 0;
    int64_t n = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      if (per_position) {
        const int64_t pos = i / inner;
        const bool real = x.mask.data<int32_t>()[pos] != 0;
        if (real != (group == 0)) continue;
      }
      max_err = std::max(max_err, std::abs(static_cast<double>(got.values[i]) - wv[i]));
      max_ref = std::max(max_ref, std::abs(wv[i]));
      ++n;
    }
    if (n == 0) continue;
    const double rel = max_err / std::max(max_ref, 1e-30);
    const std::string key = label + " " + name + (per_position ? (group == 0 ? " [real]" : " [padding]") : "");
    EXPECT_LE(rel, kTolerance) << key << ": max |ort - bertrain| " << max_err << ", max |bertrain| " << max_ref;
    worst()[key] = std::max(worst()[key], rel);
  }
}

/// Exports `ckpt`, checks the file with the ONNX checker, runs it in ONNX Runtime on `batches` and compares with
/// bertrain (padded everywhere, unpadded at real positions). Returns the checker's summary.
json export_and_compare(const std::string& label, const std::string& ckpt, OnnxTask task, OnnxTask expect,
                        const std::vector<Batch>& batches, int opset = kOnnxDefaultOpset) {
  const fs::path dir = tmp() / label;
  fs::create_directories(dir);
  OnnxExportOptions o;
  o.checkpoint = ckpt;
  o.output = (dir / "model.onnx").string();
  o.task = task;
  o.opset = opset;
  const OnnxExportResult r = export_onnx(o);
  EXPECT_EQ(r.task, expect) << label << ": " << r.task_reason;
  const fs::path log = dir / "check.json";
  const int rc = run("/usr/bin/python3 '" + kSource + "/tests/io/onnx_check.py' '" + o.output + "'", log);
  const std::string text = test::read_file(log.string());
  EXPECT_EQ(rc, 0) << label << ": the ONNX checker rejected the model: " << text;
  json summary = rc == 0 ? json::parse(text) : json::object();
  const auto ort = run_ort(o.output, batches, dir / "ort");
  const Reference ref(expect, ckpt);
  for (size_t k = 0; k < batches.size(); ++k) {
    const Outputs padded = ref.outputs(batches[k], Unpad::never);
    const Outputs unpadded = ref.outputs(batches[k], Unpad::always);
    EXPECT_EQ(ort[k].size(), padded.size()) << label;
    for (const auto& [name, want] : padded) {
      auto it = ort[k].find(name);
      if (it == ort[k].end()) {
        ADD_FAILURE() << label << ": ONNX Runtime gave no output " << name;
        continue;
      }
      compare(label + " padded", name, it->second, want, batches[k], true);
      compare(label + " unpadded", name, it->second, unpadded.at(name), batches[k], false);
    }
  }
  for (const auto& [k, v] : worst())
    if (k.rfind(label + " ", 0) == 0) std::printf("parity %-64s %.3g\n", k.c_str(), v);
  return summary;
}

/// A checkpoint directory from the golden tiny BERT (tests/fixtures/golden, hidden 32, 2 layers, 64 positions)
/// with the head of `task`: heads the golden model lacks get seeded random weights (std 0.2, biases too).
std::string golden_checkpoint(const std::string& act, OnnxTask task, const std::vector<std::string>& labels = {}) {
  const fs::path dir = tmp() / ("golden_" + act + "_" + onnx_task_name(task));
  fs::create_directories(dir);
  BertConfig cfg = load_bert_config(kGolden + "config_" + act + ".json");
  if (!labels.empty()) {
    cfg.num_labels = static_cast<int64_t>(labels.size());
    cfg.id2label = labels;
  } else {
    cfg.num_labels = 3;
  }
  Rng rng(7);
  std::shared_ptr<Module> m;
  switch (task) {
    case OnnxTask::sequence_classification: m = std::make_shared<BertForSequenceClassification>(cfg, rng); break;
    case OnnxTask::token_classification: m = std::make_shared<BertForTokenClassification>(cfg, rng); break;
    case OnnxTask::question_answering: m = std::make_shared<BertForQuestionAnswering>(cfg, rng); break;
    default: m = std::make_shared<BertForPreTraining>(cfg, rng); break;
  }
  LoadReport rep;
  load_model(kGolden + "model_" + act + ".safetensors", *m, rep);
  for (auto& [name, v] : m->named_parameters()) {
    if (name.rfind("classifier.", 0) != 0 && name.rfind("qa_outputs.", 0) != 0) continue;
    Tensor t = v.value();
    for (int64_t i = 0; i < t.numel(); ++i) t.set(i, 0.2 * rng.normal());
  }
  save_model(dir.string(), *m, cfg);
  std::string vocab;
  for (int64_t i = 0; i < cfg.vocab_size; ++i)
    vocab += (i == 0 ? "[PAD]" : i == 1 ? "[UNK]" : i == 2 ? "[CLS]" : i == 3 ? "[SEP]" : i == 4 ? "[MASK]" : "tok" + std::to_string(i)) + std::string("\n");
  test::write_file(dir / "vocab.txt", vocab);
  return dir.string();
}

std::vector<Batch> golden_batches() {
  return {make_batch({1}, 99, 1), make_batch({64}, 99, 2), make_batch({3, 64, 17}, 99, 3),
          make_batch({5, 1, 30, 2, 63, 9, 12, 40}, 99, 4)};
}

struct HeadCase {
  std::string act;
  OnnxTask task;     // the head the checkpoint gets
  OnnxTask export_;  // what --task says
};

void PrintTo(const HeadCase& c, std::ostream* os) {
  *os << c.act << " checkpoint head " << onnx_task_name(c.task) << ", --task " << onnx_task_name(c.export_);
}

class GoldenHeads : public ::testing::TestWithParam<HeadCase> {};

TEST_P(GoldenHeads, MatchesBertrainInOnnxRuntime) {
  SKIP_WITHOUT_ORT();
  const HeadCase c = GetParam();
  const std::string ckpt = golden_checkpoint(c.act, c.task);
  const OnnxTask expect = c.export_ == OnnxTask::automatic ? c.task : c.export_;
  const json s = export_and_compare("golden_" + c.act + "_" + onnx_task_name(expect), ckpt, c.export_, expect,
                                    golden_batches());
  if (s.empty()) return;
  EXPECT_EQ(s["opset"], json({{"", 17}}));
  EXPECT_EQ(s["domains"], json({""}));  // standard operators only
  for (const auto& in : s["inputs"]) EXPECT_EQ(in[1], 7) << in;  // INT64
  EXPECT_EQ(s["inputs"], json::parse(R"([["input_ids", 7, ["batch_size", "sequence_length"]],
      ["attention_mask", 7, ["batch_size", "sequence_length"]], ["token_type_ids", 7, ["batch_size", "sequence_length"]]])"));
  const auto ops = s["ops"].get<std::vector<std::string>>();
  auto has = [&](const std::string& op) { return std::find(ops.begin(), ops.end(), op) != ops.end(); };
  EXPECT_TRUE(has("LayerNormalization"));
  EXPECT_EQ(has("Erf"), c.act == "gelu") << s["ops"];  // GELU as the config's hidden_act says
  EXPECT_EQ(s["metadata"]["task"], onnx_task_name(expect));
  const json cfg = json::parse(s["metadata"]["config"].get<std::string>());
  EXPECT_EQ(cfg["architectures"], json({onnx_task_architecture(expect)}));
  EXPECT_EQ(cfg["hidden_act"], c.act);
}

INSTANTIATE_TEST_SUITE_P(
    Heads, GoldenHeads,
    ::testing::Values(HeadCase{"gelu", OnnxTask::sequence_classification, OnnxTask::automatic},
                      HeadCase{"gelu", OnnxTask::question_answering, OnnxTask::automatic},
                      HeadCase{"gelu", OnnxTask::token_classification, OnnxTask::automatic},
                      HeadCase{"gelu", OnnxTask::pretraining, OnnxTask::encoder},
                      HeadCase{"gelu", OnnxTask::pretraining, OnnxTask::automatic},
                      HeadCase{"gelu_new", OnnxTask::sequence_classification, OnnxTask::sequence_classification},
                      HeadCase{"gelu_new", OnnxTask::question_answering, OnnxTask::question_answering},
                      HeadCase{"gelu_new", OnnxTask::pretraining, OnnxTask::pretraining}),
    [](const auto& info) {
      std::string n = info.param.act + "_" + onnx_task_name(info.param.export_ == OnnxTask::automatic ? info.param.task
                                                                                                      : info.param.export_);
      if (info.param.export_ == OnnxTask::automatic) n += "_auto";
      std::replace(n.begin(), n.end(), '-', '_');
      return n;
    });

TEST(OnnxExport, Opset13WritesLayerNormOut) {
  SKIP_WITHOUT_ORT();
  const std::string ckpt = golden_checkpoint("gelu", OnnxTask::pretraining);
  const json s = export_and_compare("golden_opset13", ckpt, OnnxTask::pretraining, OnnxTask::pretraining,
                                    golden_batches(), 13);
  if (s.empty()) return;
  EXPECT_EQ(s["opset"], json({{"", 13}}));
  const auto ops = s["ops"].get<std::vector<std::string>>();
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "LayerNormalization"), 0);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "ReduceMean"), 1);
}

TEST(OnnxExport, LabelsConfigAndTokenizerFiles) {
  SKIP_WITHOUT_ORT();
  const std::string ckpt =
      golden_checkpoint("gelu", OnnxTask::token_classification, {"O", "B-PER", "I-PER", "B-LOC", "I-LOC"});
  const json s = export_and_compare("golden_labels", ckpt, OnnxTask::automatic, OnnxTask::token_classification,
                                    {make_batch({7, 20}, 99, 9)});
  if (s.empty()) return;
  EXPECT_EQ(json::parse(s["metadata"]["id2label"].get<std::string>()),
            json::parse(R"({"0": "O", "1": "B-PER", "2": "I-PER", "3": "B-LOC", "4": "I-LOC"})"));
  EXPECT_EQ(s["outputs"], json::parse(R"([["logits", 1, ["batch_size", "sequence_length", 5]]])"));
  EXPECT_EQ(s["producer_name"], "bertrain");
  const fs::path dir = tmp() / "golden_labels";
  EXPECT_EQ(test::read_file((dir / "vocab.txt").string()), test::read_file(ckpt + "/vocab.txt"));
  const json tc = json::parse(test::read_file((dir / "tokenizer_config.json").string()));
  EXPECT_EQ(tc["tokenizer_class"], "BertTokenizer");
  EXPECT_EQ(tc["model_max_length"], 64);
  EXPECT_TRUE(fs::exists(dir / "special_tokens_map.json"));
}

TEST(OnnxExport, BertMiniEn) {
  SKIP_WITHOUT_ORT();
  const std::string ckpt = kSource + "/data/checkpoints/bert-mini-en";
  ASSERT_TRUE(fs::exists(ckpt + "/model.safetensors"));
  // The encoder on sequences of 1 to 512 tokens (max_position_embeddings), with and without padding.
  export_and_compare("bert_mini_en_encoder", ckpt, OnnxTask::encoder, OnnxTask::encoder,
                     {make_batch({512, 300, 7}, 30522, 11), make_batch({1}, 30522, 12)});
  // Its pretraining heads (auto), (B, T, 30522) logits on a small batch.
  export_and_compare("bert_mini_en_pretraining", ckpt, OnnxTask::automatic, OnnxTask::pretraining,
                     {make_batch({20, 9}, 30522, 14)});
}

// PyTorch's own export of the same weights (tools/bench/scripts/torch_onnx_export.py, the contender of `bench
// predict`): the same encoder at every real position, so that the benchmark compares the same computation.
TEST(OnnxExport, TorchExportOfBertMiniEnComputesTheSame) {
  SKIP_WITHOUT_ORT();
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "skipped: python3-torch is not installed";
  const std::string ckpt = kSource + "/data/checkpoints/bert-mini-en";
  const fs::path dir = tmp() / "torch_export";
  fs::create_directories(dir);
  const fs::path model = dir / "torch.onnx";
  const int rc = run("/usr/bin/python3 '" + kSource + "/tools/bench/scripts/torch_onnx_export.py' '" + ckpt + "' '" +
                         model.string() + "'",
                     dir / "export.log");
  ASSERT_EQ(rc, 0) << test::read_file((dir / "export.log").string());
  const std::vector<Batch> batches{make_batch({128, 77, 5}, 30522, 31), make_batch({1}, 30522, 32)};
  const auto ort = run_ort(model, batches, dir / "ort");
  const Reference ref(OnnxTask::encoder, ckpt);
  for (size_t k = 0; k < batches.size(); ++k) {
    const Outputs want = ref.outputs(batches[k], Unpad::never);
    ASSERT_EQ(ort[k].size(), 2u);
    for (const char* name : {"last_hidden_state", "pooler_output"})
      compare("torch_export bert_mini_en", name, ort[k].at(name), want.at(name), batches[k], false);
  }
  for (const auto& [k, v] : worst())
    if (k.rfind("torch_export ", 0) == 0) std::printf("parity %-64s %.3g\n", k.c_str(), v);
}

TEST(OnnxExport, TensorFlowTinyBert) {
  SKIP_WITHOUT_ORT();
  const fs::path tf = fs::path(kSource) / ".." / "shared" / "data" / "tf_checkpoints" / "keras_bert_tiny";
  if (!fs::exists(tf / "bert_model.ckpt.index")) GTEST_SKIP() << "skipped: ../shared/data (the TF tiny BERT) is missing";
  // Through `convert` (a TF checkpoint to a bertrain / Hugging Face directory) ...
  const fs::path conv = tmp() / "tf_converted";
  convert_checkpoint((tf / "bert_model.ckpt").string(), conv.string());
  const std::vector<Batch> b{make_batch({16, 3}, 15, 21), make_batch({1}, 15, 22)};
  export_and_compare("tf_tiny_converted", conv.string(), OnnxTask::automatic, OnnxTask::pretraining, b);
  // ... and straight from the TF prefix.
  export_and_compare("tf_tiny_prefix", (tf / "bert_model.ckpt").string(), OnnxTask::encoder, OnnxTask::encoder, b);
}

TEST(OnnxExport, ResolvesTheTask) {
  const std::vector<std::string> base{"bert.embeddings.word_embeddings.weight", "bert.pooler.dense.weight"};
  auto with = [&](std::vector<std::string> extra, bool pooler = true) {
    std::vector<std::string> n{"bert.embeddings.word_embeddings.weight"};
    if (pooler) n.push_back("bert.pooler.dense.weight");
    n.insert(n.end(), extra.begin(), extra.end());
    return n;
  };
  std::string why;
  // A finetuned classifier whose config still says BertForPreTraining: the parameters decide.
  EXPECT_EQ(resolve_onnx_task({"BertForPreTraining"}, with({"classifier.weight"}), {"neg", "pos"}, &why),
            OnnxTask::sequence_classification);
  EXPECT_EQ(resolve_onnx_task({"BertForPreTraining"}, with({"classifier.weight"}, false), {}), OnnxTask::token_classification);
  EXPECT_EQ(resolve_onnx_task({}, with({"classifier.weight"}), {"O", "B-PER", "I-PER"}), OnnxTask::token_classification);
  EXPECT_EQ(resolve_onnx_task({}, with({"classifier.weight"}), {"NOUN", "VERB"}), OnnxTask::sequence_classification);
  EXPECT_EQ(resolve_onnx_task({"BertForTokenClassification"}, with({"classifier.weight"}), {"NOUN", "VERB"}),
            OnnxTask::token_classification);
  EXPECT_EQ(resolve_onnx_task({"BertForPreTraining"}, with({"qa_outputs.weight"}, false), {}),
            OnnxTask::question_answering);
  EXPECT_EQ(resolve_onnx_task({"BertForPreTraining"},
                              with({"cls.predictions.bias", "cls.seq_relationship.weight"}), {}),
            OnnxTask::pretraining);
  EXPECT_EQ(resolve_onnx_task({}, base, {}, &why), OnnxTask::encoder);
  EXPECT_EQ(why, "the checkpoint has no head");
  // An architectures entry whose head is absent falls back to the parameters.
  EXPECT_EQ(resolve_onnx_task({"BertForQuestionAnswering"}, with({"classifier.weight"}), {}),
            OnnxTask::sequence_classification);
  EXPECT_EQ(resolve_onnx_task({"BertModel"}, with({"classifier.weight"}), {}), OnnxTask::encoder);
  EXPECT_EQ(parse_onnx_task("question-answering"), OnnxTask::question_answering);
  EXPECT_THROW(parse_onnx_task("qa"), Error);
}

}  // namespace

// Without tokenizer_config.json the exported tokenizer takes its casing as the finetuning commands do: from the
// vocabulary (no upper-case token: uncased; 1% or more: cased).
TEST(OnnxExport, CasingFromTheVocabularyWithoutTokenizerConfig) {
  const fs::path src = golden_checkpoint("gelu", OnnxTask::encoder);
  for (const bool cased : {false, true}) {
    const fs::path ck = tmp() / (cased ? "casing_cased" : "casing_uncased");
    fs::create_directories(ck);
    for (const auto& e : fs::directory_iterator(src))
      fs::copy_file(e.path(), ck / e.path().filename(), fs::copy_options::overwrite_existing);
    ASSERT_FALSE(fs::exists(ck / "tokenizer_config.json"));
    std::string vocab;
    for (const std::string& line : test::split_lines(test::read_file((src / "vocab.txt").string())))
      vocab += (cased && line.rfind("tok", 0) == 0 ? "Tok" + line.substr(3) : line) + "\n";
    test::write_file(ck / "vocab.txt", vocab);
    OnnxExportOptions o;
    o.checkpoint = ck.string();
    o.output = (ck / "out" / "model.onnx").string();
    o.task = OnnxTask::encoder;
    fs::create_directories(ck / "out");
    export_onnx(o);
    const json tc = json::parse(test::read_file((ck / "out" / "tokenizer_config.json").string()));
    EXPECT_EQ(tc["do_lower_case"], !cased) << (cased ? "cased" : "uncased") << " vocabulary";
  }
}
