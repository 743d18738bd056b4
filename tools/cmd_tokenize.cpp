// cmd_tokenize.cpp: `bertrain tokenize`: tokenizes UTF-8 lines from stdin with a BERT vocab (WordPiece) or a
// sentencepiece model; one output line per input line, tokens (or ids) separated by single spaces.
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include "bertrain/core/error.h"
#include "bertrain/text/sentencepiece_tokenizer.h"
#include "bertrain/text/tokenizer.h"
#include "bertrain/text/utf8.h"
#include "commands.h"

namespace bertrain::cli {
namespace {

struct TokenizeFlags {
  std::string vocab_file, spm_model_file, do_lower_case = "true";
  bool ids = false;
};

int run_tokenize(const TokenizeFlags& f) {
  BERTRAIN_CHECK(f.vocab_file.empty() != f.spm_model_file.empty(),
                 "tokenize: give exactly one of --vocab_file and --spm_model_file");
  const bool lower = parse_bool_flag("do_lower_case", f.do_lower_case);
  std::optional<text::FullTokenizer> bert;
  std::optional<text::SentencePieceTokenizer> spm;
  if (!f.vocab_file.empty()) bert.emplace(text::FullTokenizer::from_vocab_file(f.vocab_file, lower));
  else spm.emplace(text::SentencePieceTokenizer::load(f.spm_model_file, lower));

  std::ios::sync_with_stdio(false);
  std::string line, out;
  std::vector<int32_t> ids;
  std::size_t line_no = 0;
  while (std::getline(std::cin, line)) {
    ++line_no;
    const std::size_t bad = text::utf8_invalid_offset(line);
    BERTRAIN_CHECK(bad == std::string_view::npos, "tokenize: stdin line ", line_no, ": not valid UTF-8 (byte ",
                   bad + 1, ")");
    out.clear();
    auto append = [&](std::string_view t) {
      if (!out.empty()) out += ' ';
      out.append(t);
    };
    if (f.ids) {
      ids.clear();
      if (bert) bert->encode_append(line, ids);
      else ids = spm->encode(line);
      for (int32_t id : ids) append(std::to_string(id));
    } else if (bert) {
      for (const auto& t : bert->tokenize(line)) append(t);
    } else {
      for (const auto& t : spm->tokenize(line)) append(t);
    }
    out += '\n';
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
  BERTRAIN_CHECK(!std::cin.bad(), "tokenize: error reading stdin after line ", line_no);
  std::fflush(stdout);
  return 0;
}

Registrar reg{{"tokenize",
               "tokenize UTF-8 lines from stdin (BERT WordPiece or sentencepiece); one output line per input line",
               [](CLI::App& sub) {
                 auto f = std::make_shared<TokenizeFlags>();
                 sub.add_option("--vocab_file", f->vocab_file, "BERT vocab.txt (WordPiece tokenizer)");
                 sub.add_option("--spm_model_file", f->spm_model_file, "sentencepiece .model (ALBERT-style)");
                 sub.add_option("--do_lower_case", f->do_lower_case, "true|false (default true)");
                 sub.add_flag("--ids", f->ids, "print token ids instead of tokens");
                 return std::function<int()>([f] { return run_tokenize(*f); });
               }}};

}  // namespace
}  // namespace bertrain::cli
