// chinese_tokenizer_test.cpp: CASES.md C35: BasicTokenizer on Chinese text (full-width forms, CJK punctuation,
// invisible characters) as google-research/bert tokenization.py, and the tokenize_chinese_chars switch.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "bertrain/text/char_vocab.h"
#include "bertrain/text/tokenizer.h"

using namespace bertrain::text;
using S = std::vector<std::string>;

TEST(ChineseBasicTokenizer, C35FullWidthPunctuationInvisible) {
  const BasicTokenizer lower(true), cased(false);
  // Ａ lowercases to full-width ａ (no NFKC); ＋ (Sm) and ＄ (Sc) are not punctuation, ％ (Po) is.
  EXPECT_EQ(lower.tokenize("ＡＢＣ＋１２３％"), (S{"ａｂｃ＋１２３", "％"}));
  EXPECT_EQ(cased.tokenize("ＡＢＣ＋１２３％"), (S{"ＡＢＣ＋１２３", "％"}));
  EXPECT_EQ(lower.tokenize("价格：＄５～１０元【包邮】"), (S{"价", "格", "：", "＄５～１０", "元", "【", "包", "邮", "】"}));
  EXPECT_EQ(lower.tokenize("Ｃ＃和Ｃ＋＋"), (S{"ｃ", "＃", "和", "ｃ＋＋"}));
  EXPECT_EQ(lower.tokenize("我用iPhone12拍照（２０２０年）"),
            (S{"我", "用", "iphone12", "拍", "照", "（", "２０２０", "年", "）"}));
  EXPECT_EQ(lower.tokenize("“你好”，他说。"), (S{"“", "你", "好", "”", "，", "他", "说", "。"}));
  EXPECT_EQ(lower.tokenize("《红楼梦》—曹雪芹"), (S{"《", "红", "楼", "梦", "》", "—", "曹", "雪", "芹"}));
  EXPECT_EQ(lower.tokenize("中文\u3000空格"), (S{"中", "文", "空", "格"}));
  EXPECT_EQ(lower.tokenize("AI芯片\u200b市场"), (S{"ai", "芯", "片", "市", "场"}));
  // Three U+FFFD are deleted: a character-level tagger must keep its own offset map.
  EXPECT_EQ(lower.tokenize("这是一个\ufffd\ufffd\ufffd中文句子"), (S{"这", "是", "一", "个", "中", "文", "句", "子"}));
  EXPECT_EQ(lower.tokenize("Café咖啡"), (S{"cafe", "咖", "啡"}));
  EXPECT_EQ(cased.tokenize("Café咖啡"), (S{"Café", "咖", "啡"}));
  EXPECT_EQ(lower.tokenize("Ⅻ章"), (S{"ⅻ", "章"}));
  EXPECT_EQ(lower.tokenize("㊣品"), (S{"㊣", "品"}));
  EXPECT_EQ(lower.tokenize("①②③"), (S{"①②③"}));
}

TEST(ChineseBasicTokenizer, C35TokenizeChineseCharsSwitch) {
  auto vocab = std::make_shared<const Vocab>(
      Vocab::from_tokens({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "的", "人", "有", "##人", "##有"}, "c35"));
  EXPECT_EQ(FullTokenizer(vocab, true).tokenize("的人有"), (S{"的", "人", "有"}));  // default true, as the reference
  EXPECT_EQ(FullTokenizer(vocab, true, std::nullopt, false).tokenize("的人有"), (S{"的", "##人", "##有"}));
  EXPECT_EQ(BasicTokenizer(true, std::nullopt, false).tokenize("我用iPhone拍照。"), (S{"我用iphone拍照", "。"}));
  EXPECT_FALSE(BasicTokenizer(true, std::nullopt, false).tokenize_chinese_chars());
}

TEST(ChineseCharVocab, CharactersThenContinuationPieces) {
  const auto dir = std::filesystem::temp_directory_path() / ("bertrain_char_vocab_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream((dir / "c.txt").string()) << "我用iPhone12拍照。\n我们的我\n";
  CharVocabOptions o{{(dir / "c.txt").string()}, (dir / "vocab.txt").string(), 100, 1, true};
  const CharVocabResult r = build_char_vocab(o);
  // Token starts: 我 x3, then once each, by code point: i U+0069, 。 U+3002, 们 U+4EEC, 拍 U+62CD, 照 U+7167,
  // 用 U+7528, 的 U+7684.
  // Continuations inside "iphone12": p h o n e 1 2 once each (ties by code point: 1 2 e h n o p).
  std::ifstream in((dir / "vocab.txt").string());
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  EXPECT_EQ(lines, (S{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "我", "i", "。", "们", "拍", "照", "用", "的",
                      "##1", "##2", "##e", "##h", "##n", "##o", "##p"}));
  EXPECT_EQ(r.characters, 8);
  EXPECT_EQ(r.continuations, 7);
  EXPECT_DOUBLE_EQ(r.coverage, 1.0);
  // The vocab tokenizes its corpus without [UNK].
  auto v = std::make_shared<const Vocab>(Vocab::load((dir / "vocab.txt").string()));
  EXPECT_EQ(FullTokenizer(v, true).tokenize("我用iPhone12"), (S{"我", "用", "i", "##p", "##h", "##o", "##n", "##e", "##1", "##2"}));
  std::filesystem::remove_all(dir);
}
