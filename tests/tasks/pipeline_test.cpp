// pipeline_test.cpp: checkpoint directories that describe themselves (io/checkpoint_files.h) and the task pipelines
// (tasks/pipeline.h): defaults read back, contradictions refused, and one loaded pipeline per task giving the same
// outputs from 4 threads at once as from one. The tiny models are the keras_bert_tiny config with seeded weights.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "bertrain/core/error.h"
#include "bertrain/io/checkpoint.h"
#include "bertrain/io/checkpoint_files.h"
#include "bertrain/io/config.h"
#include "bertrain/io/tokenizer_files.h"
#include "bertrain/models/bert.h"
#include "bertrain/tasks/finetune_command.h"
#include "bertrain/tasks/pipeline.h"

namespace fs = std::filesystem;
using namespace bertrain;
using namespace bertrain::tasks;

namespace {

const std::string kTinyDir = std::string(BERTRAIN_TEST_DATA_DIR) + "/tf_checkpoints/keras_bert_tiny";

std::string temp_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("bertrain_pipeline_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

void write_file(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// A checkpoint directory as the finetuning commands write it, with seeded weights.
template <class M>
std::string make_checkpoint(const std::string& name, const std::string& arch, std::vector<std::string> labels) {
  BertConfig cfg = load_bert_config(kTinyDir + "/bert_config.json");
  cfg.architecture = arch;
  if (!labels.empty()) {
    cfg.num_labels = static_cast<int64_t>(labels.size());
    cfg.id2label = std::move(labels);
  }
  Rng rng(7, 1);
  M model(cfg, rng);
  const std::string dir = temp_dir(name);
  save_model(dir, model, cfg);
  BertTokenizerFiles t;
  t.vocab_file = kTinyDir + "/vocab.txt";
  t.model_max_length = 12;
  save_tokenizer_files(dir, t);
  return dir;
}

// Runs `call` once, then from 4 threads at once (3 times each), and checks every result equals the first.
template <class F>
void expect_same_from_threads(F call) {
  const auto reference = call();
  std::vector<decltype(call())> results(12);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int k = 0; k < 3; ++k) results[static_cast<size_t>(t * 3 + k)] = call();
    });
  for (auto& th : threads) th.join();
  for (const auto& r : results) EXPECT_EQ(r, reference);
}

const std::vector<std::string> kTexts = {"all work and no play", "jack", "makes jack a dull boy all work and no play",
                                         "a dull boy", "no play makes jack", "all all all", "boy", "work and play"};

}  // namespace

TEST(CheckpointFiles, ConfigKeepsArchitectureAndTask) {
  BertConfig c;
  c.architecture = kArchTokenClassification;
  c.finetuning_task = "ner";
  const BertConfig back = parse_bert_config(bert_config_to_json(c));
  EXPECT_EQ(back.architecture, kArchTokenClassification);
  EXPECT_EQ(back.finetuning_task, "ner");
  EXPECT_EQ(parse_bert_config(bert_config_to_json(BertConfig{})).architecture, kArchPreTraining);
  EXPECT_THROW(parse_bert_config(R"({"architectures": "BertModel"})"), Error);
}

TEST(CheckpointFiles, ReadsTokenizerSettingsAndLength) {
  const std::string dir = make_checkpoint<BertForSequenceClassification>("files", kArchSequenceClassification, {"a", "b"});
  CheckpointFiles f = read_checkpoint_files(dir);
  EXPECT_EQ(f.architecture(), kArchSequenceClassification);
  EXPECT_EQ(f.vocab_file, (fs::path(dir) / "vocab.txt").string());
  EXPECT_EQ(f.do_lower_case, true);
  EXPECT_EQ(f.model_max_length, 12);
  EXPECT_EQ(pipeline_task(dir), "text-classification");
  // transformers' "no limit" (int(1e30)) and a length above max_position_embeddings are no length.
  write_file(dir + "/tokenizer_config.json",
             R"({"do_lower_case": false, "model_max_length": 1000000000000000019884624838656})");
  f = read_checkpoint_files(dir);
  EXPECT_EQ(f.do_lower_case, false);
  EXPECT_FALSE(f.model_max_length.has_value());
  write_file(dir + "/tokenizer_config.json", R"({"do_lower_case": "yes"})");
  EXPECT_THROW(read_checkpoint_files(dir), Error);
  fs::remove_all(dir);
}

TEST(CheckpointFiles, GoogleModelNamesDecideCasing) {
  const std::string root = temp_dir("names");
  for (const auto& [name, lower] : std::vector<std::pair<std::string, std::optional<bool>>>{
           {"cased_L-12_H-768_A-12", false}, {"uncased_L-12_H-768_A-12", true},
           {"my_model", true}}) {  // my_model: no name rule; the tiny model's vocabulary has no upper-case token
    const fs::path d = fs::path(root) / name;
    fs::create_directories(d);
    for (const auto& e : fs::directory_iterator(kTinyDir)) fs::copy_file(e.path(), d / e.path().filename());
    const CheckpointFiles f = read_checkpoint_files((d / "bert_model.ckpt").string());
    EXPECT_EQ(f.do_lower_case, lower) << name;
    EXPECT_EQ(f.vocab_file, (d / "vocab.txt").string());
    std::string vocab;
    std::optional<bool> given = !lower.value_or(true);
    if (lower) EXPECT_THROW(take_tokenizer_defaults(f, vocab, given), Error) << name;
    else EXPECT_NO_THROW(take_tokenizer_defaults(f, vocab, given));
  }
  fs::remove_all(root);
}

TEST(CheckpointFiles, TheVocabularyDecidesCasingWhenNothingElseDoes) {
  const fs::path d = fs::path(temp_dir("vocab_casing")) / "my_model";
  fs::create_directories(d);
  for (const auto& e : fs::directory_iterator(kTinyDir)) fs::copy_file(e.path(), d / e.path().filename());
  const std::string ckpt = (d / "bert_model.ckpt").string();
  CheckpointFiles f = read_checkpoint_files(ckpt);
  EXPECT_EQ(f.do_lower_case, true);
  EXPECT_NE(f.do_lower_case_source.find("no upper-case tokens"), std::string::npos) << f.do_lower_case_source;
  // --do_lower_case=false against an uncased vocabulary is refused in one line.
  std::string vocab;
  std::optional<bool> given = false;
  EXPECT_THROW(take_tokenizer_defaults(f, vocab, given), Error);
  // 2 upper-case tokens in 200 (1%): cased. 1 in 200: says nothing (bert-base-chinese's kind).
  auto vocab_with_upper = [&](int upper) {
    std::string v = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
    for (int i = 0; i < 200; ++i) v += (i < upper ? "Word" : "word") + std::to_string(i) + "\n";
    write_file((d / "vocab.txt").string(), v);
  };
  vocab_with_upper(2);
  f = read_checkpoint_files(ckpt);
  EXPECT_EQ(f.do_lower_case, false);
  given = true;
  EXPECT_THROW(take_tokenizer_defaults(f, vocab, given), Error);
  vocab_with_upper(1);
  EXPECT_EQ(read_checkpoint_files(ckpt).do_lower_case, std::nullopt);
  fs::remove_all(d.parent_path());
}

TEST(CheckpointFiles, VocabThatDiffersIsRefused) {
  const std::string dir = make_checkpoint<BertForSequenceClassification>("vocab", kArchSequenceClassification, {"a", "b"});
  const CheckpointFiles f = read_checkpoint_files(dir);
  std::string same = kTinyDir + "/vocab.txt", other = dir + "/other.txt";
  std::optional<bool> lower;
  EXPECT_NO_THROW(take_tokenizer_defaults(f, same, lower));
  write_file(other, "[PAD]\n[UNK]\n");
  try {
    take_tokenizer_defaults(f, other, lower);
    ADD_FAILURE() << "a different vocab was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("contradicts the checkpoint"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST(Pipeline, RefusesACheckpointWithoutItsHead) {
  try {
    TextClassificationPipeline::load(kTinyDir);
    ADD_FAILURE() << "a pretraining checkpoint loaded as a classifier";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds no classifier.weight"), std::string::npos) << e.what();
  }
}

TEST(Pipeline, TextClassificationFromFourThreads) {
  const std::string dir = make_checkpoint<BertForSequenceClassification>("cls", kArchSequenceClassification, {"neg", "pos"});
  PipelineOptions o;
  o.batch_size = 3;
  const auto p = TextClassificationPipeline::load(dir, o);
  EXPECT_EQ(p.max_seq_length(), 12);
  EXPECT_EQ(p.labels(), (std::vector<std::string>{"neg", "pos"}));
  std::vector<TextClassificationPipeline::Input> in;
  for (const auto& t : kTexts) in.push_back({t, std::nullopt});
  in.push_back({"jack", std::string("a dull boy")});
  const auto one = p(in);
  ASSERT_EQ(one.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {  // batching and sorting change nothing: each alone gives the same
    const auto alone = in[i].text_pair ? p(in[i].text, *in[i].text_pair) : p(in[i].text);
    EXPECT_EQ(alone.label, one[i].label);
    for (size_t k = 0; k < 2; ++k) EXPECT_NEAR(alone.scores[k], one[i].scores[k], 1e-6);
    EXPECT_NEAR(one[i].scores[0] + one[i].scores[1], 1.0, 1e-6);
  }
  expect_same_from_threads([&] {
    std::vector<std::vector<float>> s;
    for (const auto& r : p(in)) s.push_back(r.scores);
    return s;
  });
  fs::remove_all(dir);
}

TEST(Pipeline, TokenClassificationFromFourThreads) {
  const std::string dir =
      make_checkpoint<BertForTokenClassification>("ner", kArchTokenClassification, {"B-PER", "I-PER", "O"});
  const auto p = TokenClassificationPipeline::load(dir);
  EXPECT_TRUE(p.has_chunks());
  const auto r = p("  jack   makes\ta dull boy ");
  ASSERT_EQ(r.words.size(), 5u);
  EXPECT_EQ(r.words[0].word, "jack");
  EXPECT_EQ(r.words[0].start, 2);
  EXPECT_EQ(r.words[1].start, 9);
  EXPECT_EQ(r.words[2].start, 15);
  for (const auto& e : r.entities) EXPECT_EQ(e.entity_group, "PER");
  expect_same_from_threads([&] {
    std::vector<std::vector<std::tuple<std::string, int64_t, int64_t, double>>> out;
    for (const auto& x : p(kTexts)) {
      out.emplace_back();
      for (const auto& e : x.entities) out.back().emplace_back(e.entity_group, e.start, e.end, e.score);
      for (const auto& w : x.words) out.back().emplace_back(w.label, w.start, w.end, w.score);
    }
    return out;
  });
  fs::remove_all(dir);
}

TEST(Pipeline, QuestionAnsweringFromFourThreads) {
  const std::string dir = make_checkpoint<BertForQuestionAnswering>("qa", kArchQuestionAnswering, {});
  QuestionAnsweringPipeline::Settings s;
  s.doc_stride = 3;
  s.max_query_length = 3;
  const auto p = QuestionAnsweringPipeline::load(dir, {}, s);
  std::vector<QuestionAnsweringPipeline::Input> in;
  for (const auto& t : kTexts) in.push_back({"what makes jack", "Jack  makes a DULL boy, " + t});
  const auto one = p(in);
  for (size_t i = 0; i < in.size(); ++i) {  // the span is the answer's text in the context
    ASSERT_GE(one[i].start, 0);
    EXPECT_EQ(in[i].context.substr(static_cast<size_t>(one[i].byte_start),
                                   static_cast<size_t>(one[i].byte_end - one[i].byte_start)),
              one[i].answer);
  }
  expect_same_from_threads([&] {
    std::vector<std::tuple<std::string, double, int64_t, int64_t>> out;
    for (const auto& r : p(in)) out.emplace_back(r.answer, r.score, r.start, r.end);
    return out;
  });
  fs::remove_all(dir);
}

TEST(Pipeline, FeatureExtractionFromFourThreads) {
  const auto p = FeatureExtractionPipeline::load(kTinyDir, {}, FeatureExtractionPipeline::Pooling::cls, {-1, -2});
  EXPECT_EQ(p.dim(), 8);
  std::vector<FeatureExtractionPipeline::Input> in;
  for (const auto& t : kTexts) in.push_back({t, std::nullopt});
  expect_same_from_threads([&] { return p(in); });
  EXPECT_THROW(FeatureExtractionPipeline::load(kTinyDir, {}, FeatureExtractionPipeline::Pooling::mean, {2}), Error);
}
