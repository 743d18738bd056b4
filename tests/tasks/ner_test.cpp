// ner_test.cpp: token classification: conlleval / seqeval chunk rules and metrics on hand-made cases,
// tag scheme conversion, the CoNLL / UNER / CoNLL-U readers and their errors, first-sub-token
// labels, --doc_stride windows with the max-context rule, and predictions.txt.
#include <gtest/gtest.h>

#include <cmath>

#include "bertrain/core/error.h"
#include "bertrain/tasks/ner/features.h"
#include "bertrain/tasks/ner/reader.h"
#include "bertrain/tasks/ner/run_ner.h"
#include "bertrain/tasks/ner/tags.h"

using namespace bertrain;
using namespace bertrain::ner;
using S = std::vector<std::string>;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

// ---- chunks ----

TEST(NerChunks, Iob2AndIllFormedTags) {
  EXPECT_EQ(extract_chunks({"B-PER", "I-PER", "O", "B-LOC"}), (std::vector<Chunk>{{"PER", 0, 1}, {"LOC", 3, 3}}));
  // conlleval: an I- after O starts a chunk; a change of type ends one and starts another.
  EXPECT_EQ(extract_chunks({"O", "I-PER", "I-PER", "O"}), (std::vector<Chunk>{{"PER", 1, 2}}));
  EXPECT_EQ(extract_chunks({"B-PER", "I-LOC"}), (std::vector<Chunk>{{"PER", 0, 0}, {"LOC", 1, 1}}));
  // B after B of the same type: two chunks (BTC's "@ B-ORG SportsCenter B-ORG").
  EXPECT_EQ(extract_chunks({"B-ORG", "B-ORG"}), (std::vector<Chunk>{{"ORG", 0, 0}, {"ORG", 1, 1}}));
  // Types with dashes (WNUT's creative-work) keep everything after the first dash.
  EXPECT_EQ(extract_chunks({"B-creative-work", "I-creative-work"}), (std::vector<Chunk>{{"creative-work", 0, 1}}));
  EXPECT_TRUE(extract_chunks({"O", "O"}).empty());
}

TEST(NerChunks, Iob1AndIobes) {
  // IOB1 (WikiGold): I- inside, B- only between two adjacent chunks of one type.
  const S iob1 = {"I-PER", "I-PER", "B-PER", "O", "I-LOC"};
  const std::vector<Chunk> chunks = {{"PER", 0, 1}, {"PER", 2, 2}, {"LOC", 4, 4}};
  EXPECT_EQ(extract_chunks(iob1), chunks);
  EXPECT_EQ(convert_tags(iob1, TagScheme::iob2), (S{"B-PER", "I-PER", "B-PER", "O", "B-LOC"}));
  EXPECT_EQ(convert_tags(iob1, TagScheme::iobes), (S{"B-PER", "E-PER", "S-PER", "O", "S-LOC"}));
  EXPECT_EQ(convert_tags(convert_tags(iob1, TagScheme::iobes), TagScheme::iob1), iob1);
  EXPECT_EQ(extract_chunks({"S-PER", "B-LOC", "I-LOC", "E-LOC"}), (std::vector<Chunk>{{"PER", 0, 0}, {"LOC", 1, 3}}));
  // seqeval's E/S rules: a chunk ends after E; E after E starts a new one.
  EXPECT_EQ(extract_chunks({"B-PER", "E-PER", "E-PER"}), (std::vector<Chunk>{{"PER", 0, 1}, {"PER", 2, 2}}));
  // The same chunks in all three schemes score the same.
  EXPECT_EQ(extract_chunks(convert_tags(iob1, TagScheme::iobes)), chunks);
}

TEST(NerChunks, SchemeCheck) {
  EXPECT_EQ(tag_problem("B-PER", TagScheme::iob2), "");
  EXPECT_NE(tag_problem("S-PER", TagScheme::iob2), "");
  EXPECT_EQ(tag_problem("S-PER", TagScheme::iobes), "");
  EXPECT_NE(tag_problem("B_PER", TagScheme::iob2), "");
  EXPECT_NE(tag_problem("B-", TagScheme::iob2), "");
  EXPECT_EQ(tag_problem("NOUN", TagScheme::none), "");
  EXPECT_EQ(parse_tag_scheme("BIO"), TagScheme::iob2);
  EXPECT_NE(error_of([] { parse_tag_scheme("bilou"); }).find("unknown tag scheme 'bilou'"), std::string::npos);
}

// ---- metrics: every expected value computed by hand ----

TEST(NerMetrics, TypesAndMicroAverage) {
  // gold PER(0,1) LOC(3,3); predicted PER(0,1) ORG(3,3): 1 correct of 2 predicted and 2 gold.
  NerMetrics m = compute_ner_metrics({{"B-PER", "I-PER", "O", "B-LOC"}}, {{"B-PER", "I-PER", "O", "B-ORG"}});
  EXPECT_EQ(m.overall.correct, 1);
  EXPECT_DOUBLE_EQ(m.overall.precision, 0.5);
  EXPECT_DOUBLE_EQ(m.overall.recall, 0.5);
  EXPECT_DOUBLE_EQ(m.overall.f1, 0.5);
  EXPECT_DOUBLE_EQ(m.per_type.at("PER").f1, 1.0);
  EXPECT_EQ(m.per_type.at("LOC").gold, 1);
  EXPECT_DOUBLE_EQ(m.per_type.at("LOC").recall, 0.0);
  EXPECT_DOUBLE_EQ(m.per_type.at("LOC").precision, 0.0);  // nothing predicted: 0, not NaN
  EXPECT_EQ(m.per_type.at("ORG").predicted, 1);            // a type found only in the predictions is listed
  EXPECT_DOUBLE_EQ(m.per_type.at("ORG").precision, 0.0);
  EXPECT_DOUBLE_EQ(m.accuracy, 0.75);  // 3 of 4 labels equal
}

TEST(NerMetrics, SeqevalReadmeExample) {
  // seqeval's README example: gold MISC(3,5) PER(0,1), predicted MISC(2,5) PER(0,1).
  const std::vector<S> gold = {{"O", "O", "O", "B-MISC", "I-MISC", "I-MISC", "O"}, {"B-PER", "I-PER", "O"}};
  const std::vector<S> pred = {{"O", "O", "B-MISC", "I-MISC", "I-MISC", "I-MISC", "O"}, {"B-PER", "I-PER", "O"}};
  NerMetrics m = compute_ner_metrics(gold, pred);
  EXPECT_DOUBLE_EQ(m.overall.precision, 0.5);
  EXPECT_DOUBLE_EQ(m.overall.recall, 0.5);
  EXPECT_DOUBLE_EQ(m.overall.f1, 0.5);
  EXPECT_DOUBLE_EQ(m.accuracy, 0.8);  // positions 2 and 3 of sentence 1 differ: 8 of 10
  EXPECT_DOUBLE_EQ(m.per_type.at("MISC").f1, 0.0);
  EXPECT_DOUBLE_EQ(m.per_type.at("PER").f1, 1.0);
}

TEST(NerMetrics, IllFormedPredictionsAndEmptyPredictions) {
  // An I- after O is a chunk (conlleval): this prediction finds PER(1,2) exactly.
  NerMetrics m = compute_ner_metrics({{"O", "B-PER", "I-PER", "O"}}, {{"O", "I-PER", "I-PER", "O"}});
  EXPECT_DOUBLE_EQ(m.overall.f1, 1.0);
  EXPECT_DOUBLE_EQ(m.accuracy, 0.75);
  // A type switch inside a chunk: predicted PER(0,0) LOC(1,1) against gold PER(0,1): 0 correct of 2.
  m = compute_ner_metrics({{"B-PER", "I-PER"}}, {{"B-PER", "I-LOC"}});
  EXPECT_EQ(m.overall.predicted, 2);
  EXPECT_DOUBLE_EQ(m.overall.f1, 0.0);
  // Nothing predicted: precision 0/0 -> 0, recall 0/2, F1 0; accuracy 2 of 4.
  m = compute_ner_metrics({{"B-PER", "O", "O", "B-LOC"}}, {{"O", "O", "O", "O"}});
  EXPECT_EQ(m.overall.predicted, 0);
  EXPECT_EQ(m.overall.gold, 2);
  EXPECT_DOUBLE_EQ(m.overall.precision, 0.0);
  EXPECT_DOUBLE_EQ(m.overall.f1, 0.0);
  EXPECT_DOUBLE_EQ(m.accuracy, 0.5);
  // Sentences are separate: an I-PER starting sentence 2 does not continue sentence 1's PER.
  m = compute_ner_metrics({{"B-PER"}, {"B-PER"}}, {{"B-PER"}, {"I-PER"}});
  EXPECT_DOUBLE_EQ(m.overall.f1, 1.0);
  EXPECT_DOUBLE_EQ(m.accuracy, 0.5);
}

TEST(NerMetrics, PrecisionAndRecallDiffer) {
  // gold PER(0,1) LOC(3,3) ORG(5,5); predicted PER(0,1) LOC(3,4): 1 correct, 2 predicted, 3 gold.
  // P = 1/2, R = 1/3, F1 = 2 (1/6) / (5/6) = 2/5; tokens 4 and 5 differ: accuracy 4/6.
  NerMetrics m = compute_ner_metrics({{"B-PER", "I-PER", "O", "B-LOC", "O", "B-ORG"}},
                                     {{"B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O"}});
  EXPECT_EQ(m.overall.correct, 1);
  EXPECT_EQ(m.overall.predicted, 2);
  EXPECT_EQ(m.overall.gold, 3);
  EXPECT_DOUBLE_EQ(m.overall.precision, 0.5);
  EXPECT_DOUBLE_EQ(m.overall.recall, 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(m.overall.f1, 0.4);
  EXPECT_DOUBLE_EQ(m.accuracy, 4.0 / 6.0);
  EXPECT_DOUBLE_EQ(m.per_type.at("PER").f1, 1.0);
  EXPECT_EQ(m.per_type.at("LOC").predicted, 1);  // LOC(3,4) is not LOC(3,3): boundaries must match
  EXPECT_DOUBLE_EQ(m.per_type.at("LOC").f1, 0.0);
  EXPECT_EQ(m.per_type.at("ORG").gold, 1);
  EXPECT_DOUBLE_EQ(m.per_type.at("ORG").recall, 0.0);
}

TEST(NerMetrics, IllFormedIobesPredictions) {
  // seqeval's default-mode E/S rules on a prediction no IOBES writer would make:
  // I-PER after O starts PER, E-PER ends it: PER(0,1); E-LOC after O starts and the next tag ends it: LOC(3,3);
  // S-ORG is ORG(4,4); B-ORG after S starts another: ORG(5,5). Gold B-PER E-PER O S-LOC B-ORG E-ORG is PER(0,1)
  // LOC(3,3) ORG(4,5). Correct 2 (PER, LOC) of 4 predicted and 3 gold: P = 1/2, R = 2/3,
  // F1 = 2 (1/3) / (7/6) = 4/7. Equal tags at positions 1 and 2 only: accuracy 2/6.
  NerMetrics m = compute_ner_metrics({{"B-PER", "E-PER", "O", "S-LOC", "B-ORG", "E-ORG"}},
                                     {{"I-PER", "E-PER", "O", "E-LOC", "S-ORG", "B-ORG"}});
  EXPECT_EQ(m.overall.predicted, 4);
  EXPECT_EQ(m.overall.gold, 3);
  EXPECT_EQ(m.overall.correct, 2);
  EXPECT_DOUBLE_EQ(m.overall.precision, 0.5);
  EXPECT_DOUBLE_EQ(m.overall.recall, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(m.overall.f1, 4.0 / 7.0);
  EXPECT_DOUBLE_EQ(m.accuracy, 2.0 / 6.0);
  EXPECT_EQ(m.per_type.at("ORG").predicted, 2);
  EXPECT_DOUBLE_EQ(m.per_type.at("ORG").precision, 0.0);
  EXPECT_DOUBLE_EQ(m.per_type.at("LOC").f1, 1.0);
}

TEST(NerMetrics, SchemesGiveTheSameChunks) {
  // One gold chunk set written in IOB1, IOB2 and IOBES; the prediction (IOB2) gets LOC right and PER(0,1) cut
  // to PER(0,0): P = R = 1/2 in every scheme.
  const S iob2_gold = {"B-PER", "I-PER", "O", "B-LOC", "I-LOC"};
  const S iob2_pred = {"B-PER", "O", "O", "B-LOC", "I-LOC"};
  for (TagScheme s : {TagScheme::iob1, TagScheme::iob2, TagScheme::iobes}) {
    NerMetrics m = compute_ner_metrics({convert_tags(iob2_gold, s)}, {convert_tags(iob2_pred, s)});
    EXPECT_DOUBLE_EQ(m.overall.precision, 0.5) << tag_scheme_name(s);
    EXPECT_DOUBLE_EQ(m.overall.recall, 0.5) << tag_scheme_name(s);
  }
  // Token accuracy differs by scheme: IOBES writes the cut PER as S-PER vs gold B-PER E-PER (2 of 5 differ).
  EXPECT_DOUBLE_EQ(compute_ner_metrics({convert_tags(iob2_gold, TagScheme::iobes)},
                                       {convert_tags(iob2_pred, TagScheme::iobes)}).accuracy, 0.6);
  // POS tags: accuracy only.
  NerMetrics pos = compute_ner_metrics({{"NOUN", "VERB", "ADP"}}, {{"NOUN", "NOUN", "ADP"}}, false);
  EXPECT_DOUBLE_EQ(pos.accuracy, 2.0 / 3.0);
  EXPECT_TRUE(pos.per_type.empty());
  EXPECT_NE(error_of([] { compute_ner_metrics({{"O"}}, {{"O", "O"}}); }).find("sentence 0"), std::string::npos);
}

// ---- readers ----

TEST(NerReader, ConllColumnsBreaksAndEmptyTokens) {
  NerReadOptions o;
  // WNUT-style: TAB-separated, a lone TAB separates sentences, runs of blanks collapse, "#tag" is a token.
  const std::string text = "Hi\tO\n#yolo\tO\n\t\n\n \nParis\tB-location\n\tO\nrocks\tO\n";
  NerFile f = parse_ner_text(text, o, "wnut.conll");
  ASSERT_EQ(f.sentences.size(), 2u);
  EXPECT_EQ(f.sentences[0].words, (S{"Hi", "#yolo"}));
  EXPECT_EQ(f.sentences[1].words, (S{"Paris", "rocks"}));
  EXPECT_EQ(f.sentences[1].line_numbers, (std::vector<int64_t>{6, 8}));
  EXPECT_EQ(f.skipped_empty_tokens, 1);
  ASSERT_EQ(f.warnings.size(), 1u);
  EXPECT_NE(f.warnings[0].find("wnut.conll:7: empty token"), std::string::npos);
  // WikiGold: space-separated IOB1 with -DOCSTART-.
  o.scheme = TagScheme::iob1;
  f = parse_ner_text("-DOCSTART- O\n\nThe O\nEU I-ORG\n", o, "wiki.txt");
  ASSERT_EQ(f.sentences.size(), 1u);
  EXPECT_EQ(f.sentences[0].preamble, (S{"-DOCSTART- O"}));
  EXPECT_EQ(f.sentences[0].labels, (S{"O", "I-ORG"}));
}

TEST(NerReader, MalformedFilesNameFileAndLine) {
  NerReadOptions o;
  EXPECT_NE(error_of([&] { parse_ner_text("a\tO\nb\tX\tO\n", o, "f.conll"); }).find("f.conll:2: 3 columns"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse_ner_text("a\tO\nb\tE-PER\n", o, "f.conll"); }).find("f.conll:2: label 'E-PER'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse_ner_text("a\n", o, "f.conll"); }).find("f.conll:1: expected a token and a label"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse_ner_text("\n\n", o, "f.conll"); }).find("no sentences"), std::string::npos);
  o.format = NerFormat::conllu;
  EXPECT_NE(error_of([&] { parse_ner_text("1\tword\tx\n", o, "f.conllu"); }).find("f.conllu:1: a CoNLL-U line has 10"),
            std::string::npos);
}

// Files as editors save them: a UTF-8 byte-order mark (Windows Notepad, Excel's "CSV UTF-8") and whitespace after
// a TAB-separated label. The BOM is no part of the first token: with it, CoNLL-2003's "-DOCSTART-" line became a
// word (and a different column count), a UNER/CoNLL-U first "#" comment a malformed token line. A label's trailing
// spaces made a second entity type "PER " beside "PER" in training (Hugging Face's readers rstrip the label).
TEST(NerReader, ByteOrderMarkAndLabelWhitespace) {
  NerReadOptions o;
  NerFile f = parse_ner_text("\xEF\xBB\xBF-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n", o, "c.conll");
  ASSERT_EQ(f.sentences.size(), 1u);
  EXPECT_EQ(f.sentences[0].preamble, (S{"-DOCSTART- -X- -X- O"}));
  EXPECT_EQ(f.sentences[0].words, (S{"EU", "rejects"}));
  f = parse_ner_text("\xEF\xBB\xBF" "EU\tB-ORG\n", o, "c.conll");
  EXPECT_EQ(f.sentences[0].words, (S{"EU"}));
  EXPECT_EQ(f.sentences[0].lines, (S{"EU\tB-ORG"}));
  o.format = NerFormat::iob2;
  f = parse_ner_text("\xEF\xBB\xBF# sent_id = 1\n1\t北京\tB-ORG\t-\t-\n", o, "zh.iob2");
  EXPECT_EQ(f.sentences[0].words, (S{"北京"}));
  EXPECT_EQ(f.sentences[0].preamble, (S{"# sent_id = 1"}));
  o.format = NerFormat::conll;
  f = parse_ner_text("Paris\tB-LOC \nis\tO \r\n", o, "t.conll");
  EXPECT_EQ(f.sentences[0].labels, (S{"B-LOC", "O"}));
  EXPECT_EQ(LabelList::from_training(f.sentences, TagScheme::iob2, TagScheme::iob2).labels(),
            (S{"B-LOC", "I-LOC", "O"}));
  // A BOM anywhere else is text, and one inside a label is still an error naming file and line.
  EXPECT_NE(error_of([&] { parse_ner_text("a\tO\nb\t\xEF\xBB\xBF" "B-X\n", o, "f.conll"); }).find("f.conll:2: label"),
            std::string::npos);
}

TEST(NerReader, UnerAndConllu) {
  NerReadOptions o;
  o.format = parse_ner_format("auto", "zh.iob2");
  ASSERT_EQ(o.format, NerFormat::iob2);
  NerFile f = parse_ner_text("# sent_id = 1\n# text = 北京大学\n1\t北京\tB-ORG\t-\t-\n2\t大学\tI-ORG\t-\t-\n", o, "zh.iob2");
  ASSERT_EQ(f.sentences.size(), 1u);
  EXPECT_EQ(f.sentences[0].words, (S{"北京", "大学"}));
  EXPECT_EQ(f.sentences[0].labels, (S{"B-ORG", "I-ORG"}));
  EXPECT_EQ(f.sentences[0].preamble.size(), 2u);
  o.format = NerFormat::conllu;
  o.scheme = TagScheme::none;
  const std::string u =
      "# text = don't go\n1-2\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n1\tdo\tdo\tAUX\tVBP\t_\t3\taux\t_\t_\n"
      "2\tn't\tnot\tPART\tRB\t_\t3\tadvmod\t_\t_\n2.1\tx\tx\tX\tX\t_\t_\t_\t_\t_\n3\tgo\tgo\tVERB\tVB\t_\t0\troot\t_\t_\n";
  f = parse_ner_text(u, o, "ewt.conllu");
  EXPECT_EQ(f.sentences[0].words, (S{"do", "n't", "go"}));  // no multiword token, no empty node
  EXPECT_EQ(f.sentences[0].labels, (S{"AUX", "PART", "VERB"}));
  o.label_column = "xpos";
  EXPECT_EQ(parse_ner_text(u, o, "ewt.conllu").sentences[0].labels, (S{"VBP", "RB", "VB"}));
  // --label_column chooses a CoNLL-U column only: given for another format it would be ignored, so it stops the run.
  o.scheme = TagScheme::iob2;
  for (NerFormat fmt : {NerFormat::conll, NerFormat::iob2}) {
    o.format = fmt;
    const std::string err = error_of([&] { parse_ner_text("Oslo\tB-LOC\n", o, "wnut.conll"); });
    EXPECT_NE(err.find("wnut.conll: --label_column 'xpos' applies to CoNLL-U files only"), std::string::npos) << err;
  }
}

// ---- features ----

namespace {

text::FullTokenizer tiny_tokenizer() {
  return text::FullTokenizer(std::make_shared<const text::Vocab>(text::Vocab::from_tokens(
                                 {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "johan", "##son", "lives", "in",
                                  "oslo", "北", "京", "大", "学"},
                                 "ner-test")),
                             true);
}

NerSentence sentence(S words, S labels) {
  NerSentence s;
  s.words = std::move(words);
  s.labels = std::move(labels);
  for (size_t i = 0; i < s.words.size(); ++i) {
    s.lines.push_back(s.words[i] + "\t" + s.labels[i]);
    s.line_numbers.push_back(static_cast<int64_t>(i) + 1);
  }
  return s;
}

}  // namespace

TEST(NerFeatures, FirstSubTokenLabelsAndLabelAllTokens) {
  const auto tok = tiny_tokenizer();
  const std::vector<NerSentence> train = {sentence({"Johanson", "lives", "in", "Oslo"}, {"B-PER", "O", "O", "B-LOC"})};
  const LabelList labels = LabelList::from_training(train, TagScheme::iob2, TagScheme::iob2);
  EXPECT_EQ(labels.labels(), (S{"B-LOC", "B-PER", "I-LOC", "I-PER", "O"}));  // sorted, I- of every type
  NerFeatureOptions o;
  o.max_seq_length = 8;
  NerFeatures f = convert_sentences_to_features(train, tok, labels, o, "t");
  ASSERT_EQ(f.windows.size(), 1u);
  // [CLS] johan ##son lives in oslo [SEP] [PAD]
  EXPECT_EQ(f.windows[0].input_ids, (std::vector<int32_t>{2, 5, 6, 7, 8, 9, 3, 0}));
  EXPECT_EQ(f.windows[0].labels, (std::vector<int32_t>{-100, 1, -100, 4, 4, 0, -100, -100}));
  o.label_all_tokens = true;
  f = convert_sentences_to_features(train, tok, labels, o, "t");
  EXPECT_EQ(f.windows[0].labels, (std::vector<int32_t>{-100, 1, 3, 4, 4, 0, -100, -100}));  // ##son: I-PER
  // Chinese words become characters, labelled the same way.
  const std::vector<NerSentence> zh = {sentence({"北京", "大学"}, {"B-ORG", "I-ORG"})};
  const LabelList zl = LabelList::from_training(zh, TagScheme::iob2, TagScheme::iob2);  // B-ORG I-ORG O
  o.label_all_tokens = false;
  f = convert_sentences_to_features(zh, tok, zl, o, "zh");
  EXPECT_EQ(f.windows[0].labels, (std::vector<int32_t>{-100, 0, -100, 1, -100, -100, -100, -100}));
}

TEST(NerFeatures, UnseenLabelNamesFileAndLine) {
  const auto tok = tiny_tokenizer();
  const LabelList labels = LabelList::from_training({sentence({"oslo"}, {"B-LOC"})}, TagScheme::iob2, TagScheme::iob2);
  NerSentence dev = sentence({"in", "johan"}, {"O", "B-PER"});
  const std::string e = error_of([&] { convert_sentences_to_features({dev}, tok, labels, {}, "dev.conll"); });
  EXPECT_NE(e.find("dev.conll:2: label 'B-PER' is not one of the model's 3 labels"), std::string::npos) << e;
}

TEST(NerFeatures, DocStrideWindowsAndMaxContext) {
  const auto tok = tiny_tokenizer();
  // 5 words of one piece each; T = 5 holds 3 pieces; stride 1: windows [0,3) [1,4) [2,5).
  const std::vector<NerSentence> s = {sentence({"in", "oslo", "lives", "johan", "in"}, {"O", "B-LOC", "O", "B-PER", "O"})};
  const LabelList labels = LabelList::from_training(s, TagScheme::iob2, TagScheme::iob2);
  NerFeatureOptions o;
  o.max_seq_length = 5;
  o.doc_stride = 1;
  NerFeatures f = convert_sentences_to_features(s, tok, labels, o, "t");
  ASSERT_EQ(f.windows.size(), 3u);
  // Piece 2 ("lives"): min(left, right) context is 0 in windows 0 and 2, 1 in window 1 -> window 1, position 2.
  // Piece 0 only in window 0; piece 1: window 0 (left 1, right 1) beats window 1 (left 0); piece 3: window 2
  // (left 1, right 1) beats window 1 (right 0); piece 4 only in window 2.
  EXPECT_EQ(f.word_sources[0], (std::vector<std::pair<int32_t, int32_t>>{{0, 1}, {0, 2}, {1, 2}, {2, 2}, {2, 3}}));
  // Every word gets exactly one prediction, read from its source window.
  const int64_t C = labels.size();  // B-LOC B-PER I-LOC I-PER O
  std::vector<std::vector<float>> logits(3, std::vector<float>(static_cast<size_t>(5 * C), 0.f));
  auto vote = [&](int w, int pos, int label) { logits[static_cast<size_t>(w)][static_cast<size_t>(pos * C + label)] = 5.f; };
  vote(0, 1, 4);
  vote(0, 2, 0);
  vote(1, 2, 4);
  vote(2, 2, 1);
  vote(1, 3, 0);  // a vote for "johan" in window 1, which is not its source: ignored
  vote(2, 3, 4);
  const auto pred = predict_word_labels(f, labels, logits, o);
  EXPECT_EQ(pred[0], (S{"O", "B-LOC", "O", "B-PER", "O"}));
  // Back in the file's scheme: IOB1 writes single chunks with I-.
  o.file_scheme = TagScheme::iob1;
  EXPECT_EQ(predict_word_labels(f, labels, logits, o)[0], (S{"O", "I-LOC", "O", "I-PER", "O"}));
}

TEST(NerFeatures, WordsWithoutPiecesGetUnk) {
  const auto tok = tiny_tokenizer();
  // U+200B alone is deleted by BasicTokenizer (CASES.md C35): the word would have no piece.
  const std::vector<NerSentence> s = {sentence({"oslo", "\u200b"}, {"B-LOC", "O"})};
  const LabelList labels = LabelList::from_training(s, TagScheme::iob2, TagScheme::iob2);
  NerFeatures f = convert_sentences_to_features(s, tok, labels, {}, "t");
  EXPECT_EQ(f.words_without_pieces, 1);
  EXPECT_EQ(f.windows[0].input_ids[2], 1);  // [UNK]
  EXPECT_EQ(f.word_sources[0].size(), 2u);
}

TEST(NerPredictions, FileLayout) {
  std::vector<NerSentence> s = {sentence({"Oslo", "rocks"}, {"B-LOC", "O"})};
  s[0].preamble = {"# text = Oslo rocks"};
  s[0].lines[1] = "rocks O";  // a space-separated line gets a space
  EXPECT_EQ(format_predictions(s, {{"B-LOC", "B-PER"}}), "# text = Oslo rocks\nOslo\tB-LOC\tB-LOC\nrocks O B-PER\n\n");
}

// CoNLL-U's multiword-token lines ("1-2 don't") and empty nodes ("2.1") are no words, but they are input lines:
// predictions.txt keeps them in place (with "_" as their predicted column), so that it still holds every line of
// the input (EWT dev has 363 of them) and can be merged back into the treebank.
TEST(NerPredictions, ConlluMultiwordAndEmptyNodeLinesKept) {
  NerReadOptions o;
  o.format = NerFormat::conllu;
  o.scheme = TagScheme::none;
  const std::string u =
      "# text = don't go\n1-2\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n1\tdo\tdo\tAUX\tVBP\t_\t3\taux\t_\t_\n"
      "2\tn't\tnot\tPART\tRB\t_\t3\tadvmod\t_\t_\n2.1\tx\tx\tX\tX\t_\t_\t_\t_\t_\n3\tgo\tgo\tVERB\tVB\t_\t0\troot\t_\t_\n"
      "3.1\ty\ty\tX\tX\t_\t_\t_\t_\t_\n";
  NerFile f = parse_ner_text(u, o, "ewt.conllu");
  ASSERT_EQ(f.sentences.size(), 1u);
  EXPECT_EQ(f.sentences[0].words, (S{"do", "n't", "go"}));
  EXPECT_EQ(format_predictions(f.sentences, {{"AUX", "PART", "VERB"}}),
            "# text = don't go\n"
            "1-2\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\t_\n"
            "1\tdo\tdo\tAUX\tVBP\t_\t3\taux\t_\t_\tAUX\n"
            "2\tn't\tnot\tPART\tRB\t_\t3\tadvmod\t_\t_\tPART\n"
            "2.1\tx\tx\tX\tX\t_\t_\t_\t_\t_\t_\n"
            "3\tgo\tgo\tVERB\tVB\t_\t0\troot\t_\t_\tVERB\n"
            "3.1\ty\ty\tX\tX\t_\t_\t_\t_\t_\t_\n\n");
}

// ---- model and the whole command ----

#include <filesystem>
#include <fstream>

#include "bertrain/io/config.h"
#include "test_util.h"

TEST(NerModel, HuggingFaceNamesAndLossOverLabelledPositions) {
  BertConfig c = bertrain::test::tiny_bert_config(20, 8, 1, 2, 16, 16);
  c.num_labels = 3;
  c.hidden_dropout_prob = 0;
  c.attention_probs_dropout_prob = 0;
  Rng rng(1, 0);
  BertForTokenClassification m(c, rng);
  std::map<std::string, Shape> shapes;
  for (const auto& [n, v] : m.named_parameters()) shapes[n] = v.shape();
  EXPECT_EQ(shapes.at("classifier.weight"), (Shape{3, 8}));
  EXPECT_EQ(shapes.at("classifier.bias"), (Shape{3}));
  EXPECT_EQ(shapes.count("bert.pooler.dense.weight"), 0u);  // no pooler, as Hugging Face
  Tensor ids = Tensor::empty({1, 4}, DType::i32), labels = Tensor::empty({1, 4}, DType::i32);
  const int32_t id[4] = {2, 5, 6, 3}, lab[4] = {-100, 1, 2, -100};
  std::copy(id, id + 4, ids.data<int32_t>());
  std::copy(lab, lab + 4, labels.data<int32_t>());
  Variable logits = m.forward(BertInputs{ids, Tensor(), Tensor(), 0, 0});
  ASSERT_EQ(logits.shape(), (Shape{1, 4, 3}));
  // Mean cross-entropy over positions 1 and 2 only, by hand from the logits.
  const float* l = logits.value().data<float>();
  double want = 0;
  for (int p : {1, 2}) {
    const float* row = l + p * 3;
    const double mx = std::max({row[0], row[1], row[2]});
    const double lse = mx + std::log(std::exp(row[0] - mx) + std::exp(row[1] - mx) + std::exp(row[2] - mx));
    want += lse - row[lab[p]];
  }
  EXPECT_NEAR(m.loss(logits, labels).item(), want / 2, 1e-5);
  labels.data<int32_t>()[1] = 3;
  EXPECT_THROW(m.loss(logits, labels), Error);
}

TEST(RunNer, TrainEvaluatePredictAndLabelsByName) {
  namespace fs = std::filesystem;
  const fs::path dir = bertrain::test::temp_dir("run_ner");
  const std::string vocab = (dir / "vocab.txt").string();
  bertrain::test::write_file(vocab, "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\njohan\n##son\nlives\nin\noslo\n");
  BertConfig c = bertrain::test::tiny_bert_config(10, 8, 1, 2, 16, 32);
  save_bert_config((dir / "config.json").string(), c);
  std::string train;
  for (int i = 0; i < 8; ++i) train += "Johanson\tB-PER\nlives\tO\nin\tO\nOslo\tB-LOC\n\n";
  bertrain::test::write_file(dir / "train.conll", train);
  bertrain::test::write_file(dir / "dev.conll", "Oslo\tB-LOC\nlives\tO\n\n");
  RunNerOptions o;
  o.train_file = (dir / "train.conll").string();
  o.validation_file = o.test_file = (dir / "dev.conll").string();
  o.bert_config_file = (dir / "config.json").string();
  o.vocab_file = vocab;
  o.max_seq_length = 16;
  o.do_train = o.do_eval = o.do_predict = true;
  o.finetune.output_dir = (dir / "out").string();
  o.finetune.train_batch_size = 4;
  o.finetune.learning_rate = 1e-2;
  o.finetune.num_train_epochs = 10;
  o.finetune.progress = false;
  const RunNerResult r = run_ner(o);
  EXPECT_EQ(r.training.global_step, 20);
  EXPECT_TRUE(r.eval_metrics.count("eval_f1"));
  EXPECT_TRUE(fs::exists(dir / "out" / "eval_results.json"));
  EXPECT_TRUE(fs::exists(dir / "out" / "test_predictions.txt"));
  // The tiny model learns the two words (F1 1 from step 10 of 20 on, at any thread count): predictions.txt holds
  // each input line and its predicted label, then a blank line.
  EXPECT_DOUBLE_EQ(r.eval_metrics.at("eval_f1"), 1.0);
  EXPECT_EQ(bertrain::test::read_file((dir / "out" / "predictions.txt").string()), "Oslo\tB-LOC\tB-LOC\nlives\tO\tO\n\n");
  // The checkpoint names its outputs (C43) ...
  const BertConfig saved = load_bert_config((dir / "out" / "best" / "config.json").string());
  EXPECT_EQ(saved.id2label, (S{"B-LOC", "B-PER", "I-LOC", "I-PER", "O"}));
  // ... so evaluating it needs no training file, and a dev label it does not know is one line naming file and line.
  RunNerOptions e = o;
  e.do_train = e.do_predict = false;
  e.train_file.clear();
  e.bert_config_file.clear();
  e.init_checkpoint = (dir / "out" / "best").string();
  e.finetune.output_dir = (dir / "eval").string();
  const RunNerResult re = run_ner(e);
  EXPECT_DOUBLE_EQ(re.eval_metrics.at("eval_f1"), r.eval_metrics.at("eval_f1"));
  bertrain::test::write_file(dir / "bad.conll", "Oslo\tB-LOC\nlives\tB-ORG\n");
  e.validation_file = (dir / "bad.conll").string();
  const std::string err = error_of([&] { run_ner(e); });
  EXPECT_NE(err.find("bad.conll:2: label 'B-ORG' is not one of the model's 5 labels"), std::string::npos) << err;
  // The checkpoint's labels are IOB2: asking for IOBES stops the run instead of decoding its outputs wrongly.
  e.validation_file = o.validation_file;
  e.model_tag_scheme = "iobes";
  const std::string contra = error_of([&] { run_ner(e); });
  EXPECT_NE(contra.find("--model_tag_scheme iobes contradicts the checkpoint: its id2label is in iob2"),
            std::string::npos) << contra;
  // Trained in IOBES, the checkpoint's labels say so, and its evaluation without the flag (auto) is the one in IOBES.
  // (In IOB2 the dev file's B-LOC would stay B-LOC, not the model's S-LOC: a higher loss, a wrong target to train on.)
  RunNerOptions b = o;
  b.do_predict = false;
  b.model_tag_scheme = "iobes";
  b.finetune.output_dir = (dir / "out_iobes").string();
  const RunNerResult rb = run_ner(b);
  EXPECT_DOUBLE_EQ(rb.training.best_metric, 1.0);  // best/ holds a model that finds the one dev entity
  // --resume without the flag continues in the resumed checkpoint's scheme (not iob2's 5 outputs against its 9).
  RunNerOptions rs = b;
  rs.model_tag_scheme = "AUTO";  // any case
  rs.finetune.resume = true;
  rs.finetune.num_train_epochs = 11;
  EXPECT_EQ(run_ner(rs).training.global_step, 22);
  rs.model_tag_scheme = "iob1";
  EXPECT_NE(error_of([&] { run_ner(rs); }).find("--model_tag_scheme must be auto, iob2 (also bio) or iobes"),
            std::string::npos);
  const BertConfig saved_b = load_bert_config((dir / "out_iobes" / "best" / "config.json").string());
  EXPECT_EQ(saved_b.id2label,
            (S{"B-LOC", "B-PER", "E-LOC", "E-PER", "I-LOC", "I-PER", "O", "S-LOC", "S-PER"}));
  e.init_checkpoint = (dir / "out_iobes" / "best").string();
  e.finetune.output_dir = (dir / "eval_iobes").string();
  const auto want = run_ner(e).eval_metrics;  // still "iobes"
  e.model_tag_scheme = "auto";
  const auto got = run_ner(e).eval_metrics;
  EXPECT_DOUBLE_EQ(got.at("eval_f1"), 1.0);
  EXPECT_DOUBLE_EQ(got.at("eval_loss"), want.at("eval_loss"));
  e.model_tag_scheme = "iob2";
  const std::string contra2 = error_of([&] { run_ner(e); });
  EXPECT_NE(contra2.find("--model_tag_scheme iob2 contradicts the checkpoint: its id2label is in iobes"),
            std::string::npos) << contra2;
  fs::remove_all(dir);
}

// run-ner's evaluation in length-sorted, dynamically padded batches gives the predictions and loss of
// batches padded to max_seq_length in file order.
TEST(NerModel, DynamicPaddingEvaluationEqualsPadded) {
  BertConfig c = bertrain::test::tiny_bert_config(20, 16, 2, 2, 32, 32);
  const auto tok = tiny_tokenizer();
  std::vector<NerSentence> sents;
  const S words = {"Johanson", "lives", "in", "Oslo", "in", "Oslo", "lives"};
  const S tags = {"B-PER", "O", "O", "B-LOC", "O", "B-LOC", "O"};
  for (size_t n : {7u, 1u, 3u, 5u, 2u, 7u, 4u})
    sents.push_back(sentence(S(words.begin(), words.begin() + n), S(tags.begin(), tags.begin() + n)));
  const LabelList labels = LabelList::from_training(sents, TagScheme::iob2, TagScheme::iob2);
  c.num_labels = static_cast<int>(labels.labels().size());
  NerFeatureOptions o;
  o.max_seq_length = 24;
  const NerFeatures f = convert_sentences_to_features(sents, tok, labels, o, "t");
  Rng rng(3, 0);
  BertForTokenClassification m(c, rng);
  m.bert().set_unpad(Unpad::never);
  const NerEvaluation ref = evaluate_ner(m, sents, f, labels, o, 3, tasks::PaddingOptions{true, 1});
  for (Unpad unpad : {Unpad::never, Unpad::always}) {  // the padded encoder, and the unpadded one
    m.bert().set_unpad(unpad);
    const NerEvaluation dyn = evaluate_ner(m, sents, f, labels, o, 3, tasks::PaddingOptions{false, 8});
    EXPECT_EQ(dyn.predictions, ref.predictions);
    EXPECT_NEAR(dyn.loss, ref.loss, 1e-5 * std::fabs(ref.loss));
  }
}
