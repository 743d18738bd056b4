// ner.cpp (fuzz target): a token-classification file as `bertrain run-ner` reads it (read_ner_file is
// parse_ner_text over the file's bytes: CoNLL columns, Universal NER .iob2, CoNLL-U), then what run_ner does with
// the sentences: the label list, WordPiece windows with --doc_stride and max context (bert-base's uncased
// vocabulary), word predictions from per-window logits, the conlleval / seqeval metrics against the file's labels,
// and predictions.txt.
// Input: one flags byte (format = flags % 3: conll, iob2, conllu; file scheme = (flags / 3) % 4: iob1, iob2, iobes,
// none; CoNLL-U label column = (flags / 12) % 2: upos, xpos; model scheme = (flags / 24) % 2: iob2, iobes;
// max_seq_length = 4 + 4 * ((flags / 48) % 4), doc_stride = 1 + flags % 5, label_all_tokens = (flags / 5) % 2),
// then the file's bytes.
#include <cmath>

#include "bertrain/tasks/ner/features.h"
#include "bertrain/tasks/ner/reader.h"
#include "bertrain/tasks/ner/run_ner.h"
#include "bertrain/tasks/ner/tags.h"
#include "bertrain/text/tokenizer.h"
#include "fuzz_util.h"

using namespace bertrain;

namespace {

const text::FullTokenizer& tokenizer() {
  static const text::FullTokenizer tok = text::FullTokenizer::from_vocab_file(
      BERTRAIN_SOURCE_DIR "/data/vocab/bert-base-uncased-vocab.txt", true);
  return tok;
}

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "FINDING: %s\n", what.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto in = fuzz::split_flags(data, size);
  const uint8_t f = in.flags;
  ner::NerReadOptions read;
  read.format = static_cast<ner::NerFormat>(f % 3);
  read.scheme = static_cast<ner::TagScheme>((f / 3) % 4);
  read.label_column = (f / 12) % 2 ? "xpos" : "upos";
  const char* ext[] = {"conll", "iob2", "conllu"};
  const std::string source = std::string("fuzz/train.") + ext[f % 3];
  fuzz::expect_refusal_or_success(source, [&] {
    const ner::NerFile file = ner::parse_ner_text(in.bytes, read, source);
    if (file.sentences.empty()) finding("a file without sentences was accepted");
    int64_t words = 0;
    for (const auto& s : file.sentences) {
      if (s.words.empty() || s.words.size() != s.labels.size() || s.words.size() != s.lines.size() ||
          s.words.size() != s.line_numbers.size())
        finding("a sentence with inconsistent vectors");
      words += static_cast<int64_t>(s.words.size());
    }
    if (words != file.words) finding("NerFile::words disagrees with its sentences");
    for (const auto& w : file.warnings) fuzz::check_message(w.c_str(), source);

    ner::NerFeatureOptions o;
    o.file_scheme = read.scheme;
    o.model_scheme = read.scheme == ner::TagScheme::none ? ner::TagScheme::none
                     : (f / 24) % 2                       ? ner::TagScheme::iobes
                                                          : ner::TagScheme::iob2;
    o.max_seq_length = 4 + 4 * ((f / 48) % 4);
    o.doc_stride = 1 + f % 5;
    o.label_all_tokens = (f / 5) % 2;
    const ner::LabelList labels = ner::LabelList::from_training(file.sentences, o.file_scheme, o.model_scheme);
    if (labels.size() == 0) finding("no labels from accepted sentences");
    const ner::NerFeatures features =
        ner::convert_sentences_to_features(file.sentences, tokenizer(), labels, o, source);
    if (features.word_sources.size() != file.sentences.size()) finding("word_sources per sentence");
    // Logits of every window: a pattern that moves the argmax between labels, so chunk rendering sees all kinds.
    const int64_t T = o.max_seq_length, C = labels.size();
    std::vector<std::vector<float>> logits(features.windows.size());
    for (size_t w = 0; w < features.windows.size(); ++w) {
      if (static_cast<int64_t>(features.windows[w].input_ids.size()) != T) finding("a window is not T long");
      logits[w].resize(static_cast<size_t>(T * C));
      for (int64_t i = 0; i < T * C; ++i)
        logits[w][static_cast<size_t>(i)] = static_cast<float>(std::sin(0.7 * static_cast<double>(i + 3 * w)));
    }
    const auto predicted = ner::predict_word_labels(features, labels, logits, o);
    std::vector<std::vector<std::string>> gold;
    for (const auto& s : file.sentences) gold.push_back(s.labels);
    if (predicted.size() != gold.size()) finding("predictions per sentence");
    for (size_t i = 0; i < gold.size(); ++i)
      if (predicted[i].size() != gold[i].size()) finding("a prediction per word");
    const ner::NerMetrics m = ner::compute_ner_metrics(gold, predicted, read.scheme != ner::TagScheme::none);
    for (double v : {m.overall.precision, m.overall.recall, m.overall.f1, m.accuracy})
      if (!(v >= 0 && v <= 1)) finding("a metric outside [0, 1]");
    if (m.tokens != words) finding("metrics counted " + std::to_string(m.tokens) + " tokens of " + std::to_string(words));
    (void)ner::format_predictions(file.sentences, predicted);
  });
  return 0;
}
