// sentencepiece_test.cpp: ALBERT preprocessing and encode_pieces (CASES.md C08), build-vocab training and its
// BERT vocab mapping, and the `bertrain tokenize` / `bertrain build-vocab` commands.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bertrain/core/error.h"
#include "bertrain/text/sentencepiece_tokenizer.h"
#include "bertrain/text/tokenizer.h"
#include "bertrain/text/utf8.h"
#include "test_util.h"

using namespace bertrain;
using namespace bertrain::text;
namespace fs = std::filesystem;
using Tokens = std::vector<std::string>;

namespace {

using bertrain::test::read_file;
using bertrain::test::split_lines;
using bertrain::test::temp_dir;
using bertrain::test::write_file;

const std::string kSourceDir = BERTRAIN_SOURCE_DIR;
const std::string kBinary = std::string(BERTRAIN_BINARY_DIR) + "/bertrain";
const std::string kSample = std::string(BERTRAIN_SOURCE_DIR) + "/data/gutenberg/sample_small.txt";
const std::string kUncasedVocab = kSourceDir + "/data/vocab/bert-base-uncased-vocab.txt";

std::string run(const std::string& cmd, int* status) {
  FILE* p = ::popen(cmd.c_str(), "r");
  EXPECT_NE(p, nullptr) << cmd;
  std::string out;
  char buf[65536];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = ::pclose(p);
  *status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  return out;
}

std::u32string decode(const std::string& s) {
  std::vector<char32_t> cps;
  utf8_decode_append(s, cps);
  return std::u32string(cps.begin(), cps.end());
}

std::string concat(const Tokens& t) {
  std::string s;
  for (const auto& x : t) s += x;
  return s;
}

// One directory per test process; two tiny models trained once for the whole suite.
class SentencePiece : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("bertrain_spm_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    // A corpus with many "<digit>," patterns, so the model learns pieces like "▁7," (C08b), plus prose.
    std::ofstream c(dir_ / "corpus.txt");
    const auto sample = split_lines(read_file(kSample));
    for (int i = 0; i < 600; ++i) {
      c << "On May " << (i % 28 + 1) << ", 20" << (10 + i % 15) << " we counted " << (i % 9 + 1) << ", "
        << (i % 7 + 2) << ", " << (i % 5 + 3) << " and " << i << ", then 1,000 more.\n";
      c << sample[static_cast<std::size_t>(i) * 7 % sample.size()] << "\n";
    }
    c.close();
    SentencePieceTrainOptions o;
    o.input_files = {(dir_ / "corpus.txt").string()};
    o.output_dir = (dir_ / "albert").string();
    o.vocab_size = 400;
    o.do_lower_case = true;
    o.bert_pre_split = false;
    albert_ = new SentencePieceTrainResult(train_sentencepiece(o));
    o.output_dir = (dir_ / "bert").string();
    o.bert_pre_split = true;
    o.model_type = "bpe";
    bert_ = new SentencePieceTrainResult(train_sentencepiece(o));
  }
  static void TearDownTestSuite() {
    delete albert_;
    delete bert_;
    fs::remove_all(dir_);
  }
  static fs::path dir_;
  static SentencePieceTrainResult* albert_;
  static SentencePieceTrainResult* bert_;
};
fs::path SentencePiece::dir_;
SentencePieceTrainResult* SentencePiece::albert_ = nullptr;
SentencePieceTrainResult* SentencePiece::bert_ = nullptr;

}  // namespace

// ---- C08a: ALBERT preprocessing: NFKD + drop combining class != 0, lowercase, whitespace collapse ----
TEST(AlbertPreprocess, C08aNfkdAndCombiningClass) {
  EXPECT_EQ(albert_preprocess_text("  \uFB01ne \u2460  \uFF21\uFF22\uFF23 Caf\u00E9\u00A0\u00BD \u1E9E ", true),
            "fine 1 abc cafe 1\u20442 \u00DF");
  // Thai U+0E31 is Mn but has combining class 0: ALBERT keeps it, BERT's NFD+Mn drops it.
  EXPECT_EQ(decode(albert_preprocess_text("\u0E1F\u0E31\u0E19", true)), std::u32string(U"\u0E1F\u0E31\u0E19"));
  EXPECT_EQ(decode(BasicTokenizer(true).tokenize("\u0E1F\u0E31\u0E19")[0]), std::u32string(U"\u0E1F\u0E19"));
  // Case kept without lower; quotes; Final_Sigma applies on the whole text.
  EXPECT_EQ(albert_preprocess_text("``Ça va'' ΟΔΟΣ", false), "\"Ca va\" ΟΔΟΣ");
  EXPECT_EQ(albert_preprocess_text("``Ça va'' ΟΔΟΣ", true), "\"ca va\" οδος");
  EXPECT_EQ(albert_preprocess_text("``x''", true, true, false), "``x''");
  EXPECT_EQ(albert_preprocess_text(" a \t\u2028 b ", false, false), " a \t\u2028 b ");  // remove_space=false
  EXPECT_THROW(albert_preprocess_text("a\xFF", true), Error);
}

// Live comparison of albert_preprocess_text with Python's unicodedata over all assigned code points.
TEST(AlbertPreprocess, MatchesPythonOnAllCodePoints) {
  if (!fs::exists("/usr/bin/python3")) GTEST_SKIP() << "/usr/bin/python3 not installed";
  const fs::path tmp = fs::temp_directory_path() / ("bertrain_albert_pp_" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  const std::string script = kSourceDir + "/tests/reference/bert_tokenizer_ref.py";
  int st = 0;
  run("/usr/bin/python3 " + script + " unicode-stress > " + (tmp / "in.txt").string(), &st);
  ASSERT_EQ(st, 0);
  const auto input = split_lines(read_file((tmp / "in.txt").string()));
  ASSERT_GT(input.size(), 3000u);
  for (bool lower : {true, false}) {
    const auto want = split_lines(run("/usr/bin/python3 " + script + " albert-preprocess --lower=" +
                                          (lower ? "true" : "false") + " < " + (tmp / "in.txt").string(), &st));
    ASSERT_EQ(st, 0);
    ASSERT_EQ(want.size(), input.size());
    std::size_t bad = 0;
    for (std::size_t i = 0; i < input.size(); ++i) {
      const std::string got = albert_preprocess_text(input[i], lower);
      if (got != want[i] && ++bad <= 5) ADD_FAILURE() << "lower=" << lower << " line " << i + 1 << "\n got: " << got << "\nwant: " << want[i];
    }
    EXPECT_EQ(bad, 0u);
  }
  fs::remove_all(tmp);
}

// ---- C08b: the digit-comma re-split returns text, ends with ",", and loses or duplicates no '▁' ----
TEST_F(SentencePiece, C08bDigitCommaResplit) {
  const auto spm = SentencePieceTokenizer::load(albert_->model_file, true);
  const std::string text = "On May 7, 2020 we counted 3, 4, 5 and 12, then 1,000 more. Also 9,";
  const std::string pre = albert_preprocess_text(text, true);
  const Tokens out = spm.encode_pieces(pre);
  // Every "<digit>," piece of the model's vocabulary: its replacement is text, ends with ",", and
  // concatenates back to the piece.
  std::size_t matching = 0;
  for (std::size_t id = 0; id < spm.size(); ++id) {
    const std::string& p = spm.id_to_piece(static_cast<int32_t>(id));
    const std::u32string cps = decode(p);
    if (cps.size() > 1 && cps.back() == U',' && cps[cps.size() - 2] >= U'0' && cps[cps.size() - 2] <= U'9') {
      ++matching;
      const Tokens repl = spm.split_digit_comma_piece(p);
      ASSERT_FALSE(repl.empty());
      EXPECT_EQ(repl.back(), ",") << p;
      EXPECT_EQ(concat(repl), p) << p;  // no '▁' lost or duplicated
      for (const auto& r : repl) EXPECT_TRUE(utf8_is_valid(r)) << p;
    }
  }
  ASSERT_GT(matching, 0u) << "the test model should have learnt some <digit>, pieces";
  // No output piece of encode_pieces still ends in <digit>, ; the text is unchanged.
  for (const auto& p : out) {
    const std::u32string cps = decode(p);
    EXPECT_FALSE(cps.size() > 1 && cps.back() == U',' && cps[cps.size() - 2] >= U'0' && cps[cps.size() - 2] <= U'9') << p;
  }
  const std::string joined = concat(out);
  // sentencepiece writes spaces as '▁' (and prefixes one); compare with '▁' turned back into spaces.
  std::string spaced;
  for (std::size_t i = 0; i < joined.size();) {
    if (joined.compare(i, 3, "\xE2\x96\x81") == 0) {
      spaced += ' ';
      i += 3;
    } else {
      spaced += joined[i++];
    }
  }
  EXPECT_EQ(spaced, " " + pre);
  // ALBERT's example: "▁7," -> ["▁7", ","] when "7" encodes as "▁7"; a piece without '▁' gets none back.
  const Tokens seven = spm.split_digit_comma_piece("\xE2\x96\x81" "7,");
  EXPECT_EQ(concat(seven), "\xE2\x96\x81" "7,");
  if (spm.piece_to_id("\xE2\x96\x81" "7") != spm.piece_to_id("<unk>")) {
    EXPECT_EQ(seven, (Tokens{"\xE2\x96\x81" "7", ","}));
  }
  const Tokens bare = spm.split_digit_comma_piece("7,");
  EXPECT_EQ(concat(bare), "7,");
  EXPECT_EQ(bare.back(), ",");
  // tokenize = encode_pieces(preprocess) and ids agree with pieces.
  EXPECT_EQ(spm.tokenize(text), out);
  const auto ids = spm.encode(text);
  ASSERT_EQ(ids.size(), out.size());
  for (std::size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(spm.id_to_piece(ids[i]), out[i]);
}

TEST_F(SentencePiece, BuildVocabWritesBertStyleVocab) {
  for (const auto* r : {albert_, bert_}) {
    ASSERT_TRUE(fs::exists(r->model_file));
    ASSERT_TRUE(fs::exists(r->spm_vocab_file));
    const Vocab v = Vocab::load(r->vocab_file);
    EXPECT_EQ(v.size(), r->bert_vocab_size);
    ASSERT_GE(v.size(), 5u);
    EXPECT_EQ(v.token(0), "[PAD]");
    EXPECT_EQ(v.token(1), "[UNK]");
    EXPECT_EQ(v.token(2), "[CLS]");
    EXPECT_EQ(v.token(3), "[SEP]");
    EXPECT_EQ(v.token(4), "[MASK]");
    v.require_special_tokens({Vocab::kPad, Vocab::kUnk, Vocab::kCls, Vocab::kSep, Vocab::kMask}, "pretraining data");
    // The mapping: "▁x" -> "x", other pieces "x" -> "##x"; spm's control pieces are not carried over.
    const auto spm = SentencePieceTokenizer::load(r->model_file, true);
    EXPECT_EQ(bert_vocab_from_sentencepiece(spm).tokens(), v.tokens());
    EXPECT_FALSE(v.contains("<unk>"));
    EXPECT_FALSE(v.contains("<s>"));
    for (std::size_t id = 0; id < spm.size(); ++id) {
      const std::string& p = spm.id_to_piece(static_cast<int32_t>(id));
      if (p == "<unk>" || p == "<s>" || p == "</s>" || p == "\xE2\x96\x81") continue;
      if (p.rfind("\xE2\x96\x81", 0) == 0) EXPECT_TRUE(v.contains(p.substr(3))) << p;
      else EXPECT_TRUE(v.contains("##" + p)) << p;
    }
  }
  // The pre-split (BERT) vocab drives FullTokenizer on the sample with few [UNK]s.
  auto tok = FullTokenizer(std::make_shared<const Vocab>(Vocab::load(bert_->vocab_file)), true);
  std::size_t n = 0, unk = 0;
  const auto lines = split_lines(read_file(kSample));
  for (std::size_t i = 0; i < 500; ++i)
    for (int32_t id : tok.encode(lines[i])) {
      ++n;
      unk += id == 1;
    }
  EXPECT_GT(n, 1000u);
  EXPECT_LT(static_cast<double>(unk), 0.01 * static_cast<double>(n));
}

TEST(SentencePieceErrors, BadInputs) {
  EXPECT_THROW(SentencePieceTokenizer::load("/nonexistent/spm.model", true), Error);
  const fs::path tmp = fs::temp_directory_path() / ("bertrain_spm_err_" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  std::ofstream(tmp / "junk.model") << "not a model";
  try {
    SentencePieceTokenizer::load((tmp / "junk.model").string(), true);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("junk.model"), std::string::npos) << e.what();
  }
  SentencePieceTrainOptions o;
  o.input_files = {(tmp / "missing.txt").string()};
  o.output_dir = (tmp / "out").string();
  EXPECT_THROW(train_sentencepiece(o), Error);
  o.input_files = {kSample};
  o.model_type = "wordpiece";
  EXPECT_THROW(train_sentencepiece(o), Error);
  fs::remove_all(tmp);
}

// ---- The `bertrain tokenize` and `bertrain build-vocab` commands ----
TEST_F(SentencePiece, CliTokenize) {
  const fs::path in = dir_ / "cli_in.txt";
  std::ofstream(in) << "i like strawberries\n\nHéllo, WORLD!\n";
  int st = 0;
  std::string out = run(kBinary + " tokenize --vocab_file " + kUncasedVocab + " --do_lower_case=true < " + in.string(), &st);
  EXPECT_EQ(st, 0);
  EXPECT_EQ(out, "i like straw ##berries\n\nhello , world !\n");
  out = run(kBinary + " tokenize --vocab_file " + kUncasedVocab + " --do_lower_case=true --ids < " + in.string(), &st);
  EXPECT_EQ(st, 0);
  EXPECT_EQ(out, "1045 2066 13137 20968\n\n7592 1010 2088 999\n");
  // Cased: nothing lowercased, "Héllo" keeps its accent and is split by WordPiece of the uncased vocab.
  out = run(kBinary + " tokenize --vocab_file " + kUncasedVocab + " --do_lower_case=false < " + in.string(), &st);
  EXPECT_EQ(st, 0);
  EXPECT_EQ(split_lines(out).size(), 3u);
  EXPECT_EQ(split_lines(out)[0], "i like straw ##berries");
  // sentencepiece: the output equals the library's pieces.
  out = run(kBinary + " tokenize --spm_model_file " + albert_->model_file + " --do_lower_case=true < " + in.string(), &st);
  EXPECT_EQ(st, 0);
  const auto spm = SentencePieceTokenizer::load(albert_->model_file, true);
  auto lines = split_lines(out);
  ASSERT_EQ(lines.size(), 3u);
  std::string want;
  for (const auto& p : spm.tokenize("Héllo, WORLD!")) want += (want.empty() ? "" : " ") + p;
  EXPECT_EQ(lines[2], want);
  // A non-UTF-8 line is an error naming the line; bad flags are errors.
  const fs::path bad = dir_ / "cli_bad.txt";
  std::ofstream(bad) << "fine\nalso fine\nbroken \xC3(\n";
  out = run(kBinary + " tokenize --vocab_file " + kUncasedVocab + " < " + bad.string() + " 2>&1", &st);
  EXPECT_NE(st, 0);
  EXPECT_NE(out.find("line 3"), std::string::npos) << out;
  run(kBinary + " tokenize --vocab_file " + kUncasedVocab + " --do_lower_case=maybe < " + in.string() + " 2>&1", &st);
  EXPECT_NE(st, 0);
  out = run(kBinary + " tokenize --vocab_file /nonexistent/vocab.txt < " + in.string() + " 2>&1", &st);
  EXPECT_NE(st, 0);
  EXPECT_NE(out.find("/nonexistent/vocab.txt"), std::string::npos) << out;
}

TEST_F(SentencePiece, CliBuildVocab) {
  const fs::path out_dir = dir_ / "cli_vocab";
  int st = 0;
  const std::string log = run(kBinary + " build-vocab --input_file " + (dir_ / "corpus.txt").string() + "," + kSample +
                                  " --output_dir " + out_dir.string() + " --vocab_size 300 --model_type bpe --do_lower_case=true 2>&1",
                              &st);
  ASSERT_EQ(st, 0) << log;
  for (const char* f : {"spm.model", "spm.vocab", "vocab.txt"}) EXPECT_TRUE(fs::exists(out_dir / f)) << f;
  const Vocab v = Vocab::load((out_dir / "vocab.txt").string());
  EXPECT_EQ(v.token(4), "[MASK]");
  run(kBinary + " build-vocab --input_file /nonexistent.txt --output_dir " + out_dir.string() + " --vocab_size 300 2>&1", &st);
  EXPECT_NE(st, 0);
}
