// squad_test.cpp: SQuAD reading, features (CASES.md C25: doc_stride windows and max context), predictions
// (C26: get_final_text), the official v1.1/v2.0 metrics on hand-computed cases, and `bertrain squad-evaluate`
// end to end on the shared dev files.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "bertrain/core/error.h"
#include "bertrain/tasks/squad/squad.h"
#include "bertrain/tasks/squad/evaluate.h"
#include "bertrain/text/tokenizer.h"
#include "test_util.h"

using namespace bertrain;
using namespace bertrain::text;
using namespace bertrain::squad;
namespace fs = std::filesystem;
using Strings = std::vector<std::string>;

namespace {

using bertrain::test::read_file;
using bertrain::test::split_lines;
using bertrain::test::temp_dir;
using bertrain::test::write_file;

const std::string kSourceDir = BERTRAIN_SOURCE_DIR;
const std::string kBinaryDir = BERTRAIN_BINARY_DIR;
const std::string kTestData = BERTRAIN_TEST_DATA_DIR;
const std::string kSharedData = BERTRAIN_SHARED_DATA_DIR;
const std::string kDevV1 = kSharedData + "/squad_v1.1/dev-v1.1-shared.json";
const std::string kDevV2 = kSharedData + "/squad_v2.0/dev-v2.0-shared-reconstructed.json";
const std::string kUncasedVocab = kSourceDir + "/data/vocab/bert-base-uncased-vocab.txt";

template <class F>
void expect_error(F&& fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected bertrain::Error";
  } catch (const Error& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << " lacks " << p;
  }
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string run(const std::string& cmd, int* status) {
  FILE* p = ::popen(cmd.c_str(), "r");
  EXPECT_NE(p, nullptr) << cmd;
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = ::pclose(p);
  *status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  return out;
}

// A vocab with the special tokens and the given words (whole words only: every test word is in it).
FullTokenizer word_tokenizer(const Strings& words) {
  Strings tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  std::set<std::string> seen(tokens.begin(), tokens.end());
  for (const auto& w : words)
    if (seen.insert(w).second) tokens.push_back(w);
  return FullTokenizer(std::make_shared<const Vocab>(Vocab::from_tokens(tokens, "squad-test")), true);
}

Strings split_words(const std::string& s) {
  Strings out;
  std::istringstream in(s);
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

// One-paragraph SQuAD JSON with one question.
std::string one_question_json(const std::string& context, const std::string& id, const std::string& question,
                              const std::string& answers_json, const std::string& extra = "") {
  return R"({"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": )" + context +
         R"(, "qas": [{"id": ")" + id + R"(", "question": ")" + question + R"(", "answers": )" + answers_json + extra +
         "}]}]}]}";
}

const std::string kC25Doc = "the man went to the store and bought a gallon of milk";

}  // namespace

// ---- C25: doc_stride windows and max context ----

TEST(SquadWindows, C25AWindowsAndMaxContext) {
  const auto spans = make_doc_spans(12, 5, 3);
  EXPECT_EQ(spans, (std::vector<DocSpan>{{0, 5}, {3, 5}, {6, 5}, {9, 3}}));
  EXPECT_EQ(max_context_spans(spans, 12), (std::vector<int32_t>{0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3}));
}

TEST(SquadWindows, C25AThroughFeatures) {
  // Query "q" is one piece, so max_tokens_for_doc = 9 - 1 - 3 = 5.
  const FullTokenizer tok = word_tokenizer(split_words(kC25Doc + " q"));
  auto read = parse_squad_examples(one_question_json("\"" + kC25Doc + "\"", "c25a", "q", "[]"), false, false);
  ASSERT_EQ(read.examples.size(), 1u);
  SquadFeatureOptions o;
  o.max_seq_length = 9;
  o.doc_stride = 3;
  o.max_query_length = 4;  // the reference requires max_seq_length > max_query_length + 3
  const auto feats = convert_examples_to_features(read.examples, tok, o);
  ASSERT_EQ(feats.size(), 4u);
  const std::vector<int> starts = {0, 3, 6, 9}, lens = {5, 5, 5, 3};
  const std::vector<int> max_ctx = {0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3};
  std::vector<int> times_max(12, 0);
  const Strings words = split_words(kC25Doc);
  for (int s = 0; s < 4; ++s) {
    const SquadFeature& f = feats[s];
    EXPECT_EQ(f.unique_id, 1000000000 + s);
    EXPECT_EQ(f.doc_span_index, s);
    ASSERT_EQ(f.num_tokens(), 3 + lens[s] + 1);
    Strings expect_tokens = {"[CLS]", "q", "[SEP]"};
    for (int i = 0; i < lens[s]; ++i) expect_tokens.push_back(words[starts[s] + i]);
    expect_tokens.push_back("[SEP]");
    EXPECT_EQ(f.tokens, expect_tokens);
    EXPECT_EQ(tok.convert_ids_to_tokens(std::vector<int32_t>(f.input_ids.begin(), f.input_ids.begin() + f.num_tokens())),
              expect_tokens);
    ASSERT_EQ(f.input_ids.size(), 9u);
    for (int p = 0; p < 9; ++p) {
      EXPECT_EQ(f.input_mask[p], p < f.num_tokens() ? 1 : 0);
      EXPECT_EQ(f.segment_ids[p], (p >= 3 && p < f.num_tokens()) ? 1 : 0) << "span " << s << " position " << p;
      if (p >= f.num_tokens()) {
        EXPECT_EQ(f.input_ids[p], 0);
      }
    }
    for (int p = 0; p < f.num_tokens(); ++p) {
      const bool doc = p >= 3 && p < 3 + lens[s];
      EXPECT_EQ(f.token_to_orig_map[p], doc ? starts[s] + p - 3 : -1);
      if (doc) {
        const int token = starts[s] + p - 3;
        EXPECT_EQ(f.token_is_max_context[p] != 0, max_ctx[token] == s) << "token " << token << " span " << s;
        times_max[token] += f.token_is_max_context[p];
      } else {
        EXPECT_EQ(f.token_is_max_context[p], 0);
      }
    }
  }
  // Invariant: every token is max-context in exactly one window ("bought", token 7, in window 2).
  EXPECT_EQ(times_max, std::vector<int>(12, 1));
  EXPECT_EQ(feats[2].token_is_max_context[3 + 7 - 6], 1);
}

TEST(SquadWindows, C25BNoTokenSkipped) {
  EXPECT_EQ(make_doc_spans(157, 114, 128), (std::vector<DocSpan>{{0, 114}, {114, 43}}));
  Strings doc_words, query_words;
  // std::string("w").append(...), not "w" + ...: GCC 12 reports a false -Wrestrict on operator+ (bug 105651).
  for (int i = 0; i < 157; ++i) doc_words.push_back(std::string("w").append(std::to_string(i)));
  for (int i = 0; i < 11; ++i) query_words.push_back(std::string("q").append(std::to_string(i)));
  Strings all = doc_words;
  all.insert(all.end(), query_words.begin(), query_words.end());
  const FullTokenizer tok = word_tokenizer(all);
  std::string doc, query;
  for (const auto& w : doc_words) doc += (doc.empty() ? "" : " ") + w;
  for (const auto& w : query_words) query += (query.empty() ? "" : " ") + w;
  auto read = parse_squad_examples(one_question_json("\"" + doc + "\"", "c25b", query, "[]"), false, false);
  SquadFeatureOptions o;
  o.max_seq_length = 128;
  o.doc_stride = 128;
  o.max_query_length = 64;
  const auto feats = convert_examples_to_features(read.examples, tok, o);
  ASSERT_EQ(feats.size(), 2u);
  EXPECT_EQ(feats[0].num_tokens(), 128);          // 1 + 11 + 1 + 114 + 1
  EXPECT_EQ(feats[1].num_tokens(), 13 + 43 + 1);  // the rest, nothing skipped
  EXPECT_EQ(feats[0].token_to_orig_map[13], 0);
  EXPECT_EQ(feats[0].token_to_orig_map[126], 113);
  EXPECT_EQ(feats[1].token_to_orig_map[13], 114);
  EXPECT_EQ(feats[1].token_to_orig_map[13 + 42], 156);
}

TEST(SquadWindows, C25InvariantsOverManyShapes) {
  for (int32_t n = 1; n <= 40; ++n)
    for (int32_t max_doc = 1; max_doc <= 12; ++max_doc)
      for (int32_t stride = 1; stride <= 14; ++stride) {
        const auto spans = make_doc_spans(n, max_doc, stride);
        std::vector<int> covered(n, 0);
        for (const auto& s : spans) {
          ASSERT_GE(s.length, 1);
          ASSERT_LE(s.length, max_doc);
          for (int32_t t = s.start; t < s.start + s.length; ++t) covered[t] = 1;
        }
        EXPECT_EQ(spans.back().start + spans.back().length, n);
        for (int32_t t = 0; t < n; ++t) EXPECT_EQ(covered[t], 1) << n << " " << max_doc << " " << stride << " token " << t;
        const auto best = max_context_spans(spans, n);
        for (int32_t t = 0; t < n; ++t) {
          ASSERT_GE(best[t], 0);
          const auto& s = spans[best[t]];
          EXPECT_TRUE(t >= s.start && t < s.start + s.length);
        }
      }
  expect_error([] { make_doc_spans(10, 0, 3); }, {"max_tokens_for_doc"});
  expect_error([] { make_doc_spans(10, 5, 0); }, {"doc_stride"});
  EXPECT_TRUE(make_doc_spans(0, 5, 3).empty());
}

TEST(SquadWindows, C25TrainingWindowWithoutTheAnswerGetsZero) {
  const FullTokenizer tok = word_tokenizer(split_words(kC25Doc + " q"));
  // "milk" is word 11, at character 49 of the context.
  ASSERT_EQ(kC25Doc.find("milk"), 49u);
  auto read = parse_squad_examples(
      one_question_json("\"" + kC25Doc + "\"", "c25t", "q", R"([{"text": "milk", "answer_start": 49}])"), true, false);
  ASSERT_EQ(read.examples.size(), 1u);
  EXPECT_EQ(read.examples[0].start_position, 11);
  EXPECT_EQ(read.examples[0].end_position, 11);
  SquadFeatureOptions o;
  o.max_seq_length = 9;
  o.doc_stride = 3;
  o.max_query_length = 4;
  o.is_training = true;
  const auto feats = convert_examples_to_features(read.examples, tok, o);
  ASSERT_EQ(feats.size(), 4u);
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(feats[s].start_position, 0) << s;
    EXPECT_EQ(feats[s].end_position, 0) << s;
    EXPECT_TRUE(feats[s].tokens.empty());  // training features carry no token strings
  }
  // Window 3 holds tokens 9..11 at positions 3..5: "milk" is at 3 + (11 - 9) = 5.
  EXPECT_EQ(feats[3].start_position, 5);
  EXPECT_EQ(feats[3].end_position, 5);

  // v2: an impossible question gets 0, 0 in every window.
  auto read2 = parse_squad_examples(
      one_question_json("\"" + kC25Doc + "\"", "c25i", "q", "[]", R"(, "is_impossible": true)"), true, true);
  ASSERT_EQ(read2.examples.size(), 1u);
  EXPECT_TRUE(read2.examples[0].is_impossible);
  EXPECT_EQ(read2.num_impossible, 1);
  for (const auto& f : convert_examples_to_features(read2.examples, tok, o)) {
    EXPECT_EQ(f.start_position, 0);
    EXPECT_EQ(f.end_position, 0);
    EXPECT_TRUE(f.is_impossible);
  }
}

TEST(SquadFeatures, ImproveAnswerSpanTightensOntoSubTokens) {
  // The reference's own example: the whitespace word is "(1895-1943)." but the answer is "1895".
  const FullTokenizer tok = FullTokenizer::from_vocab_file(kUncasedVocab, true);
  const std::string context = "The leader was John Smith (1895-1943).";
  auto read = parse_squad_examples(
      one_question_json("\"" + context + "\"", "imp", "What year was John Smith born?",
                        R"([{"text": "1895", "answer_start": 27}])"),
      true, false);
  ASSERT_EQ(read.examples.size(), 1u);
  EXPECT_EQ(read.examples[0].start_position, 5);  // the word "(1895-1943)."
  EXPECT_EQ(read.examples[0].end_position, 5);
  SquadFeatureOptions o;
  o.max_seq_length = 64;
  o.max_query_length = 32;
  o.is_training = true;
  const auto feats = convert_examples_to_features(read.examples, tok, o);
  ASSERT_EQ(feats.size(), 1u);
  const auto ids = feats[0].input_ids;
  EXPECT_EQ(feats[0].start_position, feats[0].end_position);
  EXPECT_EQ(tok.convert_ids_to_tokens({ids[feats[0].start_position]})[0], "1895");
  EXPECT_EQ(tok.convert_ids_to_tokens({ids[feats[0].start_position - 1]})[0], "(");
  // The query is truncated to max_query_length pieces.
  o.max_query_length = 3;
  const auto short_q = convert_examples_to_features(read.examples, tok, o);
  EXPECT_EQ(tok.convert_ids_to_tokens({short_q[0].input_ids[4]})[0], "[SEP]");
  EXPECT_EQ(short_q[0].start_position, feats[0].start_position - (feats[0].num_tokens() - short_q[0].num_tokens()));
}

TEST(SquadFeatures, OptionsAreValidated) {
  const FullTokenizer tok = word_tokenizer({"a"});
  SquadFeatureOptions o;
  o.max_seq_length = 67;
  o.max_query_length = 64;
  expect_error([&] { convert_examples_to_features({}, tok, o); }, {"max_seq_length (67)", "max_query_length (64) + 3"});
  o.max_seq_length = 384;
  o.doc_stride = 0;
  expect_error([&] { o.validate(); }, {"doc_stride"});
}

TEST(SquadFeatures, BatchOfI32Tensors) {
  const FullTokenizer tok = word_tokenizer(split_words(kC25Doc + " q"));
  auto read = parse_squad_examples(
      one_question_json("\"" + kC25Doc + "\"", "b", "q", R"([{"text": "milk", "answer_start": 49}])"), true, false);
  SquadFeatureOptions o;
  o.max_seq_length = 9;
  o.doc_stride = 3;
  o.max_query_length = 4;
  o.is_training = true;
  const auto feats = convert_examples_to_features(read.examples, tok, o);
  const SquadBatch b = make_squad_batch(feats, {3, 1});
  EXPECT_EQ(b.input_ids.shape(), Shape({2, 9}));
  EXPECT_EQ(b.input_ids.dtype(), DType::i32);
  EXPECT_EQ(b.start_positions.shape(), Shape({2}));
  for (int p = 0; p < 9; ++p) {
    EXPECT_EQ(b.input_ids.data<int32_t>()[p], feats[3].input_ids[p]);
    EXPECT_EQ(b.input_mask.data<int32_t>()[9 + p], feats[1].input_mask[p]);
    EXPECT_EQ(b.segment_ids.data<int32_t>()[p], feats[3].segment_ids[p]);
  }
  EXPECT_EQ(b.start_positions.data<int32_t>()[0], 5);
  EXPECT_EQ(b.end_positions.data<int32_t>()[1], 0);
  EXPECT_EQ(b.feature_indices, (std::vector<size_t>{3, 1}));
  EXPECT_EQ(make_squad_batch(feats, 1, 4).input_ids.shape(), Shape({3, 9}));
  expect_error([&] { make_squad_batch(feats, {7}); }, {"index 7"});
}

// ---- reading ----

TEST(SquadRead, CharacterOffsetsAreCodePoints) {
  // "Café" and "Zoë" are 4 and 3 code points but 5 and 4 bytes; "home" starts at code point 18.
  const std::string context = "Café\u202FZoë\u00A0went home";
  // Words: "Café" (U+202F splits), "Zoë\u00A0went" (U+00A0 does not), "home".
  auto read = parse_squad_examples(
      one_question_json("\"" + context + "\"", "cp", "Where?", R"([{"text": "home", "answer_start": 14}])"), true,
      false);
  ASSERT_EQ(read.examples.size(), 1u);
  const auto& ex = read.examples[0];
  EXPECT_EQ(*ex.doc_tokens, (Strings{"Café", "Zoë\u00A0went", "home"}));
  EXPECT_EQ(ex.start_position, 2);
  EXPECT_EQ(ex.end_position, 2);
  EXPECT_EQ(ex.orig_answer_text, "home");
  Strings words;
  std::vector<int32_t> c2w;
  squad_split_paragraph("  ab c", words, c2w);
  EXPECT_EQ(words, (Strings{"ab", "c"}));
  EXPECT_EQ(c2w, (std::vector<int32_t>{-1, -1, 0, 0, 0, 1}));
}

TEST(SquadRead, AnswerStartAtAnEarlierCopyIsAValidSpan) {
  // As ~4% of the rebuilt train file: answer_start points at the first of two copies of the answer text.
  const std::string context = "The cat sat. The cat ran.";
  auto read = parse_squad_examples(
      one_question_json("\"" + context + "\"", "copy", "Who ran?", R"([{"text": "The cat", "answer_start": 0}])"),
      true, false);
  ASSERT_EQ(read.examples.size(), 1u);
  EXPECT_EQ(read.num_skipped, 0);
  EXPECT_EQ(read.examples[0].start_position, 0);
  EXPECT_EQ(read.examples[0].end_position, 1);
  const FullTokenizer tok = word_tokenizer({"the", "cat", "sat", "ran", ".", "who", "?"});
  SquadFeatureOptions o;
  o.max_seq_length = 32;
  o.max_query_length = 16;
  o.is_training = true;
  const auto feats = convert_examples_to_features(read.examples, tok, o);
  ASSERT_EQ(feats.size(), 1u);
  // [CLS] who ran ? [SEP] the cat sat . the cat ran . [SEP]: the first copy is at 5..6.
  EXPECT_EQ(feats[0].start_position, 5);
  EXPECT_EQ(feats[0].end_position, 6);
}

TEST(SquadRead, UnrecoverableAnswersAreSkippedAndCounted) {
  // "help" is not inside the word "hello": the reference logs "Could not find answer" and skips it.
  auto read = parse_squad_examples(
      one_question_json("\"hello world\"", "skip1", "q", R"([{"text": "help", "answer_start": 0}])"), true, false);
  EXPECT_EQ(read.examples.size(), 0u);
  EXPECT_EQ(read.num_questions, 1);
  EXPECT_EQ(read.num_skipped, 1);
  EXPECT_EQ(read.skipped_ids, Strings{"skip1"});
  // A sub-word answer is recoverable ("Japan" inside "Japanese"); whitespace in the answer is collapsed.
  auto ok = parse_squad_examples(
      one_question_json("\"The Japanese  industry\"", "ok", "q", R"([{"text": "Japanese\nindustry", "answer_start": 4}])"),
      true, false);
  EXPECT_EQ(ok.examples.size(), 1u);
  EXPECT_EQ(ok.num_skipped, 0);
  // Prediction mode never skips.
  EXPECT_EQ(parse_squad_examples(one_question_json("\"hello world\"", "skip1", "q",
                                                   R"([{"text": "help", "answer_start": 0}])"),
                                 false, false)
                .examples.size(),
            1u);
}

TEST(SquadRead, ErrorsNameTheQuestionOrTheByteOffset) {
  // answer_start past the end of the context (11 code points) names the question id.
  expect_error([] {
    parse_squad_examples(one_question_json("\"hello world\"", "q-past-end", "q", R"([{"text": "world", "answer_start": 7}])"),
                         true, false, "f.json");
  }, {"f.json", "q-past-end", "answer_start 7", "past the end"});
  expect_error([] {
    parse_squad_examples(one_question_json("\"hello world\"", "q-neg", "q", R"([{"text": "x", "answer_start": -1}])"),
                         false, false);
  }, {"q-neg", "answer_start -1 is negative"});
  // Missing fields.
  expect_error([] {
    parse_squad_examples(R"({"data": [{"paragraphs": [{"context": "a b", "qas": [{"id": "q-no-question", "answers": []}]}]}]})",
                         false, false);
  }, {"q-no-question", "missing field \"question\""});
  expect_error([] {
    parse_squad_examples(R"({"data": [{"paragraphs": [{"context": "a b", "qas": [{"question": "x", "answers": []}]}]}]})",
                         false, false);
  }, {"article 0, paragraph 0, question 0", "missing field \"id\""});
  expect_error([] {
    parse_squad_examples(R"({"data": [{"paragraphs": [{"qas": []}]}]})", false, false);
  }, {"missing field \"context\""});
  expect_error([] { parse_squad_examples(R"({"version": "1.1"})", false, false); }, {"missing field \"data\""});
  expect_error([] {
    parse_squad_examples(one_question_json("\"a b\"", "q-v2", "q", "[]"), true, true);
  }, {"q-v2", "missing field \"is_impossible\""});
  expect_error([] {
    parse_squad_examples(one_question_json("\"a b\"", "q-type", "q", R"([{"text": "a", "answer_start": "0"}])"), true,
                         false);
  }, {"q-type", "answer_start", "integer"});
  // Training needs exactly one answer for a possible question.
  expect_error([] {
    parse_squad_examples(one_question_json("\"a b\"", "q-two", "q",
                                           R"([{"text": "a", "answer_start": 0}, {"text": "b", "answer_start": 2}])"),
                         true, false);
  }, {"q-two", "exactly 1 answer"});
  // Invalid JSON: `{"data": [}` fails at the '}', byte offset 10.
  expect_error([] { parse_squad_examples(R"({"data": [})", false, false, "bad.json"); },
               {"bad.json", "invalid JSON at byte offset 10"});
  expect_error([] { read_squad_examples("/nonexistent/squad.json", false, false); }, {"/nonexistent/squad.json"});
}

TEST(SquadRead, SampleFiles) {
  auto v1 = read_squad_examples(kTestData + "/squad/sample-v1.1.json", false, false);
  EXPECT_EQ(v1.version, "1.1");
  ASSERT_EQ(v1.examples.size(), 5u);
  EXPECT_EQ(v1.examples[0].qas_id, "56be4db0acb8001400a502ec");
  EXPECT_EQ(v1.examples[0].doc_tokens, v1.examples[4].doc_tokens);  // one paragraph, shared
  EXPECT_EQ(v1.examples[0].doc_tokens->front(), "Super");
  auto v2 = read_squad_examples(kTestData + "/squad/sample-v2.0.json", false, true);
  EXPECT_EQ(v2.version, "v2.0");
  EXPECT_EQ(v2.num_questions, 9);
  EXPECT_EQ(v2.examples.size(), 9u);
  EXPECT_EQ(v2.examples[5].qas_id, "5ad39d53604f3c001a3fe8d1");
  // Training mode: the 5 answerable questions have 4 answers each, which training rejects.
  expect_error([] { read_squad_examples(kTestData + "/squad/sample-v2.0.json", true, true); },
               {"56ddde6b9a695914005b9628", "exactly 1 answer"});
}

TEST(SquadRead, SharedDevFiles) {
  if (!fs::exists(kDevV1) || !fs::exists(kDevV2)) GTEST_SKIP() << "shared SQuAD dev files not found under " << kSharedData;
  auto v1 = read_squad_examples(kDevV1, false, false);
  EXPECT_EQ(v1.version, "1.1");
  EXPECT_EQ(v1.num_questions, 9614);
  EXPECT_EQ(v1.examples.size(), 9614u);
  const SquadGold g1 = read_squad_gold(kDevV1);
  EXPECT_EQ(g1.questions.size(), 9614u);
  size_t answers = 0;
  for (const auto& q : g1.questions) answers += q.answers.size();
  EXPECT_EQ(answers, 30883u);  // SOURCE.md: 30883 answer annotations
  auto v2 = read_squad_examples(kDevV2, false, true);
  EXPECT_EQ(v2.version, "v2.0");
  EXPECT_EQ(v2.examples.size(), 10346u);
  const SquadGold g2 = read_squad_gold(kDevV2);
  size_t answerable = 0;
  for (const auto& q : g2.questions) answerable += !q.answers.empty();
  EXPECT_EQ(g2.questions.size(), 10346u);
  EXPECT_EQ(answerable, 5170u);
  EXPECT_EQ(g2.major_version(), 2);
  EXPECT_EQ(g1.major_version(), 1);
}

// ---- C26: get_final_text ----

TEST(SquadPredict, C26GetFinalText) {
  EXPECT_EQ(get_final_text("1895 - 1943", "(1895-1943).", true), "1895-1943");
  EXPECT_EQ(get_final_text("1895", "(1895-1943).", true), "1895");
  EXPECT_EQ(get_final_text("steve smith", "Steve Smith's", true), "Steve Smith");
  EXPECT_EQ(get_final_text("zoe", "Zoë", true), "Zoë");
  EXPECT_EQ(get_final_text("cafe", "Café!", true), "Café");
  // Decomposed "Zoe\u0308": 4 code points against "zoe" (3) after removing spaces -> orig_text unchanged.
  EXPECT_EQ(get_final_text("zoe", "Zoe\u0308", true), "Zoe\u0308");
  // Not found -> orig_text.
  EXPECT_EQ(get_final_text("smith", "Steve Jones", true), "Steve Jones");
  // Cased: no lowercasing, so "steve" is not found in "Steve Smith's".
  EXPECT_EQ(get_final_text("Steve", "Steve Smith's", false), "Steve");
  EXPECT_EQ(get_final_text("steve", "Steve Smith's", false), "Steve Smith's");
  // Returning the tokenized text would score EM 0 / F1 0 against the gold "1895-1943".
  EXPECT_EQ(exact_match_score("1895 - 1943", "1895-1943"), 0);
  EXPECT_EQ(f1_score_v1("1895 - 1943", "1895-1943"), 0.0);
  EXPECT_EQ(exact_match_score("1895-1943", "1895-1943"), 1);
}

TEST(SquadPredict, BestIndexesAndSoftmax) {
  EXPECT_EQ(get_best_indexes({0.5f, 2.f, 2.f, -1.f, 3.f}, 3), (std::vector<int32_t>{4, 1, 2}));
  EXPECT_EQ(get_best_indexes({1.f, 1.f}, 20), (std::vector<int32_t>{0, 1}));
  const auto p = compute_softmax({1.0, 1.0, std::log(2.0)});
  // exp(0), exp(0), exp(log 2 - 1) over their sum: 1, 1, 2/e.
  const double z = 2.0 + 2.0 / std::exp(1.0);
  EXPECT_NEAR(p[0], 1.0 / z, 1e-15);
  EXPECT_NEAR(p[2], (2.0 / std::exp(1.0)) / z, 1e-15);
  EXPECT_TRUE(compute_softmax({}).empty());
}

namespace {

struct C25Setup {
  FullTokenizer tok = word_tokenizer(split_words(kC25Doc + " q"));
  std::vector<SquadExample> examples;
  std::vector<SquadFeature> features;
  std::vector<std::vector<float>> start, end;
  C25Setup() {
    examples = parse_squad_examples(one_question_json("\"" + kC25Doc + "\"", "p1", "q", "[]"), false, false).examples;
    SquadFeatureOptions o;
    o.max_seq_length = 9;
    o.doc_stride = 3;
    o.max_query_length = 4;
    features = convert_examples_to_features(examples, tok, o);
    start.assign(features.size(), std::vector<float>(9, 0.f));
    end = start;
  }
};

}  // namespace

TEST(SquadPredict, NbestFiltersAndFinalText) {
  C25Setup s;
  // Window 1 (tokens 3..7 at positions 3..7): position 3 = token 3 "to", whose max context is window 0, so a
  // start there is filtered; an end there has no valid start (starts before it are not in the doc part).
  s.start[1][3] = 10.f;
  s.end[1][3] = 10.f;
  // Window 2 (tokens 6..10): "gallon of" = tokens 9..10 at positions 6..7.
  s.start[2][6] = 5.f;
  s.end[2][7] = 4.f;
  // A start in the query ([CLS] = 0, "q" = 1) is filtered, as is an end before the start.
  s.start[0][1] = 20.f;
  s.end[0][3] = 9.f;
  s.start[0][5] = 8.f;  // token 2 "went"; with end at position 3 (token 0), end < start: filtered
  SquadPredictOptions o;
  o.n_best_size = 20;
  o.max_answer_length = 30;
  const SquadPredictions p = compute_predictions(s.examples, s.features, s.start, s.end, o);
  ASSERT_EQ(p.qas_ids, Strings{"p1"});
  // Best valid: window 0 start 3 (token 0 "the", logit 0) + end 3 (9) = 9 and window 2 "gallon of" 5 + 4 = 9;
  // the stable sort keeps window 0's candidate first. Window 0 start 5 ("went", 8) + ends 5..7 (0) = 8 come next.
  EXPECT_EQ(p.nbest[0][0].start_logit + p.nbest[0][0].end_logit, 9.0);
  ASSERT_GE(p.nbest[0].size(), 3u);
  EXPECT_EQ(p.nbest[0][0].text, "the");
  EXPECT_EQ(p.nbest[0][1].text, "gallon of");
  EXPECT_EQ(p.nbest[0][2].text, "went");
  EXPECT_EQ(p.nbest[0][2].start_logit, 8.0);
  EXPECT_EQ(p.predictions[0], "the");
  double sum = 0;
  for (const auto& e : p.nbest[0]) {
    sum += e.probability;
  }
  EXPECT_NEAR(sum, 1.0, 1e-12);
  EXPECT_LE(p.nbest[0].size(), 20u);
  // Texts are unique.
  std::set<std::string> texts;
  for (const auto& e : p.nbest[0]) EXPECT_TRUE(texts.insert(e.text).second) << e.text;
  // max_answer_length 1 keeps only one-token answers.
  o.max_answer_length = 1;
  const SquadPredictions q = compute_predictions(s.examples, s.features, s.start, s.end, o);
  EXPECT_EQ(q.nbest[0][0].text, "the");
  EXPECT_EQ(q.nbest[0][1].text, "went");
  for (const auto& e : q.nbest[0]) EXPECT_EQ(e.text.find(' '), std::string::npos) << e.text;
  // n_best_size 2 limits the start and end indexes per window: window 0 keeps starts {1, 5} and ends {3, 0},
  // window 2 starts {6, 0} and ends {7, 0} (a 2-token span), so nothing valid remains and the reference's
  // nonce "empty" (0, 0) is the prediction.
  o.n_best_size = 2;
  const SquadPredictions r = compute_predictions(s.examples, s.features, s.start, s.end, o);
  ASSERT_EQ(r.nbest[0].size(), 1u);
  EXPECT_EQ(r.nbest[0][0].text, "empty");
  EXPECT_EQ(r.nbest[0][0].probability, 1.0);
  EXPECT_EQ(r.predictions[0], "empty");
  // With max_answer_length 2 only "gallon of" survives.
  o.max_answer_length = 2;
  EXPECT_EQ(compute_predictions(s.examples, s.features, s.start, s.end, o).predictions[0], "gallon of");
}

TEST(SquadPredict, V2NullScoreIsTheMinimumOverWindows) {
  C25Setup s;
  s.start[2][6] = 5.f;
  s.end[2][7] = 5.f;
  // Null scores start[0] + end[0] per window: 2, 0.75, 6, 4 -> score_null 0.75 from window 1.
  const float nulls[4][2] = {{1.f, 1.f}, {0.5f, 0.25f}, {3.f, 3.f}, {2.f, 2.f}};
  for (int w = 0; w < 4; ++w) {
    s.start[w][0] = nulls[w][0];
    s.end[w][0] = nulls[w][1];
  }
  SquadPredictOptions o;
  o.version_2_with_negative = true;
  SquadPredictions p = compute_predictions(s.examples, s.features, s.start, s.end, o);
  ASSERT_EQ(p.null_odds.size(), 1u);
  EXPECT_EQ(p.null_odds[0], 0.75 - 10.0);  // score_null - best non-null ("gallon of": 5 + 5)
  EXPECT_EQ(p.predictions[0], "gallon of");
  bool has_null = false;
  for (const auto& e : p.nbest[0])
    if (e.text.empty()) {
      has_null = true;
      EXPECT_EQ(e.start_logit, 0.5);
      EXPECT_EQ(e.end_logit, 0.25);
    }
  EXPECT_TRUE(has_null);
  // Predict "" iff null_odds > null_score_diff_threshold.
  o.null_score_diff_threshold = -9.25;
  EXPECT_EQ(compute_predictions(s.examples, s.features, s.start, s.end, o).predictions[0], "gallon of");
  o.null_score_diff_threshold = -9.3;
  EXPECT_EQ(compute_predictions(s.examples, s.features, s.start, s.end, o).predictions[0], "");
  // "" enters the n-best even when it is not among the top candidates (n_best_size 1).
  o.n_best_size = 1;
  o.null_score_diff_threshold = 0.0;
  p = compute_predictions(s.examples, s.features, s.start, s.end, o);
  ASSERT_EQ(p.nbest[0].size(), 2u);
  EXPECT_EQ(p.nbest[0][0].text, "gallon of");
  EXPECT_EQ(p.nbest[0][1].text, "");
  const std::string odds = p.null_odds_json();
  EXPECT_EQ(odds, "{\n    \"p1\": -9.25\n}\n");
}

TEST(SquadPredict, JsonFilesAsPythonWritesThem) {
  SquadPredictions p;
  p.qas_ids = {"a", "b\u00e9"};
  p.predictions = {"x", "Zoë \"q\""};
  p.nbest = {{{"x", 1.0, 0.5, -1.25}}, {}};
  EXPECT_EQ(p.predictions_json(), "{\n    \"a\": \"x\",\n    \"b\\u00e9\": \"Zo\\u00eb \\\"q\\\"\"\n}\n");
  EXPECT_EQ(p.nbest_json(),
            "{\n    \"a\": [\n        {\n            \"text\": \"x\",\n            \"probability\": 1.0,\n"
            "            \"start_logit\": 0.5,\n            \"end_logit\": -1.25\n        }\n    ],\n    \"b\\u00e9\": []\n}\n");
  // write_predictions writes the files (null_odds.json only for v2).
  C25Setup s;
  s.start[2][6] = 5.f;
  s.end[2][7] = 5.f;
  const fs::path dir = temp_dir("squad_test") / "pred";
  SquadPredictOptions o;
  const SquadPredictions w = write_predictions(s.examples, s.features, s.start, s.end, o, dir.string());
  EXPECT_EQ(read_file(dir / "predictions.json"), "{\n    \"p1\": \"gallon of\"\n}\n");
  EXPECT_EQ(read_file(dir / "nbest_predictions.json"), w.nbest_json());
  EXPECT_FALSE(fs::exists(dir / "null_odds.json"));
  o.version_2_with_negative = true;
  write_predictions(s.examples, s.features, s.start, s.end, o, dir.string());
  EXPECT_TRUE(fs::exists(dir / "null_odds.json"));
  fs::remove_all(dir);
  // Sizes are checked.
  s.start.pop_back();
  expect_error([&] { compute_predictions(s.examples, s.features, s.start, s.end, o); }, {"logits"});
}

// ---- evaluation ----

TEST(SquadEvaluate, NormalizeAnswer) {
  EXPECT_EQ(normalize_answer("The  Cat, sat on a MAT!"), "cat sat on mat");
  EXPECT_EQ(normalize_answer("theory an_apple a-b"), "theory anapple ab");  // '_' and '-' are punctuation
  // Non-ASCII punctuation stays; articles are whole Unicode words ("éthe" is one word).
  EXPECT_EQ(normalize_answer("The Évian\u2014the water éthe"), "évian\u2014 water éthe");
  EXPECT_EQ(normalize_answer("the\u20ac"), "\u20ac");  // the euro sign is not a word character
  EXPECT_EQ(normalize_answer("  A  "), "");
}

TEST(SquadEvaluate, ExactAndF1HandComputed) {
  // pred [denver, broncos], gold [broncos]: 1 shared; P = 1/2, R = 1; F1 = 2 * 0.5 * 1 / 1.5 = 2/3.
  EXPECT_NEAR(f1_score_v1("Denver Broncos", "Broncos"), 2.0 / 3.0, 1e-15);
  // Counter intersection: pred {cat: 2, dog: 1}, gold {cat: 1, dog: 2} -> 1 + 1 = 2 shared of 3 and 3: F1 = 2/3.
  EXPECT_NEAR(f1_score_v1("cat cat dog", "cat dog dog"), 2.0 / 3.0, 1e-15);
  // gold [santa, clara, california], pred [santa, clara]: P = 1, R = 2/3, F1 = (4/3) / (5/3) = 0.8.
  EXPECT_NEAR(f1_score_v1("Santa Clara", "Santa Clara, California"), 0.8, 1e-15);
  EXPECT_EQ(exact_match_score("the Eiffel tower.", "Eiffel Tower"), 1);
  // Empty answers: v1 scores F1 0 (no shared token), v2 scores 1 when both are empty.
  EXPECT_EQ(f1_score_v1("", ""), 0.0);
  EXPECT_EQ(compute_f1_v2("", ""), 1.0);
  EXPECT_EQ(compute_f1_v2("", "a"), 1.0);  // "a" normalizes to no tokens
  EXPECT_EQ(compute_f1_v2("Paris", ""), 0.0);
  EXPECT_EQ(exact_match_score("", ""), 1);
}

TEST(SquadEvaluate, V1HandComputed) {
  const SquadGold g = parse_squad_gold(R"({"version": "1.1", "data": [{"paragraphs": [{"context": "c", "qas": [
    {"id": "qa", "question": "?", "answers": [{"text": "Denver Broncos", "answer_start": 0}, {"text": "the Broncos", "answer_start": 0}]},
    {"id": "qb", "question": "?", "answers": [{"text": "Santa Clara, California", "answer_start": 0}]},
    {"id": "qc", "question": "?", "answers": [{"text": "Levi's Stadium", "answer_start": 0}]}]}]}]})");
  // qa: "Broncos" equals gold 2 after normalization: EM 1, F1 1 (max over golds).
  // qb: "Santa Clara": EM 0, F1 0.8 (above). qc: no prediction: 0, 0, still counted.
  // EM = 100 * 1 / 3 = 33.333333333333336; F1 = 100 * 1.8 / 3 = 60.0.
  const SquadEvalV1 r = evaluate_v1(g, {{"qa", "Broncos"}, {"qb", "Santa Clara"}, {"zz", "x"}});
  EXPECT_EQ(r.total, 3);
  EXPECT_EQ(r.unanswered, Strings{"qc"});
  EXPECT_EQ(r.exact_match, 100.0 * 1 / 3);
  EXPECT_NEAR(r.f1, 60.0, 1e-12);
  EXPECT_EQ(r.to_json(), "{\"exact_match\": 33.333333333333336, \"f1\": 60.0}");
  EXPECT_EQ(squad_evaluate_json(g, {{"qa", "Broncos"}, {"qb", "Santa Clara"}}), r.to_json());
}

namespace {
// Four questions: q1, q2 answerable; q3, q4 not.
const char* kV2Gold = R"({"version": "v2.0", "data": [{"paragraphs": [{"context": "c", "qas": [
  {"id": "q1", "question": "?", "answers": [{"text": "Denver Broncos", "answer_start": 0}, {"text": "Broncos", "answer_start": 0}], "is_impossible": false},
  {"id": "q2", "question": "?", "answers": [{"text": "the Eiffel Tower", "answer_start": 0}], "is_impossible": false},
  {"id": "q3", "question": "?", "answers": [], "is_impossible": true},
  {"id": "q4", "question": "?", "answers": [], "is_impossible": true}]}]}]})";
const std::unordered_map<std::string, std::string> kV2Preds = {
    {"q1", "Broncos"}, {"q2", "Eiffel"}, {"q3", ""}, {"q4", "Paris"}};
}  // namespace

TEST(SquadEvaluate, V2BreakdownAndBestThresholdHandComputed) {
  const SquadGold g = parse_squad_gold(kV2Gold);
  // Raw scores: q1 EM 1 F1 1; q2 "Eiffel" vs "eiffel tower": EM 0, F1 = 2 * 1 * 0.5 / 1.5 = 2/3;
  // q3 "" vs [""]: 1, 1; q4 "Paris" vs [""]: 0, 0.
  // exact = 100 * (1 + 0 + 1 + 0) / 4 = 50; f1 = 100 * (1 + 2/3 + 1 + 0) / 4 = 66.66666666666666;
  // HasAns: 100 * 1/2 = 50 and 100 * (5/3) / 2 = 83.33333333333333; NoAns: 50, 50.
  const SquadEvalV2 r = evaluate_v2(g, kV2Preds);
  EXPECT_EQ(r.to_json(),
            "{\n  \"exact\": 50.0,\n  \"f1\": 66.66666666666666,\n  \"total\": 4,\n  \"HasAns_exact\": 50.0,\n"
            "  \"HasAns_f1\": 83.33333333333333,\n  \"HasAns_total\": 2,\n  \"NoAns_exact\": 50.0,\n"
            "  \"NoAns_f1\": 50.0,\n  \"NoAns_total\": 2\n}");
  // na_probs q1 0.1, q2 0.2, q3 0.9, q4 0.3 (none above the default threshold 1.0, so the same breakdown).
  // find_best_thresh starts at 2 (two no-answer questions) and walks q1, q2, q4, q3:
  //   EM: +1 -> 3 (best, thresh 0.1); +0 -> 3; q4 predicts "Paris": -1 -> 2; q3 predicts "": 0 -> 2.
  //   best_exact = 100 * 3 / 4 = 75, thresh 0.1.
  //   F1: +1 -> 3 (0.1); +2/3 -> 3.6666666666666665 (best, 0.2); -1; 0. best_f1 = 91.66666666666666, thresh 0.2.
  const std::vector<std::pair<std::string, double>> na = {{"q1", 0.1}, {"q2", 0.2}, {"q3", 0.9}, {"q4", 0.3}};
  const SquadEvalV2 b = evaluate_v2(g, kV2Preds, &na);
  EXPECT_EQ(b.exact, 50.0);
  ASSERT_TRUE(b.best.has_value());
  EXPECT_EQ(b.best->best_exact, 75.0);
  EXPECT_EQ(b.best->best_exact_thresh, 0.1);
  EXPECT_EQ(b.best->best_f1, 91.66666666666666);
  EXPECT_EQ(b.best->best_f1_thresh, 0.2);
  const std::string j = b.to_json();
  EXPECT_NE(j.find("\"NoAns_total\": 2,\n  \"best_exact\": 75.0,\n  \"best_exact_thresh\": 0.1,\n  \"best_f1\": "
                   "91.66666666666666,\n  \"best_f1_thresh\": 0.2\n}"),
            std::string::npos)
      << j;
  // na_prob_thresh 0.25: q4 (0.3) and q3 (0.9) count as "no answer" predictions -> both score 1.
  // exact = 100 * 3 / 4 = 75; f1 = 100 * (1 + 2/3 + 1 + 1) / 4 = 91.66666666666666; NoAns 100.
  const SquadEvalV2 t = evaluate_v2(g, kV2Preds, &na, 0.25);
  EXPECT_EQ(t.exact, 75.0);
  EXPECT_EQ(t.f1, 91.66666666666666);
  EXPECT_EQ(*t.no_ans_exact, 100.0);
  EXPECT_EQ(*t.has_ans_exact, 50.0);
  // Ties in na_prob keep the file's order: with q4 before q1 at 0.1 the first step is -1, then +1 (not a new best).
  const std::vector<std::pair<std::string, double>> tie = {{"q4", 0.1}, {"q1", 0.1}, {"q2", 0.5}, {"q3", 0.5}};
  const SquadEvalV2 tb = evaluate_v2(g, kV2Preds, &tie);
  EXPECT_EQ(tb.best->best_exact, 50.0);
  EXPECT_EQ(tb.best->best_exact_thresh, 0.0);
  // Missing prediction or na_prob value: the official script crashes; bertrain names the question.
  auto missing = kV2Preds;
  missing.erase("q3");
  expect_error([&] { evaluate_v2(g, missing); }, {"q3"});
  const std::vector<std::pair<std::string, double>> short_na = {{"q1", 0.1}};
  expect_error([&] { evaluate_v2(g, kV2Preds, &short_na); }, {"q2"});
  expect_error([&] { squad_evaluate_json(parse_squad_gold(R"({"version": "1.1", "data": []})"), {}, &na); },
               {"v2.0"});
}

TEST(SquadEvaluate, FindBestNullThresholdFromPredictions) {
  const SquadGold g = parse_squad_gold(kV2Gold);
  SquadPredictions p;
  p.version_2_with_negative = true;
  p.qas_ids = {"q1", "q2", "q3", "q4"};
  p.predictions = {"Broncos", "Eiffel", "", "Paris"};
  p.null_odds = {0.1, 0.2, 0.9, 0.3};
  const SquadBestThresh b = find_best_null_threshold(g, p);
  EXPECT_EQ(b.best_exact, 75.0);
  EXPECT_EQ(b.best_exact_thresh, 0.1);
  EXPECT_EQ(b.best_f1_thresh, 0.2);
  p.version_2_with_negative = false;
  expect_error([&] { find_best_null_threshold(g, p); }, {"version_2_with_negative"});
}

TEST(SquadEvaluate, ReadingPredictionFiles) {
  const auto na = parse_squad_na_probs(R"({"z": 1, "a": -2.5, "m": 0.25})");
  ASSERT_EQ(na.size(), 3u);
  EXPECT_EQ(na[0].first, "z");  // file order kept
  EXPECT_EQ(na[1].second, -2.5);
  expect_error([] { parse_squad_predictions(R"({"a": 1})", "p.json"); }, {"p.json", "'a'", "string"});
  expect_error([] { parse_squad_predictions("{\"a\": \"x\",", "p.json"); }, {"p.json", "invalid JSON at byte offset"});
  expect_error([] { parse_squad_gold(R"({"data": [{"paragraphs": [{"qas": [{"id": "g1"}]}]}]})"); },
               {"g1", "missing field \"answers\""});
  expect_error([] { parse_squad_gold(R"({"version": "3", "data": []})").major_version(); }, {"version", "3"});
}

// ---- `bertrain squad-evaluate` end to end on the shared dev files ----

TEST(SquadEvaluateCli, V1CopyOfTheFirstGoldAnswerScores100) {
  if (!fs::exists(kDevV1)) GTEST_SKIP() << "shared SQuAD v1.1 dev file not found: " << kDevV1;
  const SquadGold g = read_squad_gold(kDevV1);
  std::string preds = "{";
  for (size_t i = 0; i < g.questions.size(); ++i) {
    SquadPredictions one;  // reuse the Python-compatible string escaping of predictions_json
    one.qas_ids = {g.questions[i].id};
    one.predictions = {g.questions[i].answers.at(0)};
    std::string obj = one.predictions_json();  // "{\n    \"id\": \"text\"\n}\n"
    obj = obj.substr(6, obj.size() - 6 - 3);
    preds += (i ? ", " : "") + obj;
  }
  preds += "}";
  const fs::path dir = temp_dir("squad_test");
  write_file(dir / "pred_v1.json", preds);
  int status = -1;
  const std::string out = run(kBinaryDir + "/bertrain squad-evaluate --data_file " + kDevV1 + " --prediction_file " +
                                  (dir / "pred_v1.json").string(),
                              &status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(out, "{\"exact_match\": 100.0, \"f1\": 100.0}\n");
  // A bad prediction file is one clear error and exit code 1.
  write_file(dir / "bad.json", "{\"x\": ");
  run(kBinaryDir + "/bertrain squad-evaluate --data_file " + kDevV1 + " --prediction_file " +
          (dir / "bad.json").string() + " 2>/dev/null",
      &status);
  EXPECT_EQ(status, 1);
}

TEST(SquadEvaluateCli, V2EmptyPredictionsScoreTheNoAnswerShare) {
  if (!fs::exists(kDevV2)) GTEST_SKIP() << "shared SQuAD v2.0 dev file not found: " << kDevV2;
  const SquadGold g = read_squad_gold(kDevV2);
  std::string preds = "{", odds = "{";
  for (size_t i = 0; i < g.questions.size(); ++i) {
    preds += (i ? ", \"" : "\"") + g.questions[i].id + "\": \"\"";
    odds += (i ? ", \"" : "\"") + g.questions[i].id + "\": 0.5";
  }
  preds += "}";
  odds += "}";
  const fs::path dir = temp_dir("squad_test");
  write_file(dir / "pred_v2.json", preds);
  write_file(dir / "odds_v2.json", odds);
  // 10346 questions, 5170 answerable (none whose answers all normalize to ""), 5176 not. Predicting "" everywhere
  // scores 0 on every answerable and 1 on every unanswerable question:
  // exact = f1 = 100 * 5176 / 10346 = 50.02899671370578; HasAns 0.0; NoAns 100.0.
  int status = -1;
  const std::string cmd = kBinaryDir + "/bertrain squad-evaluate --data_file " + kDevV2 + " --prediction_file " +
                          (dir / "pred_v2.json").string();
  std::string out = run(cmd, &status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(out,
            "{\n  \"exact\": 50.02899671370578,\n  \"f1\": 50.02899671370578,\n  \"total\": 10346,\n"
            "  \"HasAns_exact\": 0.0,\n  \"HasAns_f1\": 0.0,\n  \"HasAns_total\": 5170,\n  \"NoAns_exact\": 100.0,\n"
            "  \"NoAns_f1\": 100.0,\n  \"NoAns_total\": 5176\n}\n");
  // With a constant na_prob of 0.5, find_best_thresh never improves on "all no-answer" (5176 of 10346): the best
  // scores equal the no-answer share, at threshold 0.0.
  out = run(cmd + " --na_prob_file " + (dir / "odds_v2.json").string(), &status);
  EXPECT_EQ(status, 0);
  EXPECT_NE(out.find("\"best_exact\": 50.02899671370578,\n  \"best_exact_thresh\": 0.0,\n  \"best_f1\": "
                     "50.02899671370578,\n  \"best_f1_thresh\": 0.0\n}\n"),
            std::string::npos)
      << out;
  fs::remove_all(dir);
}

// Slice sizes must be positive: 0 or a negative count is refused at parsing (it used to mean "all").
TEST(RunSquadCli, MaxExamplesMustBePositive) {
  for (const char* flag : {"--max_predict_examples 0", "--max_predict_examples -1", "--max_train_examples 0"}) {
    int status = -1;
    const std::string out = run(kBinaryDir + "/bertrain run-squad --vocab_file v.txt --output_dir o " +
                                    "--predict_file p.json --do_predict " + flag + " 2>&1",
                                &status);
    EXPECT_NE(status, 0) << flag;
    EXPECT_NE(out.find("must be at least 1, got"), std::string::npos) << flag << ": " << out;
  }
}

// run-squad end to end on tiny files: what the break test of session 2 found. The data files are read and
// checked before the model is loaded; a v1.1 predict file without answers is predicted, not scored; repeated ids
// and skipped training questions are named; run-squad has no --do_eval; eval_results.json counts are integers.
TEST(RunSquadCli, TinyFilesAreCheckedNamedAndScoredAsTheReference) {
  const fs::path dir = temp_dir("run_squad_cli");
  write_file(dir / "config.json",
             R"({"vocab_size": 30522, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
                 "intermediate_size": 16, "max_position_embeddings": 64, "type_vocab_size": 2})");
  const std::string base = kBinaryDir + "/bertrain run-squad --vocab_file " + kUncasedVocab + " --bert_config_file " +
                           (dir / "config.json").string() +
                           " --max_seq_length 48 --doc_stride 16 --max_query_length 16 --seed 3 --output_dir " +
                           (dir / "out").string() + " ";
  const std::string ctx = "The cat sat on the mat near the old red door of the house.";
  int status = -1;

  // --do_eval belongs to run-classifier; run_squad.py evaluates through --do_predict.
  std::string out = run(base + "--do_predict --predict_file x.json --do_eval 2>&1", &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("--do_eval"), std::string::npos) << out;

  // An empty predict file fails on the file, before the (missing) checkpoint is opened.
  write_file(dir / "empty.json", R"({"version": "1.1", "data": []})");
  out = run(base + "--do_predict --predict_file " + (dir / "empty.json").string() +
                " --init_checkpoint " + (dir / "no_such_checkpoint").string() + " 2>&1",
            &status);
  EXPECT_EQ(status, 1);
  EXPECT_NE(out.find("empty.json: the predict file has no questions"), std::string::npos) << out;
  EXPECT_EQ(out.find("no_such_checkpoint"), std::string::npos) << out;

  // v1.1 predict file: q2 has no answers and q1 occurs twice. Predictions are written for q1 and q2, nothing is
  // scored (the official v1.1 script cannot score an answerless question), and both facts are named.
  write_file(dir / "v1.json", R"({"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": ")" + ctx +
                                  R"(", "qas": [
      {"id": "q1", "question": "Where did the cat sit?", "answers": [{"answer_start": 19, "text": "mat"}]},
      {"id": "q2", "question": "What colour is the door?", "answers": []},
      {"id": "q1", "question": "Where did the cat sit?", "answers": [{"answer_start": 19, "text": "mat"}]}]}]}]})");
  fs::remove_all(dir / "out");
  out = run(base + "--do_predict --predict_file " + (dir / "v1.json").string() + " 2>&1", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("1 question id(s) occur more than once (first: 'q1')"), std::string::npos) << out;
  EXPECT_NE(out.find("1 of 3 questions have no answers (first: 'q2'): predictions are written but not scored"),
            std::string::npos)
      << out;
  const std::string preds = read_file(dir / "out" / "predictions.json");
  EXPECT_NE(preds.find("\"q1\":"), std::string::npos) << preds;
  EXPECT_NE(preds.find("\"q2\":"), std::string::npos) << preds;
  EXPECT_FALSE(fs::exists(dir / "out" / "eval_results.json"));

  // Training: "dog" is not in the words of its span (characters 4-6 are "cat"), so t2 is skipped by name; the
  // finetuning log counts windows. Predicting a v2.0 file then writes integer counts to eval_results.json.
  write_file(dir / "train.json", R"({"version": "v2.0", "data": [{"title": "t", "paragraphs": [{"context": ")" + ctx +
                                     R"(", "qas": [
      {"id": "t1", "question": "Where did the cat sit?", "is_impossible": false, "answers": [{"answer_start": 19, "text": "mat"}]},
      {"id": "t2", "question": "Who sat?", "is_impossible": false, "answers": [{"answer_start": 4, "text": "dog"}]},
      {"id": "t3", "question": "What is red?", "is_impossible": false, "answers": [{"answer_start": 40, "text": "door"}]},
      {"id": "t4", "question": "Who owns the car?", "is_impossible": true, "answers": []}]}]}]})");
  write_file(dir / "v2.json", R"({"version": "v2.0", "data": [{"title": "t", "paragraphs": [{"context": ")" + ctx +
                                  R"(", "qas": [
      {"id": "d1", "question": "Where did the cat sit?", "answers": [{"answer_start": 19, "text": "mat"}]},
      {"id": "d2", "question": "Who owns the car?", "answers": []}]}]}]})");
  fs::remove_all(dir / "out");
  out = run(base + "--version_2_with_negative --do_train --train_file " + (dir / "train.json").string() +
                " --train_batch_size 2 --num_train_epochs 1 --save_checkpoints_steps 0 --do_predict --predict_file " +
                (dir / "v2.json").string() + " 2>&1",
            &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("1 question(s) skipped, the answer text is not in the words of its span"), std::string::npos)
      << out;
  EXPECT_NE(out.find("Could not find answer\"): 't2'"), std::string::npos) << out;
  EXPECT_NE(out.find("finetuning: 3 windows, batch 2"), std::string::npos) << out;
  const std::string results = read_file(dir / "out" / "eval_results.json");
  EXPECT_NE(results.find("\"total\": 2\n"), std::string::npos) << results;
  EXPECT_NE(results.find("\"HasAns_total\": 1,"), std::string::npos) << results;
  EXPECT_NE(results.find("\"NoAns_total\": 1,"), std::string::npos) << results;
  fs::remove_all(dir);
}
