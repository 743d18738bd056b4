// run_ner.cpp: evaluation, prediction files and the whole `bertrain run-ner` command (see run_ner.h).
#include "bertrain/tasks/ner/run_ner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <optional>
#include <nlohmann/json.hpp>

#include "bertrain/core/error.h"
#include "bertrain/io/atomic_file.h"
#include "bertrain/io/config.h"
#include "bertrain/io/tokenizer_files.h"
#include "bertrain/train/checkpoint_dir.h"
#include "bertrain/train/communicator.h"

namespace bertrain::ner {

namespace fs = std::filesystem;

namespace {

// A batch of windows as model inputs and labels, padded to its longest window (+ [CLS] and [SEP]) rounded up as
// `padding` says (tasks::batch_seq_length), or to max_seq_length: sentences (tweets) are mostly far shorter than
// T, and padding only adds masked positions (label -100), so the logits of real positions and the loss are the
// same (up to the matmul's summation order).
struct Batch {
  Tensor ids, mask, labels;
};
Batch make_batch(const NerFeatures& f, const std::vector<size_t>& rows, const tasks::PaddingOptions& padding) {
  const int64_t B = static_cast<int64_t>(rows.size());
  const int64_t max_len = static_cast<int64_t>(f.windows[rows[0]].input_ids.size());
  int64_t longest = 1;
  for (size_t r : rows) longest = std::max<int64_t>(longest, f.windows[r].length + 2);
  const int64_t T = tasks::batch_seq_length(std::min(longest, max_len), max_len, padding);
  Batch b{Tensor::empty({B, T}, DType::i32), Tensor::empty({B, T}, DType::i32), Tensor::empty({B, T}, DType::i32)};
  for (int64_t r = 0; r < B; ++r) {
    const NerWindow& w = f.windows[rows[static_cast<size_t>(r)]];
    std::copy_n(w.input_ids.begin(), T, b.ids.data<int32_t>() + r * T);
    std::copy_n(w.input_mask.begin(), T, b.mask.data<int32_t>() + r * T);
    std::copy_n(w.labels.begin(), T, b.labels.data<int32_t>() + r * T);
  }
  return b;
}

}  // namespace

NerEvaluation evaluate_ner(BertForTokenClassification& model, const std::vector<NerSentence>& sentences,
                           const NerFeatures& features, const LabelList& labels, const NerFeatureOptions& options,
                           int64_t batch_size, const tasks::PaddingOptions& padding) {
  BERTRAIN_CHECK(batch_size >= 1, "evaluation batch size must be >= 1, got ", batch_size);
  BERTRAIN_CHECK(!features.windows.empty(), "evaluation: no windows");
  NoGradGuard ng;
  const bool was_training = model.is_training();
  model.eval();
  const PackedForPrediction packed(model);  // the weights packed for this evaluation's products
  // Batches of similar length (tasks::length_sorted_order); each window's logits go back to its place.
  std::vector<int32_t> lengths;
  for (const NerWindow& w : features.windows) lengths.push_back(w.length + 2);
  const std::vector<int64_t> order = tasks::length_sorted_order(lengths);
  std::vector<std::vector<float>> logits(features.windows.size());
  double loss_sum = 0;
  int64_t labelled = 0;
  for (size_t b = 0; b < features.windows.size(); b += static_cast<size_t>(batch_size)) {
    const size_t e = std::min(features.windows.size(), b + static_cast<size_t>(batch_size));
    std::vector<size_t> rows(order.begin() + static_cast<int64_t>(b), order.begin() + static_cast<int64_t>(e));
    Batch batch = make_batch(features, rows, padding);
    Variable out = model.forward(BertInputs{batch.ids, Tensor(), batch.mask, 0, 0});
    int64_t n = 0;
    for (int64_t i = 0; i < batch.labels.numel(); ++i) n += batch.labels.data<int32_t>()[i] != -100 ? 1 : 0;
    if (n > 0) {
      loss_sum += model.loss(out, batch.labels, 1.0).item();
      labelled += n;
    }
    const Tensor& v = out.value();
    const int64_t per = v.size(1) * v.size(2);
    for (size_t i = 0; i < rows.size(); ++i)
      logits[rows[i]].assign(v.data<float>() + static_cast<int64_t>(i) * per,
                             v.data<float>() + static_cast<int64_t>(i + 1) * per);
  }
  model.train(was_training);
  NerEvaluation ev;
  ev.predictions = predict_word_labels(features, labels, logits, options);
  ev.loss = labelled > 0 ? loss_sum / static_cast<double>(labelled) : 0.0;
  std::vector<std::vector<std::string>> gold;
  gold.reserve(sentences.size());
  for (const auto& s : sentences) gold.push_back(s.labels);
  ev.metrics = compute_ner_metrics(gold, ev.predictions, options.file_scheme != TagScheme::none);
  return ev;
}

std::map<std::string, double> ner_metrics_map(const NerEvaluation& e, bool chunks, bool entity_level,
                                              const std::string& prefix) {
  std::map<std::string, double> m;
  m[prefix + "accuracy"] = e.metrics.accuracy;
  m[prefix + "loss"] = e.loss;
  if (!chunks) return m;
  m[prefix + "precision"] = e.metrics.overall.precision;
  m[prefix + "recall"] = e.metrics.overall.recall;
  m[prefix + "f1"] = e.metrics.overall.f1;
  if (entity_level)
    for (const auto& [type, s] : e.metrics.per_type) {
      m[prefix + type + "_precision"] = s.precision;
      m[prefix + type + "_recall"] = s.recall;
      m[prefix + type + "_f1"] = s.f1;
      m[prefix + type + "_number"] = static_cast<double>(s.gold);
    }
  return m;
}

std::string format_predictions(const std::vector<NerSentence>& sentences,
                               const std::vector<std::vector<std::string>>& predictions) {
  BERTRAIN_CHECK(sentences.size() == predictions.size(), "predictions for ", predictions.size(), " sentences, expected ",
                 sentences.size());
  std::string out;
  for (size_t s = 0; s < sentences.size(); ++s) {
    const NerSentence& sent = sentences[s];
    BERTRAIN_CHECK(predictions[s].size() == sent.words.size(), "sentence ", s, ": ", predictions[s].size(),
                   " predictions for ", sent.words.size(), " words");
    for (const auto& p : sent.preamble) out += p + "\n";
    size_t next = 0;  // interludes (CoNLL-U multiword / empty-node lines) in place, "_" as their prediction
    auto interludes_before = [&](size_t w) {
      for (; next < sent.interludes.size() && sent.interludes[next].first <= w; ++next)
        out += sent.interludes[next].second + "\t_\n";
    };
    for (size_t w = 0; w < sent.words.size(); ++w) {
      interludes_before(w);
      out += sent.lines[w];
      out += sent.lines[w].find('\t') != std::string::npos ? '\t' : ' ';
      out += predictions[s][w] + "\n";
    }
    interludes_before(sent.words.size());
    out += "\n";
  }
  return out;
}

namespace {

std::string json_text(const std::map<std::string, double>& m, int64_t step) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : m) j[k] = std::isfinite(v) ? nlohmann::json(v) : nlohmann::json();
  for (const auto& [k, v] : m)
    if (k.size() > 7 && k.compare(k.size() - 7, 7, "_number") == 0) j[k] = static_cast<int64_t>(v);
  j["global_step"] = step;
  return j.dump(2) + "\n";
}

// --model_tag_scheme: iob2 or iobes, or "auto". A checkpoint finetuned by run-ner names its outputs (id2label), and
// those names are in the scheme it was trained in: iobes has S- and E- labels for every entity type, iob2 none.
TagScheme model_tag_scheme(std::string flag, const BertConfig& cfg) {
  std::transform(flag.begin(), flag.end(), flag.begin(), [](unsigned char c) { return std::tolower(c); });
  std::optional<TagScheme> from_checkpoint;
  if (cfg.has_label_names()) {
    from_checkpoint = TagScheme::iob2;
    for (const auto& l : cfg.id2label)
      if (l.size() > 2 && (l.compare(0, 2, "S-") == 0 || l.compare(0, 2, "E-") == 0)) from_checkpoint = TagScheme::iobes;
  }
  if (flag == "auto") return from_checkpoint.value_or(TagScheme::iob2);
  TagScheme s = TagScheme::none;
  try {
    s = parse_tag_scheme(flag);
  } catch (const Error&) {
  }
  BERTRAIN_CHECK(s == TagScheme::iob2 || s == TagScheme::iobes,
                 "--model_tag_scheme must be auto, iob2 (also bio) or iobes (also bioes), got '", flag, "'");
  BERTRAIN_CHECK(!from_checkpoint || *from_checkpoint == s, "--model_tag_scheme ", flag, " contradicts the checkpoint: ",
                 "its id2label is in ", tag_scheme_name(*from_checkpoint), " (", s == TagScheme::iobes ? "no" : "an",
                 " S- or E- label); leave the flag out (auto) to use the checkpoint's scheme");
  return s;
}

}  // namespace

RunNerResult run_ner(const RunNerOptions& options) {
  BERTRAIN_CHECK(options.do_train || options.do_eval || options.do_predict,
                 "at least one of --do_train, --do_eval, --do_predict is required");
  RunNerOptions o = options;
  const std::optional<CheckpointFiles> ck = tasks::apply_checkpoint_defaults(o, kArchTokenClassification, 128);
  if (ck && ck->tokenize_chinese_chars && !o.tokenize_chinese_chars_given) {
    o.tokenize_chinese_chars = *ck->tokenize_chinese_chars;
  } else if (ck && ck->tokenize_chinese_chars) {
    BERTRAIN_CHECK(o.tokenize_chinese_chars == *ck->tokenize_chinese_chars, "--tokenize_chinese_chars ",
                   o.tokenize_chinese_chars, " contradicts the checkpoint: its tokenizer_config.json says ",
                   *ck->tokenize_chinese_chars, "; leave the flag out to use the checkpoint's");
  }
  BERTRAIN_CHECK(!o.do_train || !o.train_file.empty(), "--do_train needs --train_file");
  BERTRAIN_CHECK(!o.do_eval || !o.validation_file.empty(), "--do_eval needs --validation_file");
  BERTRAIN_CHECK(!o.do_predict || !o.test_file.empty(), "--do_predict needs --test_file");
  BERTRAIN_CHECK(!o.finetune.output_dir.empty(), "--output_dir is required");
  tasks::set_bf16(o.bf16);

  // Files first: a malformed one fails before the model is built.
  auto read = [&](const std::string& path) {
    NerReadOptions ro;
    ro.format = parse_ner_format(o.data_format, path);
    ro.label_column = o.label_column;
    ro.scheme = o.tag_scheme == "auto" ? (ro.format == NerFormat::conllu ? TagScheme::none : TagScheme::iob2)
                                       : parse_tag_scheme(o.tag_scheme);
    NerFile f = read_ner_file(path, ro);
    for (const auto& w : f.warnings) spdlog::warn("{}", w);
    spdlog::info("{}: {} sentences, {} words{}", path, f.sentences.size(), f.words,
                 f.skipped_empty_tokens ? fmt::format(", {} empty-token lines skipped", f.skipped_empty_tokens) : "");
    return std::make_pair(std::move(f), ro.scheme);
  };
  NerFile train, dev, test;
  TagScheme scheme = TagScheme::iob2;
  if (o.do_train) std::tie(train, scheme) = read(o.train_file);
  if (o.do_eval || (o.do_train && !o.validation_file.empty())) std::tie(dev, scheme) = read(o.validation_file);
  if (o.do_predict) std::tie(test, scheme) = read(o.test_file);

  NerFeatureOptions fo;
  fo.max_seq_length = o.max_seq_length;
  fo.doc_stride = o.doc_stride;
  fo.label_all_tokens = o.label_all_tokens;
  fo.file_scheme = scheme;
  BertConfig cfg = tasks::finetune_model_config(o);
  // The labels that decide `auto`: the checkpoint --resume continues from, else the init checkpoint's.
  std::optional<std::string> resume_dir;
  if (o.do_train && o.finetune.resume) resume_dir = newest_checkpoint(o.finetune.output_dir);
  fo.model_scheme =
      scheme == TagScheme::none
          ? TagScheme::none
          : model_tag_scheme(o.model_tag_scheme,
                             resume_dir ? load_bert_config((fs::path(*resume_dir) / "config.json").string()) : cfg);
  fo.validate();

  LabelList labels;
  if (cfg.has_label_names()) {
    // C43: a finetuned checkpoint names its outputs; its order is the model's, labels are found by name.
    labels = LabelList(cfg.id2label);
    spdlog::info("labels: the {} of the checkpoint's id2label, in its order", labels.size());
  } else {
    BERTRAIN_CHECK(o.do_train, "the model config has no id2label: give --do_train with --train_file so that the labels "
                               "come from the training data, or a checkpoint finetuned by run-ner");
    labels = LabelList::from_training(train.sentences, scheme, fo.model_scheme);
    cfg.id2label = labels.labels();
    cfg.num_labels = labels.size();
    std::string names;
    for (const auto& l : labels.labels()) names += (names.empty() ? "" : " ") + l;
    spdlog::info("labels ({}, {}): {}", labels.size(), tag_scheme_name(fo.model_scheme), names);
  }
  cfg.num_labels = labels.size();
  cfg.architecture = kArchTokenClassification;
  cfg.finetuning_task = "ner";
  cfg.extra["task_specific_params"] =  // read back by the token-classification pipeline and `bertrain predict`
      nlohmann::json{{"token-classification", {{"doc_stride", o.doc_stride}}}}.dump();
  text::FullTokenizer tok(std::make_shared<const text::Vocab>(text::Vocab::load(o.vocab_file)), o.lower_case(),
                          std::nullopt, o.tokenize_chinese_chars);
  tasks::check_finetune_inputs(o, cfg, tok);
  auto featurize = [&](const NerFile& f) {
    NerFeatures x = convert_sentences_to_features(f.sentences, tok, labels, fo, f.path);
    spdlog::info("{}: {} windows of at most {} pieces ({} pieces{})", f.path, x.windows.size(), o.max_seq_length - 2,
                 x.pieces, x.words_without_pieces ? fmt::format(", {} words without pieces given [UNK]", x.words_without_pieces) : "");
    return x;
  };
  NerFeatures train_f, dev_f, test_f;
  if (o.do_train) train_f = featurize(train);
  if (!dev.sentences.empty()) dev_f = featurize(dev);
  if (o.do_predict) test_f = featurize(test);

  Rng init(o.finetune.seed, 0x4e45);
  BertForTokenClassification model(cfg, init);
  model.bert().set_unpad(o.unpad);
  tasks::load_init_checkpoint(o.init_checkpoint, model);
  const std::string& out_dir = o.finetune.output_dir;
  fs::create_directories(out_dir);
  const bool chunks = scheme != TagScheme::none;
  RunNerResult res;
  auto evaluate = [&](int64_t step) {
    NerEvaluation ev = evaluate_ner(model, dev.sentences, dev_f, labels, fo, o.eval_batch_size, o.padding);
    res.eval_metrics = ner_metrics_map(ev, chunks, o.return_entity_level_metrics);
    write_text_atomic((fs::path(out_dir) / "eval_results.json").string(), json_text(res.eval_metrics, step));
    write_text_atomic((fs::path(out_dir) / "predictions.txt").string(),
                                 format_predictions(dev.sentences, ev.predictions));
    spdlog::info("eval at step {}: {}", step, json_text(res.eval_metrics, step));
    return res.eval_metrics;
  };
  if (o.do_train) {
    FinetuneTask t;
    t.num_train_examples = static_cast<int64_t>(train_f.windows.size());
    t.example_noun = "windows";
    for (const NerWindow& w : train_f.windows) t.lengths.push_back(w.length + 2);
    t.loss = [&](const std::vector<int64_t>& rows, int64_t first) {
      Batch b = make_batch(train_f, std::vector<size_t>(rows.begin(), rows.end()), o.padding);
      Variable logits = model.forward(BertInputs{b.ids, Tensor(), b.mask, first, o.finetune.seed});
      return model.loss(logits, b.labels);
    };
    if (!dev.sentences.empty()) {
      t.evaluate = evaluate;
      t.primary_metric = chunks ? "eval_f1" : "eval_accuracy";
    }
    t.write_extra_files = tasks::tokenizer_files_writer(o, o.tokenize_chinese_chars);
    res.training = run_finetuning(model, cfg, o.finetune, t);
    res.exit_code = res.training.exit_code;
    if (res.exit_code != 0) return res;
  } else if (o.do_eval && world()->rank() == 0) {
    evaluate(0);
  }
  if (o.do_predict && world()->rank() == 0) {
    NerEvaluation ev = evaluate_ner(model, test.sentences, test_f, labels, fo, o.predict_batch_size, o.padding);
    const auto m = ner_metrics_map(ev, chunks, o.return_entity_level_metrics, "test_");
    write_text_atomic((fs::path(out_dir) / "test_results.json").string(),
                                 json_text(m, res.training.global_step));
    write_text_atomic((fs::path(out_dir) / "test_predictions.txt").string(),
                                 format_predictions(test.sentences, ev.predictions));
    spdlog::info("test: {}", json_text(m, res.training.global_step));
  }
  return res;
}

}  // namespace bertrain::ner
