// pipeline.cpp: the task pipelines (see pipeline.h): a checkpoint directory loaded in one call, inputs batched by
// length through the unpadded encoder, outputs in input order.
#include "bertrain/tasks/pipeline.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "bertrain/autograd/variable.h"
#include "bertrain/core/error.h"
#include "bertrain/io/checkpoint.h"
#include "bertrain/io/checkpoint_files.h"
#include "bertrain/models/bert.h"
#include "bertrain/tasks/batching.h"
#include "bertrain/tasks/features/features.h"
#include "bertrain/tasks/finetune_command.h"
#include "bertrain/tasks/glue/glue.h"
#include "bertrain/tasks/ner/features.h"
#include "bertrain/tasks/ner/tags.h"
#include "bertrain/tasks/squad/squad.h"
#include "bertrain/text/tokenizer.h"
#include "bertrain/text/unicode.h"
#include "bertrain/text/utf8.h"
#include "bertrain/text/vocab.h"

namespace bertrain::tasks {

namespace {

// Each batch padded only to its longest input (no rounding): the unpadded encoder computes real tokens alone.
constexpr PaddingOptions kNoRounding{false, 1};

// What every pipeline reads from the directory: its files and a tokenizer built from them.
struct Loaded {
  CheckpointFiles ck;
  std::shared_ptr<const text::FullTokenizer> tok;
  bool lower_case = true;
  int max_seq_length = 0;
  int64_t batch_size = 32;
};

Loaded load_common(const std::string& checkpoint, const PipelineOptions& o, int64_t default_length) {
  BERTRAIN_CHECK(o.batch_size >= 1, "pipeline: batch_size must be >= 1, got ", o.batch_size);
  Loaded l;
  l.ck = read_checkpoint_files(checkpoint);
  std::string vocab = o.vocab_file;
  std::optional<bool> lower = o.do_lower_case;
  take_tokenizer_defaults(l.ck, vocab, lower);
  BERTRAIN_CHECK(!vocab.empty(), checkpoint, ": no vocab.txt in ", l.ck.dir, " (give PipelineOptions::vocab_file)");
  l.lower_case = lower.value_or(true);
  l.tok = std::make_shared<const text::FullTokenizer>(std::make_shared<const text::Vocab>(text::Vocab::load(vocab)),
                                                      l.lower_case, std::nullopt,
                                                      l.ck.tokenize_chinese_chars.value_or(true));
  const BertConfig& c = l.ck.config;
  BERTRAIN_CHECK(static_cast<int64_t>(l.tok->vocab().size()) <= c.vocab_size, "vocab file ", vocab, " has ",
                 l.tok->vocab().size(), " entries but vocab_size in ", l.ck.config_file, " is ", c.vocab_size);
  l.max_seq_length = o.max_seq_length > 0
                         ? o.max_seq_length
                         : static_cast<int>(l.ck.model_max_length.value_or(std::min(default_length, c.max_position_embeddings)));
  BERTRAIN_CHECK(l.max_seq_length >= 3 && l.max_seq_length <= c.max_position_embeddings, "pipeline: max_seq_length ",
                 l.max_seq_length, " is outside [3, max_position_embeddings ", c.max_position_embeddings, "] of ",
                 l.ck.config_file);
  l.batch_size = o.batch_size;
  return l;
}

// The model of the directory, eval mode, unpadded encoder. The generator only fills the parameters before the
// checkpoint overwrites them; `head` names a parameter the checkpoint must hold (its task head).
template <class M>
std::shared_ptr<M> load_weights(const Loaded& l, const char* head, const char* what) {
  Rng rng(0, 0);
  auto m = std::make_shared<M>(l.ck.config, rng);
  LoadReport rep;
  load_model(l.ck.checkpoint, *m, rep);
  if (head)
    BERTRAIN_CHECK(std::find(rep.missing.begin(), rep.missing.end(), head) == rep.missing.end(), l.ck.checkpoint,
                   " holds no ", head, ": it is not a ", what, " checkpoint (config.json architectures: ",
                   l.ck.architecture(), ")");
  m->eval();
  pack_linears_for_prediction(*m);  // constant weights from here on: packed once for every request
  return m;
}

// Softmax of one row of logits in double (as glue::predict), returned as float probabilities.
std::vector<float> softmax_row(const float* z, int64_t c, int32_t* argmax) {
  double mx = -INFINITY;
  int32_t best = 0;
  for (int64_t j = 0; j < c; ++j)
    if (z[j] > mx) {
      mx = z[j];
      best = static_cast<int32_t>(j);
    }
  double s = 0;
  for (int64_t j = 0; j < c; ++j) s += std::exp(z[j] - mx);
  std::vector<float> p(static_cast<size_t>(c));
  for (int64_t j = 0; j < c; ++j) p[static_cast<size_t>(j)] = static_cast<float>(std::exp(z[j] - mx) / s);
  if (argmax) *argmax = best;
  return p;
}

// Code point -> byte offset of a UTF-8 text (size: code points + 1).
std::vector<int64_t> byte_offsets(const std::string& s) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < s.size(); ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) out.push_back(static_cast<int64_t>(i));
  out.push_back(static_cast<int64_t>(s.size()));
  return out;
}

std::vector<int64_t> order_by_length(const std::vector<int32_t>& lengths) { return length_sorted_order(lengths); }

void check_utf8(const std::string& s, size_t index, const char* field) {
  const size_t bad = text::utf8_invalid_offset(s);
  BERTRAIN_CHECK(bad == std::string_view::npos, "pipeline input ", index, ": ", field, " is not valid UTF-8 (byte ",
                 bad, ")");
}

}  // namespace

std::string pipeline_task(const std::string& checkpoint) {
  const std::string a = read_checkpoint_files(checkpoint).architecture();
  if (a == kArchSequenceClassification) return "text-classification";
  if (a == kArchTokenClassification) return "token-classification";
  if (a == kArchQuestionAnswering) return "question-answering";
  return "feature-extraction";
}

// ---------------------------------------------------------------------------------------------------------
// Text classification
// ---------------------------------------------------------------------------------------------------------

struct TextClassificationPipeline::Impl {
  Loaded l;
  std::shared_ptr<BertForSequenceClassification> model;
  std::vector<std::string> labels;
  bool regression = false;
};

TextClassificationPipeline TextClassificationPipeline::load(const std::string& checkpoint, const PipelineOptions& o) {
  auto impl = std::make_shared<Impl>();
  impl->l = load_common(checkpoint, o, 512);
  const BertConfig& c = impl->l.ck.config;
  impl->model = load_weights<BertForSequenceClassification>(impl->l, "classifier.weight", "sequence classification");
  impl->model->bert().set_unpad(Unpad::always);
  impl->regression = c.num_labels == 1 && !c.has_label_names();
  if (!impl->regression)
    for (int64_t i = 0; i < c.num_labels; ++i) impl->labels.push_back(c.label_name(i));
  TextClassificationPipeline p;
  p.impl_ = std::move(impl);
  return p;
}

std::vector<TextClassificationPipeline::Result> TextClassificationPipeline::operator()(
    const std::vector<Input>& inputs) const {
  const Impl& m = *impl_;
  std::vector<Result> out(inputs.size());
  if (inputs.empty()) return out;
  std::vector<glue::ClassifierFeatures> feats;
  feats.reserve(inputs.size());
  std::vector<int32_t> lengths;
  for (size_t i = 0; i < inputs.size(); ++i) {
    glue::InputExample ex;
    ex.guid = "predict-" + std::to_string(i);
    ex.text_a = inputs[i].text;
    ex.text_b = inputs[i].text_pair;
    ex.source = "pipeline input";
    ex.line = static_cast<int64_t>(i) + 1;
    feats.push_back(glue::convert_single_example(ex, {}, m.regression, m.l.max_seq_length, *m.l.tok));
    lengths.push_back(feats.back().num_tokens);
  }
  NoGradGuard no_grad;
  const std::vector<int64_t> order = order_by_length(lengths);
  const int64_t n = static_cast<int64_t>(inputs.size());
  const int64_t c = m.regression ? 1 : static_cast<int64_t>(m.labels.size());
  for (int64_t b = 0; b < n; b += m.l.batch_size) {
    const int64_t e = std::min(n, b + m.l.batch_size);
    const std::span<const int64_t> rows(order.data() + b, static_cast<size_t>(e - b));
    const glue::ClassifierBatch cb = glue::make_classifier_batch(feats, rows, m.regression, kNoRounding);
    const Variable logits = m.model->forward(BertInputs{cb.input_ids, cb.segment_ids, cb.input_mask, 0, 0});
    const Tensor& v = logits.value();
    for (int64_t i = 0; i < e - b; ++i) {
      Result& r = out[static_cast<size_t>(rows[static_cast<size_t>(i)])];
      const float* z = v.data<float>() + i * c;
      if (m.regression) {
        r.score = z[0];
        r.scores = {z[0]};
        continue;
      }
      r.scores = softmax_row(z, c, &r.label_id);
      r.label = m.labels[static_cast<size_t>(r.label_id)];
      r.score = r.scores[static_cast<size_t>(r.label_id)];
    }
  }
  return out;
}

TextClassificationPipeline::Result TextClassificationPipeline::operator()(const std::string& text) const {
  return (*this)(std::vector<Input>{{text, std::nullopt}})[0];
}

TextClassificationPipeline::Result TextClassificationPipeline::operator()(const std::string& text,
                                                                         const std::string& text_pair) const {
  return (*this)(std::vector<Input>{{text, text_pair}})[0];
}

const std::vector<std::string>& TextClassificationPipeline::labels() const { return impl_->labels; }
bool TextClassificationPipeline::is_regression() const { return impl_->regression; }
int TextClassificationPipeline::max_seq_length() const { return impl_->l.max_seq_length; }

// ---------------------------------------------------------------------------------------------------------
// Token classification
// ---------------------------------------------------------------------------------------------------------

namespace {

// A task_specific_params entry of config.json (written by run-ner / run-squad), or null.
nlohmann::json task_param(const BertConfig& c, const std::string& task, const std::string& key) {
  auto it = c.extra.find("task_specific_params");
  if (it == c.extra.end()) return {};
  const nlohmann::json j = nlohmann::json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains(task) || !j[task].is_object() || !j[task].contains(key)) return {};
  return j[task][key];
}

}  // namespace

struct TokenClassificationPipeline::Impl {
  Loaded l;
  std::shared_ptr<BertForTokenClassification> model;
  ner::LabelList labels;
  ner::NerFeatureOptions fo;
  bool chunks = true;
  std::string fill_label;  // a label every word may carry while features are made (no loss is computed)
};

TokenClassificationPipeline TokenClassificationPipeline::load(const std::string& checkpoint, const PipelineOptions& o,
                                                              int doc_stride) {
  auto impl = std::make_shared<Impl>();
  impl->l = load_common(checkpoint, o, 512);
  const BertConfig& c = impl->l.ck.config;
  impl->model = load_weights<BertForTokenClassification>(impl->l, "classifier.weight", "token classification");
  impl->model->bert().set_unpad(Unpad::always);
  std::vector<std::string> names;
  for (int64_t i = 0; i < c.num_labels; ++i) names.push_back(c.label_name(i));
  impl->labels = ner::LabelList(names);
  // The model's scheme as run-ner decides it from id2label: IOBES when a label starts with S- or E-, else IOB2;
  // plain labels (POS tags) when a label is not well-formed in that scheme or there is no "O".
  ner::TagScheme scheme = ner::TagScheme::iob2;
  for (const auto& n : names)
    if (n.size() > 2 && (n.compare(0, 2, "S-") == 0 || n.compare(0, 2, "E-") == 0)) scheme = ner::TagScheme::iobes;
  bool chunks = impl->labels.id("O") >= 0;
  for (const auto& n : names) chunks = chunks && ner::tag_problem(n, scheme).empty();
  impl->chunks = chunks;
  impl->fo.file_scheme = impl->fo.model_scheme = chunks ? scheme : ner::TagScheme::none;
  impl->fill_label = chunks ? "O" : names[0];
  impl->fo.max_seq_length = impl->l.max_seq_length;
  const nlohmann::json stride = task_param(c, "token-classification", "doc_stride");
  impl->fo.doc_stride = doc_stride > 0 ? doc_stride : stride.is_number_integer() ? stride.get<int>() : 128;
  impl->fo.validate();
  TokenClassificationPipeline p;
  p.impl_ = std::move(impl);
  return p;
}

std::vector<TokenClassificationPipeline::Result> TokenClassificationPipeline::operator()(
    const std::vector<std::string>& texts) const {
  const Impl& m = *impl_;
  std::vector<Result> out(texts.size());
  // Words at Python's whitespace, with their code point and byte spans.
  struct Span {
    int64_t start, end, byte_start, byte_end;
  };
  std::vector<std::vector<Span>> spans(texts.size());
  std::vector<ner::NerSentence> sentences;
  std::vector<size_t> sentence_of_text(texts.size(), SIZE_MAX);
  for (size_t t = 0; t < texts.size(); ++t) {
    check_utf8(texts[t], t, "text");
    std::vector<char32_t> cps;
    text::utf8_decode_append(texts[t], cps);
    const std::vector<int64_t> bytes = byte_offsets(texts[t]);
    ner::NerSentence s;
    for (size_t i = 0; i < cps.size();) {
      if (text::unicode::is_python_space(cps[i])) {
        ++i;
        continue;
      }
      size_t j = i;
      while (j < cps.size() && !text::unicode::is_python_space(cps[j])) ++j;
      const Span sp{static_cast<int64_t>(i), static_cast<int64_t>(j), bytes[i], bytes[j]};
      spans[t].push_back(sp);
      s.words.push_back(texts[t].substr(static_cast<size_t>(sp.byte_start),
                                        static_cast<size_t>(sp.byte_end - sp.byte_start)));
      s.labels.push_back(m.fill_label);
      s.lines.push_back(s.words.back());
      s.line_numbers.push_back(static_cast<int64_t>(t) + 1);
      i = j;
    }
    if (s.words.empty()) continue;
    sentence_of_text[t] = sentences.size();
    sentences.push_back(std::move(s));
  }
  if (sentences.empty()) return out;
  const ner::NerFeatures f = ner::convert_sentences_to_features(sentences, *m.l.tok, m.labels, m.fo, "pipeline input");
  NoGradGuard no_grad;
  std::vector<int32_t> lengths;
  for (const ner::NerWindow& w : f.windows) lengths.push_back(w.length + 2);
  const std::vector<int64_t> order = order_by_length(lengths);
  const int64_t c = m.labels.size();
  std::vector<std::vector<float>> logits(f.windows.size());
  const int64_t n = static_cast<int64_t>(f.windows.size());
  for (int64_t b = 0; b < n; b += m.l.batch_size) {
    const int64_t e = std::min(n, b + m.l.batch_size);
    int64_t t_len = 1;
    for (int64_t k = b; k < e; ++k) t_len = std::max<int64_t>(t_len, lengths[static_cast<size_t>(order[k])]);
    const int64_t rows = e - b;
    Tensor ids = Tensor::empty({rows, t_len}, DType::i32), mask = Tensor::empty({rows, t_len}, DType::i32);
    for (int64_t r = 0; r < rows; ++r) {
      const ner::NerWindow& w = f.windows[static_cast<size_t>(order[b + r])];
      std::copy_n(w.input_ids.begin(), t_len, ids.data<int32_t>() + r * t_len);
      std::copy_n(w.input_mask.begin(), t_len, mask.data<int32_t>() + r * t_len);
    }
    const Variable y = m.model->forward(BertInputs{ids, Tensor(), mask, 0, 0});
    const float* v = y.value().data<float>();
    for (int64_t r = 0; r < rows; ++r)
      logits[static_cast<size_t>(order[b + r])].assign(v + r * t_len * c, v + (r + 1) * t_len * c);
  }
  const std::vector<std::vector<std::string>> predicted = ner::predict_word_labels(f, m.labels, logits, m.fo);
  for (size_t t = 0; t < texts.size(); ++t) {
    if (sentence_of_text[t] == SIZE_MAX) continue;
    const size_t s = sentence_of_text[t];
    Result& r = out[t];
    for (size_t w = 0; w < spans[t].size(); ++w) {
      const auto [win, pos] = f.word_sources[s][w];
      int32_t best = 0;
      const std::vector<float> p = softmax_row(logits[static_cast<size_t>(win)].data() + static_cast<int64_t>(pos) * c, c, &best);
      const Span& sp = spans[t][w];
      r.words.push_back({sentences[s].words[w], predicted[s][w], p[static_cast<size_t>(best)], sp.start, sp.end,
                         sp.byte_start, sp.byte_end});
    }
    if (!m.chunks) continue;
    for (const ner::Chunk& ch : ner::extract_chunks(predicted[s])) {
      Entity en;
      en.entity_group = ch.type;
      const Span &a = spans[t][static_cast<size_t>(ch.begin)], &z = spans[t][static_cast<size_t>(ch.end)];
      en.start = a.start;
      en.end = z.end;
      en.byte_start = a.byte_start;
      en.byte_end = z.byte_end;
      en.word = texts[t].substr(static_cast<size_t>(en.byte_start), static_cast<size_t>(en.byte_end - en.byte_start));
      double sum = 0;
      for (int64_t w = ch.begin; w <= ch.end; ++w) sum += r.words[static_cast<size_t>(w)].score;
      en.score = sum / static_cast<double>(ch.end - ch.begin + 1);
      r.entities.push_back(std::move(en));
    }
  }
  return out;
}

TokenClassificationPipeline::Result TokenClassificationPipeline::operator()(const std::string& text) const {
  return (*this)(std::vector<std::string>{text})[0];
}

const std::vector<std::string>& TokenClassificationPipeline::labels() const { return impl_->labels.labels(); }
bool TokenClassificationPipeline::has_chunks() const { return impl_->chunks; }

// ---------------------------------------------------------------------------------------------------------
// Question answering
// ---------------------------------------------------------------------------------------------------------

struct QuestionAnsweringPipeline::Impl {
  Loaded l;
  std::shared_ptr<BertForQuestionAnswering> model;
  squad::SquadFeatureOptions fo;
  squad::SquadPredictOptions po;
};

QuestionAnsweringPipeline QuestionAnsweringPipeline::load(const std::string& checkpoint, const PipelineOptions& o,
                                                          const Settings& s) {
  auto impl = std::make_shared<Impl>();
  impl->l = load_common(checkpoint, o, 384);
  const BertConfig& c = impl->l.ck.config;
  impl->model = load_weights<BertForQuestionAnswering>(impl->l, "qa_outputs.weight", "question answering");
  impl->model->bert().set_unpad(Unpad::always);
  auto integer = [&](const std::optional<int>& given, const char* key, int dflt) {
    if (given) return *given;
    const nlohmann::json v = task_param(c, "question-answering", key);
    return v.is_number_integer() ? v.get<int>() : dflt;
  };
  impl->fo.max_seq_length = impl->l.max_seq_length;
  impl->fo.doc_stride = integer(s.doc_stride, "doc_stride", 128);
  impl->fo.max_query_length = integer(s.max_query_length, "max_query_length", 64);
  impl->fo.is_training = false;
  impl->fo.validate();
  impl->po.n_best_size = integer(s.n_best_size, "n_best_size", 20);
  impl->po.max_answer_length = integer(s.max_answer_length, "max_answer_length", 30);
  impl->po.do_lower_case = impl->l.lower_case;
  const nlohmann::json v2 = task_param(c, "question-answering", "version_2_with_negative");
  impl->po.version_2_with_negative = s.version_2_with_negative.value_or(v2.is_boolean() && v2.get<bool>());
  const nlohmann::json th = task_param(c, "question-answering", "null_score_diff_threshold");
  impl->po.null_score_diff_threshold = s.null_score_diff_threshold.value_or(th.is_number() ? th.get<double>() : 0.0);
  QuestionAnsweringPipeline p;
  p.impl_ = std::move(impl);
  return p;
}

std::vector<QuestionAnsweringPipeline::Result> QuestionAnsweringPipeline::operator()(
    const std::vector<Input>& inputs) const {
  const Impl& m = *impl_;
  std::vector<Result> out(inputs.size());
  if (inputs.empty()) return out;
  std::vector<squad::SquadExample> examples;
  std::vector<std::vector<int32_t>> char_to_word(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_utf8(inputs[i].question, i, "question");
    check_utf8(inputs[i].context, i, "context");
    squad::SquadExample ex;
    ex.qas_id = std::to_string(i);
    ex.question_text = inputs[i].question;
    std::vector<std::string> words;
    std::vector<uint8_t> glued;
    squad::squad_split_paragraph(inputs[i].context, words, char_to_word[i], &glued);
    ex.doc_tokens = std::make_shared<const std::vector<std::string>>(std::move(words));
    if (std::find(glued.begin(), glued.end(), 1) != glued.end())
      ex.doc_token_glued = std::make_shared<const std::vector<uint8_t>>(std::move(glued));
    examples.push_back(std::move(ex));
  }
  const std::vector<squad::SquadFeature> feats = squad::convert_examples_to_features(examples, *m.l.tok, m.fo);
  std::vector<std::vector<float>> start(feats.size()), end(feats.size());
  if (!feats.empty()) {
    NoGradGuard no_grad;
    std::vector<int32_t> lengths;
    for (const auto& f : feats) lengths.push_back(f.num_tokens());
    const std::vector<int64_t> order = order_by_length(lengths);
    const size_t n = feats.size();
    for (size_t b = 0; b < n; b += static_cast<size_t>(m.l.batch_size)) {
      const size_t e = std::min(n, b + static_cast<size_t>(m.l.batch_size));
      std::vector<size_t> rows;
      for (size_t k = b; k < e; ++k) rows.push_back(static_cast<size_t>(order[k]));
      const squad::SquadBatch sb = squad::make_squad_batch(feats, rows, kNoRounding);
      const auto y = m.model->forward(BertInputs{sb.input_ids, sb.segment_ids, sb.input_mask, 0, 0});
      const int64_t t_len = sb.input_ids.size(1);
      for (size_t r = 0; r < rows.size(); ++r) {
        const int64_t len = feats[rows[r]].num_tokens();
        const float* sl = y.start_logits.value().data<float>() + static_cast<int64_t>(r) * t_len;
        const float* el = y.end_logits.value().data<float>() + static_cast<int64_t>(r) * t_len;
        start[rows[r]].assign(sl, sl + len);
        end[rows[r]].assign(el, el + len);
      }
    }
  }
  const squad::SquadPredictions preds = squad::compute_predictions(examples, feats, start, end, m.po);
  for (size_t i = 0; i < inputs.size(); ++i) {
    Result& r = out[i];
    r.answer = preds.predictions[i];
    const auto& nbest = preds.nbest[i];
    const auto it = std::find_if(nbest.begin(), nbest.end(),
                                 [&](const squad::SquadNbestEntry& e) { return e.text == r.answer; });
    if (it == nbest.end()) continue;
    r.score = it->probability;
    if (it->orig_doc_start < 0) continue;
    // Code points of each word in the context, and in the words of the span joined as compute_predictions joins
    // them; the answer's span in the joined text maps back word by word.
    const auto& words = *examples[i].doc_tokens;
    const auto& c2w = char_to_word[i];
    std::vector<int64_t> word_start(words.size(), -1);
    for (size_t k = 0; k < c2w.size(); ++k)
      if (c2w[k] >= 0 && word_start[static_cast<size_t>(c2w[k])] < 0) word_start[static_cast<size_t>(c2w[k])] = static_cast<int64_t>(k);
    std::vector<int64_t> joined_start;
    int64_t at = 0;
    for (int32_t w = it->orig_doc_start; w <= it->orig_doc_end; ++w) {
      if (w > it->orig_doc_start && !(examples[i].doc_token_glued && (*examples[i].doc_token_glued)[w])) ++at;
      joined_start.push_back(at);
      at += static_cast<int64_t>(text::utf8_length(words[static_cast<size_t>(w)]));
    }
    auto to_context = [&](int64_t p) {
      size_t k = 0;
      while (k + 1 < joined_start.size() && joined_start[k + 1] <= p) ++k;
      return word_start[static_cast<size_t>(it->orig_doc_start) + k] + (p - joined_start[k]);
    };
    r.start = to_context(it->text_begin);
    r.end = to_context(it->text_end - 1) + 1;
    const std::vector<int64_t> bytes = byte_offsets(inputs[i].context);
    r.byte_start = bytes[static_cast<size_t>(r.start)];
    r.byte_end = bytes[static_cast<size_t>(r.end)];
  }
  return out;
}

QuestionAnsweringPipeline::Result QuestionAnsweringPipeline::operator()(const std::string& question,
                                                                       const std::string& context) const {
  return (*this)(std::vector<Input>{{question, context}})[0];
}

// ---------------------------------------------------------------------------------------------------------
// Feature extraction
// ---------------------------------------------------------------------------------------------------------

struct FeatureExtractionPipeline::Impl {
  Loaded l;
  std::shared_ptr<BertModel> model;
  features::Pooling pooling = features::Pooling::mean;
  std::vector<int> layers;
};

FeatureExtractionPipeline FeatureExtractionPipeline::load(const std::string& checkpoint, const PipelineOptions& o,
                                                          Pooling pooling, std::vector<int> layers) {
  auto impl = std::make_shared<Impl>();
  impl->l = load_common(checkpoint, o, 512);
  const int64_t nl = impl->l.ck.config.num_hidden_layers;
  BERTRAIN_CHECK(!layers.empty(), "pipeline: no layers given");
  for (int l : layers)
    BERTRAIN_CHECK(l >= -nl && l < nl, "pipeline: layer ", l, " is outside [", -nl, ", ", nl - 1, "] (", nl,
                   " encoder layers in ", impl->l.ck.config_file, ")");
  impl->model = load_weights<BertModel>(impl->l, nullptr, "");
  impl->pooling = pooling == Pooling::cls ? features::Pooling::cls : features::Pooling::mean;
  impl->layers = std::move(layers);
  FeatureExtractionPipeline p;
  p.impl_ = std::move(impl);
  return p;
}

std::vector<std::vector<float>> FeatureExtractionPipeline::operator()(const std::vector<Input>& inputs) const {
  const Impl& m = *impl_;
  std::vector<std::vector<float>> out(inputs.size());
  if (inputs.empty()) return out;
  std::vector<features::InputExample> examples;
  for (size_t i = 0; i < inputs.size(); ++i) {
    features::InputExample ex;
    ex.unique_id = static_cast<int64_t>(i);
    ex.text_a = inputs[i].text;
    ex.has_b = inputs[i].text_pair.has_value();
    ex.text_b = inputs[i].text_pair.value_or("");
    examples.push_back(std::move(ex));
  }
  const auto feats = features::convert_examples_to_features(examples, m.l.max_seq_length, *m.l.tok);
  NoGradGuard no_grad;
  features::compute_layers(*m.model, feats, m.layers, m.l.batch_size,
                           [&](size_t i, const std::vector<Tensor>& outputs) { out[i] = features::pool(outputs, m.pooling); });
  return out;
}

std::vector<float> FeatureExtractionPipeline::operator()(const std::string& text) const {
  return (*this)(std::vector<Input>{{text, std::nullopt}})[0];
}

int64_t FeatureExtractionPipeline::dim() const {
  return impl_->l.ck.config.hidden_size * static_cast<int64_t>(impl_->layers.size());
}

}  // namespace bertrain::tasks
