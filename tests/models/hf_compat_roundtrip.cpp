// hf_compat_roundtrip.cpp: the C++ step of the hf_compat ctest. Loads the transformers-style (hf_new) and the
// old-style (hf_old: LayerNorm.gamma/beta, position_ids, decoder weight, google bert_config.json) checkpoints
// written by tests/models/hf_compat.py into bertrain's BertForPreTraining, strictly (every name must match), and
// into a bare module tree with the Hugging Face names including a tied cls.predictions.decoder.weight; checks
// all loads agree bit for bit, and saves the model for `hf_compat.py check`.
// Usage: hf_compat_roundtrip HF_NEW_DIR HF_OLD_DIR OUT_DIR. Exit status 1 with a message on any mismatch.
#include <cstring>
#include <iostream>
#include <map>
#include <memory>

#include "bertrain/io/checkpoint.h"
#include "bertrain/io/config.h"
#include "bertrain/models/bert.h"

using namespace bertrain;

namespace {

// A module tree built from dotted Hugging Face names: what BertForPreTraining registers, without its forward.
class TreeModule : public Module {
 public:
  Variable add(const std::string& dotted, const Shape& shape) {
    auto dot = dotted.find('.');
    if (dot == std::string::npos) return register_parameter(dotted, Tensor::zeros(shape));
    std::string head = dotted.substr(0, dot);
    auto it = children_.find(head);
    if (it == children_.end()) it = children_.emplace(head, register_module(head, std::make_shared<TreeModule>())).first;
    return it->second->add(dotted.substr(dot + 1), shape);
  }
  void tie(const std::string& dotted, const Variable& v) {
    auto dot = dotted.find('.');
    if (dot == std::string::npos) return replace_parameter(dotted, v);
    children_.at(dotted.substr(0, dot))->tie(dotted.substr(dot + 1), v);
  }

 private:
  std::map<std::string, std::shared_ptr<TreeModule>> children_;
};

std::shared_ptr<TreeModule> make_bert_for_pretraining(const BertConfig& c) {
  auto m = std::make_shared<TreeModule>();
  const int64_t V = c.vocab_size, H = c.hidden_size, I = c.intermediate_size;
  Variable word = m->add("bert.embeddings.word_embeddings.weight", {V, H});
  m->add("bert.embeddings.position_embeddings.weight", {c.max_position_embeddings, H});
  m->add("bert.embeddings.token_type_embeddings.weight", {c.type_vocab_size, H});
  m->add("bert.embeddings.LayerNorm.weight", {H});
  m->add("bert.embeddings.LayerNorm.bias", {H});
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "bert.encoder.layer." + std::to_string(i) + ".";
    for (const char* n : {"query", "key", "value"}) {
      m->add(p + "attention.self." + n + ".weight", {H, H});
      m->add(p + "attention.self." + n + ".bias", {H});
    }
    m->add(p + "attention.output.dense.weight", {H, H});
    m->add(p + "attention.output.dense.bias", {H});
    m->add(p + "attention.output.LayerNorm.weight", {H});
    m->add(p + "attention.output.LayerNorm.bias", {H});
    m->add(p + "intermediate.dense.weight", {I, H});
    m->add(p + "intermediate.dense.bias", {I});
    m->add(p + "output.dense.weight", {H, I});
    m->add(p + "output.dense.bias", {H});
    m->add(p + "output.LayerNorm.weight", {H});
    m->add(p + "output.LayerNorm.bias", {H});
  }
  m->add("bert.pooler.dense.weight", {H, H});
  m->add("bert.pooler.dense.bias", {H});
  m->add("cls.predictions.bias", {V});
  m->add("cls.predictions.transform.dense.weight", {H, H});
  m->add("cls.predictions.transform.dense.bias", {H});
  m->add("cls.predictions.transform.LayerNorm.weight", {H});
  m->add("cls.predictions.transform.LayerNorm.bias", {H});
  m->add("cls.predictions.decoder.weight", {V, H});
  m->tie("cls.predictions.decoder.weight", word);
  m->add("cls.seq_relationship.weight", {2, H});
  m->add("cls.seq_relationship.bias", {2});
  return m;
}

int fail(const std::string& msg) {
  std::cerr << "hf_compat_roundtrip: FAIL: " << msg << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) return fail("usage: hf_compat_roundtrip HF_NEW_DIR HF_OLD_DIR OUT_DIR");
  const std::string new_dir = argv[1], old_dir = argv[2], out_dir = argv[3];
  try {
    BertConfig c = load_bert_config(new_dir + "/config.json");
    BertConfig g = load_bert_config(old_dir + "/bert_config.json");
    if (g.layer_norm_eps != 1e-12 || g.hidden_size != c.hidden_size || g.vocab_size != c.vocab_size ||
        g.hidden_act != "gelu" || g.intermediate_size != c.intermediate_size)
      return fail("google bert_config.json read differently from config.json");

    Rng rng_a(1), rng_b(2);
    BertForPreTraining a(c, rng_a), b(g, rng_b);
    auto tree = make_bert_for_pretraining(c);
    LoadReport ra, rb, rt;
    load_model(new_dir, a, ra, LoadOptions{.strict = true});
    load_model(old_dir, b, rb, LoadOptions{.strict = true});
    load_model(old_dir, *tree, rt, LoadOptions{.strict = true});
    if (!ra.ignored.empty() || !ra.renamed.empty()) return fail("hf_new load: " + ra.summary());
    const size_t n_ln = 2 + 2 * 2 * c.num_hidden_layers + 2;  // gamma+beta per LayerNorm
    if (rb.renamed.size() != n_ln) return fail("hf_old load renamed " + std::to_string(rb.renamed.size()) + ":\n" + rb.summary());
    if (rb.ignored != std::vector<std::string>{"bert.embeddings.position_ids", "cls.predictions.decoder.weight"})
      return fail("hf_old load ignored the wrong tensors:\n" + rb.summary());
    auto same = [](const Tensor& x, const Tensor& y) {
      return x.nbytes() == y.nbytes() && std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;
    };
    for (auto& [n, v] : a.named_parameters()) {
      if (!same(v.value(), b.parameter(n).value())) return fail("hf_new and hf_old differ in " + n);
      if (!same(v.value(), tree->parameter(n).value())) return fail("model and module tree differ in " + n);
    }
    if (tree->named_parameters().size() != a.named_parameters().size() + 1)
      return fail("BertForPreTraining does not have the Hugging Face parameter set");
    if (tree->parameter("cls.predictions.decoder.weight").impl() != tree->parameter("bert.embeddings.word_embeddings.weight").impl())
      return fail("decoder no longer tied");
    save_model(out_dir, a, c);
    std::cout << "hf_compat_roundtrip: loaded " << ra.loaded.size() << " tensors from each; saved " << out_dir << "\n";
  } catch (const Error& e) {
    return fail(e.what());
  }
  return 0;
}
