// cmrc_test.cpp: Chinese reading comprehension: the CMRC 2018 metric (official script
// v6) on hand-made predictions, every number computed by hand below; training features of a Chinese paragraph
// put the answer at answer_start, not at an earlier occurrence of the same text; predictions are the
// paragraph's characters.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "bertrain/core/error.h"
#include "bertrain/tasks/squad/cmrc2018.h"
#include "bertrain/tasks/squad/evaluate.h"
#include "bertrain/tasks/squad/squad.h"
#include "bertrain/text/tokenizer.h"
#include "test_util.h"

using namespace bertrain;
using namespace bertrain::squad;
using S = std::vector<std::string>;

TEST(Cmrc2018, MixedSegmentation) {
  // lower + strip; CJK characters and sp_char marks are segments; the runs between go through NLTK.
  EXPECT_EQ(cmrc_mixed_segmentation("  Nexon公司，2V2 ", false), (S{"nexon", "公", "司", "，", "2v2"}));
  EXPECT_EQ(cmrc_mixed_segmentation("  Nexon公司，2V2 ", true), (S{"nexon", "公", "司", "2v2"}));
  // rm_punc drops 、 before the run is cut, so 2V2 and 4V4 become one segment (the script's behaviour).
  EXPECT_EQ(cmrc_mixed_segmentation("2V2、4V4随机", true), (S{"2v24v4", "随", "机"}));
  // "……" in sp_char is two characters and never matches: … stays.
  EXPECT_EQ(cmrc_mixed_segmentation("好…", true), (S{"好", "…"}));
  EXPECT_EQ(cmrc_remove_punctuation(" “红楼梦”。 "), "红楼梦");
}

TEST(Cmrc2018, NltkWordTokenizer) {
  EXPECT_EQ(nltk_word_tokenize("(npc)"), (S{"(", "npc", ")"}));
  EXPECT_EQ(nltk_word_tokenize("don't"), (S{"do", "n't"}));
  EXPECT_EQ(nltk_word_tokenize("3,000 a,b"), (S{"3,000", "a", ",", "b"}));
  EXPECT_EQ(nltk_word_tokenize("hello."), (S{"hello", "."}));
  EXPECT_EQ(nltk_word_tokenize("\"hi\" he said"), (S{"``", "hi", "''", "he", "said"}));
}

TEST(Cmrc2018, ScoresOfHandMadePredictions) {
  const S a = {"踢爆"};
  EXPECT_DOUBLE_EQ(cmrc_f1_score(a, "踢爆"), 1.0);
  EXPECT_EQ(cmrc_em_score(a, "踢爆"), 1);
  EXPECT_DOUBLE_EQ(cmrc_f1_score(a, "踢爆。"), 1.0);  // 。 removed on both sides
  EXPECT_EQ(cmrc_em_score(a, "踢爆。"), 1);
  // [为 踢 爆] vs [踢 爆]: LCS 2, P = 2/3, R = 1, F1 = 2 (2/3) / (5/3) = 0.8.
  EXPECT_DOUBLE_EQ(cmrc_f1_score(a, "为踢爆"), 0.8);
  EXPECT_EQ(cmrc_em_score(a, "为踢爆"), 0);
  EXPECT_DOUBLE_EQ(cmrc_f1_score(a, ""), 0.0);
  // [nexon 公 司] vs [nexon]: LCS 1, P = 1, R = 1/3, F1 = 0.5.
  EXPECT_DOUBLE_EQ(cmrc_f1_score({"Nexon公司"}, "nexon"), 0.5);
  // Max over answers: [2v2] shares nothing with [4v4 随 机 配 对]; [2v24v4 随 机] shares 随 机:
  // P = 2/5, R = 2/3, F1 = 2 (4/15) / (16/15) = 0.5.
  EXPECT_DOUBLE_EQ(cmrc_f1_score({"2V2", "2V2、4V4随机"}, "4V4随机配对"), 0.5);
  // [3,000 人] vs [3,000]: NLTK keeps "3,000" (a comma before a digit); F1 = 2 (1 * 1/2) / (3/2) = 2/3.
  EXPECT_DOUBLE_EQ(cmrc_f1_score({"3,000人"}, "3,000"), 2.0 / 3.0);
  EXPECT_EQ(cmrc_em_score({"“红楼梦”"}, "红楼梦"), 1);
  EXPECT_THROW(cmrc_f1_score({}, "x"), Error);
}

TEST(Cmrc2018, EvaluateAndPrintout) {
  const std::string data = R"({"version": "v1.0", "data": [{"paragraphs": [{"context": "x", "qas": [
      {"id": "q1", "question": "?", "answers": [{"text": "踢爆", "answer_start": 0}]},
      {"id": "q2", "question": "?", "answers": [{"text": "2V2", "answer_start": 0}, {"text": "2V2、4V4随机", "answer_start": 0}]},
      {"id": "q3", "question": "?", "answers": [{"text": "甲", "answer_start": 0}]}]}]}]})";
  const SquadGold gold = parse_squad_gold(data, "cmrc.json");
  // q1: F1 1, EM 1; q2: F1 0.5, EM 0; q3 unanswered: 0 and counted in TOTAL and SKIP.
  const CmrcEval r = evaluate_cmrc2018(gold, {{"q1", "踢爆"}, {"q2", "4V4随机配对"}});
  EXPECT_DOUBLE_EQ(r.f1, 50.0);
  EXPECT_DOUBLE_EQ(r.em, 100.0 / 3.0);
  EXPECT_EQ(r.unanswered, (S{"q3"}));
  EXPECT_EQ(r.to_json("pred.json"),
            R"({"AVERAGE": "41.667", "F1": "50.000", "EM": "33.333", "TOTAL": 3, "SKIP": 1, "FILE": "pred.json"})");
}

namespace {

// Runs a shell command; returns its stdout, the exit status in *status.
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

const std::string kBertrain = std::string(BERTRAIN_BINARY_DIR) + "/bertrain";

}  // namespace

TEST(Cmrc2018, SquadEvaluateCliOnHandMadeFiles) {
  namespace fs = std::filesystem;
  const fs::path dir = bertrain::test::temp_dir("cmrc_cli");
  bertrain::test::write_file(dir / "dev.json", R"({"version": "v1.0", "data": [{"title": "t", "paragraphs": [
    {"context": "由韩国Nexon公司开发。", "qas": [
      {"id": "q1", "question": "?", "answers": [{"text": "踢爆", "answer_start": 0}]},
      {"id": "q2", "question": "?", "answers": [{"text": "2V2", "answer_start": 0}, {"text": "2V2、4V4随机", "answer_start": 0}]},
      {"id": "q3", "question": "?", "answers": [{"text": "Nexon公司", "answer_start": 3}]}]},
    {"context": "甲", "qas": [
      {"id": "q4", "question": "?", "answers": [{"text": "甲", "answer_start": 0}]},
      {"id": "q5", "question": "?", "answers": [{"text": "“红楼梦”", "answer_start": 0}]},
      {"id": "q6", "question": "?", "answers": [{"text": "踢爆", "answer_start": 0}]}]}]}]})");
  // q1 "踢爆。" (as \u escapes): 。 removed on both sides, F1 1, EM 1. q2: [4v4 随 机 配 对] against the
  // second answer [2v24v4 随 机]: F1 0.5, EM 0. q3: [nexon] against [nexon 公 司]: P 1, R 1/3, F1 0.5, EM 0.
  // q4: unanswered, 0 (TOTAL 6, SKIP 1). q5: “红楼梦” without its quotes: F1 1, EM 1. q6: [为 踢 爆] against
  // [踢 爆]: P 2/3, R 1, F1 0.8, EM 0. "zz" is not a question: ignored.
  // F1 = 100 (1 + 0.5 + 0.5 + 0 + 1 + 0.8) / 6 = 63.333; EM = 100 * 2 / 6 = 33.333; AVERAGE = 48.333.
  bertrain::test::write_file(dir / "pred.json", R"({"q1": "\u8e22\u7206\u3002", "q2": "4V4随机配对", "q3": "nexon",
    "q5": "红楼梦", "q6": "为踢爆", "zz": "x"})");
  const std::string pred = (dir / "pred.json").string();
  int status = -1;
  const std::string cmd = kBertrain + " squad-evaluate --metric cmrc2018 --data_file " + (dir / "dev.json").string() +
                          " --prediction_file " + pred;
  EXPECT_EQ(run(cmd + " 2>" + (dir / "err.txt").string(), &status),
            R"({"AVERAGE": "48.333", "F1": "63.333", "EM": "33.333", "TOTAL": 6, "SKIP": 1, "FILE": ")" + pred +
                "\"}\n");
  EXPECT_EQ(status, 0);
  // As the script, one stderr line per unanswered question.
  EXPECT_EQ(bertrain::test::read_file((dir / "err.txt").string()), "Unanswered question: q4\n");
  // A prediction file that is not JSON: one line naming it, exit 1, nothing on stdout.
  bertrain::test::write_file(dir / "bad.json", "{\"q1\": ");
  const std::string out = run(kBertrain + " squad-evaluate --metric cmrc2018 --data_file " +
                                  (dir / "dev.json").string() + " --prediction_file " + (dir / "bad.json").string() +
                                  " 2>&1 >/dev/null",
                              &status);
  EXPECT_EQ(status, 1);
  EXPECT_NE(out.find("bad.json"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  fs::remove_all(dir);
}

TEST(Cmrc2018, SquadEvaluateCliOnTheSharedDevFile) {
  // The real CMRC 2018 dev file (3219 questions): its own first answers as predictions score 100 / 100.
  namespace fs = std::filesystem;
  const std::string xz = std::string(BERTRAIN_SHARED_DATA_DIR) + "/chinese/cmrc2018/cmrc2018_dev.json.xz";
  if (!fs::exists(xz)) GTEST_SKIP() << "shared CMRC 2018 dev file not found: " << xz;
  const fs::path dir = bertrain::test::temp_dir("cmrc_dev");
  int status = -1;
  run("xz -dc " + xz + " > " + (dir / "dev.json").string(), &status);
  ASSERT_EQ(status, 0) << "xz -dc " << xz;
  const SquadGold gold = read_squad_gold((dir / "dev.json").string());
  ASSERT_EQ(gold.questions.size(), 3219u);
  SquadPredictions first;  // predictions_json writes them as write_predictions does
  for (const SquadGoldQuestion& q : gold.questions) {
    first.qas_ids.push_back(q.id);
    first.predictions.push_back(q.answers.at(0));
  }
  bertrain::test::write_file(dir / "pred.json", first.predictions_json());
  const std::string out = run(kBertrain + " squad-evaluate --metric cmrc2018 --data_file " + (dir / "dev.json").string() +
                                  " --prediction_file " + (dir / "pred.json").string(),
                              &status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(out.substr(0, out.find(", \"FILE\"")),
            R"({"AVERAGE": "100.000", "F1": "100.000", "EM": "100.000", "TOTAL": 3219, "SKIP": 0)");
  fs::remove_all(dir);
}

namespace {

text::FullTokenizer zh_tokenizer() {
  return text::FullTokenizer(std::make_shared<const text::Vocab>(text::Vocab::from_tokens(
                                 {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "甲", "乙", "丙", "丁", "问", "由",
                                  "韩", "国", "nexon", "开", "发", "。"},
                                 "zh-test")),
                             true);
}

std::string one_question(const std::string& context, const std::string& answer, int start) {
  return R"({"version": "v1.0", "data": [{"paragraphs": [{"context": ")" + context +
         R"(", "qas": [{"id": "q", "question": "问", "answers": [{"text": ")" + answer +
         R"(", "answer_start": )" + std::to_string(start) + "}]}]}]}]}";
}

}  // namespace

TEST(ChineseSquad, AnswerSpanAtAnswerStartNotTheFirstOccurrence) {
  const auto tok = zh_tokenizer();
  // 甲乙 occurs at characters 0 and 3; the annotation is the second one.
  SquadReadResult r = parse_squad_examples(one_question("甲乙丙甲乙丁", "甲乙", 3), true, false, "zh.json");
  ASSERT_EQ(r.examples.size(), 1u);
  EXPECT_EQ(*r.examples[0].doc_tokens, (S{"甲", "乙", "丙", "甲", "乙", "丁"}));
  EXPECT_EQ(r.examples[0].start_position, 3);
  EXPECT_EQ(r.examples[0].end_position, 4);
  SquadFeatureOptions o;
  o.max_seq_length = 16;
  o.max_query_length = 4;
  o.is_training = true;
  const auto feats = convert_examples_to_features(r.examples, tok, o);
  ASSERT_EQ(feats.size(), 1u);
  // [CLS] 问 [SEP] 甲 乙 丙 甲 乙 丁 [SEP]: the doc starts at 3, the annotated 甲乙 at 6-7 (run_squad.py's one-word
  // paragraph would give 3-4, the first occurrence).
  EXPECT_EQ(feats[0].start_position, 6);
  EXPECT_EQ(feats[0].end_position, 7);
}

TEST(ChineseSquad, PredictionsAreTheParagraphsCharacters) {
  const auto tok = zh_tokenizer();
  SquadReadResult r = parse_squad_examples(one_question("由韩国Nexon开发。", "Nexon", 3), false, false, "zh.json");
  EXPECT_EQ(*r.examples[0].doc_tokens, (S{"由", "韩", "国", "Nexon", "开", "发", "。"}));
  SquadFeatureOptions o;
  o.max_seq_length = 16;
  o.max_query_length = 4;
  const auto feats = convert_examples_to_features(r.examples, tok, o);
  // [CLS] 问 [SEP] 由 韩 国 nexon 开 发 。 [SEP]
  auto predict = [&](int s, int e) {
    std::vector<std::vector<float>> start(1, std::vector<float>(16, 0.f)), end = start;
    start[0][static_cast<size_t>(s)] = 10.f;
    end[0][static_cast<size_t>(e)] = 10.f;
    SquadPredictOptions po;
    po.n_best_size = 1;
    return compute_predictions(r.examples, feats, start, end, po).predictions[0];
  };
  EXPECT_EQ(predict(4, 5), "韩国");  // not "韩 国"
  EXPECT_EQ(predict(5, 6), "国Nexon");
  EXPECT_EQ(predict(6, 6), "Nexon");  // case restored by get_final_text
  EXPECT_EQ(predict(7, 9), "开发。");
}

TEST(ChineseSquad, AnswerStartNotAtItsTextIsRepairedOrSkipped) {
  // CMRC 2018 as published: answer_start 1 does not point at 甲乙 (at 0 and 3): the nearest occurrence, 0, is used;
  // an answer_start past the end is no error; a text that does not occur skips the question.
  SquadReadResult r = parse_squad_examples(one_question("甲乙丙甲乙丁", "甲乙", 1), true, false, "zh.json");
  EXPECT_EQ(r.examples[0].start_position, 0);
  EXPECT_EQ(r.num_repaired, 1);
  r = parse_squad_examples(one_question("甲乙丙甲乙丁", "甲乙", 9), true, false, "zh.json");
  EXPECT_EQ(r.examples[0].start_position, 3);
  r = parse_squad_examples(one_question("甲乙丙甲乙丁", "丁丁", 2), true, false, "zh.json");
  EXPECT_TRUE(r.examples.empty());
  EXPECT_EQ(r.skipped_ids, (S{"q"}));
  EXPECT_EQ(parse_squad_examples(one_question("甲乙丙甲乙丁", "丁丁", 20), false, false, "zh.json").examples.size(), 1u);
  // CMRC dev has answer_start -1 (DEV_9_QUERY_3): repaired for training, accepted for prediction.
  EXPECT_EQ(parse_squad_examples(one_question("甲乙丙甲乙丁", "丙", -1), true, false, "zh.json").examples[0].start_position, 2);
  EXPECT_EQ(parse_squad_examples(one_question("甲乙丙甲乙丁", "丙", -1), false, false, "zh.json").examples.size(), 1u);
}
