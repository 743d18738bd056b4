// config.h: BertConfig from and to JSON: Hugging Face `config.json` and google-research/bert's
// `bert_config.json` (DESIGN.md section 5: files become typed structs only in io/ and tools/).
#pragma once

#include <string>

#include "bertrain/models/bert_config.h"

namespace bertrain {

/// Parses a config from JSON text; `source` names it in errors (a file path). Accepts both Hugging Face
/// config.json and google-research/bert bert_config.json: every BertConfig key is optional and keeps its
/// default when absent (so layer_norm_eps is 1e-12 for google's files, which have no such key). The keys
/// bert_config_to_json() writes itself (architectures, model_type, pad_token_id, torch_dtype, ...) and
/// transformers_version are dropped; every other unknown key (google's directionality and pooler_*, ...) goes to
/// BertConfig::extra and is written again by both writers below.
/// "architectures" (a list of strings; its first entry) becomes BertConfig::architecture and "finetuning_task"
/// BertConfig::finetuning_task.
/// Labels as transformers writes them: "id2label" {"0": "LABEL_0", ...} (output index as a string -> name) and
/// "label2id" {"LABEL_0": 0, ...} (its inverse) become BertConfig::id2label; either may come alone. num_labels
/// comes from "num_labels" or else from the size of id2label / label2id, as transformers derives it.
/// "gelu" is kept as "gelu", the exact erf form in both formats (what the released checkpoints were
/// trained with and what transformers computes).
/// Throws bertrain::Error naming `source` when the text is not a JSON object, and `source` plus the key when a
/// value has the wrong type (integers for sizes; numbers for probabilities, initializer_range and
/// layer_norm_eps; a string for hidden_act) or is out of range, when an id2label key is not an output index
/// 0..n-1, when label2id is not the inverse of id2label, or num_labels differs from their size; then runs
/// BertConfig::validate(), whose error is prefixed by `source`.
BertConfig parse_bert_config(const std::string& json_text, const std::string& source = "<config>");

/// Reads `path` with parse_bert_config(). Throws bertrain::Error naming the file when it cannot be read.
BertConfig load_bert_config(const std::string& path);

/// The config as transformers' save_pretrained writes it: keys sorted, indent 2, trailing newline, with
/// "architectures": [BertConfig::architecture] (["BertForPreTraining"] when it is empty), "finetuning_task" when
/// BertConfig::finetuning_task is set, "model_type": "bert", every BertConfig
/// key, "pad_token_id": 0, "position_embedding_type": "absolute", "torch_dtype": "float32",
/// "classifier_dropout": null, "use_cache": true, and "id2label" / "label2id" ({"0": "LABEL_0", ...} /
/// {"LABEL_0": 0, ...} with BertConfig::label_name) unless they are transformers' defaults (two labels named
/// LABEL_0 and LABEL_1), which transformers' save_pretrained leaves out too, and the config's
/// extra keys.
std::string bert_config_to_json(const BertConfig& config);

/// The config as google-research/bert's BertConfig.to_json_string writes bert_config.json (keys sorted,
/// indent 2, trailing newline): its eleven keys (attention_probs_dropout_prob, hidden_act, hidden_dropout_prob,
/// hidden_size, initializer_range, intermediate_size, max_position_embeddings, num_attention_heads,
/// num_hidden_layers, type_vocab_size, vocab_size), layer_norm_eps only when it is not google's fixed 1e-12,
/// "architectures" when BertConfig::architecture is set and is not "BertForPreTraining" (the model a google
/// checkpoint holds when the key is absent), "finetuning_task" when set, id2label / label2id when the
/// classifier's labels have names (google's BertConfig.from_dict keeps unknown keys as attributes and ignores
/// them; bertrain reads them back), and the config's extra keys.
std::string bert_config_to_google_json(const BertConfig& config);

/// Writes bert_config_to_json(config) to `path` atomically. Throws bertrain::Error on an invalid config
/// (validate()) or an I/O failure.
void save_bert_config(const std::string& path, const BertConfig& config);

}  // namespace bertrain
