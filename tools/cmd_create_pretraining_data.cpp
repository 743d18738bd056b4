// cmd_create_pretraining_data.cpp: `bertrain create-pretraining-data`: google-research/bert's
// create_pretraining_data.py flags, NVIDIA-layout HDF5 shards out, made in windows of documents
// (bertrain/data/create_shards.h). Active once the tokenizer is in the tree.
#if __has_include("bertrain/text/tokenizer.h")
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <unistd.h>

#include "bertrain/core/error.h"
#include "bertrain/core/threads.h"
#include "bertrain/data/create_shards.h"
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
  double window_mb = 16;
  int64_t max_instances_per_shard = 32768;
};

int run(const Flags& f) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  data::PretrainingOptions opt = f.opt;
  for (const auto& w : opt.validate()) spdlog::warn("{}", w);
  const bool lower = parse_bool_flag("do_lower_case", f.do_lower_case);
  BERTRAIN_CHECK(f.window_mb > 0, "--window_mb must be positive, got ", f.window_mb);

  text::FullTokenizer tok(std::make_shared<const text::Vocab>(text::Vocab::load(f.vocab_file)), lower, std::nullopt,
                          f.tokenize_chinese_chars);
  const text::Vocab& vocab = tok.vocab();
  vocab.require_special_tokens({text::Vocab::kPad, text::Vocab::kCls, text::Vocab::kSep, text::Vocab::kMask}, "pretraining data");
  data::PretrainingVocab pvocab(vocab.tokens());

  std::vector<std::string> files = data::expand_input_globs(f.input_file);
  data::CreateShardsOptions co;
  co.output_dir = f.output_dir;
  co.window_bytes = static_cast<int64_t>(f.window_mb * (1 << 20));
  co.max_instances_per_shard = f.max_instances_per_shard;
  co.gzip_level = f.gzip_level;
  spdlog::info("create-pretraining-data: {} input file(s), {} thread(s), vocab {} ({} tokens), windows of {} MB, at "
               "most {} instances per shard", files.size(), num_threads(), f.vocab_file, vocab.size(), f.window_mb,
               f.max_instances_per_shard);

  const bool tty = ::isatty(2);
  auto last = clock::now();
  data::ProgressFn progress = [&](int64_t done, int64_t total) {
    auto now = clock::now();
    if (now - last < std::chrono::milliseconds(tty ? 500 : 10000) && done < total) return;
    last = now;
    const double s = std::chrono::duration<double>(now - t0).count();
    std::fprintf(stderr, "%s%.1f / %.1f MB of text (%.1f MB/min)%s", tty ? "\r" : "", done / 1e6, total / 1e6,
                 60 * done / 1e6 / std::max(s, 1e-9), tty ? "   " : "\n");
  };
  std::atomic<int64_t> marks{0};
  const data::TokenizeFn tokenize = [&tok](std::string_view line) { return tok.encode(line); };
  if (!f.chinese_ref_file.empty()) {
    BERTRAIN_CHECK(opt.do_whole_word_mask,
                   "--chinese_ref_file groups characters for whole-word masking: give --do_whole_word_mask too");
    co.side_files = data::expand_input_globs(f.chinese_ref_file);
    BERTRAIN_CHECK(co.side_files.size() == files.size(), "--chinese_ref_file: ", co.side_files.size(),
                   " reference file(s) for ", files.size(), " input file(s); give one per input file, in order");
    co.side_tokenize = data::chinese_ref_side_tokenize(tokenize, pvocab, &marks);
  }
  data::DatasetInfo info;
  info.vocab_file = f.vocab_file;
  info.vocab_sha256 = vocab.sha256();
  info.vocab_size = static_cast<int64_t>(vocab.size());
  info.do_lower_case = lower;
  info = data::create_pretraining_shards(files, opt, co, pvocab, tokenize, info, progress);
  if (tty) std::fprintf(stderr, "\n");
  const data::PretrainingStats& stats = info.stats;
  for (const auto& w : stats.warnings) spdlog::warn("{}", w);
  if (!f.chinese_ref_file.empty()) spdlog::info("--chinese_ref_file: {} characters continue a word", marks.load());

  const double secs = std::chrono::duration<double>(clock::now() - t0).count(), mb = stats.bytes / 1e6;
  const int64_t skipped = stats.skipped_non_utf8_lines + stats.skipped_long_lines + stats.skipped_empty_files;
  spdlog::info(
      "done: {} windows ({} complete from an earlier run), {} shards; {} documents, {} instances, {} tokens ({} in "
      "instances), {} masked tokens ({:.2f}%), {:.2f}% random next; {:.1f} s, {:.2f} MB/s ({:.1f} MB/min); skipped "
      "records: {} ({} non-UTF-8 lines, {} lines over 1 MB, {} empty files), {} random pairs without another document",
      info.windows, info.resumed_windows, info.shards.size(), stats.documents, stats.instances, stats.tokens,
      stats.instance_tokens, stats.masked_tokens, 100.0 * stats.masked_tokens / std::max<int64_t>(1, stats.instance_tokens),
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
                 app.add_option("--num_shards", f->opt.num_shards,
                                "shards per window at least (a window's instances are dealt round-robin)")
                     ->capture_default_str();
                 app.add_option("--window_mb", f->window_mb,
                                "text per window of documents made into instances together (memory; random next "
                                "sentences come from the same window)")
                     ->capture_default_str();
                 app.add_option("--max_instances_per_shard", f->max_instances_per_shard)
                     ->check(CLI::PositiveNumber)
                     ->capture_default_str();
                 app.add_option("--gzip_level", f->gzip_level, "HDF5 gzip level 0-9 (h5py's default 4)")
                     ->check(CLI::Range(0, 9))
                     ->capture_default_str();
                 return std::function<int()>([f] { return run(*f); });
               }}};

}  // namespace
}  // namespace bertrain::cli
#endif  // __has_include("bertrain/text/tokenizer.h")
