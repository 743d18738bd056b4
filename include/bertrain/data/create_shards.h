// create_shards.h: `create-pretraining-data` for corpora of any size: the input files are cut into windows of
// whole documents, each window is made into instances on its own (several windows in parallel) and written to
// shards of bounded size, atomically, so that memory depends on the window and not on the corpus, and a rerun
// skips the windows whose shards a killed run completed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bertrain/data/hdf5_shard.h"
#include "bertrain/data/pretraining.h"

namespace bertrain::data {

/// One window: whole lines [begin, end) (bytes) of one input file. It starts at the file's start or after a
/// blank line and ends at the file's end or after a blank line, so it holds whole documents, unless a document
/// runs on for more than twice the window size: it is then cut after a line (`cut_document`), which starts a
/// new document there.
struct InputWindow {
  int64_t index = 0;                   // 0-based over all files, in file order
  int64_t file = 0;                    // index into InputPlan::files
  int64_t begin = 0, end = 0;          // byte range of the file
  int64_t first_line = 0;              // 0-based line number of `begin`
  int64_t side_begin = 0, side_end = 0;  // the byte range of the side lines of these lines (with a side file)
  int64_t side_first_line = 0;           // 0-based line number of side_begin in the side file
  bool cut_document = false;
};

struct InputFile {
  std::string path;
  std::string side_path;  // empty: no side file
  SidePairing side_pairing = SidePairing::every_line;
  int64_t bytes = 0, lines = 0;
  bool empty = false;     // nothing but whitespace: no window, counted as an empty file
};

struct InputPlan {
  std::vector<InputFile> files;
  std::vector<InputWindow> windows;
  std::vector<std::string> warnings;  // "file:line: ..." for each document cut
};

/// Cuts `files` into windows of about `window_bytes` bytes: a window ends at the first blank line (a line of
/// ASCII whitespace only) at or after `window_bytes` bytes from its start, or, when a document runs past
/// 2 * window_bytes without one, after the line that crosses that size. Reads each file once, sequentially, in
/// blocks of 1 MB (never a whole file into memory). `side_files` is empty or holds one file per input file, with
/// a line for each input line or for each non-blank one (SidePairing, chosen by its line count; e.g. a Chinese
/// whole-word reference file); a second sequential pass over it finds each window's side lines.
/// Throws bertrain::Error naming the file when a file cannot be read, window_bytes < 1, or a side file has
/// neither as many lines as its input file nor as many as its non-blank lines.
InputPlan plan_input_windows(const std::vector<std::string>& files, int64_t window_bytes,
                             const std::vector<std::string>& side_files = {});

/// The documents of one window, by read_documents' rules (bad lines skipped, counted and reported with file and
/// line). Lines over kMaxLineBytes are skipped without being held. With a side file, `side_tokenize` gets each
/// line with its side line (SidePairing), the side file's path and the side line's number. Counts bytes, lines, documents, sentences and tokens into `stats`. Throws
/// bertrain::Error naming the file when it cannot be read or has changed size since the plan.
std::vector<Document> read_window_documents(const InputPlan& plan, const InputWindow& window,
                                            const TokenizeFn& tokenize, PretrainingStats& stats,
                                            const SideTokenizeFn& side_tokenize = {},
                                            const std::function<void(int64_t bytes)>& report = {});

/// Settings of create_pretraining_shards beyond create_pretraining_data.py's flags.
struct CreateShardsOptions {
  std::string output_dir;
  int64_t window_bytes = int64_t{16} << 20;  // text per window (memory: about (1.5 + 2.5 x dupe_factor) x this
                                             // per window being processed, at T=128)
  int64_t max_instances_per_shard = 32768;   // > 0; a window's instances go round-robin to
                                             // max(num_shards, ceil(instances / this)) shards
  int gzip_level = 4;
  /// Windows processed at once (0: the thread count); the threads are shared out among them.
  int workers = 0;
  std::vector<std::string> side_files;       // see plan_input_windows
  SideTokenizeFn side_tokenize;
};

/// create-pretraining-data: plans the windows of `files`, makes each window's instances with
/// create_training_instances (documents, random next sentences and the instance shuffle within the window;
/// seed options.random_seed when the plan has one window, else one derived from it and the window index) and
/// writes them to shards with write_pretraining_shard (a temporary name, then a rename). Shard names:
/// part-%05d-training.hdf5 (shard j) when the plan has one window (so a corpus that fits one window gives the
/// shards of the whole-corpus algorithm), else part-%05d-%03d-training.hdf5 (window, shard). After a window's
/// shards, OUTPUT_DIR/.progress/window-%05d.json records them and their counts; a rerun with the same inputs
/// and settings skips those windows. Finally writes OUTPUT_DIR/dataset_info.json. `info` carries the vocab
/// fields in and everything out. `progress(done, total)` gets input bytes. Independent of the thread count.
/// Throws bertrain::Error naming the file on a read or write failure (a full disk included): complete shards
/// and records stay, no half-written shard is left under a final name.
DatasetInfo create_pretraining_shards(const std::vector<std::string>& files, const PretrainingOptions& options,
                                      const CreateShardsOptions& create, const PretrainingVocab& vocab,
                                      const TokenizeFn& tokenize, DatasetInfo info, const ProgressFn& progress = {});

}  // namespace bertrain::data
