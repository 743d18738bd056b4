// loader.h: the pretraining loader: a two-level sample order per epoch (shards, then samples within a window of
// shards) defined by the seed and the epoch only, dealt to ranks and micro-batches, streamed from HDF5 shards
// (bertrain's or NVIDIA's) with a bounded number of windows in memory, and a cursor that resumes exactly.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bertrain/core/rng.h"
#include "bertrain/core/tensor.h"
#include "bertrain/data/pretraining.h"

namespace bertrain::data {

/// Loader settings. Shapes: B = micro_batch_size rows per micro-batch on one rank; the global batch of
/// one optimizer step is G = world_size * grad_accum_steps * B samples.
struct LoaderOptions {
  std::string input_dir;            // shards: see list_training_shards
  int64_t micro_batch_size = 8;     // B
  int64_t grad_accum_steps = 1;     // A: micro-batches per rank per step
  int64_t world_size = 1;           // R
  int64_t rank = 0;
  uint64_t seed = 12345;
  /// W: consecutive shards of the epoch's shard permutation whose samples are shuffled together. Memory holds
  /// about two windows (the one being read and the next, loaded ahead), of which each rank keeps only its rows.
  int64_t window_shards = 4;
  /// Micro-batches prepared ahead on the background thread, which also loads the next window ahead
  /// (0: no thread; windows are read on the caller's thread when first needed).
  int64_t prefetch = 4;
  /// Re-mask every epoch (RoBERTa / Hugging Face style) with the rules of create_masked_lm_predictions,
  /// keyed by (seed, epoch, sample index). Needs `vocab`; P stays the shards' max_predictions_per_seq.
  bool dynamic_masking = false;
  double masked_lm_prob = 0.15;
  bool do_whole_word_mask = false;
  std::shared_ptr<const PretrainingVocab> vocab;
  /// Throws bertrain::Error for B, A, R, W < 1, rank outside [0, R), prefetch < 0, or dynamic masking without
  /// a vocab.
  void validate() const;
};

/// Where a rank stands, in terms that do not depend on the rank count: the global batch being read starts at
/// position `sample` of the epoch's order (a multiple of G; step = sample / G), and this rank has read `micro`
/// of its A micro-batches of it (0 at a step boundary, so a cursor saved between steps resumes with any R and
/// A that give the same G). `shuffle_rng` is the fresh state of the epoch's shard-permutation generator: a
/// cursor from another seed is rejected rather than silently misused.
struct LoaderCursor {
  int64_t epoch = 0;
  int64_t sample = 0;
  int64_t micro = 0;
  RngState shuffle_rng;
  /// Set only when read from a cursor written before the streaming loader ({"epoch", "position", "rng"}):
  /// `position` counted one rank's micro-batches; the trainer converts it (see PretrainTrainer) and says the
  /// order is not reproduced.
  int64_t legacy_position = -1;
  /// {"epoch":..,"sample":..,"micro":..,"rng":{"seed":..,"stream":..,"counter":..,"used":..}}
  std::string to_json() const;
  /// Throws bertrain::Error on malformed JSON or missing keys.
  static LoaderCursor from_json(const std::string& json);
  bool operator==(const LoaderCursor&) const = default;
};

/// One micro-batch. B rows, T = max_seq_length, P = max_predictions_per_seq.
struct PretrainingBatch {
  Tensor input_ids;             // i32 (B, T)
  Tensor token_type_ids;        // i32 (B, T)  from segment_ids
  Tensor attention_mask;        // i32 (B, T)  from input_mask
  Tensor masked_lm_positions;   // i32 (B, P)
  Tensor masked_lm_ids;         // i32 (B, P)
  Tensor masked_lm_weights;     // f32 (B, P)  1 where masked_lm_positions != 0, else 0 (as NVIDIA derives it)
  Tensor next_sentence_labels;  // i32 (B)     1 = random next (ref convention)
  std::vector<int64_t> sample_index;  // (B) the dataset index of each row (shards in name order, rows in file
                                      // order): key per-sample randomness by (seed, epoch, sample_index)
  int64_t epoch = 0;
  int64_t step = 0;         // optimizer step within the epoch
  int64_t micro_step = 0;   // micro-batch within the step, in [0, A)
  LoaderCursor next;        // the cursor after this batch
};

/// Fills the tensors of `b` with the rows `samples` of `f` (B = samples.size(); masked_lm_weights 1 where the
/// position is not 0, as NVIDIA derives them). Throws bertrain::Error for an empty list or a sample out of range.
void fill_pretraining_batch(const PretrainingFeatures& f, std::span<const int64_t> samples, PretrainingBatch& b);
/// The batch of rows [begin, begin + count) of `f` (evaluation reads shards in order). Same throws.
PretrainingBatch make_pretraining_batch(const PretrainingFeatures& f, int64_t begin, int64_t count);

/// An epoch's shard order and windows (a pure function of the seed, the epoch, the shard sizes and W).
struct EpochPlan {
  std::vector<int64_t> shard_order;   // permutation of the S shard indices (shards sorted by file name)
  std::vector<int64_t> window_begin;  // first position of each window in the epoch's order, then N (size + 1)
  int64_t window_shards = 1;          // window j holds shard_order[j*W, min((j+1)*W, S))
  int64_t num_windows() const { return static_cast<int64_t>(window_begin.size()) - 1; }
  /// The window holding position p in [0, N).
  int64_t window_of(int64_t position) const;
};

/// The loader. The two-level order of epoch e: the S shards (sorted by name) are permuted with a generator
/// keyed by (seed, e); consecutive groups of W shards of that permutation form windows; the samples of each
/// window (its shards' rows, concatenated in permutation order) are permuted with a generator keyed by
/// (seed, e, window); the epoch's order is the windows' orders concatenated.
///
/// Dealing: the step-s global batch is order[s*G, (s+1)*G) and micro-batch m of rank r is its contiguous block
/// k = r*A + m. One rank with R*A micro-batches takes block k as its micro-batch k, so both see exactly the same
/// samples per step, and every rank gets floor(N / G) steps per epoch whatever the shard sizes (CASES.md C41);
/// the last N mod G positions of each epoch's order are not used that epoch (a different set every epoch).
///
/// Memory: shard sizes come from the files' metadata; a window is read when the rank first needs it (the
/// background thread starts reading the next window as soon as the current one is entered) and keeps only the
/// rows this rank's micro-batches use; windows behind the current micro-batch are dropped. So a rank holds
/// about two windows' worth of its own rows, whatever the corpus size. Every rank reads every shard once per
/// epoch (its rows are spread over all of them).
class PretrainingLoader {
 public:
  /// Lists the shards of options.input_dir, reads their sizes, and starts the prefetch thread at `start`.
  /// Throws bertrain::Error when the options are invalid, the directory has no shards, a shard cannot be read,
  /// shards disagree on T or P, there are fewer than G samples, or `start` belongs to a different seed or lies
  /// outside the epoch (or is not at a multiple of G, or has micro >= A).
  explicit PretrainingLoader(LoaderOptions options, const LoaderCursor& start = {});
  ~PretrainingLoader();
  PretrainingLoader(const PretrainingLoader&) = delete;
  PretrainingLoader& operator=(const PretrainingLoader&) = delete;

  /// The next micro-batch of this rank; rolls over to the next epoch after steps_per_epoch() steps.
  /// Rethrows an error raised on the prefetch thread (a shard missing, truncated or changed since the start:
  /// the message names the file).
  PretrainingBatch next();
  /// The cursor of the batch next() returns next: save it with the checkpoint.
  LoaderCursor cursor() const;

  int64_t num_samples() const;
  int64_t num_shards() const;
  int64_t max_seq_length() const;
  int64_t max_predictions_per_seq() const;
  int64_t global_batch_size() const;
  int64_t steps_per_epoch() const;
  /// Seconds next() spent blocked since the last call (waiting for the background thread or reading on the
  /// caller's thread), and resets the count.
  double take_wait_seconds();
  /// Bytes of sample rows held in loaded windows now, and the most held at once so far.
  int64_t window_bytes() const;
  int64_t peak_window_bytes() const;

  /// The plan of epoch `epoch` for shards of `shard_sizes` samples (EpochPlan).
  static EpochPlan epoch_plan(uint64_t seed, int64_t epoch, const std::vector<int64_t>& shard_sizes,
                              int64_t window_shards);
  /// The dataset indices of window `window` of `plan`, in the epoch's order (Fisher-Yates keyed by
  /// (seed, epoch, window)). Dataset index = first index of the shard (sizes summed in name order) + row.
  static std::vector<int64_t> window_order(uint64_t seed, int64_t epoch, int64_t window, const EpochPlan& plan,
                                           const std::vector<int64_t>& shard_sizes);
  /// The whole epoch's order of all N dataset indices (for tests and tools: O(N) memory).
  static std::vector<int64_t> epoch_order(uint64_t seed, int64_t epoch, const std::vector<int64_t>& shard_sizes,
                                          int64_t window_shards);
  /// The generator state a cursor of `epoch` carries (see LoaderCursor::shuffle_rng).
  static Rng epoch_rng(uint64_t seed, int64_t epoch);
  /// The B dataset indices of micro-batch `micro` of `rank` at `step`:
  /// order[step*G + (rank*A + micro)*B + j], j in [0, B), G = R*A*B.
  static std::vector<int64_t> micro_batch_indices(const std::vector<int64_t>& order, int64_t step, int64_t rank,
                                                  int64_t micro, int64_t world_size, int64_t grad_accum_steps,
                                                  int64_t micro_batch_size);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace bertrain::data
