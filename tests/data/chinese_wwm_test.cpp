// chinese_wwm_test.cpp: CASES.md C34: Chinese whole-word masking from a word segmentation (Hugging Face
// run_chinese_ref.py's reference file), its validation errors, and the warning without a segmentation.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>

#include "bertrain/core/error.h"
#include "bertrain/data/create_shards.h"
#include "bertrain/data/pretraining.h"
#include "test_util.h"

using namespace bertrain;
using namespace bertrain::data;

namespace {

// The C34 sentence's characters, plus "##" twins of two of them: bert-base-chinese has both 用 and ##用, so a
// leaked ## mark would change ids without an error.
const std::vector<std::string> kChars = {"使", "用", "语", "言", "模", "型", "来", "预", "测", "下", "一", "个",
                                         "词", "的", "概", "率", "。", "我", "iphone", "##12", "拍", "照"};

PretrainingVocab c34_vocab() {
  std::vector<std::string> t = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  t.insert(t.end(), kChars.begin(), kChars.end());
  t.push_back("##用");
  t.push_back("##言");
  return PretrainingVocab(t);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(ChineseWholeWordMask, C34GroupsBudgetAndPlainLabels) {
  const PretrainingVocab v = c34_vocab();
  // 使用语言模型来预测下一个词的概率。 segmented [使用, 语言, 模型, 来, 预测, 下, 一个, 词, 的, 概率, 。].
  std::vector<int32_t> line;
  for (int i = 0; i < 17; ++i) line.push_back(v.id(kChars[static_cast<size_t>(i)]));
  mark_chinese_ref_words(line, {2, 4, 6, 9, 12, 16}, v, "c34.ref", 1);  // HF-style ref of the segmentation
  std::vector<int32_t> tokens = {v.cls_id()};
  tokens.insert(tokens.end(), line.begin(), line.end());
  tokens.push_back(v.sep_id());
  ASSERT_EQ(tokens.size(), 19u);
  const std::vector<std::vector<int32_t>> groups = {{1, 2}, {3, 4}, {5, 6}, {7},  {8, 9}, {10},
                                                    {11, 12}, {13}, {14}, {15, 16}, {17}};
  EXPECT_EQ(masked_lm_candidate_groups(tokens, true, v), groups);
  // Without whole-word masking, or without the marks, every character is its own group.
  EXPECT_EQ(masked_lm_candidate_groups(tokens, false, v).size(), 17u);
  EXPECT_EQ(masked_lm_budget(19, 0.15, 20), 3);  // round(2.85)

  std::vector<int32_t> plain = tokens;
  for (int32_t& t : plain) t &= ~kWordContinuationBit;
  const int32_t mask = v.mask_id();
  const int kSeeds = 20000;
  std::vector<int> chosen(19, 0);
  int split_treatment = 0, two_char_words = 0;
  for (int seed = 0; seed < kSeeds; ++seed) {
    Rng rng(static_cast<uint64_t>(seed), 7);
    const MaskedLmPredictions m = create_masked_lm_predictions(tokens, 0.15, 20, true, v, rng);
    ASSERT_EQ(m.positions.size(), 3u) << "seed " << seed;
    for (size_t k = 0; k < m.positions.size(); ++k) {
      const int32_t p = m.positions[k];
      EXPECT_EQ(m.labels[k], plain[static_cast<size_t>(p)]);  // 用, never ##用 or a marked id
      ++chosen[static_cast<size_t>(p)];
    }
    for (size_t i = 0; i < 19; ++i) {
      const bool masked = std::find(m.positions.begin(), m.positions.end(), static_cast<int32_t>(i)) != m.positions.end();
      if (!masked) {
        EXPECT_EQ(m.tokens[i], plain[i]);  // unmasked input ids are the plain characters
      }
      EXPECT_EQ(m.tokens[i] & kWordContinuationBit, 0);
    }
    // Never one character of a word: both or neither.
    for (const auto& g : groups) {
      if (g.size() != 2) continue;
      const bool a = chosen[static_cast<size_t>(g[0])] != chosen[static_cast<size_t>(g[1])];
      ASSERT_FALSE(a) << "seed " << seed << " masked part of the word at " << g[0];
      const bool in = std::find(m.positions.begin(), m.positions.end(), g[0]) != m.positions.end();
      if (in) {
        ++two_char_words;
        // 80/10/10 per character: the two characters of a word may be treated differently.
        const bool m0 = m.tokens[static_cast<size_t>(g[0])] == mask, m1 = m.tokens[static_cast<size_t>(g[1])] == mask;
        split_treatment += m0 != m1 ? 1 : 0;
      }
    }
  }
  // Each two-character word is chosen about 13.6% of the time, each single about 27.3% (CASES.md C34, and a
  // 400,000-draw simulation of the reference rule: 0.1354-0.1369 and 0.2718-0.2739): within 1.2 points.
  for (const auto& g : groups) {
    const double f = static_cast<double>(chosen[static_cast<size_t>(g[0])]) / kSeeds;
    EXPECT_NEAR(f, g.size() == 2 ? 0.136 : 0.273, 0.012) << "group at " << g[0];
  }
  // P(exactly one of two characters is [MASK]) = 2 * 0.8 * 0.2 = 0.32.
  EXPECT_NEAR(static_cast<double>(split_treatment) / two_char_words, 0.32, 0.03);
}

TEST(ChineseWholeWordMask, C34RefValidation) {
  const PretrainingVocab v = c34_vocab();
  auto ids = [&](std::vector<std::string> toks) {
    std::vector<int32_t> out;
    for (auto& t : toks) out.push_back(v.id(t));
    return out;
  };
  auto mark = [&](std::vector<int32_t> line, std::vector<int32_t> pos) {
    return error_of([&] { mark_chinese_ref_words(line, pos, v, "zh.ref", 7); });
  };
  const auto line = ids({"我", "用", "iphone", "##12", "拍", "照"});
  EXPECT_EQ(mark(line, {2, 6}), "(no error)");
  EXPECT_NE(mark(line, {7}).find("zh.ref:7: position 7 is outside the line's tokens 1..6"), std::string::npos);
  EXPECT_NE(mark(line, {0}).find("zh.ref:7: position 0 is outside"), std::string::npos);
  EXPECT_NE(mark(line, {3}).find("zh.ref:7: position 3 is the token 'iphone', not a CJK character"), std::string::npos);
  EXPECT_NE(mark(line, {5}).find("zh.ref:7: position 5 ('拍') is word-initial"), std::string::npos);
  EXPECT_NE(mark(line, {1}).find("is word-initial: the first token of the line"), std::string::npos);
  EXPECT_NE(error_of([] { parse_chinese_ref("[1, 2]\n[3, 2]\n", "r.txt"); }).find("r.txt:2: positions must be strictly"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_chinese_ref("[1, x]\n", "r.txt"); }).find("r.txt:1:"), std::string::npos);
  EXPECT_EQ(parse_chinese_ref("[2, 4]\n[]\n", "r.txt").lines, (std::vector<std::vector<int32_t>>{{2, 4}, {}}));
}

TEST(ChineseWholeWordMask, C34RefFileLinesAndWarning) {
  const PretrainingVocab v = c34_vocab();
  const auto dir = bertrain::test::temp_dir("chinese_wwm");
  bertrain::test::write_file(dir / "in.txt", "我用\n\n拍照\n");
  // One char per token: a whitespace-free line maps its characters to ids.
  TokenizeFn tok = [&](std::string_view line) {
    std::vector<int32_t> out;
    for (size_t i = 0; i < line.size(); i += 3) out.push_back(v.id(std::string(line.substr(i, 3))));
    return out;
  };
  auto read = [&](const std::string& ref) {
    bertrain::test::write_file(dir / "in.ref", ref);
    PretrainingStats st;
    ChineseRefOptions o{{(dir / "in.ref").string()}, &v};
    return read_documents({(dir / "in.txt").string()}, tok, st, {}, &o);
  };
  // One line per input line, or per non-blank line (run_chinese_ref.py drops blank lines).
  auto docs = read("[2]\n[]\n[2]\n");
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0][0][1] & kWordContinuationBit, kWordContinuationBit);
  EXPECT_EQ(docs[0][0][0] & kWordContinuationBit, 0);
  docs = read("[2]\n[2]\n");
  EXPECT_EQ(docs[1][0][1] & kWordContinuationBit, kWordContinuationBit);
  const std::string e = error_of([&] { read("[2]\n"); });
  EXPECT_NE(e.find("1 lines, but the input"), std::string::npos) << e;
  EXPECT_NE(e.find("has 3 lines (2 non-blank)"), std::string::npos) << e;
  // Without a segmentation, whole-word masking on Chinese text warns (and stays silent on other text).
  PretrainingStats st;
  docs = read_documents({(dir / "in.txt").string()}, tok, st);
  EXPECT_NE(chinese_whole_word_mask_warning(docs, v).find("4 of 4 tokens are CJK characters"), std::string::npos);
  EXPECT_EQ(chinese_whole_word_mask_warning({{{v.id("iphone"), v.id("##12")}}}, v), "");
}

// create-pretraining-data reads a reference file as the side file of its windows (create_shards.h): the same
// marks as read_documents in both of its formats, also when a window boundary falls between the lines, and the
// same one-line errors naming the reference file.
TEST(ChineseWholeWordMask, C34RefFileThroughTheWindowedReader) {
  const PretrainingVocab v = c34_vocab();
  const auto dir = bertrain::test::temp_dir("chinese_wwm_windows");
  const std::string in = (dir / "in.txt").string(), ref = (dir / "in.ref").string();
  bertrain::test::write_file(in, "我用\n\n拍照\n \t\n来预测下一个词\n");
  TokenizeFn tok = [&](std::string_view line) {
    std::vector<int32_t> out;
    for (size_t i = 0; i < line.size(); i += 3) out.push_back(v.id(std::string(line.substr(i, 3))));
    return out;
  };
  std::atomic<int64_t> marks{0};
  const SideTokenizeFn side = chinese_ref_side_tokenize(tok, v, &marks);
  for (const std::string r : {"[2]\n[]\n[2]\n[]\n[3, 4]\n", "[2]\n[2]\n[3, 4]\n"}) {
    bertrain::test::write_file(ref, r);
    PretrainingStats whole_st;
    ChineseRefOptions o{{ref}, &v};
    const std::vector<Document> whole = read_documents({in}, tok, whole_st, {}, &o);
    for (int64_t window : {1, 1 << 20}) {  // a window per document, and one window
      const InputPlan plan = plan_input_windows({in}, window, {ref});
      std::vector<Document> windowed;
      PretrainingStats st;
      for (const InputWindow& w : plan.windows)
        for (Document& d : read_window_documents(plan, w, tok, st, side)) windowed.push_back(std::move(d));
      EXPECT_EQ(windowed, whole) << r << " window " << window;
    }
    ASSERT_EQ(whole.size(), 3u);
    EXPECT_EQ(whole[0][0][1] & kWordContinuationBit, kWordContinuationBit);
    EXPECT_EQ(whole[2][0][2] & kWordContinuationBit, kWordContinuationBit);
    EXPECT_EQ(whole[2][0][1] & kWordContinuationBit, 0);
    EXPECT_EQ(whole_st.chinese_ref_marks, 4);
  }
  EXPECT_EQ(marks.load(), 2 * 2 * 4);  // two formats x two window sizes x 4 marks
  // A line count that fits neither format, and a bad position, name the reference file (and its line).
  bertrain::test::write_file(ref, "[2]\n[]\n");
  std::string e = error_of([&] { plan_input_windows({in}, 1, {ref}); });
  EXPECT_NE(e.find(ref), std::string::npos) << e;
  EXPECT_NE(e.find("has 2 lines, but its input file"), std::string::npos) << e;
  EXPECT_NE(e.find("5 lines (3 non-blank)"), std::string::npos) << e;
  bertrain::test::write_file(ref, "[2]\n[1]\n[3, 4]\n");
  e = error_of([&] {
    const InputPlan plan = plan_input_windows({in}, 1, {ref});
    PretrainingStats st;
    for (const InputWindow& w : plan.windows) read_window_documents(plan, w, tok, st, side);
  });
  EXPECT_NE(e.find(ref + ":2: position 1 ('拍') is word-initial"), std::string::npos) << e;
}
