// cmd_bench_tokenizer.cpp: `bertrain bench tokenizer`: single-thread tokenizer throughput (MB/s of UTF-8 input)
// of FullTokenizer::encode (or the sentencepiece tokenizer) over every line of a file.
#include <time.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>

#include "bertrain/core/error.h"
#include "bertrain/text/sentencepiece_tokenizer.h"
#include "bertrain/text/tokenizer.h"
#include "bertrain/text/utf8.h"
#include "bench_util.h"
#include "commands.h"

namespace bertrain::cli {
namespace {

struct BenchFlags {
  std::string vocab_file, spm_model_file, input_file, do_lower_case = "true";
  int repeat = 1;
};

int run_bench(const BenchFlags& f) {
  BERTRAIN_CHECK(f.vocab_file.empty() != f.spm_model_file.empty(),
                 "bench tokenizer: give exactly one of --vocab_file and --spm_model_file");
  const bool lower = parse_bool_flag("do_lower_case", f.do_lower_case);
  std::ifstream in(f.input_file, std::ios::binary);
  BERTRAIN_CHECK(in.good(), "bench tokenizer: input file '", f.input_file, "': cannot open");
  std::ostringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  std::vector<std::string_view> lines;
  std::size_t pos = 0, skipped = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::string_view l(text.data() + pos, nl - pos);
    if (text::utf8_is_valid(l)) lines.push_back(l);
    else ++skipped;
    pos = nl + 1;
  }
  std::optional<text::FullTokenizer> bert;
  std::optional<text::SentencePieceTokenizer> spm;
  if (!f.vocab_file.empty()) bert.emplace(text::FullTokenizer::from_vocab_file(f.vocab_file, lower));
  else spm.emplace(text::SentencePieceTokenizer::load(f.spm_model_file, lower));

  std::vector<int32_t> ids;
  std::size_t tokens = 0;
  double best = 1e300, best_cpu = 1e300;
  auto thread_cpu_seconds = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  };
  for (int r = 0; r < std::max(1, f.repeat); ++r) {
    tokens = 0;
    const double c0 = thread_cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    for (std::string_view l : lines) {
      ids.clear();
      if (bert) bert->encode_append(l, ids);
      else ids = spm->encode(l);
      tokens += ids.size();
    }
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    best_cpu = std::min(best_cpu, thread_cpu_seconds() - c0);
  }
  const double mb = static_cast<double>(text.size()) / 1e6;
  std::printf("bench tokenizer: %s, do_lower_case=%s, %zu lines (%zu skipped as non-UTF-8), %.1f MB, %zu tokens\n",
              bert ? "BERT WordPiece" : "sentencepiece", lower ? "true" : "false", lines.size(), skipped, mb, tokens);
  std::printf("single thread: %.3f s wall, %.1f MB/s, %.2f M tokens/s (best of %d)\n", best, mb / best,
              static_cast<double>(tokens) / best / 1e6, std::max(1, f.repeat));
  // Thread CPU time excludes time the thread waited for a core: the figure to compare on a loaded machine.
  std::printf("single thread: %.3f s CPU, %.1f MB/s per CPU-second\n", best_cpu, mb / best_cpu);
  return 0;
}

BenchRegistrar reg{{"tokenizer", "single-thread tokenizer throughput (MB/s) on a text file", [](CLI::App& sub) {
                 auto f = std::make_shared<BenchFlags>();
                 sub.add_option("--vocab_file", f->vocab_file, "BERT vocab.txt");
                 sub.add_option("--spm_model_file", f->spm_model_file, "sentencepiece .model");
                 sub.add_option("--input_file", f->input_file, "UTF-8 text, one sentence per line")->required();
                 sub.add_option("--do_lower_case", f->do_lower_case, "true|false (default true)");
                 sub.add_option("--repeat", f->repeat, "timed passes; the best is reported (default 1)");
                 return std::function<int()>([f] { return run_bench(*f); });
               }}};

}  // namespace
}  // namespace bertrain::cli
