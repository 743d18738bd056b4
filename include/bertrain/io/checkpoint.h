// checkpoint.h: model weights to and from safetensors under Hugging Face names and layouts, and checkpoint
// directories (config.json + model.safetensors) loadable by transformers' from_pretrained.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "bertrain/models/bert_config.h"
#include "bertrain/nn/module.h"

namespace bertrain {

/// File names inside a checkpoint directory, as transformers' save_pretrained writes them.
inline constexpr const char* kWeightsFileName = "model.safetensors";
inline constexpr const char* kConfigFileName = "config.json";

/// The tied MLM decoder weight: never written, skipped on load (the model ties it to
/// bert.embeddings.word_embeddings.weight), as transformers' _tied_weights_keys for BertForPreTraining.
inline constexpr const char* kTiedDecoderWeight = "cls.predictions.decoder.weight";

/// What load_model() did. Names are the model's (Hugging Face) names unless stated otherwise.
struct LoadReport {
  std::vector<std::string> loaded;      // parameters set from the file
  std::vector<std::string> missing;     // parameters not in the file: they keep their initialisation
  std::vector<std::string> unexpected;  // file tensors matching no parameter (file names)
  std::vector<std::string> ignored;     // file tensors skipped on purpose: position_ids buffers, the tied decoder
  std::vector<std::string> renamed;     // "file name -> parameter name" (LayerNorm.gamma/beta, bert. prefix)
  std::vector<std::string> converted;   // "name: F16 -> f32" when the file dtype differed from the parameter's
  std::vector<std::string> optimizer_state;  // TF checkpoints: optimizer slots and counters skipped (TF names)
  std::vector<std::string> warnings;    // e.g. a cls.predictions.decoder.weight that differs from the word embeddings
  /// True when every missing parameter belongs to the pooler or a head (bert.pooler.*, cls.*, classifier.*,
  /// qa_outputs.*): the situation of finetuning from a pretraining checkpoint, or of a checkpoint saved
  /// without its pooler.
  bool only_heads_missing() const;
  /// A multi-line summary for logs.
  std::string summary() const;
};

struct LoadOptions {
  /// Throw when anything is missing or unexpected (after aliases and the harmless set).
  bool strict = false;
  /// Throw when a parameter outside the pooler and heads is missing (a checkpoint of another model is
  /// almost certainly a mistake; the pooler and heads may legitimately be absent, see LoadReport).
  bool require_backbone = true;
};

/// Writes `model`'s parameters to safetensors under their named_parameters() names, each in its own dtype
/// (f32 stays F32), with metadata {"format": "pt"} as transformers writes. A parameter sharing its Variable
/// with one listed earlier (weight tying) and cls.predictions.decoder.weight are not written.
/// `path` ending in ".safetensors" is the file; otherwise it is a checkpoint directory (created if needed)
/// receiving model.safetensors and, when `config` is given, config.json (for a ".safetensors" path the
/// config.json goes into the same directory as the file). Each file is written atomically.
/// Throws bertrain::Error on I/O failure or an invalid config.
void save_model(const std::string& path, const Module& model, const std::optional<BertConfig>& config = std::nullopt);

/// Loads weights into `model` from a .safetensors file, a PyTorch checkpoint (torch.save of a state dict, such as
/// Hugging Face's pytorch_model.bin: bertrain/io/torch_checkpoint.h, read without running its pickle), a
/// checkpoint directory's model.safetensors or else its pytorch_model.bin, or a TensorFlow checkpoint: a prefix whose PREFIX.index exists (google-research/bert's --init_checkpoint, e.g.
/// dir/bert_model.ckpt), its .index file, or a directory without model.safetensors holding a `checkpoint` file
/// (the latest checkpoint it names, as tf.train.latest_checkpoint) or one *.index (find_tf_checkpoint). A TF
/// checkpoint's variables are mapped to Hugging Face names and layouts by bertrain/io/tf_bert.h (kernels
/// transposed, heads renamed, optimizer slots and global_step skipped and counted in the report), every one
/// read and CRC-checked before the model is touched; the rules below then apply to the mapped names.
/// Matching, as transformers' from_pretrained: exact names first; then the older names `LayerNorm.gamma` /
/// `LayerNorm.beta` (hub's bert-base-uncased files) for `LayerNorm.weight` / `LayerNorm.bias`; then the base
/// model prefix "bert." added or removed when the file was saved from BertModel and the model is a
/// BertFor* (or the reverse). cls.predictions.decoder.weight is skipped (tied), and accepted in the file when
/// its shape equals the word embeddings'; `cls.predictions.decoder.bias` is taken for cls.predictions.bias
/// when that is absent; buffers such as `bert.embeddings.position_ids` are ignored silently. F16/BF16/F64
/// values are converted to the parameter's dtype; same-dtype loads are bit-exact. A PyTorch file's tensors are
/// copied out of their storages (views, offsets and tied storages resolved) before the same rules apply.
/// When the file holds both cls.predictions.bias and cls.predictions.decoder.bias they must be equal (one bias,
/// added once: CASES.md C33); a decoder weight that differs from the word embeddings is reported in warnings.
/// Throws bertrain::Error naming the file and tensor on a shape mismatch (both shapes in the message), a
/// non-floating file tensor for a parameter, anything SafetensorsFile::open() rejects, a missing backbone
/// parameter (unless options.require_backbone is false), or any missing/unexpected tensor when
/// options.strict. The model is modified only after every check passed.
void load_model(const std::string& path, Module& model, LoadReport& report, const LoadOptions& options = {});

/// The config that belongs to a checkpoint when no config file is given: config.json in a checkpoint directory,
/// or beside a .safetensors file or a TF prefix; when that does not exist and bert_config.json does (Google's
/// zips), bert_config.json. Returns the config.json path when neither exists (the caller's error names it).
std::string default_config_file(const std::string& checkpoint);

/// The weights file of a checkpoint path: `path` itself when it is a file, else path/model.safetensors, else
/// path/pytorch_model.bin (transformers' order). Throws bertrain::Error when none exists. WeightsFile::open()
/// (bertrain/io/weights_file.h) reads what this returns, whichever format it is.
std::string resolve_weights_file(const std::string& path);

}  // namespace bertrain
