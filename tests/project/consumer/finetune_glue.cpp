// finetune_glue.cpp: an outside program on the installed package and the umbrella header only: writes a small
// SST-2-layout task, finetunes a tiny BertForSequenceClassification on it for 20 steps with bertrain's finetuning
// loop, evaluates with the task's metric (accuracy), and checks the atomic checkpoints it wrote load back. Then
// TensorFlow checkpoints (LevelDB tables, snappy blocks: the dependencies a static package must bring): the
// checkpoint converted to google-research/bert's bundle loads back into the same tensors, and TF_PREFIX (a bundle
// whose index blocks are snappy-compressed) reads with the expected values.
// Usage: finetune_glue VOCAB_TXT WORK_DIR TF_PREFIX
#include <bertrain/bertrain.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

using namespace bertrain;
namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: finetune_glue VOCAB_TXT WORK_DIR TF_PREFIX\n");
    return 2;
  }
  const std::string vocab = argv[1];
  const fs::path work = argv[2];
  try {
    // SST-2's layout (header "sentence\tlabel"): sentiment carried by one word, so 20 steps can learn it.
    fs::create_directories(work / "sst2");
    const char* subjects[] = {"the film", "this movie", "the plot", "the acting", "the music", "the ending",
                              "the story", "the cast"};
    for (const char* file : {"train.tsv", "dev.tsv"}) {
      std::ofstream f(work / "sst2" / file);
      f << "sentence\tlabel\n";
      for (int i = 0; i < 32; ++i)
        f << subjects[(i / 2 + (file[0] == 'd' ? 3 : 0)) % 8] << (i % 2 ? " was good" : " was bad") << " .\t" << i % 2
          << "\n";
    }
    auto processor = glue::make_glue_processor("SST-2");
    const text::FullTokenizer tokenizer = text::FullTokenizer::from_vocab_file(vocab, true);
    const auto train = glue::convert_examples_to_features(processor->get_train_set((work / "sst2").string()).examples,
                                                          *processor, 16, tokenizer);
    const auto dev = glue::convert_examples_to_features(processor->get_dev_set((work / "sst2").string(), 0).examples,
                                                        *processor, 16, tokenizer);

    BertConfig cfg;
    cfg.vocab_size = 30522;
    cfg.hidden_size = 32;
    cfg.num_hidden_layers = 1;
    cfg.num_attention_heads = 2;
    cfg.intermediate_size = 64;
    cfg.max_position_embeddings = 32;
    cfg.num_labels = processor->num_labels();
    Rng init(7, 1);
    BertForSequenceClassification model(cfg, init);

    FinetuneTask task;
    task.num_train_examples = static_cast<int64_t>(train.size());
    task.loss = [&](const std::vector<int64_t>& rows, int64_t first) {
      glue::ClassifierBatch b = glue::make_classifier_batch(train, rows, false);
      return model.loss(model.forward(BertInputs{b.input_ids, b.segment_ids, b.input_mask, first, 7}), b.labels);
    };
    task.evaluate = [&](int64_t) {
      std::vector<int32_t> predictions, labels;
      glue::ClassifierBatch b = glue::make_classifier_batch(dev, 0, static_cast<int64_t>(dev.size()), false);
      const Tensor logits = model.forward(BertInputs{b.input_ids, b.segment_ids, b.input_mask, 0, 7}).value();
      for (int64_t i = 0; i < logits.shape()[0]; ++i) {
        predictions.push_back(logits.get(2 * i + 1) > logits.get(2 * i) ? 1 : 0);
        labels.push_back(static_cast<int32_t>(b.labels.get(i)));
      }
      return glue::compute_glue_metrics("SST-2", predictions, labels, 2);
    };
    task.primary_metric = glue::glue_primary_metric("SST-2");
    FinetuneOptions o;
    o.output_dir = (work / "out").string();
    o.train_batch_size = 8;
    o.learning_rate = 5e-3;
    o.num_train_epochs = 5;
    o.max_steps = 20;
    o.warmup_proportion = 0.1;
    o.progress = false;
    FinetuneResult r = run_finetuning(model, cfg, o, task);

    // The checkpoints are complete directories (written to a temporary name, then renamed) that load back.
    BertForSequenceClassification reloaded(cfg, init);
    LoadReport rep;
    load_model((work / "out" / "checkpoint-20").string(), reloaded, rep);
    const TrainState st = TrainState::read((work / "out" / "checkpoint-20").string());
    const double accuracy = r.last_metrics.at("accuracy");
    std::printf("steps %lld, dev accuracy %.3f, best %.3f at step %lld, checkpoint-20 at global_step %lld\n",
                static_cast<long long>(r.global_step), accuracy, r.best_metric, static_cast<long long>(r.best_step),
                static_cast<long long>(st.global_step));
    if (r.global_step != 20 || st.global_step != 20 || !fs::exists(work / "out" / "best" / "model.safetensors")) return 1;

    // bertrain -> TF bundle -> a new model: every parameter equal, bit for bit.
    const ConvertResult cr = convert_checkpoint((work / "out" / "checkpoint-20").string(), (work / "tf").string());
    BertForSequenceClassification from_tf(cfg, init);
    LoadReport tf_rep;
    load_model((work / "tf" / "bert_model.ckpt").string(), from_tf, tf_rep);
    size_t differing = 0;
    for (const auto& [name, p] : reloaded.named_parameters()) {
      const Tensor a = p.value();
      const Tensor b = from_tf.parameter(name).value();
      if (a.shape() != b.shape() || std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) != 0) ++differing;
    }
    // A bundle TensorFlow wrote with snappy-compressed index blocks (TF Serving's half_plus_two: y = a * x + b).
    const TfCheckpointReader half = TfCheckpointReader::open(argv[3]);
    const float a = half.load("a").data<float>()[0], b = half.load("b").data<float>()[0];
    std::printf("TF bundle: %zu tensors written, %zu loaded back, %zu differ; %s: a = %g, b = %g\n", cr.tensors,
                tf_rep.loaded.size(), differing, argv[3], a, b);
    return differing == 0 && tf_rep.loaded.size() == cr.tensors && a == 0.5f && b == 2.0f ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "finetune_glue: %s\n", e.what());
    return 1;
  }
}
