// hdf5_shard.cpp: NVIDIA-layout pretraining shards on the libhdf5 C API; HDF5's own error printing is
// silenced and every failure becomes a bertrain::Error that names the file and the dataset.
#include "bertrain/data/hdf5_shard.h"

#include <hdf5.h>
#include <signal.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>

namespace bertrain::data {
namespace {

namespace fs = std::filesystem;

// libhdf5 closes every object still open in an atexit handler. A file whose write failed (a full disk, a
// file-size limit) cannot be closed cleanly: its close flushes again, fails and leaves the file object half torn
// down, and closing it once more at exit crashed inside libhdf5 (H5F__close_cb) after the one error line had been
// printed. bertrain closes its files itself, so the handler is turned off at load time, before libhdf5 starts
// (H5dont_atexit must precede every other HDF5 call).
[[maybe_unused]] const herr_t kNoHdf5Atexit = H5dont_atexit();

// The automatic error printing is a per-thread setting in thread-safe builds of libhdf5 (the loader reads on
// background threads), so every thread turns it off once.
void silence_hdf5() {
  thread_local bool done = false;
  if (!done) H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  done = true;
}

// A libhdf5 built without thread safety must see one caller at a time (the loader reads on background threads
// while evaluation reads on the trainer's); thread-safe builds (Debian's) lock inside the library.
std::unique_lock<std::mutex> hdf5_guard() {
  static std::mutex mu;
  static const bool safe = [] {
    hbool_t ts = 0;
    H5is_library_threadsafe(&ts);
    return ts > 0;
  }();
  return safe ? std::unique_lock<std::mutex>() : std::unique_lock<std::mutex>(mu);
}

// Dependency findings H3 and H4 (README "Reliability"): libhdf5 1.10.8 can crash with SIGSEGV on a corrupt file
// instead of returning an error (H3 in its metadata accumulator, H4 in a dataset read), on state no check of
// bertrain's can see before the call. So while a thread reads a file through libhdf5 (ReadingFile), a SIGSEGV or SIGBUS handler
// names that file on stderr in one line and then gives the signal back to the handler it displaced: it restores
// that handler and returns, the faulting instruction faults again, and the process ends as it would have (killed
// by the signal; under AddressSanitizer or libFuzzer, with their report). A fault on any other code path goes
// straight to the previous handler. initial-exec TLS: reading it in a signal handler calls nothing.
__attribute__((tls_model("initial-exec"))) thread_local const char* t_reading_file = nullptr;
struct sigaction g_previous_segv, g_previous_bus;

void write_stderr(const char* s) {
  size_t n = std::strlen(s);
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

extern "C" void on_fault_in_hdf5(int sig, siginfo_t*, void*) {
  if (const char* path = t_reading_file) {
    write_stderr(sig == SIGSEGV ? "bertrain: fatal: SIGSEGV" : "bertrain: fatal: SIGBUS");
    write_stderr(" inside libhdf5 while reading '");
    write_stderr(path);
    write_stderr("': the file is corrupt (libhdf5 1.10.8 crashes on some corrupt files instead of reporting an "
                 "error: dependency findings H3 and H4, README \"Reliability\")\n");
  }
  sigaction(sig, sig == SIGSEGV ? &g_previous_segv : &g_previous_bus, nullptr);
}

// Marks the calling thread as reading `path` through libhdf5 for its lifetime (the handler above is installed
// on first use); nests.
class ReadingFile {
 public:
  explicit ReadingFile(const std::string& path) : previous_(t_reading_file) {
    static std::once_flag installed;
    std::call_once(installed, [] {
      struct sigaction sa {};
      sa.sa_sigaction = on_fault_in_hdf5;
      sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
      sigemptyset(&sa.sa_mask);
      sigaction(SIGSEGV, &sa, &g_previous_segv);
      sigaction(SIGBUS, &sa, &g_previous_bus);
    });
    t_reading_file = path.c_str();
  }
  ~ReadingFile() { t_reading_file = previous_; }
  ReadingFile(const ReadingFile&) = delete;
  ReadingFile& operator=(const ReadingFile&) = delete;

 private:
  const char* previous_;
};

// The innermost message of HDF5's error stack ("" when empty), then clears it.
std::string hdf5_error() {
  std::string msg;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_UPWARD,
      [](unsigned, const H5E_error2_t* e, void* out) -> herr_t {
        auto* s = static_cast<std::string*>(out);
        if (s->empty() && e->desc) *s = e->desc;
        return 0;
      },
      &msg);
  H5Eclear2(H5E_DEFAULT);
  // A failed write's description spans lines (time, descriptor, buffer...): keep the system's error message.
  const size_t em = msg.find("error message = '");
  if (em != std::string::npos) msg = msg.substr(em + 17, msg.find('\'', em + 17) - (em + 17));
  std::replace(msg.begin(), msg.end(), '\n', ' ');
  return msg.empty() ? "" : " (" + msg + ")";
}

// An HDF5 id closed by its close function.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

#define H5_CHECK(expr, ...)                                                                      \
  do {                                                                                           \
    if ((expr) < 0) {                                                                            \
      std::string h5_err__ = hdf5_error();                                                       \
      BERTRAIN_CHECK(false, __VA_ARGS__, h5_err__);                                              \
    }                                                                                            \
  } while (0)

template <class T>
void write_dataset(hid_t file, const std::string& path, const char* name, const std::vector<T>& data,
                   int64_t rows, int64_t cols, int gzip_level) {
  const int rank = cols > 0 ? 2 : 1;
  hsize_t dims[2] = {static_cast<hsize_t>(rows), static_cast<hsize_t>(cols)};
  Handle space(H5Screate_simple(rank, dims, nullptr), H5Sclose);
  H5_CHECK(space.get(), path, ": cannot create the dataspace of '", name, "'");
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  hsize_t chunk_dims[2] = {1, 1};
  H5_CHECK(H5Pset_obj_track_times(dcpl.get(), 0), path, ": cannot turn off timestamps");
  if (rows > 0) {
    // Chunks of about 256 KiB: big enough for gzip, small enough for partial reads.
    const int64_t row_bytes = std::max<int64_t>(1, cols) * static_cast<int64_t>(sizeof(T));
    chunk_dims[0] = static_cast<hsize_t>(std::clamp<int64_t>((256 << 10) / row_bytes, 1, rows));
    chunk_dims[1] = dims[1];
    H5_CHECK(H5Pset_chunk(dcpl.get(), rank, chunk_dims), path, ": cannot set chunking of '", name, "'");
    if (gzip_level > 0) H5_CHECK(H5Pset_deflate(dcpl.get(), static_cast<unsigned>(gzip_level)), path, ": no gzip");
  }
  const hid_t file_type = sizeof(T) == 4 ? H5T_STD_I32LE : H5T_STD_I8LE;
  const hid_t mem_type = sizeof(T) == 4 ? H5T_NATIVE_INT32 : H5T_NATIVE_INT8;
  Handle ds(H5Dcreate2(file, name, file_type, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT), H5Dclose);
  H5_CHECK(ds.get(), path, ": cannot create dataset '", name, "'");
  if (rows == 0) return;
  if (gzip_level == 0) {
    H5_CHECK(H5Dwrite(ds.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()), path,
             ": cannot write dataset '", name, "'");
    return;
  }
  // gzip the chunks in parallel (zlib compress2, the stream HDF5's deflate filter writes and reads) and hand
  // them to HDF5 as they are: the serial libhdf5 is not thread-safe, zlib is. The edge chunk is zero-padded
  // to the full chunk shape, as HDF5 stores it. The bytes do not depend on the thread count.
  const int64_t chunk_rows = static_cast<int64_t>(chunk_dims[0]);
  const int64_t row_elems = std::max<int64_t>(1, cols);
  const int64_t nchunks = (rows + chunk_rows - 1) / chunk_rows;
  std::vector<std::vector<unsigned char>> packed(static_cast<size_t>(nchunks));
  std::atomic<bool> failed{false};
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t c = 0; c < nchunks; ++c) {
    std::vector<T> buf(static_cast<size_t>(chunk_rows * row_elems), T{0});
    const int64_t r0 = c * chunk_rows, r1 = std::min(rows, r0 + chunk_rows);
    std::copy(data.begin() + r0 * row_elems, data.begin() + r1 * row_elems, buf.begin());
    const uLong src_len = static_cast<uLong>(buf.size() * sizeof(T));
    uLongf dst_len = compressBound(src_len);
    auto& out = packed[static_cast<size_t>(c)];
    out.resize(dst_len);
    if (compress2(out.data(), &dst_len, reinterpret_cast<const Bytef*>(buf.data()), src_len, gzip_level) != Z_OK)
      failed = true;
    out.resize(dst_len);
  }
  BERTRAIN_CHECK(!failed, path, ": zlib failed to compress dataset '", name, "'");
  for (int64_t c = 0; c < nchunks; ++c) {
    hsize_t offset[2] = {static_cast<hsize_t>(c * chunk_rows), 0};
    const auto& out = packed[static_cast<size_t>(c)];
    H5_CHECK(H5Dwrite_chunk(ds.get(), H5P_DEFAULT, 0, offset, out.size(), out.data()), path,
             ": cannot write chunk ", c, " of dataset '", name, "'");
  }
}

// Opens `path` read-only after checking that it is an HDF5 file.
hid_t open_shard(const std::string& path) {
  silence_hdf5();
  BERTRAIN_CHECK(fs::is_regular_file(path), "shard '", path, "' does not exist or is not a regular file");
  const htri_t is = H5Fis_hdf5(path.c_str());
  if (is <= 0) {
    hdf5_error();
    BERTRAIN_CHECK(false, "'", path, "' is not an HDF5 file", is < 0 ? " (or cannot be read)" : "");
  }
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  H5_CHECK(f, "cannot open HDF5 file '", path, "'");
  return f;
}

// Opens the file image `bytes` read-only after the check H5Fis_hdf5 makes on files: the superblock signature
// at offset 0, 512, 1024, 2048, ...
hid_t open_shard_image(std::string_view bytes, const std::string& source) {
  silence_hdf5();
  static constexpr char kSignature[] = "\x89HDF\r\n\x1a\n";
  bool found = false;
  for (size_t at = 0; !found && at + 8 <= bytes.size(); at = at == 0 ? 512 : 2 * at)
    found = bytes.compare(at, 8, kSignature, 8) == 0;
  BERTRAIN_CHECK(found, "'", source, "' is not an HDF5 file");
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  H5_CHECK(fapl.get(), "'", source, "': cannot create a file access property list");
  H5_CHECK(H5Pset_fapl_core(fapl.get(), 1 << 16, /*backing_store=*/0), "'", source, "': no core driver");
  H5_CHECK(H5Pset_file_image(fapl.get(), const_cast<char*>(bytes.data()), bytes.size()), "'", source,
           "': cannot set the file image");
  // HDF5 keeps a list of open files by name: a name of its own for each image, never a path on disk.
  static std::atomic<uint64_t> counter{0};
  const std::string name = "bertrain-image-" + std::to_string(counter++);
  hid_t f = H5Fopen(name.c_str(), H5F_ACC_RDONLY, fapl.get());
  H5_CHECK(f, "cannot open HDF5 file '", source, "'");
  return f;
}

// Opens dataset `name`, checks it is an integer dataset, and returns its dims.
hid_t open_dataset(hid_t file, const std::string& path, const char* name, std::vector<hsize_t>& dims) {
  const htri_t exists = H5Lexists(file, name, H5P_DEFAULT);
  if (exists <= 0) {
    hdf5_error();
    BERTRAIN_CHECK(false, "'", path, "' has no dataset '", name,
                   "': not a pretraining shard in NVIDIA's layout (needs input_ids, input_mask, segment_ids, "
                   "masked_lm_positions, masked_lm_ids, next_sentence_labels)");
  }
  hid_t ds = H5Dopen2(file, name, H5P_DEFAULT);
  H5_CHECK(ds, "'", path, "': cannot open dataset '", name, "'");
  Handle type(H5Dget_type(ds), H5Tclose);
  if (!type.ok() || H5Tget_class(type.get()) != H5T_INTEGER) {
    H5Dclose(ds);
    hdf5_error();
    BERTRAIN_CHECK(false, "'", path, "': dataset '", name, "' is not an integer dataset");
  }
  Handle space(H5Dget_space(ds), H5Sclose);
  const int rank = space.ok() ? H5Sget_simple_extent_ndims(space.get()) : -1;
  if (rank < 1 || rank > 2) {
    H5Dclose(ds);
    hdf5_error();
    BERTRAIN_CHECK(false, "'", path, "': dataset '", name, "' has rank ", rank, ", expected 1 or 2");
  }
  dims.assign(static_cast<size_t>(rank), 0);
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return ds;
}

// Deflate's best ratio (RFC 1951: a 258-byte match in at most 2 bits, so 1032:1): no HDF5 file with the
// standard filters stores a dataset in fewer bytes than its values / 1032.
constexpr uint64_t kMaxCompressionRatio = 1032;

// Throws unless dataset `name` of rank `dims.size()` stores enough bytes for the values it claims: the check
// that keeps a corrupt or hostile header from making the reader allocate what the header says.
void check_storage(hid_t ds, const std::string& path, const char* name, const std::vector<hsize_t>& dims,
                   uint64_t file_size) {
  uint64_t values = 1;
  for (hsize_t d : dims) BERTRAIN_CHECK(!__builtin_mul_overflow(values, d, &values), "'", path, "': dataset '", name,
                                        "' claims more than 2^64 values");
  if (values == 0) return;
  Handle type(H5Dget_type(ds), H5Tclose);
  const uint64_t type_size = type.ok() ? H5Tget_size(type.get()) : 0;
  uint64_t bytes = 0;
  BERTRAIN_CHECK(type_size > 0 && !__builtin_mul_overflow(values, type_size, &bytes), "'", path, "': dataset '",
                 name, "' claims ", values, " values of ", type_size, " bytes");
  const uint64_t stored = std::min<uint64_t>(H5Dget_storage_size(ds), file_size);
  hdf5_error();  // H5Dget_storage_size returns 0 on errors too
  BERTRAIN_CHECK(bytes / kMaxCompressionRatio <= stored, "'", path, "': dataset '", name, "' claims ", values,
                 " values (", bytes, " bytes) but stores ", stored, " bytes in a file of ", file_size,
                 ": truncated or corrupt (nothing allocated)");
}

// Reads the dims of all six datasets, checks them against each other, and optionally reads the data.
// Takes ownership of `file_id`; `path` names the file in errors. Callers hold hdf5_guard() from the open on.
ShardInfo read_or_inspect(hid_t file_id, const std::string& path, uint64_t file_size, PretrainingFeatures* out) {
  Handle file(file_id, H5Fclose);
  std::vector<hsize_t> d_ids, d_mask, d_seg, d_pos, d_mids, d_nsl;
  Handle ids(open_dataset(file.get(), path, "input_ids", d_ids), H5Dclose);
  Handle mask(open_dataset(file.get(), path, "input_mask", d_mask), H5Dclose);
  Handle seg(open_dataset(file.get(), path, "segment_ids", d_seg), H5Dclose);
  Handle pos(open_dataset(file.get(), path, "masked_lm_positions", d_pos), H5Dclose);
  Handle mids(open_dataset(file.get(), path, "masked_lm_ids", d_mids), H5Dclose);
  Handle nsl(open_dataset(file.get(), path, "next_sentence_labels", d_nsl), H5Dclose);
  auto shape_str = [](const std::vector<hsize_t>& d) {
    std::string s = "(";
    for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
    return s + ")";
  };
  BERTRAIN_CHECK(d_ids.size() == 2, "'", path, "': dataset 'input_ids' has shape ", shape_str(d_ids),
                 ", expected (N, max_seq_length)");
  BERTRAIN_CHECK(d_pos.size() == 2, "'", path, "': dataset 'masked_lm_positions' has shape ", shape_str(d_pos),
                 ", expected (N, max_predictions_per_seq)");
  const hsize_t N = d_ids[0], T = d_ids[1], P = d_pos[1];
  auto expect = [&](const char* name, const std::vector<hsize_t>& d, std::vector<hsize_t> want) {
    BERTRAIN_CHECK(d == want, "'", path, "': dataset '", name, "' has shape ", shape_str(d), ", expected ",
                   shape_str(want), " to match input_ids ", shape_str(d_ids), " and masked_lm_positions ",
                   shape_str(d_pos));
  };
  expect("input_mask", d_mask, {N, T});
  expect("segment_ids", d_seg, {N, T});
  expect("masked_lm_positions", d_pos, {N, P});
  expect("masked_lm_ids", d_mids, {N, P});
  if (d_nsl.size() == 2 && d_nsl[1] == 1) d_nsl.pop_back();  // (N, 1) is accepted as (N)
  expect("next_sentence_labels", d_nsl, {N});
  BERTRAIN_CHECK(T > 0 && P > 0, "'", path, "': empty sequence or prediction axis (T=", T, ", P=", P, ")");

  // Every claim is checked before anything is allocated.
  check_storage(ids.get(), path, "input_ids", d_ids, file_size);
  check_storage(mask.get(), path, "input_mask", d_mask, file_size);
  check_storage(seg.get(), path, "segment_ids", d_seg, file_size);
  check_storage(pos.get(), path, "masked_lm_positions", d_pos, file_size);
  check_storage(mids.get(), path, "masked_lm_ids", d_mids, file_size);
  check_storage(nsl.get(), path, "next_sentence_labels", d_nsl, file_size);
  BERTRAIN_CHECK(N <= static_cast<hsize_t>(INT64_MAX) && T <= static_cast<hsize_t>(INT32_MAX) &&
                     P <= static_cast<hsize_t>(INT32_MAX),
                 "'", path, "': shape (N=", N, ", T=", T, ", P=", P, ") out of range");
  ShardInfo info{static_cast<int64_t>(N), static_cast<int64_t>(T), static_cast<int64_t>(P)};
  if (!out) return info;

  PretrainingFeatures f(info.max_seq_length, info.max_predictions_per_seq);
  auto read = [&](const Handle& ds, const char* name, auto& vec, size_t n) {
    using T_ = typename std::decay_t<decltype(vec)>::value_type;
    vec.resize(n);
    if (n == 0) return;
    const hid_t mem_type = sizeof(T_) == 4 ? H5T_NATIVE_INT32 : H5T_NATIVE_INT8;
    H5_CHECK(H5Dread(ds.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, vec.data()), "'", path,
             "': cannot read dataset '", name, "'");
  };
  read(ids, "input_ids", f.input_ids, N * T);
  read(mask, "input_mask", f.input_mask, N * T);
  read(seg, "segment_ids", f.segment_ids, N * T);
  read(pos, "masked_lm_positions", f.masked_lm_positions, N * P);
  read(mids, "masked_lm_ids", f.masked_lm_ids, N * P);
  read(nsl, "next_sentence_labels", f.next_sentence_labels, N);
  for (size_t i = 0; i < f.masked_lm_positions.size(); ++i) {
    const int32_t p = f.masked_lm_positions[i];
    BERTRAIN_CHECK(p >= 0 && static_cast<hsize_t>(p) < T, "'", path, "': masked_lm_positions[", i / P, ", ", i % P,
                   "] = ", p, " is outside [0, ", T, ")");
  }
  f.check_consistent("'" + path + "'");
  *out = std::move(f);
  return info;
}

}  // namespace

void write_pretraining_shard(const std::string& path, const PretrainingFeatures& f, int gzip_level) {
  auto guard = hdf5_guard();
  silence_hdf5();
  BERTRAIN_CHECK(gzip_level >= 0 && gzip_level <= 9, "gzip level must be in 0..9, got ", gzip_level);
  f.check_consistent("features for '" + path + "'");
  if (gzip_level > 0)
    BERTRAIN_CHECK(H5Zfilter_avail(H5Z_FILTER_DEFLATE) > 0, "this libhdf5 has no gzip (deflate) filter");
  const std::string tmp = path + ".tmp";
  try {
    Handle fcpl(H5Pcreate(H5P_FILE_CREATE), H5Pclose);
    H5_CHECK(H5Pset_obj_track_times(fcpl.get(), 0), path, ": cannot turn off timestamps");
    Handle file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, fcpl.get(), H5P_DEFAULT), H5Fclose);
    H5_CHECK(file.get(), "cannot create HDF5 file '", tmp, "'");
    const int64_t N = f.size(), T = f.max_seq_length, P = f.max_predictions_per_seq;
    write_dataset(file.get(), path, "input_ids", f.input_ids, N, T, gzip_level);
    write_dataset(file.get(), path, "input_mask", f.input_mask, N, T, gzip_level);
    write_dataset(file.get(), path, "segment_ids", f.segment_ids, N, T, gzip_level);
    write_dataset(file.get(), path, "masked_lm_positions", f.masked_lm_positions, N, P, gzip_level);
    write_dataset(file.get(), path, "masked_lm_ids", f.masked_lm_ids, N, P, gzip_level);
    write_dataset(file.get(), path, "next_sentence_labels", f.next_sentence_labels, N, 0, gzip_level);
    H5_CHECK(H5Fflush(file.get(), H5F_SCOPE_GLOBAL), "cannot flush '", tmp, "'");
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);  // a full disk or a write error: no half-written file is left behind
    throw;
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  BERTRAIN_CHECK(!ec, "cannot rename '", tmp, "' to '", path, "': ", ec.message());
}

PretrainingFeatures read_pretraining_shard(const std::string& path) {
  PretrainingFeatures f;
  auto guard = hdf5_guard();
  const ReadingFile reading(path);
  const hid_t file = open_shard(path);
  std::error_code ec;
  read_or_inspect(file, path, fs::file_size(path, ec), &f);
  return f;
}

ShardInfo inspect_pretraining_shard(const std::string& path) {
  auto guard = hdf5_guard();
  const ReadingFile reading(path);
  const hid_t file = open_shard(path);
  std::error_code ec;
  return read_or_inspect(file, path, fs::file_size(path, ec), nullptr);
}

PretrainingFeatures read_pretraining_shard_image(std::string_view bytes, const std::string& source) {
  PretrainingFeatures f;
  auto guard = hdf5_guard();
  const ReadingFile reading(source);
  read_or_inspect(open_shard_image(bytes, source), source, bytes.size(), &f);
  return f;
}

ShardInfo inspect_pretraining_shard_image(std::string_view bytes, const std::string& source) {
  auto guard = hdf5_guard();
  const ReadingFile reading(source);
  return read_or_inspect(open_shard_image(bytes, source), source, bytes.size(), nullptr);
}

namespace {

/// Regular files (or links to them) of `dir` named *.hdf5 or *.h5, sorted by name.
std::vector<std::string> list_hdf5_files(const std::string& dir, const char* what) {
  std::error_code ec;
  BERTRAIN_CHECK(fs::is_directory(dir, ec), what, " '", dir, "' does not exist or is not a directory");
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string ext = e.path().extension().string();
    if (e.is_regular_file() && (ext == ".hdf5" || ext == ".h5")) out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  BERTRAIN_CHECK(!out.empty(), what, " '", dir, "' holds no HDF5 shard (*.hdf5 or *.h5 file)");
  return out;
}

}  // namespace

std::vector<std::string> list_training_shards(const std::string& dir) {
  std::vector<std::string> all = list_hdf5_files(dir, "shard directory");
  std::vector<std::string> training;
  for (const std::string& p : all)
    if (fs::path(p).filename().string().find("training") != std::string::npos) training.push_back(p);
  return training.empty() ? all : training;
}

std::vector<std::string> list_eval_shards(const std::string& dir) { return list_hdf5_files(dir, "eval_dir"); }

void write_pretraining_shards(const std::vector<TrainingInstance>& instances, const PretrainingOptions& options,
                              const std::string& output_dir, DatasetInfo& info, int gzip_level) {
  std::error_code ec;
  fs::create_directories(output_dir, ec);
  BERTRAIN_CHECK(!ec, "cannot create output directory '", output_dir, "': ", ec.message());
  const int64_t S = options.num_shards;
  info.shards.clear();
  info.shard_samples.clear();
  for (int64_t s = 0; s < S; ++s) {
    PretrainingFeatures f(options.max_seq_length, options.max_predictions_per_seq);
    for (size_t i = static_cast<size_t>(s); i < instances.size(); i += static_cast<size_t>(S)) f.append(instances[i]);
    char name[64];
    std::snprintf(name, sizeof(name), "part-%05lld-training.hdf5", static_cast<long long>(s));
    write_pretraining_shard((fs::path(output_dir) / name).string(), f, gzip_level);
    info.shards.emplace_back(name);
    info.shard_samples.push_back(f.size());
  }
}

void write_dataset_info(const std::string& path, const DatasetInfo& info) {
  const auto& o = info.options;
  const auto& s = info.stats;
  nlohmann::ordered_json j;
  j["format"] = "NVIDIA DeepLearningExamples BERT HDF5 (input_ids, input_mask, segment_ids, masked_lm_positions, "
                "masked_lm_ids, next_sentence_labels)";
  j["flags"] = {{"input_file", info.input_files},       {"vocab_file", info.vocab_file},
                {"do_lower_case", info.do_lower_case},  {"max_seq_length", o.max_seq_length},
                {"max_predictions_per_seq", o.max_predictions_per_seq}, {"masked_lm_prob", o.masked_lm_prob},
                {"dupe_factor", o.dupe_factor},         {"short_seq_prob", o.short_seq_prob},
                {"random_seed", o.random_seed},         {"do_whole_word_mask", o.do_whole_word_mask},
                {"num_shards", o.num_shards}};
  if (info.windows > 0) {
    j["flags"]["window_mb"] = static_cast<double>(info.window_bytes) / (1 << 20);
    j["flags"]["max_instances_per_shard"] = info.max_instances_per_shard;
    if (!info.side_files.empty()) j["flags"]["side_files"] = info.side_files;
    j["windows"] = {{"count", info.windows}, {"resumed", info.resumed_windows},
                    {"random_next_from", "documents of the same window"}};
  }
  j["vocab"] = {{"sha256", info.vocab_sha256}, {"size", info.vocab_size}};
  nlohmann::ordered_json shards = nlohmann::ordered_json::array();
  for (size_t i = 0; i < info.shards.size(); ++i)
    shards.push_back({{"file", info.shards[i]}, {"samples", i < info.shard_samples.size() ? info.shard_samples[i] : 0}});
  j["shards"] = shards;
  j["counts"] = {{"files", s.files},
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
                 {"skipped_empty_files", s.skipped_empty_files}};
  j["seconds"] = info.seconds;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    BERTRAIN_CHECK(f.good(), "cannot write '", tmp, "'");
    f << j.dump(2) << "\n";
    BERTRAIN_CHECK(f.good(), "error while writing '", tmp, "'");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  BERTRAIN_CHECK(!ec, "cannot rename '", tmp, "' to '", path, "': ", ec.message());
}

}  // namespace bertrain::data
