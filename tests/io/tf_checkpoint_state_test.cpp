// tf_checkpoint_state_test.cpp: bertrain's reader of a TF training directory's `checkpoint` file
// (read_tf_checkpoint_state in bertrain/io/tf_checkpoint.h) against protobuf's own TextFormat, with
// CheckpointState compiled by protoc from tests/io/checkpoint_state.proto: on every input of the table both accept
// with the same model_checkpoint_path, or both refuse; and what protobuf's printer writes (the form TF writes,
// non-ASCII bytes as octal escapes) reads back byte for byte. Links the io layer only (see tf_checkpoint.cmake).
#include <gtest/gtest.h>
#include <google/protobuf/text_format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "bertrain/core/error.h"
#include "bertrain/io/tf_checkpoint.h"
#include "checkpoint_state.pb.h"

namespace fs = std::filesystem;
using bertrain::read_tf_checkpoint_state;

namespace {

const fs::path kRoot = fs::temp_directory_path() / ("bertrain_ckpt_state_" + std::to_string(::getpid()));
struct RemoveRoot {
  ~RemoveRoot() {
    std::error_code ec;
    fs::remove_all(kRoot, ec);
  }
} remove_root;

fs::path dir_with(const std::string& name, const std::string& text) {
  const fs::path d = kRoot / name;
  fs::create_directories(d);
  std::ofstream(d / "checkpoint", std::ios::binary) << text;
  return d;
}

struct Outcome {
  bool accepted = false;
  std::string path;   // model_checkpoint_path as written in the file (before joining to the directory)
  std::string error;  // bertrain's message when refused
};

// bertrain's reading, with the directory prefix taken off again for relative paths.
Outcome ours(const fs::path& d) {
  Outcome o;
  try {
    const std::string p = *read_tf_checkpoint_state(d.string());
    o.accepted = true;
    const std::string prefix = (d / "").string();
    o.path = p.compare(0, prefix.size(), prefix) == 0 ? p.substr(prefix.size()) : p;
  } catch (const bertrain::Error& e) {
    o.error = e.what();
  }
  return o;
}

// protobuf's: Merge (a repeated singular field: the last counts), as TF's text_format.Merge; an empty path is
// refused as TF's get_checkpoint_state refuses it ("Invalid checkpoint state").
Outcome reference(const std::string& text) {
  bertrain::tfproto::CheckpointState s;
  google::protobuf::TextFormat::Parser parser;
  parser.AllowPartialMessage(true);
  Outcome o;
  o.accepted = parser.MergeFromString(text, &s) && s.has_model_checkpoint_path() && !s.model_checkpoint_path().empty();
  o.path = s.model_checkpoint_path();
  return o;
}

struct Case {
  const char* name;
  std::string text;
  bool ours_stricter = false;  // protobuf accepts, bertrain refuses on purpose (a NUL byte in a path)
};

TEST(TfCheckpointState, AgreesWithProtobufTextFormat) {
  google::protobuf::LogSilencer quiet;  // protobuf's parser logs every refusal
  const std::vector<Case> cases = {
      {"tf_estimator", "model_checkpoint_path: \"model.ckpt-1000\"\nall_model_checkpoint_paths: \"model.ckpt-500\"\n"
                       "all_model_checkpoint_paths: \"model.ckpt-1000\"\nall_model_checkpoint_timestamps: 1.7e+09\n"
                       "all_model_checkpoint_timestamps: 1700000123.25\nlast_preserved_timestamp: 1699999000.5\n"},
      {"absolute", "model_checkpoint_path: \"/tmp/output/model.ckpt-20\"\n"},
      {"order_and_no_newline", "all_model_checkpoint_paths: \"a\" model_checkpoint_path: \"b\""},
      {"comments_and_separators", "# written by hand\nmodel_checkpoint_path : 'ckpt-3' ; # the latest\n"
                                  "all_model_checkpoint_paths: \"ckpt-3\",\n"},
      {"adjacent_strings", "model_checkpoint_path: \"run/\" 'model' \".ckpt-7\"\n"},
      {"escapes", "model_checkpoint_path: \"a\\\"b\\\\c\\td\\x41\\101\\'e\\?\\n\"\n"},
      {"utf8_octal", "model_checkpoint_path: \"\\346\\250\\241\\345\\236\\213/model.ckpt-9\"\n"},
      {"utf8_raw", "model_checkpoint_path: \"模型/model.ckpt-9\"\n"},
      {"short_octal_and_hex", "model_checkpoint_path: \"x\\7y\\12z\\x9w\"\n"},
      {"last_wins", "model_checkpoint_path: \"first\"\nmodel_checkpoint_path: \"second\"\n"},
      {"crlf", "model_checkpoint_path: \"model.ckpt-5\"\r\nall_model_checkpoint_paths: \"model.ckpt-5\"\r\n"},
      {"tokens_across_lines", "model_checkpoint_path\n:  # the latest\n  \"model\" # more\n \".ckpt-1\"\n"},
      {"lists", "model_checkpoint_path: \"b\"\nall_model_checkpoint_paths: [\"a\", 'b']\n"
                "all_model_checkpoint_timestamps: [1.5, 2e3, -3]\n"},
      {"empty_list", "all_model_checkpoint_paths: []\nmodel_checkpoint_path: 'x'"},
      {"unicode_escapes", "model_checkpoint_path: \"\\u6a21\\u578b/\\U0001F600\\ud83d\\ude00.ckpt\""},
      {"number_int", "all_model_checkpoint_timestamps: 17\nmodel_checkpoint_path: 'x'"},
      {"number_dot", "all_model_checkpoint_timestamps: .5\nmodel_checkpoint_path: 'x'"},
      {"number_f", "all_model_checkpoint_timestamps: 1.5f\nmodel_checkpoint_path: 'x'"},
      {"number_inf", "all_model_checkpoint_timestamps: inf\nmodel_checkpoint_path: 'x'"},
      {"number_minus_infinity", "all_model_checkpoint_timestamps: -Infinity\nmodel_checkpoint_path: 'x'"},
      {"number_nan", "all_model_checkpoint_timestamps: nan\nmodel_checkpoint_path: 'x'"},
      {"number_minus_space", "last_preserved_timestamp: - 1e5\nmodel_checkpoint_path: 'x'"},
      // Refused by both.
      {"empty_file", ""},
      {"only_comment", "# nothing\n"},
      {"no_latest", "all_model_checkpoint_paths: \"model.ckpt-5\"\n"},
      {"empty_path", "model_checkpoint_path: \"\"\n"},
      {"unterminated", "model_checkpoint_path: \"model.ckpt-5\n"},
      {"newline_in_string", "model_checkpoint_path: \"model\n.ckpt-5\"\n"},
      {"unknown_escape", "model_checkpoint_path: \"model\\q\"\n"},
      {"hex_without_digit", "model_checkpoint_path: \"model\\xg\"\n"},
      {"no_colon", "model_checkpoint_path \"model.ckpt-5\"\n"},
      {"unquoted", "model_checkpoint_path: model.ckpt-5\n"},
      {"number", "model_checkpoint_path: 12\n"},
      {"message_value", "model_checkpoint_path { }\n"},
      {"no_value", "model_checkpoint_path:\n"},
      {"garbage", "\x01\x02\x03"},
      {"unknown_field", "model_checkpoint_path: 'x'\nfoo: 1\n"},
      {"digit_name", "1abc: 'x'\n"},
      {"paths_not_strings", "model_checkpoint_path: 'x'\nall_model_checkpoint_paths: foo\n"},
      {"timestamp_string", "model_checkpoint_path: 'x'\nlast_preserved_timestamp: \"1\"\n"},
      {"leading_separator", ",model_checkpoint_path: 'x'"},
      {"double_separator", "model_checkpoint_path: 'x';;"},
      {"singular_list", "model_checkpoint_path: ['x']\n"},
      {"unclosed_list", "all_model_checkpoint_paths: ['x'\nmodel_checkpoint_path: 'y'\n"},
      {"list_without_comma", "all_model_checkpoint_paths: ['x' 1]\nmodel_checkpoint_path: 'y'\n"},
      {"bad_exponent", "last_preserved_timestamp: 1e\nmodel_checkpoint_path: 'x'\n"},
      {"number_hex", "all_model_checkpoint_timestamps: 0x10\nmodel_checkpoint_path: 'x'"},
      {"number_leading_zero", "all_model_checkpoint_timestamps: 017\nmodel_checkpoint_path: 'x'"},
      {"number_leading_zero_float", "all_model_checkpoint_timestamps: 01.5\nmodel_checkpoint_path: 'x'"},
      {"number_zero_float", "all_model_checkpoint_timestamps: 0.5\nall_model_checkpoint_timestamps: 0\n"
                            "all_model_checkpoint_timestamps: 0e3\nmodel_checkpoint_path: 'x'"},
      {"not_octal", "last_preserved_timestamp: 08\nmodel_checkpoint_path: 'x'\n"},
      {"short_unicode", "model_checkpoint_path: '\\u12'\n"},
      {"raw_nul", std::string("model_checkpoint_path: 'a\0b'\n", 29)},
      {"nul_escape", "model_checkpoint_path: 'a\\000b'\n", true},
  };
  for (const Case& c : cases) {
    const Outcome ref = reference(c.text);
    const fs::path d = dir_with(c.name, c.text);
    const Outcome got = ours(d);
    EXPECT_EQ(got.accepted, ref.accepted && !c.ours_stricter)
        << c.name << ": protobuf " << (ref.accepted ? "accepted" : "refused") << ", bertrain "
        << (got.accepted ? "accepted '" + got.path + "'" : got.error);
    if (got.accepted && ref.accepted) {
      EXPECT_EQ(got.path, ref.path) << c.name;
    }
    if (c.ours_stricter) {
      EXPECT_TRUE(ref.accepted) << c.name << ": protobuf refuses it too; not a difference";
    }
    if (!got.accepted) {
      EXPECT_EQ(got.error.rfind((d / "checkpoint").string() + ": ", 0), 0u) << c.name << ": " << got.error;
    }
  }
}

// What TF writes: protobuf's printer, which escapes bytes above 0x7e as octal (Python's text_format as_utf8=False
// does the same); every byte value read back, relative and absolute paths joined as tf.train.latest_checkpoint.
TEST(TfCheckpointState, ReadsWhatTheProtobufPrinterWrites) {
  std::string all_bytes;
  for (int b = 1; b < 256; ++b) all_bytes += static_cast<char>(b);
  for (const std::string& path : {std::string("model.ckpt-12"), std::string("/data/模型/model.ckpt-7"),
                                  std::string("it's \"quoted\"\\ and\ttabbed"), all_bytes}) {
    bertrain::tfproto::CheckpointState s;
    s.set_model_checkpoint_path(path);
    s.add_all_model_checkpoint_paths(path);
    s.add_all_model_checkpoint_timestamps(1700000000.5);
    std::string text;
    ASSERT_TRUE(google::protobuf::TextFormat::PrintToString(s, &text));
    const fs::path d = dir_with("printed", text);
    const std::string want = path[0] == '/' ? path : (d / path).string();
    EXPECT_EQ(*read_tf_checkpoint_state(d.string()), want) << text;
  }
}

// A path longer than PATH_MAX, or a file over 1 MiB, is refused before anything else reads it.
TEST(TfCheckpointState, Limits) {
  const std::string ok_path(4096, 'a'), long_path(4097, 'a');
  const Outcome ok = ours(dir_with("path4096", "model_checkpoint_path: '" + ok_path + "'"));
  EXPECT_TRUE(ok.accepted) << ok.error;
  const Outcome too_long = ours(dir_with("path4097", "model_checkpoint_path: '" + long_path + "'"));
  EXPECT_NE(too_long.error.find(": line 1: model_checkpoint_path is 4097 bytes"), std::string::npos) << too_long.error;
  const Outcome big = ours(dir_with("big", "model_checkpoint_path: 'x'\n" + std::string(1 << 20, '#')));
  EXPECT_NE(big.error.find("checkpoint: 1048603 bytes; a CheckpointState"), std::string::npos) << big.error;
}

TEST(TfCheckpointState, NoFileIsNoState) {
  const fs::path d = kRoot / "none";
  fs::create_directories(d);
  EXPECT_FALSE(read_tf_checkpoint_state(d.string()).has_value());
}

TEST(TfCheckpointState, ErrorNamesFileAndLine) {
  const fs::path d = dir_with("line3", "# a\nall_model_checkpoint_paths: \"x\"\nmodel_checkpoint_path: \"y\\q\"\n");
  const Outcome o = ours(d);
  ASSERT_FALSE(o.accepted);
  EXPECT_NE(o.error.find((d / "checkpoint").string() + ": line 3: unknown escape '\\q'"), std::string::npos) << o.error;
  const Outcome g = ours(dir_with("binary", "\x01\x02"));
  EXPECT_NE(g.error.find(": line 1: expected a field name, got byte 0x01"), std::string::npos) << g.error;
}

}  // namespace
