// loader.h: the pretraining loader: one seeded global sample order per epoch over a directory of HDF5
// shards (bertrain's or NVIDIA's), dealt to ranks and micro-batches, prefetched on a background thread,
// with a cursor that resumes exactly.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "bertrain/core/rng.h"
#include "bertrain/core/tensor.h"
#include "bertrain/data/pretraining.h"

namespace bertrain::data {

/// Loader settings. Shapes: B = micro_batch_size rows per micro-batch on one rank; the global batch of
/// one optimizer step is G = world_size * grad_accum_steps * B samples.
struct LoaderOptions {
  std::string input_dir;            // shards: files whose name contains "training"
  int64_t micro_batch_size = 8;     // B
  int64_t grad_accum_steps = 1;     // A: micro-batches per rank per step
  int64_t world_size = 1;           // R
  int64_t rank = 0;
  uint64_t seed = 12345;
  int64_t prefetch = 4;             // micro-batches prepared ahead on the background thread (0: none)
  /// Re-mask every epoch (RoBERTa / Hugging Face style) with the rules of create_masked_lm_predictions,
  /// keyed by (seed, epoch, sample index). Needs `vocab`; P stays the shards' max_predictions_per_seq.
  bool dynamic_masking = false;
  double masked_lm_prob = 0.15;
  bool do_whole_word_mask = false;
  std::shared_ptr<const PretrainingVocab> vocab;
  /// Throws bertrain::Error for B, A, R < 1, rank outside [0, R), prefetch < 0, or dynamic masking without
  /// a vocab.
  void validate() const;
};

/// Where a rank stands. `position` counts the micro-batches this rank has consumed in `epoch`, so the next
/// one is step position / A, micro-batch position % A. `shuffle_rng` is the generator state the epoch's
/// order is drawn from (a fresh Rng per epoch, see PretrainingLoader::epoch_order); restoring checks it
/// against the loader's seed, so a cursor from another seed is rejected rather than silently misused.
struct LoaderCursor {
  int64_t epoch = 0;
  int64_t position = 0;
  RngState shuffle_rng;
  /// {"epoch":..,"position":..,"rng":{"seed":..,"stream":..,"counter":..,"used":..}}
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
  std::vector<int64_t> sample_index;  // (B) the dataset index of each row: key per-sample randomness by
                                      // (seed, epoch, sample_index), never by rank or thread
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

/// The loader. Every rank loads the shard directory (all samples, in memory: N * (6T + 8P + 1) bytes) and
/// computes the same epoch order; dealing (see micro_batch_indices) gives each rank its rows.
///
/// Equivalence: with R ranks and A micro-batches each, the step-s global batch is order[s*G, (s+1)*G) and
/// micro-batch m of rank r is the contiguous block k = r*A + m of it. One rank with R*A micro-batches takes
/// block k as its micro-batch k, so both see exactly the same samples per step (and the same rows per
/// block). An epoch has floor(N / G) steps; the last N mod G samples of the order are not used that epoch
/// (each epoch's order is different, so no sample is excluded for ever).
class PretrainingLoader {
 public:
  /// Opens the shards of options.input_dir and starts the prefetch thread at `start`. Throws
  /// bertrain::Error when the options are invalid, the directory has no shards, shards disagree on T or P,
  /// there are fewer than G samples, or `start` belongs to a different seed or lies past the epoch end.
  explicit PretrainingLoader(LoaderOptions options, const LoaderCursor& start = {});
  ~PretrainingLoader();
  PretrainingLoader(const PretrainingLoader&) = delete;
  PretrainingLoader& operator=(const PretrainingLoader&) = delete;

  /// The next micro-batch of this rank; rolls over to the next epoch after steps_per_epoch() steps.
  /// Rethrows an error raised on the prefetch thread.
  PretrainingBatch next();
  /// The cursor of the batch next() returns next: save it with the checkpoint.
  LoaderCursor cursor() const;

  int64_t num_samples() const { return num_samples_; }
  int64_t max_seq_length() const { return T_; }
  int64_t max_predictions_per_seq() const { return P_; }
  int64_t global_batch_size() const;
  int64_t steps_per_epoch() const;

  /// The epoch's order of all N dataset indices: Fisher-Yates with Rng(shuffle_seed(seed), epoch).
  static std::vector<int64_t> epoch_order(uint64_t seed, int64_t epoch, int64_t n);
  /// The generator epoch_order draws from (its fresh state goes into the cursor).
  static Rng epoch_rng(uint64_t seed, int64_t epoch);
  /// The B dataset indices of micro-batch `micro` of `rank` at `step`:
  /// order[step*G + (rank*A + micro)*B + j], j in [0, B), G = R*A*B.
  static std::vector<int64_t> micro_batch_indices(const std::vector<int64_t>& order, int64_t step, int64_t rank,
                                                  int64_t micro, int64_t world_size, int64_t grad_accum_steps,
                                                  int64_t micro_batch_size);

 private:
  PretrainingBatch make_batch(const LoaderCursor& at);
  LoaderCursor advance(const LoaderCursor& c) const;
  void producer_loop();

  LoaderOptions opt_;
  int64_t num_samples_ = 0, T_ = 0, P_ = 0;
  PretrainingFeatures data_;  // all shards, concatenated in file order
  std::vector<int64_t> order_;
  int64_t order_epoch_ = -1;

  LoaderCursor consumer_;  // next batch to hand out
  LoaderCursor producer_;  // next batch to prepare
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<PretrainingBatch> queue_;
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace bertrain::data
