// cmd_build_vocab.cpp: `bertrain build-vocab`: trains a sentencepiece model (unigram or BPE) on a corpus and
// writes spm.model, spm.vocab and a BERT-style vocab.txt (see train_sentencepiece for the mapping); or, with
// --model_type chinese_char, a bert-base-chinese-style character vocab.txt (build_char_vocab).
#include <spdlog/spdlog.h>

#include <chrono>
#include <sstream>

#include "bertrain/core/error.h"
#include "bertrain/text/char_vocab.h"
#include "bertrain/text/sentencepiece_tokenizer.h"
#include <filesystem>
#include "commands.h"

namespace bertrain::cli {
namespace {

struct BuildVocabFlags {
  std::string input_file, do_lower_case = "false";
  int64_t min_count = 1;
  text::SentencePieceTrainOptions opts;
};

int run_build_vocab(BuildVocabFlags& f) {
  std::stringstream ss(f.input_file);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) f.opts.input_files.push_back(item);
  f.opts.do_lower_case = parse_bool_flag("do_lower_case", f.do_lower_case);
  const auto t0 = std::chrono::steady_clock::now();
  if (f.opts.model_type == "chinese_char") {
    std::filesystem::create_directories(f.opts.output_dir);
    text::CharVocabOptions co{f.opts.input_files, f.opts.output_dir + "/vocab.txt", f.opts.vocab_size, f.min_count,
                              f.opts.do_lower_case};
    const text::CharVocabResult r = text::build_char_vocab(co);
    if (r.invalid_utf8_lines > 0) spdlog::warn("build-vocab: skipped {} non-UTF-8 line(s)", r.invalid_utf8_lines);
    spdlog::info("build-vocab: {} lines, wrote {} ({} tokens: {} characters, {} ## pieces), covering {:.4f}% of the "
                 "corpus's characters", r.lines, co.output_file, r.vocab_size, r.characters, r.continuations,
                 100 * r.coverage);
    return 0;
  }
  const text::SentencePieceTrainResult r = text::train_sentencepiece(f.opts);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (r.invalid_utf8_lines > 0)
    spdlog::warn("build-vocab: skipped {} line(s) that are not valid UTF-8; the first is {}", r.invalid_utf8_lines,
                 r.first_invalid_utf8_line);
  spdlog::info("build-vocab: {} sentences, {} model, wrote {} ({} pieces), {} and {} ({} tokens) in {:.1f} s",
               r.sentences, f.opts.model_type, r.model_file, f.opts.vocab_size, r.spm_vocab_file, r.vocab_file,
               r.bert_vocab_size, secs);
  return 0;
}

Registrar reg{{"build-vocab", "train a sentencepiece model and a BERT-style vocab.txt on a corpus", [](CLI::App& sub) {
                 auto f = std::make_shared<BuildVocabFlags>();
                 sub.add_option("--input_file", f->input_file, "UTF-8 corpus file(s), comma-separated")->required();
                 sub.add_option("--output_dir", f->opts.output_dir, "directory for spm.model, spm.vocab, vocab.txt")
                     ->required();
                 sub.add_option("--vocab_size", f->opts.vocab_size, "sentencepiece vocab size")->required();
                 sub.add_option("--model_type", f->opts.model_type, "unigram, bpe (sentencepiece) or chinese_char (characters and ## pieces, as bert-base-chinese)")
                     ->check(CLI::IsMember({"unigram", "bpe", "chinese_char"}));
                 sub.add_option("--min_count", f->min_count, "chinese_char: leave out characters seen fewer times");
                 sub.add_option("--do_lower_case", f->do_lower_case, "true|false (default false)")
                     ->expected(0, 1)
                     ->default_str("false");
                 sub.add_option("--character_coverage", f->opts.character_coverage, "default 0.9995");
                 sub.add_option("--input_sentence_size", f->opts.input_sentence_size,
                                "sample this many sentences (default 0: all)");
                 sub.add_option("--num_threads_train", f->opts.num_threads, "trainer threads (default 1)");
                 sub.add_option("--random_seed", f->opts.seed, "sentencepiece random seed (default 12345)");
                 return std::function<int()>([f] { return run_build_vocab(*f); });
               }}};

}  // namespace
}  // namespace bertrain::cli
