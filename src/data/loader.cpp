// loader.cpp: PretrainingLoader: epoch orders from keyed Philox streams, rank/micro-batch dealing, optional
// dynamic masking, and a bounded prefetch queue filled by one background thread.
#include "bertrain/data/loader.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "bertrain/data/hdf5_shard.h"

namespace bertrain::data {
namespace {

// Independent seeds per purpose, derived from the user's seed with one Philox block.
constexpr uint64_t kShuffleTag = 0x5348554646ull;  // "SHUFF"
constexpr uint64_t kMaskTag = 0x4d41534bull;       // "MASK"

uint64_t derive_seed(uint64_t seed, uint64_t tag, uint64_t index) {
  auto w = philox_keyed(seed, tag, index);
  return (static_cast<uint64_t>(w[0]) << 32) | w[1];
}

}  // namespace

void LoaderOptions::validate() const {
  BERTRAIN_CHECK(micro_batch_size >= 1, "micro_batch_size must be >= 1, got ", micro_batch_size);
  BERTRAIN_CHECK(grad_accum_steps >= 1, "grad_accum_steps must be >= 1, got ", grad_accum_steps);
  BERTRAIN_CHECK(world_size >= 1, "world_size must be >= 1, got ", world_size);
  BERTRAIN_CHECK(rank >= 0 && rank < world_size, "rank ", rank, " outside [0, world_size=", world_size, ")");
  BERTRAIN_CHECK(prefetch >= 0, "prefetch must be >= 0, got ", prefetch);
  BERTRAIN_CHECK(!dynamic_masking || vocab, "dynamic masking needs the vocab");
  BERTRAIN_CHECK(!dynamic_masking || (masked_lm_prob > 0 && masked_lm_prob <= 1), "masked_lm_prob must be in (0, 1], got ",
                 masked_lm_prob);
}

std::string LoaderCursor::to_json() const {
  nlohmann::ordered_json j;
  j["epoch"] = epoch;
  j["position"] = position;
  j["rng"] = {{"seed", shuffle_rng.seed}, {"stream", shuffle_rng.stream}, {"counter", shuffle_rng.counter},
              {"used", shuffle_rng.used}};
  return j.dump();
}

LoaderCursor LoaderCursor::from_json(const std::string& text) {
  LoaderCursor c;
  try {
    auto j = nlohmann::json::parse(text);
    c.epoch = j.at("epoch").get<int64_t>();
    c.position = j.at("position").get<int64_t>();
    const auto& r = j.at("rng");
    c.shuffle_rng.seed = r.at("seed").get<uint64_t>();
    c.shuffle_rng.stream = r.at("stream").get<uint64_t>();
    c.shuffle_rng.counter = r.at("counter").get<uint64_t>();
    c.shuffle_rng.used = r.at("used").get<uint32_t>();
  } catch (const nlohmann::json::exception& e) {
    BERTRAIN_CHECK(false, "loader cursor: malformed JSON (", e.what(), "): ", text);
  }
  return c;
}

Rng PretrainingLoader::epoch_rng(uint64_t seed, int64_t epoch) {
  return Rng(derive_seed(seed, kShuffleTag, 0), static_cast<uint64_t>(epoch));
}

std::vector<int64_t> PretrainingLoader::epoch_order(uint64_t seed, int64_t epoch, int64_t n) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  Rng rng = epoch_rng(seed, epoch);
  for (size_t i = order.size(); i-- > 1;) std::swap(order[i], order[static_cast<size_t>(rng.randint(i + 1))]);
  return order;
}

std::vector<int64_t> PretrainingLoader::micro_batch_indices(const std::vector<int64_t>& order, int64_t step,
                                                            int64_t rank, int64_t micro, int64_t world_size,
                                                            int64_t grad_accum_steps, int64_t micro_batch_size) {
  const int64_t B = micro_batch_size, G = world_size * grad_accum_steps * B;
  const int64_t begin = step * G + (rank * grad_accum_steps + micro) * B;
  BERTRAIN_ASSERT(rank < world_size && micro < grad_accum_steps && begin + B <= static_cast<int64_t>(order.size()));
  return {order.begin() + begin, order.begin() + begin + B};
}

PretrainingLoader::PretrainingLoader(LoaderOptions options, const LoaderCursor& start) : opt_(std::move(options)) {
  opt_.validate();
  for (const auto& path : list_training_shards(opt_.input_dir)) {
    PretrainingFeatures f = read_pretraining_shard(path);
    if (T_ == 0) {
      T_ = f.max_seq_length;
      P_ = f.max_predictions_per_seq;
      data_ = PretrainingFeatures(T_, P_);
    }
    BERTRAIN_CHECK(f.max_seq_length == T_ && f.max_predictions_per_seq == P_, "shard '", path,
                   "' has max_seq_length ", f.max_seq_length, " and max_predictions_per_seq ",
                   f.max_predictions_per_seq, ", the shards before it ", T_, " and ", P_);
    auto cat = [](auto& dst, const auto& src) { dst.insert(dst.end(), src.begin(), src.end()); };
    cat(data_.input_ids, f.input_ids);
    cat(data_.input_mask, f.input_mask);
    cat(data_.segment_ids, f.segment_ids);
    cat(data_.masked_lm_positions, f.masked_lm_positions);
    cat(data_.masked_lm_ids, f.masked_lm_ids);
    cat(data_.next_sentence_labels, f.next_sentence_labels);
  }
  num_samples_ = data_.size();
  BERTRAIN_CHECK(num_samples_ >= global_batch_size(), "'", opt_.input_dir, "' holds ", num_samples_,
                 " samples, fewer than one global batch of ", global_batch_size(), " (world_size ", opt_.world_size,
                 " x grad_accum_steps ", opt_.grad_accum_steps, " x micro_batch_size ", opt_.micro_batch_size, ")");
  if (opt_.dynamic_masking)
    for (int32_t id : data_.input_ids)
      BERTRAIN_CHECK(id >= 0 && static_cast<size_t>(id) < opt_.vocab->size(), "'", opt_.input_dir, "': token id ", id,
                     " outside the vocab of ", opt_.vocab->size(), " given for dynamic masking");

  // Validate and normalise the start cursor.
  LoaderCursor c = start;
  const RngState fresh = epoch_rng(opt_.seed, c.epoch).state();
  if (c.shuffle_rng == RngState{}) c.shuffle_rng = fresh;  // a default cursor: start of its epoch
  BERTRAIN_CHECK(c.shuffle_rng == fresh, "loader cursor was saved with a different seed (or is corrupt): its shuffle ",
                 "generator state does not match seed ", opt_.seed, " at epoch ", c.epoch);
  BERTRAIN_CHECK(c.epoch >= 0 && c.position >= 0 && c.position <= steps_per_epoch() * opt_.grad_accum_steps,
                 "loader cursor (epoch ", c.epoch, ", position ", c.position, ") is outside an epoch of ",
                 steps_per_epoch() * opt_.grad_accum_steps, " micro-batches");
  if (c.position == steps_per_epoch() * opt_.grad_accum_steps) c = advance(LoaderCursor{c.epoch, c.position - 1, c.shuffle_rng});
  consumer_ = producer_ = c;
  if (opt_.prefetch > 0) thread_ = std::thread([this] { producer_loop(); });
}

PretrainingLoader::~PretrainingLoader() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

int64_t PretrainingLoader::global_batch_size() const {
  return opt_.world_size * opt_.grad_accum_steps * opt_.micro_batch_size;
}

int64_t PretrainingLoader::steps_per_epoch() const { return num_samples_ / global_batch_size(); }

LoaderCursor PretrainingLoader::advance(const LoaderCursor& c) const {
  LoaderCursor n = c;
  if (++n.position >= steps_per_epoch() * opt_.grad_accum_steps) {
    ++n.epoch;
    n.position = 0;
    n.shuffle_rng = epoch_rng(opt_.seed, n.epoch).state();
  }
  return n;
}

void fill_pretraining_batch(const PretrainingFeatures& f, std::span<const int64_t> samples, PretrainingBatch& b) {
  const int64_t B = static_cast<int64_t>(samples.size()), T = f.max_seq_length, P = f.max_predictions_per_seq;
  BERTRAIN_CHECK(B > 0, "fill_pretraining_batch: no samples");
  b.input_ids = Tensor::empty({B, T}, DType::i32);
  b.token_type_ids = Tensor::empty({B, T}, DType::i32);
  b.attention_mask = Tensor::empty({B, T}, DType::i32);
  b.masked_lm_positions = Tensor::empty({B, P}, DType::i32);
  b.masked_lm_ids = Tensor::empty({B, P}, DType::i32);
  b.masked_lm_weights = Tensor::empty({B, P}, DType::f32);
  b.next_sentence_labels = Tensor::empty({B}, DType::i32);
  int32_t* ids = b.input_ids.data<int32_t>();
  int32_t* tt = b.token_type_ids.data<int32_t>();
  int32_t* am = b.attention_mask.data<int32_t>();
  int32_t* pos = b.masked_lm_positions.data<int32_t>();
  int32_t* mid = b.masked_lm_ids.data<int32_t>();
  float* w = b.masked_lm_weights.data<float>();
  int32_t* nsl = b.next_sentence_labels.data<int32_t>();
  for (int64_t r = 0; r < B; ++r) {
    const int64_t s = samples[static_cast<size_t>(r)];
    BERTRAIN_CHECK(s >= 0 && s < f.size(), "fill_pretraining_batch: sample ", s, " outside [0, ", f.size(), ")");
    const size_t src_t = static_cast<size_t>(s * T), src_p = static_cast<size_t>(s * P);
    for (int64_t t = 0; t < T; ++t) {
      ids[r * T + t] = f.input_ids[src_t + static_cast<size_t>(t)];
      tt[r * T + t] = f.segment_ids[src_t + static_cast<size_t>(t)];
      am[r * T + t] = f.input_mask[src_t + static_cast<size_t>(t)];
    }
    for (int64_t p = 0; p < P; ++p) {
      pos[r * P + p] = f.masked_lm_positions[src_p + static_cast<size_t>(p)];
      mid[r * P + p] = f.masked_lm_ids[src_p + static_cast<size_t>(p)];
      w[r * P + p] = pos[r * P + p] != 0 ? 1.0f : 0.0f;
    }
    nsl[r] = f.next_sentence_labels[static_cast<size_t>(s)];
  }
}

PretrainingBatch make_pretraining_batch(const PretrainingFeatures& f, int64_t begin, int64_t count) {
  std::vector<int64_t> samples(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) samples[static_cast<size_t>(i)] = begin + i;
  PretrainingBatch b;
  fill_pretraining_batch(f, samples, b);
  b.sample_index = std::move(samples);
  return b;
}

PretrainingBatch PretrainingLoader::make_batch(const LoaderCursor& at) {
  if (order_epoch_ != at.epoch) {
    order_ = epoch_order(opt_.seed, at.epoch, num_samples_);
    order_epoch_ = at.epoch;
  }
  const int64_t A = opt_.grad_accum_steps, B = opt_.micro_batch_size, T = T_, P = P_;
  PretrainingBatch b;
  b.epoch = at.epoch;
  b.step = at.position / A;
  b.micro_step = at.position % A;
  b.next = advance(at);
  b.sample_index = micro_batch_indices(order_, b.step, opt_.rank, b.micro_step, opt_.world_size, A, B);
  fill_pretraining_batch(data_, b.sample_index, b);
  int32_t* ids = b.input_ids.data<int32_t>();
  int32_t* am = b.attention_mask.data<int32_t>();
  int32_t* pos = b.masked_lm_positions.data<int32_t>();
  int32_t* mid = b.masked_lm_ids.data<int32_t>();
  float* w = b.masked_lm_weights.data<float>();
  for (int64_t r = 0; r < B; ++r) {
    const int64_t s = b.sample_index[static_cast<size_t>(r)];
    if (opt_.dynamic_masking) {
      // Restore the original tokens, then mask afresh with a generator keyed by (seed, epoch, sample).
      int64_t len = 0;
      while (len < T && am[r * T + len] != 0) ++len;
      std::vector<int32_t> tokens(ids + r * T, ids + r * T + len);
      for (int64_t p = 0; p < P; ++p)
        if (pos[r * P + p] != 0 && pos[r * P + p] < len) tokens[static_cast<size_t>(pos[r * P + p])] = mid[r * P + p];
      Rng rng(derive_seed(opt_.seed, kMaskTag, static_cast<uint64_t>(at.epoch)), static_cast<uint64_t>(s));
      MaskedLmPredictions m = create_masked_lm_predictions(tokens, opt_.masked_lm_prob, static_cast<int>(P),
                                                           opt_.do_whole_word_mask, *opt_.vocab, rng);
      std::copy(m.tokens.begin(), m.tokens.end(), ids + r * T);
      for (int64_t p = 0; p < P; ++p) {
        const bool real = p < static_cast<int64_t>(m.positions.size());
        pos[r * P + p] = real ? m.positions[static_cast<size_t>(p)] : 0;
        mid[r * P + p] = real ? m.labels[static_cast<size_t>(p)] : 0;
      }
    }
    for (int64_t p = 0; p < P; ++p) w[r * P + p] = pos[r * P + p] != 0 ? 1.0f : 0.0f;
  }
  return b;
}

void PretrainingLoader::producer_loop() {
  for (;;) {
    LoaderCursor at;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || static_cast<int64_t>(queue_.size()) < opt_.prefetch; });
      if (stop_ || error_) return;
      at = producer_;
    }
    try {
      PretrainingBatch b = make_batch(at);
      std::lock_guard<std::mutex> g(mu_);
      producer_ = b.next;
      queue_.push_back(std::move(b));
    } catch (...) {
      std::lock_guard<std::mutex> g(mu_);
      error_ = std::current_exception();
      cv_.notify_all();
      return;
    }
    cv_.notify_all();
  }
}

PretrainingBatch PretrainingLoader::next() {
  if (opt_.prefetch == 0) {
    PretrainingBatch b = make_batch(consumer_);
    consumer_ = b.next;
    return b;
  }
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return !queue_.empty() || error_; });
  if (queue_.empty() && error_) std::rethrow_exception(error_);
  PretrainingBatch b = std::move(queue_.front());
  queue_.pop_front();
  consumer_ = b.next;
  lk.unlock();
  cv_.notify_all();
  return b;
}

LoaderCursor PretrainingLoader::cursor() const {
  std::lock_guard<std::mutex> g(mu_);
  return consumer_;
}

}  // namespace bertrain::data
