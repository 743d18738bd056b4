// predict.h: `bertrain predict` as a library function: a checkpoint directory's pipeline (tasks/pipeline.h) over
// an input file, one JSON line out per input line, with the label names. The task comes from the checkpoint's
// config.json "architectures" (pipeline_task).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bertrain/tasks/pipeline.h"

namespace bertrain::tasks {

struct PredictOptions {
  std::string checkpoint;   ///< checkpoint directory (bertrain, Hugging Face, or TF with bert_config.json)
  std::string input_file;   ///< "-": stdin
  std::string output_file;  ///< empty or "-": stdout; else written atomically
  /// Empty: pipeline_task(checkpoint). "feature-extraction" also works on any finetuned checkpoint's encoder.
  std::string task;
  PipelineOptions pipeline;
  FeatureExtractionPipeline::Pooling pooling = FeatureExtractionPipeline::Pooling::mean;
  std::vector<int> layers = {-1};
};

struct PredictSummary {
  std::string task;
  int64_t lines = 0;
  std::string output;  ///< where the lines went
};

/// One input line is one input: plain text; "text ||| text_pair" (split at the last " ||| ", as extract_features.py)
/// for pairs; or a JSON object (a line starting with '{') with "text" (and "text_pair"), or for question answering
/// "question" and "context" (required there). A JSON "id" is copied to the output line. Output lines (JSON):
///   text-classification   {"label": name, "score": p, "scores": {name: p, ...}} (id2label order), or
///                         {"score": value} for regression
///   token-classification  {"entities": [{"entity_group", "score", "word", "start", "end"}, ...],
///                          "words": [{"word", "label", "score", "start", "end"}, ...]}
///   question-answering    {"answer": text, "score": p, "start": s, "end": e}
///   feature-extraction    {"values": [...]}
/// start/end count code points (Python's str offsets). All lines are read first: a bad line (not UTF-8, invalid
/// JSON, a missing field) stops the run with one line naming the file and line before any output.
/// Throws bertrain::Error as the pipelines' load and call, for an unknown task, or on I/O failure.
PredictSummary predict_file(const PredictOptions& options);

}  // namespace bertrain::tasks
