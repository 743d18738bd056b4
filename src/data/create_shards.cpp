// create_shards.cpp: the windowed create-pretraining-data (see create_shards.h): a streaming scan that cuts the
// input into windows of whole documents, a streaming window reader, and the driver that makes and writes the
// windows in parallel with per-window completion records for resumable runs.
#include "bertrain/data/create_shards.h"

#include <fcntl.h>
#include <omp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "bertrain/core/threads.h"

namespace bertrain::data {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

constexpr size_t kBlock = size_t{1} << 20;
constexpr uint64_t kWindowSeedTag = 0x43524541ull;  // "CREA": the seed of window w of a multi-window plan

// A file read sequentially from an offset in blocks of kBlock bytes.
class BlockFile {
 public:
  BlockFile(const std::string& path, const char* what) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    BERTRAIN_CHECK(fd_ >= 0, "cannot open ", what, " '", path, "': ", std::strerror(errno));
    struct stat st {};
    BERTRAIN_CHECK(::fstat(fd_, &st) == 0, "cannot stat '", path, "': ", std::strerror(errno));
    size_ = static_cast<int64_t>(st.st_size);
    buf_.resize(kBlock);
  }
  ~BlockFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  BlockFile(const BlockFile&) = delete;
  BlockFile& operator=(const BlockFile&) = delete;
  int64_t size() const { return size_; }
  /// The next block of [pos, end): empty at `end`. Throws naming the file on a read error or an early end.
  std::string_view read(int64_t& pos, int64_t end) {
    if (pos >= end) return {};
    const size_t want = static_cast<size_t>(std::min<int64_t>(end - pos, static_cast<int64_t>(kBlock)));
    ssize_t r;
    do r = ::pread(fd_, buf_.data(), want, static_cast<off_t>(pos));
    while (r < 0 && errno == EINTR);
    BERTRAIN_CHECK(r >= 0, "error while reading '", path_, "' at byte ", pos, ": ", std::strerror(errno));
    BERTRAIN_CHECK(r > 0, "'", path_, "' ended at byte ", pos, ", before the ", end, " bytes it had when planned ",
                   "(it changed during the run)");
    pos += r;
    return {buf_.data(), static_cast<size_t>(r)};
  }

 private:
  std::string path_;
  int fd_ = -1;
  int64_t size_ = 0;
  std::vector<char> buf_;
};

// Python str.isspace() over ASCII: what makes a line blank (a document boundary) for the scan.
bool ascii_space(unsigned char c) { return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20); }

// The byte offsets at which the lines `wanted` (0-based, ascending; a value equal to the line count maps to the
// file size) of a file start, and its line count (a last line without "\n" counts). Reads the file once.
std::vector<int64_t> line_offsets(const std::string& path, const std::vector<int64_t>& wanted, int64_t& lines) {
  BlockFile f(path, "side file");
  std::vector<int64_t> at(wanted.size(), -1);
  size_t next = 0;
  lines = 0;
  auto mark = [&](int64_t line, int64_t offset) {
    while (next < wanted.size() && wanted[next] == line) at[next++] = offset;
  };
  mark(0, 0);
  int64_t pos = 0;
  char last = '\n';
  for (;;) {
    const int64_t block_start = pos;
    const std::string_view b = f.read(pos, f.size());
    if (b.empty()) break;
    last = b.back();
    for (size_t i = 0; i < b.size();) {
      const void* nl = std::memchr(b.data() + i, '\n', b.size() - i);
      if (!nl) break;
      const size_t e = static_cast<size_t>(static_cast<const char*>(nl) - b.data());
      mark(++lines, block_start + static_cast<int64_t>(e) + 1);
      i = e + 1;
    }
  }
  if (last != '\n' && f.size() > 0) mark(++lines, f.size());
  return at;
}

// Scans one file (see plan_input_windows); appends its windows (index not set yet) and warnings.
InputFile scan_file(const std::string& path, const std::string& side_path, int64_t window_bytes, int64_t file_index,
                    std::vector<InputWindow>& out, std::vector<std::string>& warnings) {
  InputFile info;
  info.path = path;
  info.side_path = side_path;
  BlockFile f(path, "input file");
  const bool side = !side_path.empty();
  info.bytes = f.size();
  const size_t first_window = out.size();
  int64_t pos = 0, line_no = 0, non_blank = 0;
  int64_t w_begin = 0, w_line = 0, w_non_blank = 0;
  bool blank = true, any_text = false;
  // With a side file: is the line blank by read_documents' rule (is_blank_input_line)? Only lines of ASCII
  // whitespace and non-ASCII bytes can be; such a line's bytes are kept (up to kMaxLineBytes) to decide.
  bool maybe_blank = true;
  std::string line_bytes;
  char last_char = '\n';
  std::vector<std::pair<int64_t, int64_t>> side_first;  // per window: (first line, first non-blank line)
  auto close = [&](int64_t end, bool cut) {
    InputWindow w;
    w.file = file_index;
    w.begin = w_begin;
    w.end = end;
    w.first_line = w_line;
    w.cut_document = cut;
    out.push_back(w);
    side_first.emplace_back(w_line, w_non_blank);
    if (cut)
      warnings.push_back(detail::str_cat(path, ":", line_no, ": a document runs on for more than ", 2 * window_bytes,
                                         " bytes (2 x the window); it is cut after this line, which starts a new "
                                         "document"));
    w_begin = end;
    w_line = line_no;
    w_non_blank = non_blank;
  };
  auto end_line = [&](int64_t next_start) {
    ++line_no;
    if (side) {
      if (!(maybe_blank && is_blank_input_line(line_bytes, static_cast<int64_t>(line_bytes.size())))) ++non_blank;
      maybe_blank = true;
      line_bytes.clear();
    }
    const int64_t size = next_start - w_begin;
    if ((blank && size >= window_bytes) || (!blank && size >= 2 * window_bytes)) close(next_start, !blank);
    blank = true;
  };
  for (;;) {
    const int64_t block_start = pos;
    const std::string_view b = f.read(pos, f.size());
    if (b.empty()) break;
    last_char = b.back();
    for (size_t i = 0; i < b.size();) {
      const void* nl = std::memchr(b.data() + i, '\n', b.size() - i);
      const size_t e = nl ? static_cast<size_t>(static_cast<const char*>(nl) - b.data()) : b.size();
      for (size_t k = i; k < e && (blank || !any_text || (side && maybe_blank)); ++k) {
        const auto c = static_cast<unsigned char>(b[k]);
        if (!ascii_space(c)) blank = false;
        if (c != ' ' && c != '\t' && c != '\r' && c != '\v' && c != '\f') any_text = true;
        if (side && maybe_blank) {
          if ((c < 0x80 && !ascii_space(c)) || line_bytes.size() >= kMaxLineBytes) {
            maybe_blank = false;
            line_bytes.clear();
          } else {
            line_bytes.push_back(static_cast<char>(c));
          }
        }
      }
      if (!nl) break;
      end_line(block_start + static_cast<int64_t>(e) + 1);
      i = e + 1;
    }
  }
  if (last_char != '\n' && info.bytes > 0) end_line(info.bytes);  // a last line without "\n" is a line too
  if (w_begin < info.bytes) close(info.bytes, false);
  info.lines = line_no;
  info.empty = !any_text;
  if (info.empty) {
    out.resize(first_window);
    return info;
  }
  if (side) {
    // Side lines go with every input line or with the non-blank ones, whichever count the side file has.
    std::vector<int64_t> wanted;
    for (const auto& [l, nb] : side_first) wanted.insert(wanted.end(), {l, nb});
    wanted.insert(wanted.end(), {line_no, non_blank});
    std::sort(wanted.begin(), wanted.end());
    int64_t side_lines = 0;
    const std::vector<int64_t> at = line_offsets(side_path, wanted, side_lines);
    BERTRAIN_CHECK(side_lines == line_no || side_lines == non_blank, "side file '", side_path, "' has ", side_lines,
                   " lines, but its input file '", path, "' has ", line_no, " lines (", non_blank, " non-blank): ",
                   "give one side line per input line, or one per non-blank input line (as run_chinese_ref.py writes "
                   "a reference file)");
    info.side_pairing = side_lines == line_no ? SidePairing::every_line : SidePairing::non_blank_lines;
    auto offset = [&](int64_t line) {
      return at[static_cast<size_t>(std::lower_bound(wanted.begin(), wanted.end(), line) - wanted.begin())];
    };
    for (size_t k = first_window; k < out.size(); ++k) {
      const auto pick = [&](size_t j) {
        if (j == side_first.size()) return info.side_pairing == SidePairing::every_line ? line_no : non_blank;
        return info.side_pairing == SidePairing::every_line ? side_first[j].first : side_first[j].second;
      };
      InputWindow& w = out[k];
      w.side_first_line = pick(k - first_window);
      w.side_begin = offset(w.side_first_line);
      w.side_end = offset(pick(k - first_window + 1));
    }
  }
  return info;
}

json stats_to_json(const PretrainingStats& s) {
  return json{{"files", s.files},
              {"bytes", s.bytes},
              {"lines", s.lines},
              {"documents", s.documents},
              {"sentences", s.sentences},
              {"tokens", s.tokens},
              {"instances", s.instances},
              {"instance_tokens", s.instance_tokens},
              {"masked_tokens", s.masked_tokens},
              {"random_next", s.random_next},
              {"skipped_random_pairs", s.skipped_random_pairs},
              {"skipped_non_utf8_lines", s.skipped_non_utf8_lines},
              {"skipped_long_lines", s.skipped_long_lines},
              {"skipped_empty_files", s.skipped_empty_files},
              {"warnings", s.warnings}};
}

PretrainingStats stats_from_json(const nlohmann::json& j) {
  PretrainingStats s;
  s.files = j.at("files");
  s.bytes = j.at("bytes");
  s.lines = j.at("lines");
  s.documents = j.at("documents");
  s.sentences = j.at("sentences");
  s.tokens = j.at("tokens");
  s.instances = j.at("instances");
  s.instance_tokens = j.at("instance_tokens");
  s.masked_tokens = j.at("masked_tokens");
  s.random_next = j.at("random_next");
  s.skipped_random_pairs = j.at("skipped_random_pairs");
  s.skipped_non_utf8_lines = j.at("skipped_non_utf8_lines");
  s.skipped_long_lines = j.at("skipped_long_lines");
  s.skipped_empty_files = j.at("skipped_empty_files");
  s.warnings = j.at("warnings").get<std::vector<std::string>>();
  return s;
}

// Writes `text` to `path` through a temporary file and a rename; errors name the file (a full disk included).
void write_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    BERTRAIN_CHECK(f.good(), "cannot create '", tmp, "': ", std::strerror(errno));
    f << text;
    f.flush();
    if (!f.good()) {
      const std::string err = std::strerror(errno);
      f.close();
      fs::remove(tmp);
      BERTRAIN_CHECK(false, "error while writing '", tmp, "': ", err);
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  BERTRAIN_CHECK(!ec, "cannot rename '", tmp, "' to '", path, "': ", ec.message());
}

std::string read_small_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// What one window produced.
struct WindowResult {
  std::vector<std::string> shards;
  std::vector<int64_t> samples;
  PretrainingStats stats;
  bool resumed = false;
};

}  // namespace

InputPlan plan_input_windows(const std::vector<std::string>& files, int64_t window_bytes,
                             const std::vector<std::string>& side_files) {
  BERTRAIN_CHECK(window_bytes >= 1, "window size must be at least 1 byte, got ", window_bytes);
  BERTRAIN_CHECK(side_files.empty() || side_files.size() == files.size(), "got ", side_files.size(),
                 " side files for ", files.size(), " input files: give one per input file");
  const int64_t n = static_cast<int64_t>(files.size());
  std::vector<std::vector<InputWindow>> per_file(files.size());
  std::vector<std::vector<std::string>> warn(files.size());
  std::vector<InputFile> info(files.size());
  std::vector<std::exception_ptr> errors(files.size());
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t i = 0; i < n; ++i) {
    const size_t k = static_cast<size_t>(i);
    try {
      info[k] = scan_file(files[k], side_files.empty() ? std::string() : side_files[k], window_bytes, i, per_file[k], warn[k]);
    } catch (...) {
      errors[k] = std::current_exception();
    }
  }
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  InputPlan plan;
  plan.files = std::move(info);
  for (size_t k = 0; k < files.size(); ++k) {
    for (InputWindow& w : per_file[k]) {
      w.index = static_cast<int64_t>(plan.windows.size());
      plan.windows.push_back(w);
    }
    plan.warnings.insert(plan.warnings.end(), warn[k].begin(), warn[k].end());
  }
  return plan;
}

std::vector<Document> read_window_documents(const InputPlan& plan, const InputWindow& w, const TokenizeFn& tokenize,
                                            PretrainingStats& stats, const SideTokenizeFn& side_tokenize,
                                            const std::function<void(int64_t bytes)>& report) {
  const InputFile& file = plan.files[static_cast<size_t>(w.file)];
  // The lines of [begin, end) into one buffer; a line over kMaxLineBytes keeps only its length.
  struct Lines {
    std::string text;
    std::vector<std::pair<size_t, int64_t>> at;  // (offset in text, length in the file)
  };
  auto read_lines = [](const std::string& path, const char* what, int64_t begin, int64_t end, int64_t planned_size) {
    BlockFile f(path, what);
    BERTRAIN_CHECK(f.size() == planned_size, "'", path, "' has ", f.size(), " bytes, not the ", planned_size,
                   " it had when the run was planned (it changed during the run)");
    Lines out;
    out.text.reserve(static_cast<size_t>(end - begin));
    int64_t pos = begin, len = 0;
    size_t start = 0;
    bool open = false;
    for (;;) {
      const std::string_view b = f.read(pos, end);
      if (b.empty()) break;
      for (size_t i = 0; i < b.size();) {
        const void* nl = std::memchr(b.data() + i, '\n', b.size() - i);
        const size_t e = nl ? static_cast<size_t>(static_cast<const char*>(nl) - b.data()) : b.size();
        if (!open) {
          start = out.text.size();
          len = 0;
          open = true;
        }
        len += static_cast<int64_t>(e - i);
        if (len <= static_cast<int64_t>(kMaxLineBytes)) out.text.append(b.data() + i, e - i);
        else out.text.resize(start);
        if (!nl) break;
        out.at.emplace_back(start, len);
        open = false;
        i = e + 1;
      }
    }
    if (open) out.at.emplace_back(start, len);
    return out;
  };
  const Lines text = read_lines(file.path, "input file", w.begin, w.end, file.bytes);
  std::vector<InputLine> lines(text.at.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto [off, len] = text.at[i];
    lines[i].bytes = len;
    if (len <= static_cast<int64_t>(kMaxLineBytes)) lines[i].text = std::string_view(text.text).substr(off, static_cast<size_t>(len));
  }
  Lines side;
  if (!file.side_path.empty()) {
    side = read_lines(file.side_path, "side file", w.side_begin, w.side_end, fs::file_size(file.side_path));
    const bool every = file.side_pairing == SidePairing::every_line;
    size_t k = 0;
    for (InputLine& l : lines) {
      if (!every && is_blank_input_line(l.text, l.bytes)) continue;
      if (k < side.at.size() && side.at[k].second <= static_cast<int64_t>(kMaxLineBytes))
        l.side = std::string_view(side.text).substr(side.at[k].first, static_cast<size_t>(side.at[k].second));
      l.side_line = w.side_first_line + static_cast<int64_t>(k) + 1;
      ++k;
    }
    BERTRAIN_CHECK(k == side.at.size(), "side file '", file.side_path, "' has ", side.at.size(), " lines for lines ",
                   w.first_line + 1, "-", w.first_line + static_cast<int64_t>(text.at.size()), " of '", file.path,
                   "', which need ", k, " (it changed during the run)");
  }
  stats.bytes += w.end - w.begin;
  return documents_from_lines(file.path, w.first_line, lines, tokenize, file.side_path.empty() ? SideTokenizeFn() : side_tokenize,
                              stats, report, file.side_path);
}

DatasetInfo create_pretraining_shards(const std::vector<std::string>& files, const PretrainingOptions& options,
                                      const CreateShardsOptions& create, const PretrainingVocab& vocab,
                                      const TokenizeFn& tokenize, DatasetInfo info, const ProgressFn& progress) {
  options.validate();
  BERTRAIN_CHECK(create.max_instances_per_shard >= 1, "max_instances_per_shard must be >= 1, got ",
                 create.max_instances_per_shard);
  BERTRAIN_CHECK(!create.side_files.empty() == static_cast<bool>(create.side_tokenize),
                 "side files need a side tokenizer (and a side tokenizer needs side files)");
  const fs::path out(create.output_dir), progress_dir = out / ".progress";
  std::error_code ec;
  fs::create_directories(progress_dir, ec);
  BERTRAIN_CHECK(!ec, "cannot create output directory '", progress_dir.string(), "': ", ec.message());

  const InputPlan plan = plan_input_windows(files, create.window_bytes, create.side_files);
  const bool single = plan.windows.size() == 1;

  // The settings that decide the shards' contents: a rerun must use the same to reuse complete windows.
  json settings;
  settings["input_files"] = json::array();
  for (const InputFile& f : plan.files)
    settings["input_files"].push_back({{"path", f.path}, {"bytes", f.bytes}, {"side_file", f.side_path}});
  settings["max_seq_length"] = options.max_seq_length;
  settings["max_predictions_per_seq"] = options.max_predictions_per_seq;
  settings["masked_lm_prob"] = options.masked_lm_prob;
  settings["dupe_factor"] = options.dupe_factor;
  settings["short_seq_prob"] = options.short_seq_prob;
  settings["random_seed"] = options.random_seed;
  settings["do_whole_word_mask"] = options.do_whole_word_mask;
  settings["num_shards"] = options.num_shards;
  settings["window_bytes"] = create.window_bytes;
  settings["max_instances_per_shard"] = create.max_instances_per_shard;
  settings["gzip_level"] = create.gzip_level;
  settings["vocab_sha256"] = info.vocab_sha256;
  settings["do_lower_case"] = info.do_lower_case;
  const fs::path settings_path = progress_dir / "settings.json";
  if (fs::exists(settings_path)) {
    const json old = json::parse(read_small_file(settings_path), nullptr, false);
    std::string differs = old.is_discarded() ? "(unreadable)" : "";
    for (auto it = settings.begin(); differs.empty() && it != settings.end(); ++it)
      if (!old.contains(it.key()) || old.at(it.key()) != it.value()) differs = it.key();
    BERTRAIN_CHECK(differs.empty(), "output_dir '", out.string(), "' holds shards of a run with other settings (",
                   differs, " differs; see ", settings_path.string(), "): use another output_dir or empty this one");
  } else {
    write_atomically(settings_path.string(), settings.dump(2) + "\n");
  }
  for (const auto& e : fs::directory_iterator(out))  // a killed run's half-written files
    if (e.path().extension() == ".tmp") fs::remove(e.path(), ec);

  auto shard_name = [&](int64_t window, int64_t j) {
    char name[64];
    if (single) std::snprintf(name, sizeof name, "part-%05lld-training.hdf5", static_cast<long long>(j));
    else std::snprintf(name, sizeof name, "part-%05lld-%03lld-training.hdf5", static_cast<long long>(window),
                       static_cast<long long>(j));
    return std::string(name);
  };
  auto record_path = [&](int64_t window) {
    char name[64];
    std::snprintf(name, sizeof name, "window-%05lld.json", static_cast<long long>(window));
    return progress_dir / name;
  };

  // Windows a previous run completed (its record, and every shard it lists, in place).
  const size_t nw = plan.windows.size();
  std::vector<WindowResult> results(nw);
  std::vector<size_t> todo;
  int64_t total_bytes = 0, resumed_bytes = 0;
  for (const InputFile& f : plan.files) total_bytes += f.bytes;
  for (size_t i = 0; i < nw; ++i) {
    const fs::path rp = record_path(static_cast<int64_t>(i));
    bool done = false;
    if (fs::exists(rp)) {
      const nlohmann::json j = nlohmann::json::parse(read_small_file(rp), nullptr, false);
      if (!j.is_discarded() && j.contains("shards") && j.contains("counts")) {
        WindowResult r;
        done = true;
        for (const auto& s : j.at("shards")) {
          r.shards.push_back(s.at("file"));
          r.samples.push_back(s.at("samples"));
          done = done && fs::exists(out / r.shards.back());
        }
        r.stats = stats_from_json(j.at("counts"));
        r.resumed = true;
        if (done) results[i] = std::move(r);
      }
    }
    if (done) resumed_bytes += plan.windows[i].end - plan.windows[i].begin;
    else todo.push_back(i);
  }

  // Progress in input bytes, from whichever thread finishes a block of lines.
  std::atomic<int64_t> done_bytes{resumed_bytes};
  std::mutex progress_mu;
  auto report = [&](int64_t add) {
    const int64_t now = done_bytes.fetch_add(add) + add;
    if (progress && progress_mu.try_lock()) {
      progress(std::min(now, total_bytes), total_bytes);
      progress_mu.unlock();
    }
  };

  auto process = [&](size_t i) {
    const InputWindow& w = plan.windows[i];
    WindowResult r;
    std::vector<Document> docs = read_window_documents(plan, w, tokenize, r.stats, create.side_tokenize, report);
    // Whole-word masking of Chinese text without a segmentation masks single characters: warn, from window 0.
    if (w.index == 0 && options.do_whole_word_mask && create.side_files.empty())
      if (std::string warn = chinese_whole_word_mask_warning(docs, vocab); !warn.empty())
        r.stats.warnings.push_back(warn + " (counted in the first window)");
    std::vector<TrainingInstance> inst;
    if (!docs.empty()) {
      uint64_t seed = options.random_seed;
      if (!single) {
        const auto k = philox_keyed(options.random_seed, kWindowSeedTag, static_cast<uint64_t>(w.index));
        seed = (static_cast<uint64_t>(k[0]) << 32) | k[1];
      }
      inst = create_training_instances(std::move(docs), options, vocab, r.stats, seed);
    }
    const int64_t n = static_cast<int64_t>(inst.size());
    const int64_t k = std::max<int64_t>(options.num_shards, (n + create.max_instances_per_shard - 1) / create.max_instances_per_shard);
    for (int64_t j = 0; j < (n > 0 || single ? k : 0); ++j) {
      PretrainingFeatures f(options.max_seq_length, options.max_predictions_per_seq);
      for (int64_t t = j; t < n; t += k) {
        f.append(inst[static_cast<size_t>(t)]);
        inst[static_cast<size_t>(t)] = TrainingInstance();  // each instance goes to one shard: free it now
      }
      r.shards.push_back(shard_name(w.index, j));
      r.samples.push_back(f.size());
      write_pretraining_shard((out / r.shards.back()).string(), f, create.gzip_level);
    }
    json rec;
    rec["window"] = w.index;
    rec["file"] = plan.files[static_cast<size_t>(w.file)].path;
    rec["bytes"] = {w.begin, w.end};
    rec["shards"] = json::array();
    for (size_t s = 0; s < r.shards.size(); ++s) rec["shards"].push_back({{"file", r.shards[s]}, {"samples", r.samples[s]}});
    rec["counts"] = stats_to_json(r.stats);
    write_atomically(record_path(w.index).string(), rec.dump(1) + "\n");
    results[i] = std::move(r);
  };

  // Windows in parallel; the threads are shared out among them (each window's tokenization, instance making
  // and gzip use OpenMP with its share).
  const int threads = std::max(1, num_threads());
  const int workers = static_cast<int>(std::min<size_t>(todo.size(), create.workers > 0 ? create.workers : threads));
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mu;
  auto work = [&](int inner) {
    omp_set_num_threads(inner);
    for (size_t t; !failed && (t = next.fetch_add(1)) < todo.size();) {
      try {
        process(todo[t]);
      } catch (...) {
        std::lock_guard<std::mutex> g(error_mu);
        if (!error) error = std::current_exception();
        failed = true;
      }
    }
  };
  if (workers <= 1) {
    if (!todo.empty()) work(threads);
  } else {
    std::vector<std::thread> pool;
    for (int t = 0; t < workers; ++t) pool.emplace_back(work, std::max(1, threads / workers));
    for (auto& th : pool) th.join();
  }
  if (error) std::rethrow_exception(error);

  PretrainingStats stats;
  for (const InputFile& f : plan.files) {
    ++stats.files;
    if (f.empty) {
      ++stats.skipped_empty_files;
      stats.bytes += f.bytes;
      stats.warnings.push_back(detail::str_cat(f.path, ": empty file (no text), skipped"));
    }
  }
  stats.warnings.insert(stats.warnings.end(), plan.warnings.begin(), plan.warnings.end());
  int64_t documents = 0;
  for (const WindowResult& r : results) documents += r.stats.documents;
  BERTRAIN_CHECK(documents > 0, "no documents in the input: nothing to make pretraining instances from");
  info.options = options;
  info.input_files = files;
  info.shards.clear();
  info.shard_samples.clear();
  info.resumed_windows = 0;
  for (WindowResult& r : results) {
    stats.merge(r.stats);
    info.shards.insert(info.shards.end(), r.shards.begin(), r.shards.end());
    info.shard_samples.insert(info.shard_samples.end(), r.samples.begin(), r.samples.end());
    info.resumed_windows += r.resumed ? 1 : 0;
  }
  info.stats = stats;
  info.windows = static_cast<int64_t>(nw);
  info.window_bytes = create.window_bytes;
  info.max_instances_per_shard = create.max_instances_per_shard;
  info.side_files = create.side_files;
  write_dataset_info((out / "dataset_info.json").string(), info);
  return info;
}

}  // namespace bertrain::data
