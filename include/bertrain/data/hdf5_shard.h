// hdf5_shard.h: pretraining shards in NVIDIA DeepLearningExamples' HDF5 layout (BERT/data/
// create_pretraining_data.py, written with h5py), read and written with libhdf5 behind this interface.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bertrain/data/pretraining.h"

namespace bertrain::data {

/// Writes `features` to `path` as six gzip-compressed, chunked datasets: input_ids int32 (N, T), input_mask
/// int8 (N, T), segment_ids int8 (N, T), masked_lm_positions int32 (N, P), masked_lm_ids int32 (N, P),
/// next_sentence_labels int8 (N). masked_lm_weights is not stored (NVIDIA derives it; so does our loader).
/// Object timestamps are off, so equal features give byte-identical files. The file is written to a
/// temporary name and renamed. `gzip_level` in 0..9 (h5py's default is 4). Throws bertrain::Error naming
/// the file on any HDF5 failure.
void write_pretraining_shard(const std::string& path, const PretrainingFeatures& features, int gzip_level = 4);

/// Reads a shard written by bertrain or by NVIDIA's scripts. Integer datasets of any width are converted to
/// the in-memory types (NVIDIA's int64 files included). Throws bertrain::Error naming the file (and dataset)
/// when the file is missing, not HDF5, lacks a dataset, has a non-integer dataset, inconsistent shapes, or
/// masked_lm_positions outside [0, T), and, before allocating anything, when a dataset claims more values
/// than the file can hold (more than deflate's best ratio, 1032:1, times the bytes the dataset stores, and
/// those bytes no more than the file's size). Some corrupt files make libhdf5 1.10.8 itself crash with SIGSEGV
/// (dependency findings H3 and H4, README "Reliability"), which nothing can check before the call: the process then still
/// dies by the signal, after one line on stderr that names the file.
PretrainingFeatures read_pretraining_shard(const std::string& path);

/// N, T and P of a shard without reading its data. Same errors as read_pretraining_shard.
struct ShardInfo {
  int64_t num_samples = 0;
  int64_t max_seq_length = 0;
  int64_t max_predictions_per_seq = 0;
};
ShardInfo inspect_pretraining_shard(const std::string& path);

/// The same two on the bytes of a whole shard file in memory, through HDF5's file-image API (the core driver,
/// no backing store; HDF5 copies the bytes). `source` names it in errors as the path does above. Same throws.
PretrainingFeatures read_pretraining_shard_image(std::string_view bytes, const std::string& source);
ShardInfo inspect_pretraining_shard_image(std::string_view bytes, const std::string& source);

/// The training shards of a directory, sorted by name: its *.hdf5 / *.h5 files whose name contains "training"
/// when there are any (NVIDIA's layout keeps `*_training_*` and `*_test_*` files side by side and its loader
/// selects "training"), otherwise all of them. Throws bertrain::Error naming `dir` when it is missing or holds
/// no HDF5 file. Temporary files (*.hdf5.tmp) never match.
std::vector<std::string> list_training_shards(const std::string& dir);
/// The evaluation shards of a directory: every *.hdf5 / *.h5 file, sorted by name (NVIDIA's held-out files are
/// named `*_test_*`). Same throws.
std::vector<std::string> list_eval_shards(const std::string& dir);

/// What `create-pretraining-data` records in `dataset_info.json` beside the shards.
struct DatasetInfo {
  PretrainingOptions options;
  std::string vocab_file;
  std::string vocab_sha256;
  int64_t vocab_size = 0;
  bool do_lower_case = true;
  std::vector<std::string> input_files;
  std::vector<std::string> shards;         // file names, relative to the output directory
  std::vector<int64_t> shard_samples;      // N of each shard
  PretrainingStats stats;
  double seconds = 0;
  // create_pretraining_shards (create_shards.h): windows of the input, their size, the shard bound, the windows a
  // rerun found complete, and the side files (one per input file)
  int64_t windows = 0, window_bytes = 0, max_instances_per_shard = 0, resumed_windows = 0;
  std::vector<std::string> side_files;
};

/// Deals `instances` round-robin over options.num_shards shards (instance i goes to shard i % num_shards, as
/// ref's writer does), writes `<output_dir>/part-%05d-training.hdf5` and returns the file names and sizes in
/// `info.shards` / `info.shard_samples`. Creates output_dir. Throws bertrain::Error on write failures.
void write_pretraining_shards(const std::vector<TrainingInstance>& instances, const PretrainingOptions& options,
                              const std::string& output_dir, DatasetInfo& info, int gzip_level = 4);

/// Writes `info` as JSON (flags under google-research/bert names, counts, vocab checksum) to `path`.
void write_dataset_info(const std::string& path, const DatasetInfo& info);

}  // namespace bertrain::data
