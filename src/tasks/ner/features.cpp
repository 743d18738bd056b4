// features.cpp: label list, word-piece windows with first-sub-token labels, and max-context predictions.
#include "bertrain/tasks/ner/features.h"

#include <algorithm>
#include <set>

#include "bertrain/core/error.h"
#include "bertrain/tasks/squad/squad.h"

namespace bertrain::ner {

LabelList::LabelList(std::vector<std::string> labels) : labels_(std::move(labels)) {
  for (size_t i = 0; i < labels_.size(); ++i) {
    const bool fresh = ids_.emplace(labels_[i], static_cast<int32_t>(i)).second;
    BERTRAIN_CHECK(fresh, "label list names '", labels_[i], "' twice");
  }
}

LabelList LabelList::from_training(const std::vector<NerSentence>& train, TagScheme file_scheme, TagScheme model_scheme) {
  std::set<std::string> out;
  if (file_scheme == TagScheme::none) {
    for (const auto& s : train) out.insert(s.labels.begin(), s.labels.end());
  } else {
    out.insert("O");
    const std::string prefixes = model_scheme == TagScheme::iobes ? "BIES" : "BI";
    for (const auto& s : train)
      for (const Chunk& c : extract_chunks(s.labels))
        for (char p : prefixes) out.insert(std::string(1, p) + "-" + c.type);
  }
  return LabelList(std::vector<std::string>(out.begin(), out.end()));
}

int32_t LabelList::id(const std::string& label) const {
  auto it = ids_.find(label);
  return it == ids_.end() ? -1 : it->second;
}

void NerFeatureOptions::validate() const {
  BERTRAIN_CHECK(max_seq_length >= 3, "max_seq_length must be at least 3 ([CLS] a piece [SEP]), got ", max_seq_length);
  BERTRAIN_CHECK(doc_stride >= 1, "doc_stride must be >= 1, got ", doc_stride);
  BERTRAIN_CHECK((file_scheme == TagScheme::none) == (model_scheme == TagScheme::none),
                 "tag schemes: the files' scheme is ", tag_scheme_name(file_scheme), " but the model's is ",
                 tag_scheme_name(model_scheme), " (plain labels and chunk tags cannot be converted)");
}

NerFeatures convert_sentences_to_features(const std::vector<NerSentence>& sentences,
                                          const text::FullTokenizer& tokenizer, const LabelList& labels,
                                          const NerFeatureOptions& o, const std::string& source) {
  o.validate();
  const text::Vocab& vocab = tokenizer.vocab();
  vocab.require_special_tokens({text::Vocab::kCls, text::Vocab::kSep, text::Vocab::kUnk}, "token classification");
  const int32_t cls = vocab.id(text::Vocab::kCls), sep = vocab.id(text::Vocab::kSep), unk = vocab.id(text::Vocab::kUnk);
  const int32_t T = o.max_seq_length;
  NerFeatures out;
  out.word_sources.resize(sentences.size());
  std::vector<int32_t> ids, piece_label, word_first;
  std::vector<std::string> model_labels;
  for (size_t s = 0; s < sentences.size(); ++s) {
    const NerSentence& sent = sentences[s];
    const size_t n = sent.words.size();
    model_labels = o.file_scheme == TagScheme::none ? sent.labels : convert_tags(sent.labels, o.model_scheme);
    std::vector<int32_t> word_label(n);
    for (size_t w = 0; w < n; ++w) {
      word_label[w] = labels.id(model_labels[w]);
      BERTRAIN_CHECK(word_label[w] >= 0, source, ":", sent.line_numbers[w], ": label '", sent.labels[w], "'",
                     model_labels[w] != sent.labels[w] ? " (" + model_labels[w] + " in the model's scheme)" : "",
                     " is not one of the model's ", labels.size(), " labels (training never saw it)");
    }
    // Pieces of every word; the first piece of word w is word_first[w].
    ids.clear();
    word_first.assign(n, 0);
    std::vector<int32_t> piece_word;
    for (size_t w = 0; w < n; ++w) {
      word_first[w] = static_cast<int32_t>(ids.size());
      tokenizer.encode_append(sent.words[w], ids);
      if (static_cast<int32_t>(ids.size()) == word_first[w]) {
        ids.push_back(unk);
        ++out.words_without_pieces;
      }
      piece_word.resize(ids.size(), static_cast<int32_t>(w));
    }
    const int32_t np = static_cast<int32_t>(ids.size());
    out.pieces += np;
    piece_label.assign(static_cast<size_t>(np), -100);
    for (size_t w = 0; w < n; ++w) piece_label[static_cast<size_t>(word_first[w])] = word_label[w];
    if (o.label_all_tokens) {
      if (o.file_scheme == TagScheme::none) {
        for (int32_t p = 0; p < np; ++p) piece_label[static_cast<size_t>(p)] = word_label[static_cast<size_t>(piece_word[static_cast<size_t>(p)])];
      } else {
        // The word chunks spread over their pieces, rendered in the model's scheme (B-X I-X ... for IOB2).
        std::vector<Chunk> chunks = extract_chunks(model_labels);
        for (Chunk& c : chunks) {
          c.begin = word_first[static_cast<size_t>(c.begin)];
          c.end = static_cast<size_t>(c.end) + 1 < n ? word_first[static_cast<size_t>(c.end) + 1] - 1 : np - 1;
        }
        const std::vector<std::string> tags = render_chunks(chunks, np, o.model_scheme);
        for (int32_t p = 0; p < np; ++p) {
          piece_label[static_cast<size_t>(p)] = labels.id(tags[static_cast<size_t>(p)]);
          BERTRAIN_ASSERT(piece_label[static_cast<size_t>(p)] >= 0, "piece label ", tags[static_cast<size_t>(p)]);
        }
      }
    }
    const std::vector<squad::DocSpan> spans = squad::make_doc_spans(np, T - 2, o.doc_stride);
    const std::vector<int32_t> best = squad::max_context_spans(spans, np);
    const int32_t first_window = static_cast<int32_t>(out.windows.size());
    for (const squad::DocSpan& span : spans) {
      NerWindow win;
      win.sentence = static_cast<int32_t>(s);
      win.start = span.start;
      win.length = span.length;
      win.input_ids.assign(static_cast<size_t>(T), 0);
      win.input_mask.assign(static_cast<size_t>(T), 0);
      win.labels.assign(static_cast<size_t>(T), -100);
      win.input_ids[0] = cls;
      for (int32_t i = 0; i < span.length; ++i) {
        win.input_ids[static_cast<size_t>(1 + i)] = ids[static_cast<size_t>(span.start + i)];
        win.labels[static_cast<size_t>(1 + i)] = piece_label[static_cast<size_t>(span.start + i)];
      }
      win.input_ids[static_cast<size_t>(1 + span.length)] = sep;
      std::fill(win.input_mask.begin(), win.input_mask.begin() + 2 + span.length, 1);
      out.windows.push_back(std::move(win));
    }
    auto& src = out.word_sources[s];
    src.resize(n);
    for (size_t w = 0; w < n; ++w) {
      const int32_t p = word_first[w], span = best[static_cast<size_t>(p)];
      BERTRAIN_ASSERT(span >= 0, "piece ", p, " in no window");
      src[w] = {first_window + span, 1 + p - spans[static_cast<size_t>(span)].start};
    }
  }
  return out;
}

std::vector<std::vector<std::string>> predict_word_labels(const NerFeatures& f, const LabelList& labels,
                                                          const std::vector<std::vector<float>>& logits,
                                                          const NerFeatureOptions& o) {
  BERTRAIN_CHECK(logits.size() == f.windows.size(), "NER predictions: ", logits.size(), " logit rows for ",
                 f.windows.size(), " windows");
  const int64_t C = labels.size();
  std::vector<std::vector<std::string>> out(f.word_sources.size());
  for (size_t s = 0; s < f.word_sources.size(); ++s) {
    std::vector<std::string>& tags = out[s];
    for (const auto& [w, pos] : f.word_sources[s]) {
      const std::vector<float>& l = logits[static_cast<size_t>(w)];
      BERTRAIN_CHECK(static_cast<int64_t>(l.size()) >= (pos + 1) * C, "NER predictions: window ", w, " has ", l.size(),
                     " logits, too few for position ", pos, " of ", C, " labels");
      const float* row = l.data() + pos * C;
      tags.push_back(labels.labels()[static_cast<size_t>(std::max_element(row, row + C) - row)]);
    }
    if (o.file_scheme != TagScheme::none) tags = convert_tags(tags, o.file_scheme);
  }
  return out;
}

}  // namespace bertrain::ner
