// features.h: contextual token features from a BERT encoder, google-research/bert's extract_features.py
// (`bertrain extract-features`): lines of `text_a` or `text_a ||| text_b` in, one JSON line per input line out
// with every real token's vectors from the chosen encoder layers; plus one pooled vector per line ([CLS] or the
// mean over the line's tokens) as JSON lines or a .npy matrix.
#pragma once

#include <cstdint>
#include <functional>
#include <istream>
#include <optional>
#include <string>
#include <vector>

#include "bertrain/models/bert.h"
#include "bertrain/text/tokenizer.h"

namespace bertrain::features {

/// One input line (extract_features.py InputExample); unique_id is the 0-based line number.
struct InputExample {
  int64_t unique_id = 0;
  std::string text_a, text_b;
  bool has_b = false;
};

/// Reads every line of `in` as extract_features.py's read_examples: the line is stripped of surrounding ASCII
/// whitespace, and split at its last " ||| " into text_a and text_b (its regex `^(.*) \|\|\| (.*)$`); an empty
/// line is an example with empty text. `source` names the input in errors.
std::vector<InputExample> read_examples(std::istream& in, const std::string& source);

/// One example as model input: the real tokens only (padding is added per batch).
struct InputFeatures {
  int64_t unique_id = 0;
  std::vector<std::string> tokens;      ///< [CLS] a... [SEP] (b... [SEP])
  std::vector<int32_t> input_ids;       ///< ids of tokens
  std::vector<int32_t> input_type_ids;  ///< 0 for [CLS], text_a and its [SEP]; 1 for text_b and its [SEP]
  bool truncated = false;               ///< tokens were dropped to fit seq_length
};

/// extract_features.py convert_examples_to_features: WordPiece tokens of text_a (and text_b), truncated to
/// seq_length - 2 (a alone) or, by _truncate_seq_pair (one token at a time from the longer), to seq_length - 3
/// (a and b), then [CLS] and [SEP]s. Throws bertrain::Error naming the line when a text is not valid UTF-8
/// (the reference drops such bytes) or seq_length < 3.
std::vector<InputFeatures> convert_examples_to_features(const std::vector<InputExample>& examples, int64_t seq_length,
                                                        const text::FullTokenizer& tokenizer);

/// Runs the encoder (inference: no dropout, no gradients) over `features` in batches of `batch_size` made of
/// examples sorted by length within windows of 64 batches, each batch padded only to its longest example, and
/// calls `sink(i, outputs)` for every i in input order, where outputs[k] is f32 (n_i, H): layer `layers[k]`'s
/// vectors for the n_i real tokens of features[i]. Layer indices are google-research/bert's: 0 .. L-1 the
/// encoder layers' outputs, -1 the last, -L the first (the embeddings are not a layer). Results equal a
/// one-example-at-a-time forward up to GEMM rounding (padding is masked with -10000, whose softmax weight is an
/// exact 0 in f32). Throws bertrain::Error on a layer index outside [-L, L-1] or batch_size < 1.
void compute_layers(const BertModel& model, const std::vector<InputFeatures>& features, const std::vector<int>& layers,
                    int64_t batch_size,
                    const std::function<void(size_t index, const std::vector<Tensor>& outputs)>& sink);

enum class Pooling { none, cls, mean };

/// One vector per example: for each requested layer in order, the [CLS] vector (cls) or the mean over the
/// example's real tokens including [CLS] and [SEP] (mean, accumulated in double), concatenated: (len(layers) H).
std::vector<float> pool(const std::vector<Tensor>& outputs, Pooling pooling);

/// extract_features.py's output line: {"linex_index": id, "features": [{"token": t, "layers": [{"index": i,
/// "values": [...]}, ...]}, ...]} as Python's json.dumps writes it (", " and ": " separators, ASCII with \uXXXX
/// escapes), each value round(float(x), 6) printed as Python's repr. No trailing newline.
std::string features_json_line(const InputFeatures& f, const std::vector<int>& layers, const std::vector<Tensor>& outputs);
/// {"linex_index": id, "values": [...]} for a pooled vector, with the same number formatting.
std::string pooled_json_line(int64_t unique_id, const std::vector<float>& values);
/// Python's repr(round(x, 6)) for a float32 value widened to double (json.dumps prints NaN, Infinity,
/// -Infinity for the non-finite ones).
std::string python_round6_repr(float x);

/// The whole command.
struct Options {
  std::string input_file;         ///< "-" for stdin
  std::string output_file;        ///< "-" or empty for stdout; a name ending in ".npy" writes a .npy matrix
  std::string vocab_file;         ///< empty: vocab.txt beside init_checkpoint
  std::string bert_config_file;   ///< default: config.json / bert_config.json beside init_checkpoint
  std::string init_checkpoint;    ///< bertrain / Hugging Face checkpoint or TF prefix (io/checkpoint.h load_model)
  /// nullopt: init_checkpoint's tokenizer_config.json (or a Google model's name), else true. A value that
  /// contradicts the checkpoint's is refused (tasks::take_tokenizer_defaults).
  std::optional<bool> do_lower_case;
  std::vector<int> layers = {-1, -2, -3, -4};
  /// 0: init_checkpoint's model_max_length (tokenizer_config.json), else min(128, max_position_embeddings).
  int64_t max_seq_length = 0;
  int64_t batch_size = 32;
  Pooling pooling = Pooling::none;
};

struct Summary {
  int64_t examples = 0, truncated = 0;
  int64_t dim = 0;               ///< values per line (pooled) or per token and layer (H)
  int64_t max_seq_length = 0;    ///< the length used (the option, or the checkpoint's default)
  std::string load_report;       ///< what loading the checkpoint did (io LoadReport, compact)
  std::string output;            ///< where the output went
};

/// Reads the config, the vocab (checked against vocab_size), the checkpoint (into a BertModel; heads in the file
/// are reported, not used), the input (all lines first, so a bad line stops the run before any output), then
/// writes one line per input line in input order, or a float32 .npy of shape (lines, len(layers) H) when
/// output_file ends in ".npy" (pooling required). Files are written atomically. Throws bertrain::Error, one line
/// naming the file, on any missing or invalid input, a .npy without pooling, max_seq_length above
/// max_position_embeddings, or a bad layer index.
Summary extract_features(const Options& options);

}  // namespace bertrain::features
