// tokenizer_files.cpp: vocab.txt, tokenizer_config.json and special_tokens_map.json of a checkpoint directory.
#include "bertrain/io/tokenizer_files.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "bertrain/io/atomic_file.h"
#include "io/file_util.h"

namespace bertrain {

std::string tokenizer_config_json(const BertTokenizerFiles& t) {
  nlohmann::json j = nlohmann::json::object();  // sorted keys
  j["clean_up_tokenization_spaces"] = true;
  j["cls_token"] = t.cls_token;
  j["do_basic_tokenize"] = true;
  j["do_lower_case"] = t.do_lower_case;
  j["mask_token"] = t.mask_token;
  j["model_max_length"] = t.model_max_length;
  j["never_split"] = nullptr;
  j["pad_token"] = t.pad_token;
  j["sep_token"] = t.sep_token;
  j["strip_accents"] = t.strip_accents ? nlohmann::json(*t.strip_accents) : nlohmann::json(nullptr);
  j["tokenize_chinese_chars"] = t.tokenize_chinese_chars;
  j["tokenizer_class"] = "BertTokenizer";
  j["unk_token"] = t.unk_token;
  return j.dump(2) + "\n";
}

std::string special_tokens_map_json(const BertTokenizerFiles& t) {
  nlohmann::json j{{"cls_token", t.cls_token}, {"mask_token", t.mask_token}, {"pad_token", t.pad_token},
                   {"sep_token", t.sep_token}, {"unk_token", t.unk_token}};
  return j.dump(2) + "\n";
}

void save_tokenizer_files(const std::string& dir, const BertTokenizerFiles& t) {
  const std::filesystem::path d(dir);
  if (!t.vocab_file.empty()) write_text_atomic((d / "vocab.txt").string(), read_text_file(t.vocab_file));
  write_text_atomic((d / "tokenizer_config.json").string(), tokenizer_config_json(t));
  write_text_atomic((d / "special_tokens_map.json").string(), special_tokens_map_json(t));
}

}  // namespace bertrain
