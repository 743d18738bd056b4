// glue_test.cpp: GLUE readers on small files in each task's layout (CASES.md C29), classifier truncation (C13),
// featurization against the real uncased vocab, batching, every metric with exact values, malformed-file errors
// and the output writers' exact text.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "bertrain/core/error.h"
#include "bertrain/tasks/glue/glue.h"
#include "bertrain/tasks/glue/writers.h"
#include "bertrain/tasks/glue/metrics.h"
#include "bertrain/data/pretraining.h"
#include "bertrain/text/tokenizer.h"

using namespace bertrain;
using namespace bertrain::text;
using namespace bertrain::data;
using namespace bertrain::glue;
namespace fs = std::filesystem;
using Strings = std::vector<std::string>;
using Ids = std::vector<int32_t>;

namespace {

const std::string kGlueData = std::string(BERTRAIN_TEST_DATA_DIR) + "/glue";
const std::string kUncasedVocab = std::string(BERTRAIN_SOURCE_DIR) + "/data/vocab/bert-base-uncased-vocab.txt";

std::string dir(const std::string& task) { return kGlueData + "/" + task; }

// Runs `fn`, expects a bertrain::Error whose message contains every one of `parts`.
void expect_error(const std::function<void()>& fn, const Strings& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected bertrain::Error containing '" << parts.at(0) << "'";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

// A scratch directory holding one file, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("bertrain_glue_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                         "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string write(const std::string& name, const std::string& bytes) const {
    const std::string p = (path_ / name).string();
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

Strings texts_a(const std::vector<InputExample>& ex) {
  Strings s;
  for (const auto& e : ex) s.push_back(e.text_a);
  return s;
}
Strings label_strings(const std::vector<InputExample>& ex) {
  Strings s;
  for (const auto& e : ex) s.push_back(e.label.value_or("<none>"));
  return s;
}

// ---------------------------------------------------------------- TSV reading (CASES.md C29)

TEST(GlueTsv, QuoteIsLiteralAndRowsNeverMerge) {
  // C29: `"Second<TAB>second` -> ['"Second', 'second'].
  EXPECT_EQ(split_tsv_line("\"Second\tsecond"), (Strings{"\"Second", "second"}));
  EXPECT_EQ(split_tsv_line("a\t\tb\t"), (Strings{"a", "", "b", ""}));
  TempDir t;
  // An unclosed quote on line 1 must not swallow line 2 (a quoting CSV reader would merge them).
  const std::string p = t.write("q.tsv", "First\tfirst\n\"Second\tsecond\nThird\t\"third\"\r\n\nlast\tno newline");
  const auto rows = read_tsv(p);
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[0], (Strings{"First", "first"}));
  EXPECT_EQ(rows[1], (Strings{"\"Second", "second"}));
  EXPECT_EQ(rows[2], (Strings{"Third", "\"third\""}));  // "\r\n" ending: '\r' dropped, quotes kept
  EXPECT_EQ(rows[3], Strings{});                        // empty line: [] as Python's csv
  EXPECT_EQ(rows[4], (Strings{"last", "no newline"}));
}

TEST(GlueTsv, MissingFileAndBadUtf8NameFileAndLine) {
  TempDir t;
  expect_error([&] { read_tsv(t.str() + "/nope.tsv"); }, {"nope.tsv", "no such file"});
  const std::string p = t.write("bad.tsv", "index\tsentence\n0\tok\n1\tbad \xC3\x28 byte\n");
  expect_error([&] { read_tsv(p); }, {p + ":3:", "UTF-8", "column 7"});
}

// ---------------------------------------------------------------- the task readers

TEST(GlueTasks, NamesAndLookup) {
  EXPECT_EQ(glue_task_names(),
            (Strings{"CoLA", "SST-2", "MRPC", "QQP", "STS-B", "MNLI", "QNLI", "RTE", "WNLI", "generic"}));
  EXPECT_EQ(make_glue_processor("sst2")->task_name(), "SST-2");
  EXPECT_EQ(make_glue_processor("StS-b")->task_name(), "STS-B");
  EXPECT_EQ(make_glue_processor("mnli")->task_name(), "MNLI");
  expect_error([] { make_glue_processor("xnli"); }, {"unknown task_name 'xnli'", "CoLA", "generic"});
}

TEST(GlueTasks, ColaTrainDevHaveNoHeaderTestHasOne) {
  auto p = make_glue_processor("cola");
  EXPECT_EQ(p->labels(), (Strings{"0", "1"}));
  EXPECT_FALSE(p->is_pair_task());
  const auto train = p->get_train_examples(dir("CoLA"));
  ASSERT_EQ(train.size(), 3u);  // line 1 is data
  EXPECT_EQ(texts_a(train),
            (Strings{"The cat sat on the mat.", "Cat the mat on sat the.", "\"Quoted words stay as they are."}));
  EXPECT_EQ(label_strings(train), (Strings{"1", "0", "1"}));
  EXPECT_EQ(train[0].guid, "train-0");
  EXPECT_EQ(train[0].line, 1);
  EXPECT_EQ(train[2].index, "2");
  EXPECT_FALSE(train[0].text_b.has_value());
  EXPECT_EQ(train[0].source, dir("CoLA") + "/train.tsv");
  const auto dev = p->get_dev_examples(dir("CoLA"));
  ASSERT_EQ(dev.size(), 2u);
  EXPECT_EQ(dev[0].text_a, "She reads books.");
  const auto test = p->get_test_examples(dir("CoLA"));
  ASSERT_EQ(test.size(), 2u);  // line 1 (index, sentence) skipped
  EXPECT_EQ(test[0].text_a, "He runs fast.");
  EXPECT_EQ(test[0].guid, "test-1");  // reference: i counts the header line
  EXPECT_EQ(test[1].index, "1");
  EXPECT_EQ(test[1].line, 3);
  EXPECT_FALSE(test[0].label.has_value());
  EXPECT_EQ(p->submission_file_names(), Strings{"CoLA.tsv"});
}

TEST(GlueTasks, Sst2) {
  auto p = make_glue_processor("SST-2");
  const auto train = p->get_train_examples(dir("SST-2"));
  ASSERT_EQ(train.size(), 3u);
  // The quote opened on line 3 is literal and does not merge line 4 into it.
  EXPECT_EQ(texts_a(train),
            (Strings{"a gripping , funny film ", "\"unclosed quote opens this review", "dull and lifeless "}));
  EXPECT_EQ(label_strings(train), (Strings{"1", "0", "0"}));
  EXPECT_EQ(train[0].line, 2);
  EXPECT_EQ(train[0].guid, "train-1");
  EXPECT_EQ(train[0].index, "0");
  EXPECT_EQ(p->get_dev_examples(dir("SST-2")).size(), 2u);
  const auto test = p->get_test_examples(dir("SST-2"));
  EXPECT_EQ(texts_a(test), (Strings{"an honest , moving story ", "nothing works here "}));
  EXPECT_EQ(p->submission_file_names(), Strings{"SST-2.tsv"});
}

TEST(GlueTasks, MrpcSkipsLineOneInEverySplit) {
  auto p = make_glue_processor("MRPC");
  EXPECT_TRUE(p->is_pair_task());
  for (const char* set : {"train", "dev", "test"}) {
    const auto ex = std::string(set) == "train" ? p->get_train_examples(dir("MRPC"))
                    : std::string(set) == "dev" ? p->get_dev_examples(dir("MRPC"))
                                                : p->get_test_examples(dir("MRPC"));
    ASSERT_EQ(ex.size(), 2u) << set;
    EXPECT_EQ(ex[0].line, 2) << set;
  }
  const auto train = p->get_train_examples(dir("MRPC"));
  EXPECT_EQ(train[0].text_a, "The company said profits rose .");
  EXPECT_EQ(train[0].text_b.value(), "Profits rose , the company said .");
  EXPECT_EQ(label_strings(train), (Strings{"1", "0"}));
  const auto test = p->get_test_examples(dir("MRPC"));
  EXPECT_EQ(test[1].text_b.value(), "Stocks rose .");
  EXPECT_EQ(test[1].index, "1");
}

TEST(GlueTasks, Qqp) {
  auto p = make_glue_processor("qqp");
  const auto train = p->get_train_examples(dir("QQP"));
  ASSERT_EQ(train.size(), 2u);
  EXPECT_EQ(train[1].text_a, "Why is the sky blue?");
  EXPECT_EQ(train[1].text_b.value(), "How do planes fly?");
  EXPECT_EQ(label_strings(train), (Strings{"1", "0"}));
  EXPECT_EQ(train[0].guid, "train-201");
  EXPECT_EQ(train[0].index, "201");
  const auto test = p->get_test_examples(dir("QQP"));
  ASSERT_EQ(test.size(), 2u);
  EXPECT_EQ(test[0].text_a, "Is tea healthy?");
  EXPECT_EQ(test[0].text_b.value(), "Is green tea good for you?");
}

TEST(GlueTasks, StsbIsRegression) {
  auto p = make_glue_processor("sts-b");
  EXPECT_TRUE(p->is_regression());
  EXPECT_EQ(p->num_labels(), 1);
  EXPECT_TRUE(p->labels().empty());
  const auto train = p->get_train_examples(dir("STS-B"));
  ASSERT_EQ(train.size(), 2u);
  EXPECT_EQ(train[0].text_a, "A man is playing a flute.");
  EXPECT_EQ(train[0].text_b.value(), "A man plays a flute.");
  EXPECT_EQ(label_strings(train), (Strings{"4.750", "0.000"}));
  const auto test = p->get_test_examples(dir("STS-B"));
  ASSERT_EQ(test.size(), 1u);
  EXPECT_EQ(test[0].text_b.value(), "Showers forecast today.");
  EXPECT_EQ(p->submission_file_names(), Strings{"STS-B.tsv"});
}

TEST(GlueTasks, MnliLabelOrderBothDevSetsAndTestSets) {
  auto p = make_glue_processor("MNLI");
  // C29: contradiction, entailment, neutral -> 0, 1, 2.
  EXPECT_EQ(p->labels(), (Strings{"contradiction", "entailment", "neutral"}));
  EXPECT_EQ(p->num_labels(), 3);
  const auto train = p->get_train_examples(dir("MNLI"));
  ASSERT_EQ(train.size(), 3u);  // line 1 skipped
  EXPECT_EQ(train[0].text_a, "The man walked home.");
  EXPECT_EQ(train[0].text_b.value(), "The man went home.");
  EXPECT_EQ(label_strings(train), (Strings{"entailment", "contradiction", "neutral"}));
  EXPECT_EQ(p->dev_set_names(), (Strings{"dev_matched", "dev_mismatched"}));
  const auto dev = p->get_dev_sets(dir("MNLI"));
  ASSERT_EQ(dev.size(), 2u);
  EXPECT_EQ(dev[0].name, "dev_matched");
  EXPECT_EQ(dev[0].path, dir("MNLI") + "/dev_matched.tsv");
  ASSERT_EQ(dev[0].examples.size(), 2u);
  // The label is the last column (gold_label), not label1 (which says "neutral" on this row).
  EXPECT_EQ(label_strings(dev[0].examples), (Strings{"entailment", "contradiction"}));
  EXPECT_EQ(dev[0].examples[0].guid, "dev_matched-9815");
  EXPECT_EQ(dev[1].name, "dev_mismatched");
  ASSERT_EQ(dev[1].examples.size(), 3u);
  EXPECT_EQ(label_strings(dev[1].examples), (Strings{"entailment", "contradiction", "neutral"}));
  EXPECT_EQ(dev[1].examples[0].guid, "dev_mismatched-9847");
  EXPECT_EQ(p->get_dev_examples(dir("MNLI")).size(), 2u);  // the first (matched) set, as the reference
  EXPECT_EQ(p->get_dev_set(dir("MNLI"), 1).examples.size(), 3u);
  expect_error([&] { p->get_dev_set(dir("MNLI"), 2); }, {"MNLI has 2 dev set(s), asked for #2"});
  {  // get_dev_examples reads only dev_matched.tsv; get_dev_sets needs both files.
    TempDir t;
    t.write("dev_matched.tsv", slurp(dir("MNLI") + "/dev_matched.tsv"));
    EXPECT_EQ(p->get_dev_examples(t.str()).size(), 2u);
    expect_error([&] { p->get_dev_sets(t.str()); }, {"dev_mismatched.tsv", "no such file"});
  }
  const auto test = p->get_test_sets(dir("MNLI"));
  ASSERT_EQ(test.size(), 2u);
  EXPECT_EQ(test[0].submission_file, "MNLI-m.tsv");
  EXPECT_EQ(test[1].submission_file, "MNLI-mm.tsv");
  EXPECT_EQ(test[0].examples.size(), 1u);
  EXPECT_EQ(test[1].examples.size(), 2u);
  EXPECT_EQ(test[1].examples[1].text_b.value(), "Birds are silent.");
  EXPECT_EQ(p->submission_file_names(), (Strings{"MNLI-m.tsv", "MNLI-mm.tsv"}));
}

TEST(GlueTasks, QnliRteWnli) {
  for (const auto& [task, labels] : std::vector<std::pair<std::string, Strings>>{
           {"QNLI", {"entailment", "not_entailment"}}, {"RTE", {"entailment", "not_entailment"}}, {"WNLI", {"0", "1"}}}) {
    auto p = make_glue_processor(task);
    EXPECT_EQ(p->labels(), labels) << task;
    const auto train = p->get_train_examples(dir(task));
    ASSERT_EQ(train.size(), 2u) << task;
    EXPECT_EQ(train[0].text_a, task + " first text a.");
    EXPECT_EQ(train[0].text_b.value(), task + " first text b.");
    EXPECT_EQ(train[0].guid, "train-0");
    const auto dev = p->get_dev_examples(dir(task));
    ASSERT_EQ(dev.size(), 1u) << task;
    const auto test = p->get_test_examples(dir(task));
    ASSERT_EQ(test.size(), 2u) << task;
    EXPECT_EQ(test[1].text_a, task + " test two a.");
    EXPECT_EQ(p->submission_file_names(), Strings{task + ".tsv"});
  }
  EXPECT_EQ(label_strings(make_glue_processor("WNLI")->get_train_examples(dir("WNLI"))), (Strings{"1", "0"}));
}

// ---------------------------------------------------------------- malformed files

TEST(GlueErrors, MalformedFilesNameFileAndLine) {
  TempDir t;
  const auto write_task = [&](const std::string& file, const std::string& text) { return t.write(file, text); };
  auto qnli = make_glue_processor("QNLI");
  // Wrong column count on line 3.
  std::string p = write_task("train.tsv", "index\tquestion\tsentence\tlabel\n0\tq\ts\tentailment\n1\tq\ts\n");
  expect_error([&] { qnli->get_train_examples(t.str()); }, {p + ":3:", "expected 4", "got 3"});
  // Unknown label on line 2.
  write_task("train.tsv", "index\tquestion\tsentence\tlabel\n0\tq\ts\tcontradiction\n");
  expect_error([&] { qnli->get_train_examples(t.str()); },
               {p + ":2:", "unknown QNLI label 'contradiction'", "entailment, not_entailment"});
  // Non-UTF-8 on line 2.
  write_task("train.tsv", "index\tquestion\tsentence\tlabel\n0\tq\xff\ts\tentailment\n");
  expect_error([&] { qnli->get_train_examples(t.str()); }, {p + ":2:", "UTF-8"});
  // Missing file.
  expect_error([&] { qnli->get_dev_examples(t.str()); }, {t.str() + "/dev.tsv", "no such file"});
  // Header only.
  write_task("dev.tsv", "index\tquestion\tsentence\tlabel\n");
  expect_error([&] { qnli->get_dev_examples(t.str()); }, {"dev.tsv", "no examples"});
  // STS-B: a score that is not a number on line 3.
  const std::string h = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n";
  write_task("train.tsv", h + "0\tg\tf\ty\to\ts\ts\ta\tb\t1.5\n1\tg\tf\ty\to\ts\ts\ta\tb\tfive\n");
  expect_error([&] { make_glue_processor("STS-B")->get_train_examples(t.str()); },
               {p + ":3:", "'five' is not a finite number"});
  write_task("train.tsv", h + "0\tg\tf\ty\to\ts\ts\ta\tb\tnan\n");
  expect_error([&] { make_glue_processor("STS-B")->get_train_examples(t.str()); }, {p + ":2:", "'nan'"});
  // CoLA train given a header line: line 1 is data, so its label "label" is unknown.
  write_task("train.tsv", "source\tlabel\tstar\tsentence\ns\t1\t\tok\n");
  expect_error([&] { make_glue_processor("CoLA")->get_train_examples(t.str()); }, {p + ":1:", "unknown CoLA label"});
  // CoLA train with 3 columns.
  write_task("train.tsv", "s\t1\tok\n");
  expect_error([&] { make_glue_processor("CoLA")->get_train_examples(t.str()); }, {p + ":1:", "expected 4", "got 3"});
  // A header too narrow for the layout.
  write_task("train.tsv", "a\tb\n0\t1\n");
  expect_error([&] { make_glue_processor("MRPC")->get_train_examples(t.str()); }, {p + ":1:", "at least 5"});
  // A blank line inside a file is a row of 0 columns.
  write_task("train.tsv", "sentence\tlabel\ngood\t1\n\nbad\t0\n");
  expect_error([&] { make_glue_processor("SST-2")->get_train_examples(t.str()); }, {p + ":3:", "got 0"});
}

// ---------------------------------------------------------------- generic task

TEST(GlueGeneric, Tsv) {
  GlueOptions o;
  o.text_a_column = "review";
  o.label_column = "label";
  o.index_column = "id";
  o.labels = {"negative", "neutral", "positive"};
  auto p = make_glue_processor("generic", o);
  EXPECT_FALSE(p->is_pair_task());
  const auto train = p->get_train_examples(dir("generic/tsv"));
  ASSERT_EQ(train.size(), 2u);
  EXPECT_EQ(texts_a(train), (Strings{"\"Great\" product", "Broke after a day"}));  // quotes literal in TSV
  EXPECT_EQ(label_strings(train), (Strings{"positive", "negative"}));
  EXPECT_EQ(train[1].index, "2");
  EXPECT_EQ(train[1].guid, "train-1");
  EXPECT_EQ(train[1].line, 3);
  const auto test = p->get_test_examples(dir("generic/tsv"));  // test file has no label column
  ASSERT_EQ(test.size(), 1u);
  EXPECT_EQ(test[0].index, "4");
  EXPECT_FALSE(test[0].label.has_value());
  o.labels = {"positive", "negative"};
  expect_error([&] { make_glue_processor("generic", o)->get_dev_examples(dir("generic/tsv")); },
               {"dev.tsv:2:", "unknown generic label 'neutral'"});
  o.text_a_column = "text";
  expect_error([&] { make_glue_processor("generic", o)->get_train_examples(dir("generic/tsv")); },
               {"train.tsv:1:", "no column 'text'", "label, review, id"});
}

TEST(GlueGeneric, CsvWithRfc4180QuotingAndRegression) {
  GlueOptions o;
  o.format = "csv";
  o.text_a_column = "premise";
  o.text_b_column = "hypothesis";
  o.label_column = "score";
  o.regression = true;
  auto p = make_glue_processor("generic", o);
  EXPECT_TRUE(p->is_regression());
  EXPECT_TRUE(p->is_pair_task());
  const auto train = p->get_train_examples(dir("generic/csv"));
  ASSERT_EQ(train.size(), 3u);
  EXPECT_EQ(train[0].text_a, "A man, a plan");
  EXPECT_EQ(train[0].text_b.value(), "He said \"hi\"");
  EXPECT_EQ(train[1].text_a, "Line one\nline two");  // newline inside quotes
  EXPECT_EQ(train[1].line, 3);
  EXPECT_EQ(train[2].text_a, "Quote\"inside");  // a quote inside an unquoted field is literal
  EXPECT_EQ(train[2].line, 6);                  // after the blank line 5
  EXPECT_EQ(label_strings(train), (Strings{"4.5", "1", "0.25"}));
  EXPECT_EQ(p->get_test_examples(dir("generic/csv")).at(0).text_b.value(), "Test b");
  // Without --format the extension decides.
  o.format = "";
  EXPECT_EQ(make_glue_processor("generic", o)->get_dev_examples(dir("generic/csv")).size(), 1u);
}

TEST(GlueGeneric, CsvErrors) {
  TempDir t;
  std::string p = t.write("x.csv", "a,b\n\"open,1\n2,3\n");
  expect_error([&] { read_csv(p); }, {p + ":2:", "never closes"});
  p = t.write("y.csv", "a,b\n\"ab\"c,1\n");
  expect_error([&] { read_csv(p); }, {p + ":2:", "after a closing quote"});
  const auto r = read_csv(t.write("z.csv", "a,\"\",c\n,\n"));
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].fields, (Strings{"a", "", "c"}));
  EXPECT_EQ(r[1].fields, (Strings{"", ""}));
}

TEST(GlueGeneric, Jsonl) {
  GlueOptions o;
  o.text_a_column = "text";
  o.labels = {"0", "1"};
  auto p = make_glue_processor("generic", o);
  const auto train = p->get_train_examples(dir("generic/jsonl"));
  ASSERT_EQ(train.size(), 3u);  // the blank line 3 is skipped
  EXPECT_EQ(texts_a(train), (Strings{"I loved it", "I hated it", "caf\xC3\xA9 ok"}));
  EXPECT_EQ(label_strings(train), (Strings{"1", "0", "1"}));  // numbers and strings both give "1"/"0"
  EXPECT_EQ(train[2].line, 4);
  EXPECT_FALSE(p->get_test_examples(dir("generic/jsonl")).at(0).label.has_value());
  TempDir t;
  t.write("train.jsonl", "{\"text\": \"ok\", \"label\": 1}\n{\"text\": \"no label\"}\n");
  expect_error([&] { p->get_train_examples(t.str()); }, {"train.jsonl:2:", "no key 'label'"});
  t.write("train.jsonl", "{\"text\": 5, \"label\": 1}\n");
  expect_error([&] { p->get_train_examples(t.str()); }, {"train.jsonl:1:", "'text' must be a string"});
  t.write("train.jsonl", "{\"text\": \"a\", \"label\": 1}\n{\"text\": \"a\", \"label\": 1\n");
  expect_error([&] { p->get_train_examples(t.str()); }, {"train.jsonl:2:", "not valid JSON"});
  t.write("train.jsonl", "[1, 2]\n");
  expect_error([&] { p->get_train_examples(t.str()); }, {"train.jsonl:1:", "expected a JSON object"});
}

TEST(GlueGeneric, OptionValidation) {
  GlueOptions o;
  expect_error([&] { make_glue_processor("generic", o); }, {"--labels must list at least 2"});
  o.labels = {"a", "b", "a"};
  expect_error([&] { make_glue_processor("generic", o); }, {"'a' appears twice"});
  o.labels = {"a", "b"};
  o.regression = true;
  expect_error([&] { make_glue_processor("generic", o); }, {"regression task takes no --labels"});
  o.regression = false;
  o.format = "xml";
  expect_error([&] { make_glue_processor("generic", o); }, {"unknown format 'xml'"});
  o.format = "";
  o.text_a_column = "";
  expect_error([&] { make_glue_processor("generic", o); }, {"--text_a_column is empty"});
  TempDir t;
  o.text_a_column = "sentence";
  expect_error([&] { make_glue_processor("generic", o)->get_train_examples(t.str()); }, {"train.{tsv,csv,jsonl}"});
  t.write("train.tsv", "sentence\tlabel\nx\ta\n");
  t.write("train.csv", "sentence,label\nx,a\n");
  expect_error([&] { make_glue_processor("generic", o)->get_train_examples(t.str()); }, {"choose one with --format"});
}

// ---------------------------------------------------------------- truncation (CASES.md C13) and featurization

// The classifier truncation is pretraining.h's truncate_seq_pair_back, which convert_single_example uses.
TEST(GlueFeatures, ClassifierTruncationPopsTheBackOfTheLonger) {
  // C13: max_seq_length 9 -> 6 tokens for a and b: a = a1..a5, b = b1..b5 -> [a1,a2,a3], [b1,b2,b3].
  Strings a{"a1", "a2", "a3", "a4", "a5"}, b{"b1", "b2", "b3", "b4", "b5"};
  truncate_seq_pair_back<std::string>(a, b, 9 - 3);
  EXPECT_EQ(a, (Strings{"a1", "a2", "a3"}));
  EXPECT_EQ(b, (Strings{"b1", "b2", "b3"}));
  // Longer side first, ties trim b: (7, 2) -> (4, 2); (2, 7) -> (2, 4); (3, 3) stays.
  a = {"a1", "a2", "a3", "a4", "a5", "a6", "a7"};
  b = {"b1", "b2"};
  truncate_seq_pair_back<std::string>(a, b, 6);
  EXPECT_EQ(a, (Strings{"a1", "a2", "a3", "a4"}));
  EXPECT_EQ(b, (Strings{"b1", "b2"}));
  a = {"a1", "a2"};
  b = {"b1", "b2", "b3", "b4", "b5", "b6", "b7"};
  truncate_seq_pair_back<std::string>(a, b, 6);
  EXPECT_EQ(b, (Strings{"b1", "b2", "b3", "b4"}));
  a = {"a1", "a2", "a3"};
  b = {"b1", "b2", "b3", "b4"};
  truncate_seq_pair_back<std::string>(a, b, 5);  // 7 -> pop b4 (b longer), then tie 3/3 -> pop b3
  EXPECT_EQ(a, (Strings{"a1", "a2", "a3"}));
  EXPECT_EQ(b, (Strings{"b1", "b2"}));
}

class GlueFeaturize : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { tok_ = new FullTokenizer(FullTokenizer::from_vocab_file(kUncasedVocab, true)); }
  static void TearDownTestSuite() { delete tok_; }
  static FullTokenizer* tok_;
};
FullTokenizer* GlueFeaturize::tok_ = nullptr;

InputExample pair(const std::string& a, const std::string& b, const std::string& label) {
  InputExample e;
  e.guid = "dev-7";
  e.text_a = a;
  e.text_b = b;
  e.label = label;
  e.source = "dev.tsv";
  e.line = 8;
  return e;
}

TEST_F(GlueFeaturize, PairWithRealVocabIds) {
  // [CLS] the cat sat on the mat . [SEP] is this jacksonville ? [SEP] then padding to 16.
  // Ids from data/vocab/bert-base-uncased-vocab.txt (0-based line numbers): [CLS] 101, [SEP] 102, the 1996,
  // cat 4937, sat 2938, on 2006, mat 13523, . 1012, is 2003, this 2023, jacksonville 13057, ? 1029.
  const auto f = convert_single_example(pair("The cat sat on the mat.", "Is this Jacksonville?", "not_entailment"),
                                        {"entailment", "not_entailment"}, false, 16, *tok_);
  EXPECT_EQ(f.input_ids, (Ids{101, 1996, 4937, 2938, 2006, 1996, 13523, 1012, 102, 2003, 2023, 13057, 1029, 102, 0, 0}));
  EXPECT_EQ(f.input_mask, (Ids{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}));
  EXPECT_EQ(f.segment_ids, (Ids{0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0}));
  EXPECT_EQ(f.label_id, 1);
  EXPECT_TRUE(f.has_label);
  EXPECT_EQ(f.num_tokens, 14);
  EXPECT_FALSE(f.truncated);
}

TEST_F(GlueFeaturize, PairTruncatedToMaxSeqLengthMinus3) {
  // a has 7 pieces (the cat sat on the mat .), b 4 (is this jacksonville ?); max_seq_length 9 leaves 6:
  // (7,4) -> (6,4) -> (5,4) -> (4,4) -> tie trims b (4,3) -> (3,3): a = the cat sat, b = is this jacksonville.
  const auto f = convert_single_example(pair("The cat sat on the mat.", "Is this Jacksonville?", "entailment"),
                                        {"entailment", "not_entailment"}, false, 9, *tok_);
  EXPECT_EQ(f.input_ids, (Ids{101, 1996, 4937, 2938, 102, 2003, 2023, 13057, 102}));
  EXPECT_EQ(f.input_mask, Ids(9, 1));
  EXPECT_EQ(f.segment_ids, (Ids{0, 0, 0, 0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(f.label_id, 0);
  EXPECT_TRUE(f.truncated);
}

TEST_F(GlueFeaturize, SingleSentenceKeepsFirstMaxMinus2AndEmptyBIsSingle) {
  InputExample e;
  e.guid = "train-0";
  e.text_a = "The cat sat on the mat.";
  e.text_b = "";  // empty text_b: single sentence, as the reference's `if example.text_b:`
  e.label = "1";
  const auto f = convert_single_example(e, {"0", "1"}, false, 5, *tok_);
  EXPECT_EQ(f.input_ids, (Ids{101, 1996, 4937, 2938, 102}));
  EXPECT_EQ(f.segment_ids, Ids(5, 0));
  EXPECT_EQ(f.label_id, 1);
  e.text_b = "\x01";  // tokenizes to nothing (a control character is cleaned away): single sentence too
  EXPECT_EQ(convert_single_example(e, {"0", "1"}, false, 5, *tok_).input_ids, (Ids{101, 1996, 4937, 2938, 102}));
}

TEST_F(GlueFeaturize, RegressionUnlabeledAndErrors) {
  auto e = pair("The cat", "sat", "3.800");
  auto f = convert_single_example(e, {}, true, 8, *tok_);
  EXPECT_FLOAT_EQ(f.label_value, 3.8f);
  EXPECT_EQ(f.label_id, 0);
  EXPECT_EQ(f.input_ids, (Ids{101, 1996, 4937, 102, 2938, 102, 0, 0}));
  e.label.reset();  // test example
  f = convert_single_example(e, {"0", "1"}, false, 8, *tok_);
  EXPECT_FALSE(f.has_label);
  EXPECT_EQ(f.label_id, 0);
  e.label = "maybe";
  expect_error([&] { convert_single_example(e, {"0", "1"}, false, 8, *tok_); },
               {"dev.tsv:8:", "'dev-7'", "unknown label 'maybe'"});
  e.label = "x";
  expect_error([&] { convert_single_example(e, {}, true, 8, *tok_); }, {"dev.tsv:8:", "not a finite number"});
  e.label = "1";
  expect_error([&] { convert_single_example(e, {"0", "1"}, false, 2, *tok_); }, {"max_seq_length must be at least 3"});
  e.text_a = "bad \xC3";
  expect_error([&] { convert_single_example(e, {"0", "1"}, false, 8, *tok_); }, {"dev.tsv:8:", "UTF-8"});
  auto no_cls = FullTokenizer(std::make_shared<Vocab>(Vocab::from_tokens({"[PAD]", "[SEP]", "the"})), true);
  e.text_a = "the";
  expect_error([&] { convert_single_example(e, {"0", "1"}, false, 8, no_cls); }, {"no [CLS]"});
}

TEST_F(GlueFeaturize, ProcessorToBatches) {
  auto p = make_glue_processor("MNLI");
  const auto dev = p->get_dev_sets(dir("MNLI"));
  const auto feats = convert_examples_to_features(dev[1].examples, *p, 12, *tok_);
  ASSERT_EQ(feats.size(), 3u);
  EXPECT_EQ(feats[0].label_id, 1);  // entailment
  EXPECT_EQ(feats[1].label_id, 0);  // contradiction
  EXPECT_EQ(feats[2].label_id, 2);  // neutral
  const auto b = make_classifier_batch(feats, std::vector<int64_t>{2, 0}, false);
  EXPECT_EQ(b.input_ids.shape(), (Shape{2, 12}));
  EXPECT_EQ(b.input_ids.dtype(), DType::i32);
  EXPECT_EQ(b.input_mask.dtype(), DType::i32);
  EXPECT_EQ(b.segment_ids.dtype(), DType::i32);
  EXPECT_EQ(b.labels.shape(), (Shape{2}));
  EXPECT_EQ(b.labels.dtype(), DType::i32);
  for (int64_t t = 0; t < 12; ++t) {
    EXPECT_EQ(b.input_ids.get(t), feats[2].input_ids[t]);
    EXPECT_EQ(b.input_ids.get(12 + t), feats[0].input_ids[t]);
    EXPECT_EQ(b.input_mask.get(12 + t), feats[0].input_mask[t]);
    EXPECT_EQ(b.segment_ids.get(t), feats[2].segment_ids[t]);
  }
  EXPECT_EQ(b.labels.get(0), 2);
  EXPECT_EQ(b.labels.get(1), 1);
  const auto r = make_classifier_batch(feats, 1, 3, false);
  EXPECT_EQ(r.labels.to_vector(), (std::vector<double>{0, 2}));

  auto sts = make_glue_processor("STS-B");
  const auto sf = convert_examples_to_features(sts->get_train_examples(dir("STS-B")), *sts, 10, *tok_);
  const auto sb = make_classifier_batch(sf, 0, 2, true);
  EXPECT_EQ(sb.labels.dtype(), DType::f32);
  EXPECT_FLOAT_EQ(static_cast<float>(sb.labels.get(0)), 4.75f);
  EXPECT_FLOAT_EQ(static_cast<float>(sb.labels.get(1)), 0.0f);

  expect_error([&] { make_classifier_batch(feats, std::vector<int64_t>{}, false); }, {"empty batch"});
  expect_error([&] { make_classifier_batch(feats, std::vector<int64_t>{3}, false); }, {"index 3"});
  std::vector<ClassifierFeatures> mixed{feats[0], sf[0]};
  expect_error([&] { make_classifier_batch(mixed, 0, 2, false); }, {"length 10, expected 12"});
}

// ---------------------------------------------------------------- metrics (exact values)

TEST(GlueMetrics, CasesC29) {
  // y = [1,0,1,0], prediction all 1: one class never predicted -> MCC 0 (not NaN).
  const Ids y1{1, 0, 1, 0}, p1{1, 1, 1, 1};
  EXPECT_EQ(matthews_corrcoef(p1, y1), 0.0);
  EXPECT_EQ(accuracy(p1, y1), 0.5);
  // y = [1,1,0,0], p = [1,0,0,0]: c = 3, s = 4, t = (2, 2), p = (3, 1):
  // (3*4 - (2*3 + 2*1)) / sqrt((16 - (9 + 1)) * (16 - (4 + 4))) = 4 / sqrt(48) = 0.5773502691896258.
  const Ids y2{1, 1, 0, 0}, p2{1, 0, 0, 0};
  EXPECT_NEAR(matthews_corrcoef(p2, y2), 0.5773503, 5e-8);
  EXPECT_DOUBLE_EQ(matthews_corrcoef(p2, y2), 4 / std::sqrt(48.0));
  EXPECT_EQ(accuracy(p2, y2), 0.75);
  // tp = 1, fp = 0, fn = 1: 2 / (2 + 0 + 1) = 0.6666667.
  EXPECT_NEAR(f1_score(p2, y2), 0.6666667, 5e-8);
  EXPECT_DOUBLE_EQ(f1_score(p2, y2), 2.0 / 3.0);
}

TEST(GlueMetrics, MoreHandComputedCases) {
  // MCC, 3 classes: y = [0,1,2,0,1,2], p = [0,2,2,0,1,1]: c = 4, s = 6, t = p = (2,2,2):
  // (4*6 - 12) / sqrt((36 - 12) * (36 - 12)) = 12 / 24 = 0.5.
  EXPECT_DOUBLE_EQ(matthews_corrcoef(Ids{0, 2, 2, 0, 1, 1}, Ids{0, 1, 2, 0, 1, 2}), 0.5);
  // Perfectly wrong binary: -1. All labels one class and predicted right: denominator 0 -> 0.
  EXPECT_DOUBLE_EQ(matthews_corrcoef(Ids{0, 1, 0, 1}, Ids{1, 0, 1, 0}), -1.0);
  EXPECT_EQ(matthews_corrcoef(Ids{1, 1}, Ids{1, 1}), 0.0);
  // F1 with no positive anywhere: tp + fp + fn = 0 -> 0 (sklearn's zero_division).
  EXPECT_EQ(f1_score(Ids{0, 0}, Ids{0, 0}), 0.0);
  // F1 of another positive label: positive 2, p = [2,2,0], y = [2,0,2]: tp 1, fp 1, fn 1 -> 2/4 = 0.5.
  EXPECT_DOUBLE_EQ(f1_score(Ids{2, 2, 0}, Ids{2, 0, 2}, 2), 0.5);

  // Pearson x = [1,2,3,4], y = [2,4,5,9]: means 2.5 and 5, dx = [-1.5,-.5,.5,1.5], dy = [-3,-1,0,4];
  // sxy = 4.5+0.5+0+6 = 11, sxx = 5, syy = 26 -> 11/sqrt(130) = 0.9647638212377322 (scipy pearsonr agrees).
  const std::vector<double> x{1, 2, 3, 4}, y{2, 4, 5, 9};
  EXPECT_NEAR(pearson_corrcoef(x, y), 11 / std::sqrt(130.0), 1e-15);
  EXPECT_NEAR(pearson_corrcoef(x, y), 0.9647638212377322, 1e-15);
  // No ties: Spearman is 1 (ranks identical).
  EXPECT_DOUBLE_EQ(spearman_corrcoef(x, y), 1.0);
  // Spearman with ties, x = [1,2,2,3], y = [1,3,2,4]: ranks x = [1,2.5,2.5,4], y = [1,3,2,4], means 2.5;
  // dx = [-1.5,0,0,1.5], dy = [-1.5,.5,-.5,1.5]: sxy = 4.5, sxx = 4.5, syy = 5 -> 4.5/sqrt(22.5) = 3/sqrt(10)
  // = 0.9486832980505138.
  EXPECT_EQ(rank_average(std::vector<double>{1, 2, 2, 3}), (std::vector<double>{1, 2.5, 2.5, 4}));
  EXPECT_NEAR(spearman_corrcoef(std::vector<double>{1, 2, 2, 3}, std::vector<double>{1, 3, 2, 4}), 3 / std::sqrt(10.0),
              1e-15);
  // Ties on both sides, negative: x = [3,1,1,2,5] -> ranks [4,1.5,1.5,3,5]; y = [2,2,4,4,1] -> [2.5,2.5,4.5,4.5,1];
  // means 3: dx = [1,-1.5,-1.5,0,2], dy = [-.5,-.5,1.5,1.5,-2]; sxy = -.5+.75-2.25+0-4 = -6, sxx = 9.5, syy = 9
  // -> -6/sqrt(85.5) = -0.6488856845230502 (scipy spearmanr agrees).
  const std::vector<double> x3{3, 1, 1, 2, 5}, y3{2, 2, 4, 4, 1};
  EXPECT_EQ(rank_average(x3), (std::vector<double>{4, 1.5, 1.5, 3, 5}));
  EXPECT_EQ(rank_average(y3), (std::vector<double>{2.5, 2.5, 4.5, 4.5, 1}));
  EXPECT_NEAR(spearman_corrcoef(x3, y3), -6 / std::sqrt(85.5), 1e-15);
  EXPECT_NEAR(spearman_corrcoef(x3, y3), -0.6488856845230502, 1e-15);
  // Pearson with ties (ties do not matter to Pearson): x = [.5,1.5,1.5,4], y = [1,2,3,3]: means 1.875 and 2.25;
  // dx = [-1.375,-.375,-.375,2.125], dy = [-1.25,-.25,.75,.75]: sxy = 1.71875+.09375-.28125+1.59375 = 3.125,
  // sxx = 1.890625+.140625+.140625+4.515625 = 6.6875, syy = 1.5625+.0625+.5625+.5625 = 2.75
  // -> 3.125/sqrt(18.390625) = 0.7287050466613612 (scipy agrees).
  EXPECT_NEAR(pearson_corrcoef(std::vector<double>{.5, 1.5, 1.5, 4}, std::vector<double>{1, 2, 3, 3}),
              0.7287050466613612, 1e-15);
  // Constant input: NaN, as scipy.
  EXPECT_TRUE(std::isnan(pearson_corrcoef(std::vector<double>{1, 1, 1}, std::vector<double>{1, 2, 3})));
  EXPECT_TRUE(std::isnan(spearman_corrcoef(std::vector<double>{1, 2, 3}, std::vector<double>{5, 5, 5})));
  // Errors: lengths differ, empty, too short.
  expect_error([] { accuracy(Ids{1}, Ids{1, 0}); }, {"1 predictions but 2 labels"});
  expect_error([] { accuracy(Ids{}, Ids{}); }, {"no predictions"});
  expect_error([] { pearson_corrcoef(std::vector<double>{1}, std::vector<double>{1}); }, {"at least 2"});
}

TEST(GlueMetrics, PerTaskSets) {
  const Ids y{1, 1, 0, 0}, p{1, 0, 0, 0};
  using M = std::map<std::string, double>;
  EXPECT_EQ(compute_glue_metrics("CoLA", p, y), (M{{"matthews_correlation", 4 / std::sqrt(48.0)}}));
  for (const char* t : {"SST-2", "sst2", "MNLI", "QNLI", "RTE", "WNLI"})
    EXPECT_EQ(compute_glue_metrics(t, p, y), (M{{"accuracy", 0.75}})) << t;
  const M acc_f1{{"accuracy", 0.75}, {"f1", 2.0 / 3.0}, {"combined_score", (0.75 + 2.0 / 3.0) / 2}};
  EXPECT_EQ(compute_glue_metrics("MRPC", p, y), acc_f1);
  EXPECT_EQ(compute_glue_metrics("qqp", p, y), acc_f1);
  EXPECT_EQ(compute_glue_metrics("generic", p, y, 2),
            (M{{"accuracy", 0.75}, {"f1", 2.0 / 3.0}, {"matthews_correlation", 4 / std::sqrt(48.0)}}));
  EXPECT_EQ(compute_glue_metrics("generic", p, y, 3), (M{{"accuracy", 0.75}}));
  expect_error([&] { compute_glue_metrics("STS-B", p, y); }, {"compute_glue_regression_metrics"});
  expect_error([&] { compute_glue_metrics("squad", p, y); }, {"unknown task 'squad'"});
  const std::vector<double> x{1, 2, 2, 3}, z{1, 3, 2, 4};
  const auto r = compute_glue_regression_metrics("STS-B", x, z);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_DOUBLE_EQ(r.at("spearmanr"), 3 / std::sqrt(10.0));
  // Pearson of x, z: means 2 and 2.5; dx = [-1,0,0,1], dz = [-1.5,.5,-.5,1.5]: sxz = 3, sxx = 2, szz = 5
  // -> 3/sqrt(10): here equal to Spearman.
  EXPECT_DOUBLE_EQ(r.at("pearson"), 3 / std::sqrt(10.0));
  EXPECT_DOUBLE_EQ(r.at("combined_score"), 3 / std::sqrt(10.0));
  expect_error([&] { compute_glue_regression_metrics("MRPC", x, z); }, {"not a regression task"});
  EXPECT_EQ(glue_primary_metric("CoLA"), "matthews_correlation");
  EXPECT_EQ(glue_primary_metric("mrpc"), "combined_score");
  EXPECT_EQ(glue_primary_metric("STS-B"), "combined_score");
  EXPECT_EQ(glue_primary_metric("MNLI"), "accuracy");
  EXPECT_EQ(glue_primary_metric("generic", true), "combined_score");
  EXPECT_EQ(glue_primary_metric("generic", false), "accuracy");
  expect_error([] { glue_primary_metric("squad"); }, {"unknown task 'squad'"});
}

// ---------------------------------------------------------------- the shared QNLI file, split by article

// Runs experiments/qnli-transfer/split_qnli.py on ../shared/data and reads both halves with the QNLI
// processor: every row is read, the counts add up to the 5035 shared rows, no question is in both halves, and
// every example featurizes at max_seq_length 128. Skipped when the shared data or /usr/bin/python3 is absent.
TEST(GlueQnliSplit, SplitByArticleReadsBack) {
  const fs::path shared = fs::path(BERTRAIN_SOURCE_DIR) / ".." / "shared" / "data";
  if (!fs::exists(shared / "glue_qnli_dev" / "dev-shared.tsv") || !fs::exists("/usr/bin/python3"))
    GTEST_SKIP() << "needs ../shared/data/glue_qnli_dev and /usr/bin/python3";
  TempDir t;
  const std::string cmd = "/usr/bin/python3 " + std::string(BERTRAIN_SOURCE_DIR) + "/experiments/qnli-transfer/split_qnli.py " + t.str() +
                          " > " + t.str() + "/log.txt 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << slurp(t.str() + "/log.txt");
  auto p = make_glue_processor("QNLI");
  const auto train = p->get_train_examples(t.str());
  const auto dev = p->get_dev_examples(t.str());
  EXPECT_EQ(train.size() + dev.size(), 5035u);
  EXPECT_GT(dev.size(), 500u);
  EXPECT_GT(train.size(), 3 * dev.size());
  std::set<std::string> train_questions;
  for (const auto& e : train) train_questions.insert(e.text_a);
  for (const auto& e : dev) EXPECT_EQ(train_questions.count(e.text_a), 0u) << e.text_a;
  // The script's printed counts are the ones read back.
  const std::string log = slurp(t.str() + "/log.txt");
  EXPECT_NE(log.find("train " + std::string(train.size() < 10000 ? " " : "") + std::to_string(train.size()) + " rows"),
            std::string::npos) << log;
  const auto tok = FullTokenizer::from_vocab_file(kUncasedVocab, true);
  const auto feats = convert_examples_to_features(dev, *p, 128, tok);
  ASSERT_EQ(feats.size(), dev.size());
  int64_t entail = 0;
  for (const auto& f : feats) entail += f.label_id == 0;
  EXPECT_GT(entail, 0);
  EXPECT_LT(entail, static_cast<int64_t>(feats.size()));
}

// ---------------------------------------------------------------- writers (exact text)

TEST(GlueWriters, EvalResultsJson) {
  const std::map<std::string, double> m{{"accuracy", 0.75}, {"f1", 0.5}};
  EXPECT_EQ(format_eval_results(m, 0.25, 1200),
            "{\n  \"eval_accuracy\": 0.75,\n  \"eval_f1\": 0.5,\n  \"eval_loss\": 0.25,\n  \"global_step\": 1200\n}\n");
  // MNLI: the mismatched set's values under "_mm" keys.
  EXPECT_EQ(format_eval_results({{"accuracy", 0.5}, {"accuracy_mm", 0.625}, {"loss_mm", 0.75}}, 0.125, 7),
            "{\n  \"eval_accuracy\": 0.5,\n  \"eval_accuracy_mm\": 0.625,\n  \"eval_loss\": 0.125,\n"
            "  \"eval_loss_mm\": 0.75,\n  \"global_step\": 7\n}\n");
  EXPECT_EQ(format_eval_results({{"pearson", std::nan("")}}, 1.5, 3),
            "{\n  \"eval_loss\": 1.5,\n  \"eval_pearson\": null,\n  \"global_step\": 3\n}\n");
  TempDir t;
  const std::string p = t.str() + "/eval_results.json";
  write_eval_results(p, m, 0.25, 1200);
  EXPECT_EQ(slurp(p), format_eval_results(m, 0.25, 1200));
  EXPECT_FALSE(fs::exists(p + ".tmp"));
  expect_error([&] { write_eval_results(t.str() + "/no/such/dir/e.json", m, 0, 0); }, {"no/such/dir/e.json"});
}

TEST(GlueWriters, TestResultsTsv) {
  const std::vector<float> probs{0.25f, 0.75f, 0.1f, 0.9f, 1.0f, 0.0f};
  EXPECT_EQ(format_test_results(probs, 2), "0.25\t0.75\n0.1\t0.9\n1\t0\n");
  EXPECT_EQ(format_test_results(std::vector<float>{3.8f, 1e-5f}, 1), "3.8\n1e-05\n");
  expect_error([&] { format_test_results(probs, 4); }, {"not a whole number of rows of 4"});
  TempDir t;
  write_test_results(t.str() + "/test_results.tsv", probs, 3);
  EXPECT_EQ(slurp(t.str() + "/test_results.tsv"), "0.25\t0.75\t0.1\n0.9\t1\t0\n");
}

TEST(GlueWriters, SubmissionFiles) {
  auto p = make_glue_processor("MNLI");
  const auto test = p->get_test_sets(dir("MNLI"));
  const auto& mm = test[1];
  EXPECT_EQ(format_glue_submission(mm.examples, Ids{2, 0}, p->labels()),
            "index\tprediction\n0\tneutral\n1\tcontradiction\n");
  expect_error([&] { format_glue_submission(mm.examples, Ids{3, 0}, p->labels()); }, {"predicted id 3"});
  expect_error([&] { format_glue_submission(mm.examples, Ids{0}, p->labels()); }, {"2 examples but 1 predictions"});
  auto sts = make_glue_processor("STS-B");
  const auto st = sts->get_test_examples(dir("STS-B"));
  EXPECT_EQ(format_glue_submission_regression(st, std::vector<float>{4.25f}), "index\tprediction\n0\t4.25\n");
  TempDir t;
  const std::string path = t.str() + "/" + mm.submission_file;
  write_glue_submission(path, mm.examples, Ids{1, 1}, p->labels());
  EXPECT_EQ(slurp(path), "index\tprediction\n0\tentailment\n1\tentailment\n");
  write_glue_submission_regression(t.str() + "/STS-B.tsv", st, std::vector<float>{0.5f});
  EXPECT_EQ(slurp(t.str() + "/STS-B.tsv"), "index\tprediction\n0\t0.5\n");
}

}  // namespace
