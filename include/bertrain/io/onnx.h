// onnx.h: a BERT checkpoint with its head as an ONNX model (`bertrain export-onnx`), runnable by ONNX Runtime and
// any other ONNX runtime. The protobuf messages of onnx/onnx.proto (ModelProto, GraphProto, NodeProto, TensorProto,
// ValueInfoProto, AttributeProto, OperatorSetIdProto, StringStringEntryProto) are encoded by hand, as the
// TensorFlow bundle writer does (see io/layer.cmake for why protobuf's runtime is not linked).
//
// The graph: inputs input_ids, attention_mask, token_type_ids, int64 (batch_size, sequence_length), both axes
// dynamic; outputs under the names Hugging Face's ONNX export gives them (OnnxTask). Standard ONNX operators only
// (domain ""), the computation of bertrain's padded path (models/bert.h): embeddings (word + position + token
// type) and LayerNormalization; per layer Q, K, V projections (MatMul + Add), scores Q K^T * 1/sqrt(HS) plus
// (1 - attention_mask) * -10000, Softmax, the context's projection, residual + LayerNormalization, the
// intermediate projection, the config's hidden_act (gelu: x * 0.5 * (1 + Erf(x / sqrt 2)); gelu_new and
// gelu_pytorch_tanh: 0.5 x (1 + Tanh(sqrt(2/pi) (x + 0.044715 x^3))); relu; tanh), the output projection,
// residual + LayerNormalization; the pooler Tanh(dense(first token)).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace bertrain {

/// What the exported model computes, and its outputs (Hugging Face's ONNX output names; shapes with B
/// batch_size, T sequence_length, H hidden_size, V vocab_size, L num_labels):
///  - encoder: BertModel: last_hidden_state (B, T, H), and pooler_output (B, H) when the checkpoint has a pooler;
///  - sequence_classification: BertForSequenceClassification: logits (B, L) from the pooled output;
///  - question_answering: BertForQuestionAnswering: start_logits, end_logits (B, T), each with
///    (1 - attention_mask) * -10000 added as bertrain's head does (padding is never an answer);
///  - token_classification: BertForTokenClassification: logits (B, T, L);
///  - pretraining: BertForPreTraining: prediction_logits (B, T, V) at every position (the decoder tied to the
///    word embeddings, plus cls.predictions.bias) and seq_relationship_logits (B, 2).
/// automatic: chosen from the checkpoint (resolve_onnx_task).
enum class OnnxTask { automatic, encoder, sequence_classification, question_answering, token_classification, pretraining };

/// "auto", "encoder", "sequence-classification", "question-answering", "token-classification", "pretraining".
std::string onnx_task_name(OnnxTask task);
/// The inverse of onnx_task_name. Throws bertrain::Error listing the known names for any other text.
OnnxTask parse_onnx_task(const std::string& name);
/// Hugging Face's class for a task: BertModel, BertForSequenceClassification, ...
std::string onnx_task_architecture(OnnxTask task);

/// The opsets the writer emits: 13 (Softmax over one axis, Unsqueeze's axes as an input) to 17 (the first with
/// LayerNormalization, used from 17 on; below it is written as ReduceMean, Sub, Mul, Add, Sqrt, Div).
inline constexpr int kOnnxMinOpset = 13;
inline constexpr int kOnnxMaxOpset = 17;
inline constexpr int kOnnxDefaultOpset = 17;

/// The task of a checkpoint: its config's `architectures` entry when that names a head class
/// (BertForSequenceClassification, BertForTokenClassification, BertForQuestionAnswering, BertModel) whose
/// parameters the checkpoint has; otherwise (BertForPreTraining, which finetuned checkpoints may also carry, or no
/// entry) the parameters present, Hugging Face names: qa_outputs.weight -> question_answering; classifier.weight
/// -> token_classification when the checkpoint has no pooler (Hugging Face's and bertrain's token classifiers
/// have none) or its id2label are IOB/IOBES tags (B-X, I-X, E-X, S-X, O), else sequence_classification;
/// cls.predictions.* with cls.seq_relationship.* -> pretraining; else encoder. `why` (when given) receives a
/// short reason for the log.
OnnxTask resolve_onnx_task(const std::vector<std::string>& architectures, const std::vector<std::string>& hf_names,
                           const std::vector<std::string>& id2label, std::string* why = nullptr);

struct OnnxExportOptions {
  /// A checkpoint directory (config.json + model.safetensors, a Hugging Face directory), a .safetensors file, or a
  /// TensorFlow checkpoint (a prefix, or a directory holding one), as load_model() accepts.
  std::string checkpoint;
  /// The .onnx file to write; its directory must exist. The tokenizer files go into the same directory.
  std::string output;
  OnnxTask task = OnnxTask::automatic;
  int opset = kOnnxDefaultOpset;
  /// Default: default_config_file(checkpoint).
  std::string bert_config_file;
  /// Default: vocab.txt beside the checkpoint (in the directory, or beside the file / TF prefix).
  std::string vocab_file;
  /// Default: the checkpoint's tokenizer_config.json when it has one, else true.
  std::optional<bool> do_lower_case;
};

struct OnnxExportResult {
  OnnxTask task = OnnxTask::automatic;  ///< the task exported (never automatic)
  std::string task_reason;              ///< why that task (auto), or "--task"
  std::vector<std::string> outputs;     ///< graph output names
  std::vector<std::string> written;     ///< files written, the model last
  std::vector<std::string> warnings;    ///< e.g. an encoder exported without pooler_output
  int64_t nodes = 0, initializers = 0, bytes = 0;
  std::string load_summary;             ///< LoadReport::summary() of the checkpoint load
};

/// Loads the checkpoint (load_model: Hugging Face names, a TF checkpoint mapped by io/tf_bert.h) into the task's
/// model and writes `output` (ONNX ModelProto: ir_version 8, the default domain at `opset`, producer "bertrain",
/// the graph above with every weight as an initializer of raw little-endian data, and metadata_props "task"
/// (onnx_task_name), "architecture" (onnx_task_architecture), "config" (the model's config.json text, with that
/// architecture) and, for the classification tasks, "id2label" (a JSON object {"0": name, ...} as config.json's)),
/// then the tokenizer files (vocab.txt, tokenizer_config.json, special_tokens_map.json as transformers'
/// BertTokenizer.save_pretrained writes them) into the output's directory. Every input is read and checked and
/// the whole model is planned before anything is written; the model is written atomically, so an error leaves no
/// partial model file and any previous one untouched.
/// Throws bertrain::Error, one line naming what is wrong: an opset outside [kOnnxMinOpset, kOnnxMaxOpset]; an
/// output directory that does not exist, is not a directory or is not writable, or an output that is a
/// directory; a missing or invalid config; a checkpoint without the head the task needs (naming the missing
/// tensor and the heads it has); a checkpoint load error (load_model's); a missing vocab file or one with more
/// tokens than vocab_size; a model whose serialised size reaches protobuf's 2 GiB limit; an I/O failure.
OnnxExportResult export_onnx(const OnnxExportOptions& options);

}  // namespace bertrain
