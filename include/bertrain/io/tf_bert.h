// tf_bert.h: google-research/bert's TensorFlow variable names and layouts <-> Hugging Face's (bertrain's), both
// ways, and whole-checkpoint conversion (`bertrain convert`). The rules are ../shared/CASES.md C33's, checked
// against transformers' load_tf_weights_in_bert / convert_bert_pytorch_checkpoint_to_original_tf.py and the
// reference heads (run_classifier.py, run_squad.py, run_pretraining.py):
//  - dense kernels are [in, out] in TF and (out, in) in Hugging Face: every `.../kernel` is transposed, square
//    ones (Q, K, V, attention output, pooler, MLM transform) included;
//  - embeddings, `cls/seq_relationship/output_weights` ([2, H], already (out, in)), the classifier's unscoped
//    `output_weights` ([num_labels, H]) and `cls/squad/output_weights` ([2, H]: row 0 start, row 1 end) are not;
//  - LayerNorm gamma/beta are weight/bias; `cls/predictions/output_bias` is `cls.predictions.bias`, and the
//    masked-LM decoder is the word embeddings (there is no decoder matrix in TF, and its bias is not added twice);
//  - optimizer slots (`adam_m`, `adam_v`, `Adam`, `Adam_1`), `global_step`, `beta1_power`/`beta2_power` and
//    anything under `AdamWeightDecayOptimizer` are not weights: skipped and counted.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bertrain/core/tensor.h"
#include "bertrain/io/tf_checkpoint.h"
#include "bertrain/models/bert_config.h"

namespace bertrain {

/// A variable's name on the other side and whether its value is transposed on the way.
struct TfNameMapping {
  std::string name;
  bool transpose = false;
};

/// The Hugging Face name of a google-research/bert variable, or nullopt when the name follows none of the rules
/// above (the caller reports it). Pure name rules: no shape is checked here.
std::optional<TfNameMapping> tf_to_hf_name(const std::string& tf_name);
/// The google-research/bert name of a Hugging Face BERT parameter (with or without the "bert." prefix, old
/// LayerNorm.gamma/beta spellings accepted), or nullopt for names that have none (the tied
/// cls.predictions.decoder.*, position_ids buffers, unknown names).
std::optional<TfNameMapping> hf_to_tf_name(const std::string& hf_name);
/// True for optimizer state and counters a TF training checkpoint carries besides the weights.
bool is_tf_optimizer_variable(const std::string& tf_name);

/// The Hugging Face shape a BERT parameter must have under `config`, or nullopt for a name outside BertModel,
/// BertForPreTraining, BertForSequenceClassification and BertForQuestionAnswering. The classifier's row count
/// is num_labels of the file, so only its hidden size is fixed: its expected shape uses `classifier_rows`.
std::optional<Shape> bert_parameter_shape(const std::string& hf_name, const BertConfig& config, int64_t classifier_rows);

/// What a conversion did; names are the source's.
struct TfMappingReport {
  std::vector<std::string> mapped;           ///< "tf -> hf" (", transposed" when it was)
  std::vector<std::string> optimizer;        ///< optimizer slots and counters, not weights (skipped)
  std::vector<std::string> unexpected;       ///< tensors that are no BERT parameter (left out)
  std::vector<std::string> not_convertible;  ///< DT_STRING and other non-numeric tensors (left out)
  std::vector<std::string> tied;             ///< decoder weight/bias equal to what they are tied to (left out)
  /// Several lines for the log: counts, then the unexpected and not-convertible names.
  std::string summary() const;
};

/// One model variable read from a TF checkpoint.
struct TfBertTensor {
  std::string hf_name;   ///< bert.encoder.layer.0.attention.self.query.weight
  std::string tf_name;   ///< bert/encoder/layer_0/attention/self/query/kernel
  bool transposed = false;
  Tensor value;          ///< in Hugging Face layout
};

/// The model variables of a google-research/bert checkpoint as Hugging Face tensors, in the file's dtype
/// (DT_HALF widened to f32), every CRC checked, kernels transposed. With `config`, each tensor's shape is checked
/// against it (`config_source` names the config in the message). Throws bertrain::Error, one line naming the
/// checkpoint and the TF tensor, when a tensor cannot be read (TfCheckpointReader::load's errors), a mapped
/// tensor is sliced, or its shape disagrees with the config (both shapes, TF layout).
std::vector<TfBertTensor> read_tf_bert_weights(const TfCheckpointReader& reader, const BertConfig* config,
                                               const std::string& config_source, TfMappingReport& report);

/// Hugging Face tensors to google-research/bert variables (kernels transposed back), values unchanged.
/// cls.predictions.decoder.weight is left out when it equals the word embeddings and
/// cls.predictions.decoder.bias when it equals cls.predictions.bias (or becomes it when that is absent), both
/// reported as tied; position_ids buffers are left out. Throws bertrain::Error naming `source` and both tensors
/// when a decoder weight or bias differs from what it is tied to (a checkpoint with an untied decoder cannot be
/// written as google-research/bert's tied head), or a tensor is not 2-D where a transpose is needed.
std::vector<std::pair<std::string, Tensor>> hf_to_tf_tensors(const std::vector<std::pair<std::string, Tensor>>& hf,
                                                             const std::string& source, TfMappingReport& report);

struct ConvertOptions {
  std::string bert_config_file;  ///< default: bert_config.json (TF input) or config.json (bertrain input) beside it
  std::string vocab_file;        ///< default: vocab.txt beside the input, when there is one
  /// For a bertrain / Hugging Face input: "tf" or "safetensors"; empty: safetensors for a PyTorch checkpoint
  /// (pytorch_model.bin), tf for safetensors. A TF input always becomes safetensors.
  std::string output_format;
};

struct ConvertResult {
  bool to_tf = false;                 ///< direction: bertrain/Hugging Face -> TF (else -> safetensors)
  std::vector<std::string> written;   ///< files written
  size_t tensors = 0;                 ///< tensors written
  TfMappingReport report;
};

/// `bertrain convert`. A TF checkpoint input (a prefix, its .index, or a directory holding exactly one
/// *.index, as Google's zips) becomes the directory `output` with config.json (Hugging Face form, Google's
/// extra keys kept; num_labels from a classifier head), model.safetensors (Hugging Face names and layouts,
/// the file's dtypes) and vocab.txt. A bertrain / Hugging Face checkpoint (a directory with model.safetensors,
/// a .safetensors file, a pytorch_model.bin or a directory holding one) becomes, with output_format "tf",
/// the directory `output` with bert_model.ckpt.index,
/// bert_model.ckpt.data-00000-of-00001 (DT_FLOAT), bert_config.json (Google's form) and vocab.txt, loadable by
/// google-research/bert's --init_checkpoint=output/bert_model.ckpt; with "safetensors" (the default for a PyTorch
/// input) the directory `output` with model.safetensors (every tensor in its file dtype, F16 widened to F32, views
/// copied out, the tied decoder weight and bias left out: reported as tied), config.json and vocab.txt. Every input tensor is read and checked
/// against the config before the first file is written, and each file is written atomically, so an error
/// writes nothing. Throws bertrain::Error (one line, naming the file and tensor) on a missing config, any reader
/// error, a shape that disagrees with the config, or a missing backbone parameter (word embeddings).
ConvertResult convert_checkpoint(const std::string& input, const std::string& output, const ConvertOptions& options = {});

/// The TF prefix an input names: a prefix, its .index / .data file, or a directory without model.safetensors
/// and pytorch_model.bin that holds a `checkpoint` file (the latest checkpoint it names, read_tf_checkpoint_state in tf_checkpoint.h) or
/// exactly one *.index file (bert_model.ckpt.index in Google's zips); nullopt when it names no TF checkpoint.
/// A `checkpoint` file takes precedence over the *.index files, as in TF. Throws bertrain::Error (one line) for
/// a `checkpoint` file that cannot be read or names a missing checkpoint (with a hint: the same name in this
/// directory, or the prefixes it holds), and for a directory with several *.index files and no `checkpoint` file
/// (listing the prefixes): one prefix must be chosen.
std::optional<std::string> find_tf_checkpoint(const std::string& path);

}  // namespace bertrain
