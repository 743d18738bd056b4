// glue.cpp (fuzz target): GLUE and generic task files through the processors `bertrain run-classifier` uses
// (make_glue_processor(...)->get_{train,dev,test}_set(data_dir): header rules, columns, labels, TSV/CSV/JSONL
// parsing), then run_classifier featurization of the accepted examples with bert-base's uncased vocabulary.
// Input: one flags byte (task = flags % 12: the nine GLUE tasks, then generic tsv/csv/jsonl; which set =
// (flags / 12) % 3: train, dev, test), then the file's bytes.
#include <filesystem>
#include <memory>

#include "bertrain/tasks/glue/glue.h"
#include "bertrain/text/tokenizer.h"
#include "fuzz_util.h"

using namespace bertrain;

namespace {

const text::FullTokenizer& tokenizer() {
  static const text::FullTokenizer tok = text::FullTokenizer::from_vocab_file(
      BERTRAIN_SOURCE_DIR "/data/vocab/bert-base-uncased-vocab.txt", true);
  return tok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const char* const kTasks[] = {"CoLA", "SST-2", "MRPC", "QQP", "STS-B", "MNLI", "QNLI", "RTE", "WNLI"};
  const auto in = fuzz::split_flags(data, size);
  const int task = in.flags % 12, set = (in.flags / 12) % 3;
  const bool generic = task >= 9;
  glue::GlueOptions options;
  std::string ext = "tsv";
  if (generic) {
    // The columns of the generic seeds (tests/fixtures/glue/generic): a single-sentence classification TSV, a pair
    // regression CSV and a single-sentence JSONL, as the readers' own tests use them.
    ext = options.format = task == 9 ? "tsv" : task == 10 ? "csv" : "jsonl";
    if (task == 9) {
      options.text_a_column = "review";
      options.labels = {"positive", "negative"};
      options.index_column = "id";
    } else if (task == 10) {
      options.text_a_column = "premise";
      options.text_b_column = "hypothesis";
      options.label_column = "score";
      options.regression = true;
      options.index_column = "id";
    } else {
      options.text_a_column = "text";
      options.labels = {"0", "1"};
    }
  }
  // Every file name a task may read gets the bytes: train, dev, test and MNLI's matched/mismatched sets.
  const std::string dir = fuzz::scratch_dir() + "/glue";
  std::filesystem::create_directories(dir);
  for (const char* name : {"train", "dev", "test", "dev_matched", "dev_mismatched", "test_matched", "test_mismatched"})
    fuzz::write_scratch(std::string("glue/") + name + "." + ext, in.bytes);
  const auto processor = glue::make_glue_processor(generic ? "generic" : kTasks[task], options);
  fuzz::expect_refusal_or_success(dir, [&] {
    const glue::ExampleSet s = set == 0   ? processor->get_train_set(dir)
                               : set == 1 ? processor->get_dev_set(dir, 0)
                                          : processor->get_test_set(dir, 0);
    const auto features = glue::convert_examples_to_features(s.examples, *processor, 24, tokenizer());
    if (features.size() != s.examples.size()) {
      std::fprintf(stderr, "FINDING: %zu examples gave %zu features\n", s.examples.size(), features.size());
      std::abort();
    }
    if (!features.empty()) (void)glue::make_classifier_batch(features, 0, static_cast<int64_t>(features.size()),
                                                             processor->is_regression());
  });
  return 0;
}
