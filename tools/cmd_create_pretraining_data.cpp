// cmd_create_pretraining_data.cpp: `bertrain create-pretraining-data`: google-research/bert's
// create_pretraining_data.py flags, NVIDIA-layout HDF5 shards out. Active once the tokenizer is in the tree.
#if __has_include("bertrain/text/tokenizer.h")
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <unistd.h>

#include "bertrain/core/error.h"
#include "bertrain/core/threads.h"
#include "bertrain/data/hdf5_shard.h"
#include "bertrain/data/pretraining.h"
#include "bertrain/text/tokenizer.h"
#include "commands.h"

namespace bertrain::cli {
namespace {

struct Flags {
  std::string input_file, output_dir, vocab_file, do_lower_case = "true", chinese_ref_file;
  bool tokenize_chinese_chars = true;
  data::PretrainingOptions opt;
  int gzip_level = 4;
};

int run(const Flags& f) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  data::PretrainingOptions opt = f.opt;
  for (const auto& w : opt.validate()) spdlog::warn("{}", w);
  const bool lower = parse_bool_flag("do_lower_case", f.do_lower_case);

  text::FullTokenizer tok(std::make_shared<const text::Vocab>(text::Vocab::load(f.vocab_file)), lower, std::nullopt,
                          f.tokenize_chinese_chars);
  const text::Vocab& vocab = tok.vocab();
  vocab.require_special_tokens({text::Vocab::kPad, text::Vocab::kCls, text::Vocab::kSep, text::Vocab::kMask}, "pretraining data");
  std::vector<std::string> words;
  words.reserve(vocab.size());
  for (size_t i = 0; i < vocab.size(); ++i) words.push_back(vocab.token(static_cast<int32_t>(i)));
  data::PretrainingVocab pvocab(std::move(words));

  std::vector<std::string> files = data::expand_input_globs(f.input_file);
  spdlog::info("create-pretraining-data: {} input file(s), {} thread(s), vocab {} ({} tokens)", files.size(),
               num_threads(), f.vocab_file, vocab.size());

  data::PretrainingStats stats;
  const bool tty = ::isatty(2);
  auto last = clock::now();
  data::ProgressFn progress = [&](int64_t done, int64_t total) {
    auto now = clock::now();
    if (now - last < std::chrono::milliseconds(500) && done < total) return;
    last = now;
    const double s = std::chrono::duration<double>(now - t0).count();
    std::fprintf(stderr, "%stokenizing %.1f / %.1f MB (%.1f MB/s)%s", tty ? "\r" : "", done / 1e6, total / 1e6,
                 done / 1e6 / std::max(s, 1e-9), tty ? "   " : "\n");
  };
  data::ChineseRefOptions ref{{}, &pvocab};
  if (!f.chinese_ref_file.empty()) ref.files = data::expand_input_globs(f.chinese_ref_file);
  BERTRAIN_CHECK(f.chinese_ref_file.empty() || opt.do_whole_word_mask,
                 "--chinese_ref_file groups characters for whole-word masking: give --do_whole_word_mask too");
  std::vector<data::Document> docs = data::read_documents(
      files, [&tok](std::string_view line) { return tok.encode(line); }, stats, progress,
      f.chinese_ref_file.empty() ? nullptr : &ref);
  if (opt.do_whole_word_mask && f.chinese_ref_file.empty())
    if (const std::string w = data::chinese_whole_word_mask_warning(docs, pvocab); !w.empty()) spdlog::warn("{}", w);
  if (!f.chinese_ref_file.empty()) spdlog::info("--chinese_ref_file: {} characters continue a word", stats.chinese_ref_marks);
  if (tty) std::fprintf(stderr, "\n");
  for (const auto& w : stats.warnings) spdlog::warn("{}", w);
  const double t_read = std::chrono::duration<double>(clock::now() - t0).count();
  spdlog::info("read {} documents, {} sentences, {} tokens in {:.1f} s; making instances (dupe_factor {})",
               stats.documents, stats.sentences, stats.tokens, t_read, opt.dupe_factor);

  std::vector<data::TrainingInstance> instances = data::create_training_instances(std::move(docs), opt, pvocab, stats);
  const double t_inst = std::chrono::duration<double>(clock::now() - t0).count();
  spdlog::info("made {} instances in {:.1f} s; writing {} shard(s) to {}", instances.size(), t_inst - t_read,
               opt.num_shards, f.output_dir);

  data::DatasetInfo info;
  info.options = opt;
  info.vocab_file = f.vocab_file;
  info.vocab_sha256 = vocab.sha256();
  info.vocab_size = static_cast<int64_t>(vocab.size());
  info.do_lower_case = lower;
  info.input_files = files;
  data::write_pretraining_shards(instances, opt, f.output_dir, info, f.gzip_level);
  info.stats = stats;
  info.seconds = std::chrono::duration<double>(clock::now() - t0).count();
  data::write_dataset_info((std::filesystem::path(f.output_dir) / "dataset_info.json").string(), info);

  const double secs = info.seconds, mb = stats.bytes / 1e6;
  const int64_t skipped = stats.skipped_non_utf8_lines + stats.skipped_long_lines + stats.skipped_empty_files;
  spdlog::info(
      "done: {} documents, {} instances, {} tokens ({} in instances), {} masked tokens ({:.2f}%), {:.2f}% random "
      "next; {:.1f} s, {:.2f} MB/s ({:.1f} MB/min); skipped records: {} ({} non-UTF-8 lines, {} lines over 1 MB, {} "
      "empty files), {} random pairs without another document",
      stats.documents, stats.instances, stats.tokens, stats.instance_tokens, stats.masked_tokens,
      100.0 * stats.masked_tokens / std::max<int64_t>(1, stats.instance_tokens),
      100.0 * stats.random_next / std::max<int64_t>(1, stats.instances), secs, mb / secs, 60 * mb / secs, skipped,
      stats.skipped_non_utf8_lines, stats.skipped_long_lines, stats.skipped_empty_files, stats.skipped_random_pairs);
  return 0;
}

Registrar reg{{"create-pretraining-data",
               "make masked-LM/NSP pretraining shards (NVIDIA HDF5 layout) from one-sentence-per-line text, as "
               "google-research/bert create_pretraining_data.py",
               [](CLI::App& app) {
                 auto f = std::make_shared<Flags>();
                 app.add_option("--input_file", f->input_file, "input text: glob pattern(s), comma-separated")->required();
                 app.add_option("--output_dir", f->output_dir, "directory for part-NNNNN-training.hdf5 and dataset_info.json")
                     ->required();
                 app.add_option("--vocab_file", f->vocab_file, "BERT vocab.txt")->required();
                 app.add_option("--do_lower_case", f->do_lower_case, "true for uncased vocabs, false for cased")
                     ->capture_default_str();
                 app.add_option("--max_seq_length", f->opt.max_seq_length)->capture_default_str();
                 app.add_option("--max_predictions_per_seq", f->opt.max_predictions_per_seq)->capture_default_str();
                 app.add_option("--masked_lm_prob", f->opt.masked_lm_prob)->capture_default_str();
                 app.add_option("--dupe_factor", f->opt.dupe_factor, "times each document is used (masked anew)")
                     ->capture_default_str();
                 app.add_option("--short_seq_prob", f->opt.short_seq_prob)->capture_default_str();
                 app.add_option("--random_seed", f->opt.random_seed)->capture_default_str();
                 app.add_flag("--do_whole_word_mask", f->opt.do_whole_word_mask, "mask whole words (all their ## pieces)");
                 app.add_option("--chinese_ref_file", f->chinese_ref_file,
                                "Chinese word segmentation for whole-word masking, one per input file (comma-separated): "
                                "Hugging Face run_chinese_ref.py's format (scripts/chinese_ref.py)");
                 app.add_option("--tokenize_chinese_chars", f->tokenize_chinese_chars,
                                "isolate CJK characters before WordPiece (default true, as the reference)");
                 app.add_option("--num_shards", f->opt.num_shards, "output shards (instances dealt round-robin)")
                     ->capture_default_str();
                 app.add_option("--gzip_level", f->gzip_level, "HDF5 gzip level 0-9 (h5py's default 4)")
                     ->check(CLI::Range(0, 9))
                     ->capture_default_str();
                 return std::function<int()>([f] { return run(*f); });
               }}};

}  // namespace
}  // namespace bertrain::cli
#endif  // __has_include("bertrain/text/tokenizer.h")
