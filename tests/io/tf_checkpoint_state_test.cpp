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
  };
  for (const Case& c : cases) {
    const Outcome ref = reference(c.text);
    const Outcome got = ours(dir_with(c.name, c.text));
    EXPECT_EQ(got.accepted, ref.accepted) << c.name << ": bertrain " << (got.accepted ? "accepted" : got.error);
    if (got.accepted && ref.accepted) {
      EXPECT_EQ(got.path, ref.path) << c.name;
    }
    if (!got.accepted) {
      EXPECT_NE(got.error.find("checkpoint"), std::string::npos) << c.name << ": " << got.error;
      EXPECT_EQ(got.error.find('\n'), std::string::npos) << c.name << ": " << got.error;
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
