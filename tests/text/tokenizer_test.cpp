// tokenizer_test.cpp: BERT Basic/WordPiece/Full tokenizers (CASES.md C01-C07), vocab loading and
// validation, SHA-256 vectors, golden outputs of an independent Python reference, and `bertrain tokenize`.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bertrain/core/error.h"
#include "bertrain/core/sha256.h"
#include "bertrain/text/tokenizer.h"
#include "bertrain/text/utf8.h"
#include "bertrain/text/vocab.h"
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
const std::string kUncasedVocab = kSourceDir + "/data/vocab/bert-base-uncased-vocab.txt";
const std::string kCasedVocab = kSourceDir + "/data/vocab/bert-base-cased-vocab.txt";

std::string join(const Tokens& t) {
  std::string s;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (i) s += ' ';
    s += t[i];
  }
  return s;
}

// Expects `fn` to throw bertrain::Error whose message contains every one of `parts`.
template <class F>
void expect_error(F&& fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected bertrain::Error";
  } catch (const Error& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << " lacks " << p;
  }
}

std::shared_ptr<const Vocab> c07_vocab() {
  return std::make_shared<const Vocab>(
      Vocab::from_tokens({"[UNK]", "un", "##aff", "##able", "a", "##b", "é", "##é", "x"}, "C07"));
}

std::string repeat(const std::string& s, int n) {
  std::string r;
  for (int i = 0; i < n; ++i) r += s;
  return r;
}

std::u32string decode(const std::string& s) {
  std::vector<char32_t> cps;
  utf8_decode_append(s, cps);
  return std::u32string(cps.begin(), cps.end());
}

// Runs a shell command, returns its stdout and sets `status` to its exit status.
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

}  // namespace

// ---- C01: accent stripping is tied to lowercasing (and to HF's explicit strip_accents flag) ----
TEST(BasicTokenizer, C01AccentStrippingFollowsLowercasing) {
  BasicTokenizer lower(true), cased(false), lower_keep(true, false);
  EXPECT_EQ(lower.tokenize("Héllo, WORLD!"), (Tokens{"hello", ",", "world", "!"}));
  EXPECT_EQ(lower.tokenize("naïve café"), (Tokens{"naive", "cafe"}));
  EXPECT_EQ(lower.tokenize("が"), (Tokens{"か"}));
  EXPECT_EQ(decode(lower.tokenize("が")[0]), std::u32string(U"\u304B"));
  EXPECT_EQ(cased.tokenize("Héllo, WORLD!"), (Tokens{"Héllo", ",", "WORLD", "!"}));
  EXPECT_EQ(cased.tokenize("naïve café"), (Tokens{"naïve", "café"}));
  EXPECT_EQ(cased.tokenize("が"), (Tokens{"が"}));
  EXPECT_EQ(lower_keep.tokenize("Héllo, WORLD!"), (Tokens{"héllo", ",", "world", "!"}));
  // strip_accents=true without lowercasing (HF semantics): accents go, case stays.
  EXPECT_EQ(BasicTokenizer(false, true).tokenize("Héllo naïve"), (Tokens{"Hello", "naive"}));
}

// ---- C02: Hangul syllables decompose to jamo under NFD (not recomposed) ----
TEST(BasicTokenizer, C02HangulDecomposesToJamo) {
  auto t = BasicTokenizer(true).tokenize("한국어");
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(decode(t[0]), std::u32string(U"\u1112\u1161\u11AB\u1100\u116E\u11A8\u110B\u1165"));
  auto c = BasicTokenizer(false).tokenize("한국어");
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(decode(c[0]), std::u32string(U"\uD55C\uAD6D\uC5B4"));
}

// ---- C03: Python str.lower() semantics: full mapping, Final_Sigma, never Turkish-locale ----
TEST(BasicTokenizer, C03LowercasingOfNonAscii) {
  BasicTokenizer lower(true);
  const Tokens turkish = lower.tokenize("ÇOCUK ŞANLIURFA'DAN GELENLERİ ÖĞÜN OLARAK YİYOR");
  EXPECT_EQ(join(turkish), "cocuk sanliurfa ' dan gelenleri ogun olarak yiyor");
  EXPECT_EQ(turkish.size(), 8u);
  EXPECT_EQ(lower.tokenize("İstanbul"), (Tokens{"istanbul"}));
  const Tokens greek = lower.tokenize("ΟΔΟΣ");
  ASSERT_EQ(greek.size(), 1u);
  EXPECT_EQ(decode(greek[0]), std::u32string(U"\u03BF\u03B4\u03BF\u03C2"));
  EXPECT_EQ(lower.tokenize("I"), (Tokens{"i"}));  // not dotless ı
  // Without accent stripping the full mapping is visible: İ -> i + U+0307 (two code points).
  BasicTokenizer keep(true, false);
  EXPECT_EQ(decode(keep.tokenize("İ")[0]), std::u32string(U"i\u0307"));
  // Final_Sigma needs a cased letter before (case-ignorables skipped) and none after.
  EXPECT_EQ(decode(keep.tokenize("Σ")[0]), std::u32string(U"\u03C3"));             // nothing before
  EXPECT_EQ(decode(keep.tokenize("ΣΑ")[0]), std::u32string(U"\u03C3\u03B1"));      // word-initial
  EXPECT_EQ(decode(keep.tokenize("ΑΣΑ")[0]), std::u32string(U"\u03B1\u03C3\u03B1"));  // medial
  // ' is case-ignorable: skipped by the Final_Sigma scan (lowering happens before the punctuation split).
  EXPECT_EQ(decode(join(keep.tokenize("Α'Σ"))), std::u32string(U"\u03B1 ' \u03C2"));
  EXPECT_EQ(decode(join(keep.tokenize("ΑΣ'Α"))), std::u32string(U"\u03B1\u03C3 ' \u03B1"));
  EXPECT_EQ(decode(keep.tokenize("ΑΣ1")[0]), std::u32string(U"\u03B1\u03C21"));    // digit: not cased
  // Final sigma is decided within the whitespace token, before punctuation is split off.
  auto t = keep.tokenize("ΟΔΟΣ, ΑΣ.Α");
  ASSERT_EQ(t.size(), 5u);
  EXPECT_EQ(decode(t[0]), std::u32string(U"\u03BF\u03B4\u03BF\u03C2"));
  EXPECT_EQ(decode(t[2]), std::u32string(U"\u03B1\u03C3"));  // '.' is case-ignorable, then cased Α follows
}

// ---- C05: the punctuation set: ASCII symbol ranges and Unicode P*, not Sc/So ----
TEST(BasicTokenizer, C05PunctuationSet) {
  const Tokens want = {"¿", "que", "?", "«", "si", "»", "—", "‘", "ok", "’", "1", ",", "000", ".", "5", "e", "-",
                       "mail", "$", "5", "50", "%", "a", "+", "b", "=", "c", "^", "`", "5€", "20°c", "©2020", "x",
                       "_", "y"};
  EXPECT_EQ(BasicTokenizer(true).tokenize("¿Qué? «Sí» — ‘ok’ 1,000.5 e-mail $5 50% a+b=c ^ ` 5€ 20°C ©2020 x_y"),
            want);
}

// ---- C06: CJK ideographs (incl. supplementary and compatibility blocks) are isolated; kana/Hangul not ----
TEST(BasicTokenizer, C06CjkIsolation) {
  const Tokens want = {"カタカナ", "漢", "字", "𠀀", "x", "ひらがな", "한국어", "豈", "a", "。", "、"};
  EXPECT_EQ(BasicTokenizer(false).tokenize("カタカナ漢字𠀀x ひらがな 한국어 豈a 。、"), want);
}

TEST(BasicTokenizer, CleaningAndWhitespace) {
  BasicTokenizer cased(false);
  // NUL, U+FFFD, Cc and Cf are removed (joining their neighbours); \t \n \r and Zs separate.
  EXPECT_EQ(cased.tokenize(std::string("a\0b\xEF\xBF\xBD" "c\x01" "d\u200Be", 13)), (Tokens{"abcde"}));
  EXPECT_EQ(cased.tokenize("a\tb\nc\rd\u00A0e\u3000f"), (Tokens{"a", "b", "c", "d", "e", "f"}));
  // U+2028/U+2029 are neither removed nor _is_whitespace, but Python's str.split() splits on them.
  EXPECT_EQ(cased.tokenize("a\u2028b\u2029c"), (Tokens{"a", "b", "c"}));
  EXPECT_EQ(cased.tokenize("  \t "), Tokens{});
  EXPECT_EQ(cased.tokenize(""), Tokens{});
  // Invalid UTF-8 is rejected (the reference silently drops the bytes).
  expect_error([&] { cased.tokenize("ok \xC3\x28"); }, {"invalid UTF-8", "byte 3"});
  expect_error([&] { cased.tokenize("\xED\xA0\x80"); }, {"invalid UTF-8"});  // a surrogate
  expect_error([&] { cased.tokenize("\xC0\xAF"); }, {"invalid UTF-8"});      // overlong '/'
}

TEST(BasicTokenizer, StreamingMatchesVector) {
  BasicTokenizer t(true);
  Tokens streamed;
  t.tokenize("Hello, ΟΔΟΣ 漢字!", [&](std::string_view s) { streamed.emplace_back(s); });
  EXPECT_EQ(streamed, t.tokenize("Hello, ΟΔΟΣ 漢字!"));
}

// ---- C07: WordPiece greedy longest-match-first; whole word [UNK]; 200 code point limit ----
TEST(WordpieceTokenizer, C07GreedyLongestMatchFirst) {
  WordpieceTokenizer wp(c07_vocab());
  EXPECT_EQ(wp.tokenize("unaffable"), (Tokens{"un", "##aff", "##able"}));
  EXPECT_EQ(wp.tokenize("abx"), (Tokens{"[UNK]"}));
  EXPECT_EQ(wp.tokenize("unaffablex"), (Tokens{"[UNK]"}));
  EXPECT_EQ(wp.tokenize("unaffable abx a"), (Tokens{"un", "##aff", "##able", "[UNK]", "a"}));
  Tokens want200 = {"a"};
  for (int i = 0; i < 199; ++i) want200.push_back("##b");
  EXPECT_EQ(wp.tokenize(std::string("a").append(repeat("b", 199))), want200);
  EXPECT_EQ(wp.tokenize(std::string("a").append(repeat("b", 200))), (Tokens{"[UNK]"}));
  Tokens want_e = {"é"};
  for (int i = 0; i < 199; ++i) want_e.push_back("##é");
  EXPECT_EQ(wp.tokenize(repeat("é", 200)), want_e);  // 400 bytes, 200 code points
  EXPECT_EQ(wp.tokenize(repeat("é", 201)), (Tokens{"[UNK]"}));
  std::vector<int32_t> ids;
  wp.encode_word("unaffable", ids);
  wp.encode_word("abx", ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2, 3, 0}));
}

TEST(WordpieceTokenizer, UnknownWordWithoutUnkTokenIsAnError) {
  auto v = std::make_shared<const Vocab>(Vocab::from_tokens({"a", "##b"}, "tiny"));
  WordpieceTokenizer wp(v);
  EXPECT_EQ(wp.tokenize("ab c"), (Tokens{"a", "##b", "[UNK]"}));  // strings work without [UNK] in the vocab
  std::vector<int32_t> ids;
  expect_error([&] { wp.encode_word("c", ids); }, {"tiny", "[UNK]", "'c'"});
}

// ---- FullTokenizer against the released BERT vocabularies ----
TEST(FullTokenizer, IdsFromReleasedUncasedVocab) {
  auto tok = FullTokenizer::from_vocab_file(kUncasedVocab, true);
  EXPECT_EQ(tok.tokenize("i like strawberries"), (Tokens{"i", "like", "straw", "##berries"}));
  EXPECT_EQ(tok.encode("I like Strawberries"), (std::vector<int32_t>{1045, 2066, 13137, 20968}));
  EXPECT_EQ(tok.convert_tokens_to_ids(tok.tokenize("i like strawberries")), tok.encode("i like strawberries"));
  EXPECT_EQ(tok.convert_ids_to_tokens({101, 1996, 1012, 102, 100, 103, 0}),
            (Tokens{"[CLS]", "the", ".", "[SEP]", "[UNK]", "[MASK]", "[PAD]"}));
  expect_error([&] { tok.convert_tokens_to_ids({"the", "notaword"}); }, {"notaword", "bert-base-uncased-vocab.txt"});
  expect_error([&] { tok.convert_ids_to_tokens({30522}); }, {"30522", "out of range"});
}

TEST(FullTokenizer, IdsFromReleasedCasedVocab) {
  auto tok = FullTokenizer::from_vocab_file(kCasedVocab, false);
  EXPECT_EQ(tok.encode("The the , ."), (std::vector<int32_t>{1109, 1103, 117, 119}));
  EXPECT_EQ(tok.vocab().id("##s"), 1116);
}

// Golden: the whole sample corpus through the Python reference (tests/reference/bert_tokenizer_ref.py).
TEST(FullTokenizer, MatchesPythonReferenceOnSampleCorpus) {
  const auto input = split_lines(read_file(std::string(BERTRAIN_SOURCE_DIR) + "/data/gutenberg/sample_small.txt"));
  struct Case {
    const char* golden;
    const std::string& vocab;
    bool lower;
  };
  for (const Case& c : {Case{"sample_small.uncased.wordpiece", kUncasedVocab, true},
                        Case{"sample_small.cased.wordpiece", kCasedVocab, false}}) {
    const auto golden = split_lines(read_file(std::string(BERTRAIN_TEST_DATA_DIR) + "/tokenizer/" + c.golden));
    ASSERT_GT(golden.size(), 1000u);
    ASSERT_LE(golden.size(), input.size());
    auto tok = FullTokenizer::from_vocab_file(c.vocab, c.lower);
    std::size_t mismatches = 0;
    for (std::size_t i = 0; i < golden.size(); ++i) {
      const std::string got = join(tok.tokenize(input[i]));
      if (got != golden[i] && ++mismatches <= 5) ADD_FAILURE() << c.golden << " line " << i + 1 << "\n got: " << got << "\nwant: " << golden[i];
    }
    EXPECT_EQ(mismatches, 0u) << c.golden;
  }
}

// Live comparison with Python's unicodedata on every assigned code point (CJK/Hangul blocks sampled), in the
// contexts the tokenizer cares about. Needs /usr/bin/python3 (installed by scripts/setup.sh).
TEST(BasicTokenizer, MatchesPythonUnicodeDatabaseOnAllCodePoints) {
  if (!fs::exists("/usr/bin/python3")) GTEST_SKIP() << "/usr/bin/python3 not installed";
  const fs::path dir = temp_dir("tokenizer_test");
  const std::string script = kSourceDir + "/tests/reference/bert_tokenizer_ref.py";
  int st = 0;
  run("/usr/bin/python3 " + script + " unicode-stress > " + (dir / "stress.txt").string(), &st);
  ASSERT_EQ(st, 0);
  const auto input = split_lines(read_file((dir / "stress.txt").string()));
  ASSERT_GT(input.size(), 3000u);
  for (bool lower : {true, false}) {
    const std::string out = run("/usr/bin/python3 " + script + " tokenize --do_lower_case=" + (lower ? "true" : "false") +
                                    " < " + (dir / "stress.txt").string(), &st);
    ASSERT_EQ(st, 0);
    const auto want = split_lines(out);
    ASSERT_EQ(want.size(), input.size());
    BasicTokenizer tok(lower);
    std::size_t mismatches = 0;
    for (std::size_t i = 0; i < input.size(); ++i) {
      const std::string got = join(tok.tokenize(input[i]));
      if (got != want[i] && ++mismatches <= 5)
        ADD_FAILURE() << "lower=" << lower << " line " << i + 1 << "\ninput: " << input[i] << "\n  got: " << got << "\n want: " << want[i];
    }
    EXPECT_EQ(mismatches, 0u) << "lower=" << lower;
  }
  fs::remove_all(dir);
}

// ---- Vocab loading and validation ----
TEST(Vocab, LoadsReleasedVocabs) {
  const Vocab v = Vocab::load(kUncasedVocab);
  EXPECT_EQ(v.size(), 30522u);
  EXPECT_EQ(v.id("[PAD]"), 0);
  EXPECT_EQ(v.id("[unused0]"), 1);
  EXPECT_EQ(v.unk_id(), 100);
  EXPECT_EQ(v.id("[CLS]"), 101);
  EXPECT_EQ(v.id("[SEP]"), 102);
  EXPECT_EQ(v.id("[MASK]"), 103);
  EXPECT_EQ(v.id("the"), 1996);
  EXPECT_EQ(v.id("."), 1012);
  EXPECT_EQ(v.id("not-a-token"), -1);
  EXPECT_FALSE(v.contains("The"));
  EXPECT_EQ(v.token(1996), "the");
  expect_error([&] { v.token(-1); }, {"-1", "out of range"});
  expect_error([&] { v.token(30522); }, {"30522"});
  EXPECT_EQ(v.sha256(), "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3");
  v.require_special_tokens({Vocab::kPad, Vocab::kUnk, Vocab::kCls, Vocab::kSep, Vocab::kMask}, "pretraining data");
  const Vocab c = Vocab::load(kCasedVocab);
  EXPECT_EQ(c.size(), 28996u);
  EXPECT_EQ(c.sha256(), "eeaa9875b23b04b4c54ef759d03db9d1ba1554838f8fb26c5d96fa551df93d02");
}

TEST(Vocab, ValidationErrorsNameFileAndLine) {
  const fs::path dir = temp_dir("tokenizer_test");
  expect_error([&] { Vocab::load((dir / "missing.txt").string()); }, {"missing.txt", "cannot open"});
  write_file(dir / "empty.txt", "");
  expect_error([&] { Vocab::load((dir / "empty.txt").string()); }, {"empty.txt", "empty"});
  write_file(dir / "dup.txt", "[PAD]\n[UNK]\nfoo\nbar\nfoo\n");
  expect_error([&] { Vocab::load((dir / "dup.txt").string()); }, {"dup.txt", "line 5", "duplicate", "'foo'", "line 3"});
  // After str.strip() "foo " and "foo" are the same token.
  write_file(dir / "dup_strip.txt", "foo\nfoo \n");
  expect_error([&] { Vocab::load((dir / "dup_strip.txt").string()); }, {"line 2", "duplicate"});
  write_file(dir / "latin1.txt", "[PAD]\ncaf\xE9\n");
  expect_error([&] { Vocab::load((dir / "latin1.txt").string()); }, {"latin1.txt", "line 2", "UTF-8"});
  fs::remove_all(dir);
}

TEST(Vocab, StripsLikePythonAndKeepsIds) {
  const fs::path dir = temp_dir("tokenizer_test");
  // CRLF endings, a trailing no-newline line, U+00A0 around a token (Python's strip() removes it), a blank line.
  write_file(dir / "v.txt", "[PAD]\r\n[UNK]\r\n\u00A0x\u00A0\n\ny");
  const Vocab v = Vocab::load((dir / "v.txt").string());
  EXPECT_EQ(v.tokens(), (std::vector<std::string>{"[PAD]", "[UNK]", "x", "", "y"}));
  EXPECT_EQ(v.id("y"), 4);
  EXPECT_EQ(v.unk_id(), 1);
  expect_error([&] { v.require_special_tokens({Vocab::kPad, Vocab::kCls}, "pretraining data"); },
               {"v.txt", "[CLS]", "pretraining data"});
  // save() + load() round trip; from_tokens() checksum is that of the saved bytes.
  const Vocab m = Vocab::from_tokens({"[PAD]", "a", "##b"});
  m.save((dir / "m.txt").string());
  const Vocab r = Vocab::load((dir / "m.txt").string());
  EXPECT_EQ(r.tokens(), m.tokens());
  EXPECT_EQ(r.sha256(), m.sha256());
  EXPECT_EQ(m.sha256(), sha256_hex("[PAD]\na\n##b\n"));
  expect_error([] { Vocab::from_tokens({"a", "b", "a"}, "mem"); }, {"mem", "duplicate", "'a'"});
  expect_error([] { Vocab::from_tokens({}, "mem"); }, {"mem", "empty"});
  fs::remove_all(dir);
}

// ---- SHA-256: FIPS 180-4 / NIST CAVP example vectors, plus padding boundaries (checked with hashlib) ----
TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  EXPECT_EQ(sha256_hex(std::string(55, 'a')), "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  EXPECT_EQ(sha256_hex(std::string(56, 'a')), "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  EXPECT_EQ(sha256_hex(std::string(64, 'a')), "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
  EXPECT_EQ(sha256_hex(std::string(119, 'a')), "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb");
  EXPECT_EQ(sha256_hex(std::string(120, 'a')), "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c");
}

TEST(Utf8, Validation) {
  EXPECT_TRUE(utf8_is_valid("plain ascii"));
  EXPECT_TRUE(utf8_is_valid("é 漢 𠀀 \xF4\x8F\xBF\xBF"));  // U+10FFFF
  EXPECT_EQ(utf8_invalid_offset("ab\xF4\x90\x80\x80"), 2u);  // above U+10FFFF
  EXPECT_EQ(utf8_invalid_offset("a\xE0\x80\xAF"), 1u);       // overlong
  EXPECT_EQ(utf8_invalid_offset("abc\xE6\xBC"), 3u);         // truncated
  EXPECT_EQ(utf8_invalid_offset("\x80"), 0u);                // stray continuation
  EXPECT_EQ(utf8_length("a漢𠀀"), 3u);
}
