// loader.cpp: PretrainingLoader: the two-level epoch order from keyed Philox streams, rank/micro-batch dealing,
// windows of shards read on demand (and one ahead) keeping only this rank's rows, optional dynamic masking, and a
// bounded prefetch queue filled by one background thread.
#include "bertrain/data/loader.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <future>
#include <limits>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <numeric>
#include <thread>
#include <type_traits>

#include "bertrain/data/hdf5_shard.h"
#include "core/json_number.h"

namespace bertrain::data {
namespace {

// Independent seeds per purpose, derived from the user's seed with one Philox block.
constexpr uint64_t kShuffleTag = 0x5348554646ull;  // "SHUFF": the epoch's shard permutation (and cursor check)
constexpr uint64_t kWindowTag = 0x57494e444full;   // "WINDO": the sample permutation of (epoch, window)
constexpr uint64_t kMaskTag = 0x4d41534bull;       // "MASK"

uint64_t derive_seed(uint64_t seed, uint64_t tag, uint64_t index) {
  auto w = philox_keyed(seed, tag, index);
  return (static_cast<uint64_t>(w[0]) << 32) | w[1];
}

void fisher_yates(std::vector<int64_t>& v, Rng& rng) {
  for (size_t i = v.size(); i-- > 1;) std::swap(v[i], v[static_cast<size_t>(rng.randint(i + 1))]);
}

std::vector<int64_t> prefix_sums(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> off(sizes.size() + 1, 0);
  for (size_t i = 0; i < sizes.size(); ++i) off[i + 1] = off[i] + sizes[i];
  return off;
}

// Copies row `src` of `f` into row `dst` of `to` (same T and P).
void copy_row(const PretrainingFeatures& f, int64_t src, PretrainingFeatures& to, int64_t dst) {
  const int64_t T = f.max_seq_length, P = f.max_predictions_per_seq;
  std::copy_n(f.input_ids.begin() + src * T, T, to.input_ids.begin() + dst * T);
  std::copy_n(f.input_mask.begin() + src * T, T, to.input_mask.begin() + dst * T);
  std::copy_n(f.segment_ids.begin() + src * T, T, to.segment_ids.begin() + dst * T);
  std::copy_n(f.masked_lm_positions.begin() + src * P, P, to.masked_lm_positions.begin() + dst * P);
  std::copy_n(f.masked_lm_ids.begin() + src * P, P, to.masked_lm_ids.begin() + dst * P);
  to.next_sentence_labels[static_cast<size_t>(dst)] = f.next_sentence_labels[static_cast<size_t>(src)];
}

}  // namespace

void LoaderOptions::validate() const {
  BERTRAIN_CHECK(micro_batch_size >= 1, "micro_batch_size must be >= 1, got ", micro_batch_size);
  BERTRAIN_CHECK(grad_accum_steps >= 1, "grad_accum_steps must be >= 1, got ", grad_accum_steps);
  BERTRAIN_CHECK(world_size >= 1, "world_size must be >= 1, got ", world_size);
  BERTRAIN_CHECK(rank >= 0 && rank < world_size, "rank ", rank, " outside [0, world_size=", world_size, ")");
  BERTRAIN_CHECK(window_shards >= 1, "window_shards must be >= 1, got ", window_shards);
  BERTRAIN_CHECK(prefetch >= 0, "prefetch must be >= 0, got ", prefetch);
  BERTRAIN_CHECK(!dynamic_masking || vocab, "dynamic masking needs the vocab");
  BERTRAIN_CHECK(!dynamic_masking || (masked_lm_prob > 0 && masked_lm_prob <= 1), "masked_lm_prob must be in (0, 1], got ",
                 masked_lm_prob);
}

std::string LoaderCursor::to_json() const {
  nlohmann::ordered_json j;
  j["epoch"] = epoch;
  j["sample"] = sample;
  j["micro"] = micro;
  j["rng"] = {{"seed", shuffle_rng.seed}, {"stream", shuffle_rng.stream}, {"counter", shuffle_rng.counter},
              {"used", shuffle_rng.used}};
  return j.dump();
}

LoaderCursor LoaderCursor::from_json(const std::string& text) {
  LoaderCursor c;
  try {
    auto j = nlohmann::json::parse(text);
    // not get<T>(): a float out of T's range would be undefined behaviour there (core/json_number.h)
    auto integer = [&](const nlohmann::json& obj, const char* key, auto& out) {
      BERTRAIN_CHECK(bertrain::detail::json_to_integer(obj.at(key), out), "loader cursor: \"", key,
                     "\" must be an integer from ", +std::numeric_limits<std::decay_t<decltype(out)>>::min(), " to ",
                     +std::numeric_limits<std::decay_t<decltype(out)>>::max(), ", got ", obj.at(key).dump());
    };
    integer(j, "epoch", c.epoch);
    if (j.contains("position") && !j.contains("sample")) {
      integer(j, "position", c.legacy_position);
    } else {
      integer(j, "sample", c.sample);
      integer(j, "micro", c.micro);
    }
    const auto& r = j.at("rng");
    integer(r, "seed", c.shuffle_rng.seed);
    integer(r, "stream", c.shuffle_rng.stream);
    integer(r, "counter", c.shuffle_rng.counter);
    integer(r, "used", c.shuffle_rng.used);
  } catch (const nlohmann::json::exception& e) {
    BERTRAIN_CHECK(false, "loader cursor: malformed JSON (", e.what(), "): ", text);
  }
  BERTRAIN_CHECK(c.epoch >= 0 && c.sample >= 0 && c.micro >= 0, "loader cursor: negative field in ", text);
  return c;
}

// ------------------------------------------------------------------------------------------------- the order

int64_t EpochPlan::window_of(int64_t position) const {
  BERTRAIN_ASSERT(position >= 0 && position < window_begin.back(), "position ", position, " outside the epoch");
  return static_cast<int64_t>(std::upper_bound(window_begin.begin(), window_begin.end(), position) -
                              window_begin.begin()) - 1;
}

Rng PretrainingLoader::epoch_rng(uint64_t seed, int64_t epoch) {
  return Rng(derive_seed(seed, kShuffleTag, 0), static_cast<uint64_t>(epoch));
}

EpochPlan PretrainingLoader::epoch_plan(uint64_t seed, int64_t epoch, const std::vector<int64_t>& sizes, int64_t W) {
  BERTRAIN_CHECK(W >= 1, "window_shards must be >= 1, got ", W);
  EpochPlan p;
  p.window_shards = W;
  p.shard_order.resize(sizes.size());
  std::iota(p.shard_order.begin(), p.shard_order.end(), int64_t{0});
  Rng rng = epoch_rng(seed, epoch);
  fisher_yates(p.shard_order, rng);
  int64_t pos = 0;
  for (size_t i = 0; i < p.shard_order.size(); ++i) {
    if (i % static_cast<size_t>(W) == 0) p.window_begin.push_back(pos);
    pos += sizes[static_cast<size_t>(p.shard_order[i])];
  }
  p.window_begin.push_back(pos);
  return p;
}

std::vector<int64_t> PretrainingLoader::window_order(uint64_t seed, int64_t epoch, int64_t window, const EpochPlan& plan,
                                                     const std::vector<int64_t>& sizes) {
  BERTRAIN_ASSERT(window >= 0 && window < plan.num_windows());
  const std::vector<int64_t> offsets = prefix_sums(sizes);
  std::vector<int64_t> order;
  order.reserve(static_cast<size_t>(plan.window_begin[window + 1] - plan.window_begin[window]));
  const size_t first = static_cast<size_t>(window * plan.window_shards);
  const size_t last = std::min(plan.shard_order.size(), first + static_cast<size_t>(plan.window_shards));
  for (size_t i = first; i < last; ++i) {
    const size_t s = static_cast<size_t>(plan.shard_order[i]);
    for (int64_t r = 0; r < sizes[s]; ++r) order.push_back(offsets[s] + r);
  }
  Rng rng(derive_seed(seed, kWindowTag, static_cast<uint64_t>(epoch)), static_cast<uint64_t>(window));
  fisher_yates(order, rng);
  return order;
}

std::vector<int64_t> PretrainingLoader::epoch_order(uint64_t seed, int64_t epoch, const std::vector<int64_t>& sizes,
                                                    int64_t W) {
  const EpochPlan plan = epoch_plan(seed, epoch, sizes, W);
  std::vector<int64_t> order;
  for (int64_t j = 0; j < plan.num_windows(); ++j) {
    std::vector<int64_t> w = window_order(seed, epoch, j, plan, sizes);
    order.insert(order.end(), w.begin(), w.end());
  }
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

// ------------------------------------------------------------------------------------------------- batches

namespace {

// A batch's tensors allocated at (B, T) and (B, P), with their data pointers; copy() fills row r from sample
// `slot` of a features table (the masked-LM weight 1 where a position is set).
struct BatchRows {
  int64_t T, P;
  int32_t *ids, *tt, *am, *pos, *mid, *nsl;
  float* w;
  BatchRows(PretrainingBatch& b, int64_t B, int64_t t, int64_t p) : T(t), P(p) {
    b.input_ids = Tensor::empty({B, T}, DType::i32);
    b.token_type_ids = Tensor::empty({B, T}, DType::i32);
    b.attention_mask = Tensor::empty({B, T}, DType::i32);
    b.masked_lm_positions = Tensor::empty({B, P}, DType::i32);
    b.masked_lm_ids = Tensor::empty({B, P}, DType::i32);
    b.masked_lm_weights = Tensor::empty({B, P}, DType::f32);
    b.next_sentence_labels = Tensor::empty({B}, DType::i32);
    ids = b.input_ids.data<int32_t>();
    tt = b.token_type_ids.data<int32_t>();
    am = b.attention_mask.data<int32_t>();
    pos = b.masked_lm_positions.data<int32_t>();
    mid = b.masked_lm_ids.data<int32_t>();
    w = b.masked_lm_weights.data<float>();
    nsl = b.next_sentence_labels.data<int32_t>();
  }
  void copy(int64_t r, const PretrainingFeatures& f, int64_t slot) {
    const size_t src_t = static_cast<size_t>(slot * T), src_p = static_cast<size_t>(slot * P);
    std::copy_n(f.input_ids.begin() + static_cast<std::ptrdiff_t>(src_t), T, ids + r * T);
    std::copy_n(f.segment_ids.begin() + static_cast<std::ptrdiff_t>(src_t), T, tt + r * T);
    std::copy_n(f.input_mask.begin() + static_cast<std::ptrdiff_t>(src_t), T, am + r * T);
    std::copy_n(f.masked_lm_positions.begin() + static_cast<std::ptrdiff_t>(src_p), P, pos + r * P);
    std::copy_n(f.masked_lm_ids.begin() + static_cast<std::ptrdiff_t>(src_p), P, mid + r * P);
    for (int64_t p = 0; p < P; ++p) w[r * P + p] = pos[r * P + p] != 0 ? 1.0f : 0.0f;
    nsl[r] = f.next_sentence_labels[static_cast<size_t>(slot)];
  }
};

}  // namespace

void fill_pretraining_batch(const PretrainingFeatures& f, std::span<const int64_t> samples, PretrainingBatch& b) {
  const int64_t B = static_cast<int64_t>(samples.size());
  BERTRAIN_CHECK(B > 0, "fill_pretraining_batch: no samples");
  BatchRows rows(b, B, f.max_seq_length, f.max_predictions_per_seq);
  for (int64_t r = 0; r < B; ++r) {
    const int64_t s = samples[static_cast<size_t>(r)];
    BERTRAIN_CHECK(s >= 0 && s < f.size(), "fill_pretraining_batch: sample ", s, " outside [0, ", f.size(), ")");
    rows.copy(r, f, s);
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

// ------------------------------------------------------------------------------------------------- the loader

namespace {

/// The rows of one window that this rank reads.
struct Window {
  int64_t begin = 0, end = 0;   // positions [begin, end) of the epoch's order
  std::vector<int64_t> order;   // (end - begin) dataset indices
  std::vector<int32_t> slot;    // (end - begin) row of `rows`, -1 where another rank reads the position
  PretrainingFeatures rows;
  std::atomic<int64_t>* counter = nullptr;  // bytes held by all windows (the loader's)
  int64_t bytes = 0;
  ~Window() {
    if (counter) *counter -= bytes;
  }
};
using WindowPtr = std::shared_ptr<const Window>;
using WindowKey = std::pair<int64_t, int64_t>;  // (epoch, window)

}  // namespace

struct PretrainingLoader::Impl {
  LoaderOptions opt;
  std::vector<std::string> shards;
  std::vector<int64_t> sizes, offsets;
  int64_t N = 0, T = 0, P = 0, G = 0, steps = 0;

  std::atomic<int64_t> held_bytes{0}, peak_bytes{0};
  // Producer side (the background thread, or the caller with prefetch 0): epoch plans and the window cache.
  std::map<int64_t, std::shared_ptr<const EpochPlan>> plans;
  std::map<WindowKey, std::shared_future<WindowPtr>> windows;

  LoaderCursor consumer;  // next batch to hand out
  LoaderCursor producer;  // next batch to prepare
  mutable std::mutex mu;
  std::condition_variable cv;
  std::deque<PretrainingBatch> queue;
  std::exception_ptr error;
  bool stop = false;
  double wait_seconds = 0;
  std::thread thread;

  explicit Impl(LoaderOptions o) : opt(std::move(o)) {}

  LoaderCursor advance(const LoaderCursor& c) const {
    LoaderCursor n = c;
    if (++n.micro == opt.grad_accum_steps) {
      n.micro = 0;
      n.sample += G;
      if (n.sample >= steps * G) {
        ++n.epoch;
        n.sample = 0;
        n.shuffle_rng = epoch_rng(opt.seed, n.epoch).state();
      }
    }
    return n;
  }

  const EpochPlan& plan(int64_t epoch) {
    auto it = plans.find(epoch);
    if (it == plans.end()) {
      while (plans.size() >= 2) plans.erase(plans.begin());
      it = plans.emplace(epoch, std::make_shared<const EpochPlan>(epoch_plan(opt.seed, epoch, sizes, opt.window_shards)))
               .first;
    }
    return *it->second;
  }

  /// Reads window `j` of `epoch`: the shards holding rows this rank's micro-batches use, keeping those rows.
  WindowPtr load_window(int64_t epoch, int64_t j, std::shared_ptr<const EpochPlan> p) {
    auto w = std::make_shared<Window>();
    w->begin = p->window_begin[j];
    w->end = p->window_begin[j + 1];
    w->order = window_order(opt.seed, epoch, j, *p, sizes);
    w->slot.assign(static_cast<size_t>(w->end - w->begin), -1);
    const int64_t A = opt.grad_accum_steps, B = opt.micro_batch_size;
    std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> need;  // shard -> (row in shard, slot)
    int64_t count = 0;
    for (int64_t q = w->begin; q < std::min(w->end, steps * G); ++q) {
      if ((q % G) / B / A != opt.rank) continue;  // block k = (q mod G) / B belongs to rank k / A
      const int64_t d = w->order[static_cast<size_t>(q - w->begin)];
      const int64_t s = std::upper_bound(offsets.begin(), offsets.end(), d) - offsets.begin() - 1;
      w->slot[static_cast<size_t>(q - w->begin)] = static_cast<int32_t>(count);
      need[s].emplace_back(d - offsets[static_cast<size_t>(s)], count++);
    }
    w->rows = PretrainingFeatures(T, P);
    w->rows.input_ids.resize(static_cast<size_t>(count * T));
    w->rows.input_mask.resize(static_cast<size_t>(count * T));
    w->rows.segment_ids.resize(static_cast<size_t>(count * T));
    w->rows.masked_lm_positions.resize(static_cast<size_t>(count * P));
    w->rows.masked_lm_ids.resize(static_cast<size_t>(count * P));
    w->rows.next_sentence_labels.resize(static_cast<size_t>(count));
    for (const auto& [s, rows] : need) {
      const std::string& path = shards[static_cast<size_t>(s)];
      const PretrainingFeatures f = read_pretraining_shard(path);
      BERTRAIN_CHECK(f.size() == sizes[static_cast<size_t>(s)] && f.max_seq_length == T && f.max_predictions_per_seq == P,
                     "shard '", path, "' changed while training: it held ", sizes[static_cast<size_t>(s)],
                     " samples of length ", T, " with ", P, " predictions when the run started, now ", f.size(), ", ",
                     f.max_seq_length, " and ", f.max_predictions_per_seq);
      if (opt.dynamic_masking)
        for (const auto& [row, slot] : rows)
          for (int64_t t = 0; t < T; ++t) {
            const int32_t id = f.input_ids[static_cast<size_t>(row * T + t)];
            BERTRAIN_CHECK(id >= 0 && static_cast<size_t>(id) < opt.vocab->size(), "shard '", path, "' sample ", row,
                           ": token id ", id, " outside the vocab of ", opt.vocab->size(), " given for dynamic masking");
          }
      for (const auto& [row, slot] : rows) copy_row(f, row, w->rows, slot);
    }
    w->bytes = static_cast<int64_t>(w->order.size() * sizeof(int64_t) + w->slot.size() * sizeof(int32_t)) +
               count * (6 * T + 8 * P + 1);
    w->counter = &held_bytes;
    const int64_t now = held_bytes += w->bytes;
    int64_t peak = peak_bytes.load();
    while (now > peak && !peak_bytes.compare_exchange_weak(peak, now)) {
    }
    return w;
  }

  /// Starts reading window (epoch, j) unless it is cached or being read: on its own thread when prefetching.
  void request(int64_t epoch, int64_t j) {
    const WindowKey key{epoch, j};
    if (windows.count(key)) return;
    plan(epoch);
    std::shared_ptr<const EpochPlan> p = plans.at(epoch);
    if (opt.prefetch == 0) {
      std::promise<WindowPtr> done;
      done.set_value(load_window(epoch, j, p));
      windows.emplace(key, done.get_future().share());
    } else {
      windows.emplace(key, std::async(std::launch::async, [this, epoch, j, p] { return load_window(epoch, j, p); }).share());
    }
  }

  /// Windows of `epoch` that hold positions of the epoch's steps (later ones only hold the unused tail).
  int64_t used_windows(int64_t epoch) { return plan(epoch).window_of(steps * G - 1) + 1; }

  PretrainingBatch make_batch(const LoaderCursor& at) {
    const int64_t A = opt.grad_accum_steps, B = opt.micro_batch_size;
    PretrainingBatch b;
    b.epoch = at.epoch;
    b.step = at.sample / G;
    b.micro_step = at.micro;
    b.next = advance(at);
    BatchRows rows(b, B, T, P);
    int32_t* ids = rows.ids;
    int32_t* am = rows.am;
    int32_t* pos = rows.pos;
    int32_t* mid = rows.mid;
    float* w = rows.w;

    const EpochPlan& pl = plan(at.epoch);
    const int64_t first = at.sample + (opt.rank * A + at.micro) * B;
    const int64_t w_first = pl.window_of(first), w_last = pl.window_of(first + B - 1);
    // Windows behind this batch are done with; the window after it is read ahead (on its own thread).
    while (!windows.empty() && windows.begin()->first < WindowKey{at.epoch, w_first}) windows.erase(windows.begin());
    for (int64_t j = w_first; j <= w_last; ++j) request(at.epoch, j);
    if (opt.prefetch > 0) {
      if (w_last + 1 < used_windows(at.epoch)) {
        request(at.epoch, w_last + 1);
      } else {
        request(at.epoch + 1, 0);
      }
    }
    b.sample_index.resize(static_cast<size_t>(B));
    for (int64_t r = 0; r < B; ++r) {
      const int64_t q = first + r;
      const WindowPtr win = windows.at({at.epoch, pl.window_of(q)}).get();  // rethrows a read error
      const int32_t slot = win->slot[static_cast<size_t>(q - win->begin)];
      BERTRAIN_ASSERT(slot >= 0, "position ", q, " of epoch ", at.epoch, " is not this rank's");
      b.sample_index[static_cast<size_t>(r)] = win->order[static_cast<size_t>(q - win->begin)];
      rows.copy(r, win->rows, slot);
    }
    for (int64_t r = 0; r < B; ++r) {
      const int64_t s = b.sample_index[static_cast<size_t>(r)];
      if (opt.dynamic_masking) {
        // Restore the original tokens, then mask afresh with a generator keyed by (seed, epoch, sample).
        int64_t len = 0;
        while (len < T && am[r * T + len] != 0) ++len;
        std::vector<int32_t> tokens(ids + r * T, ids + r * T + len);
        for (int64_t p = 0; p < P; ++p)
          if (pos[r * P + p] != 0 && pos[r * P + p] < len) tokens[static_cast<size_t>(pos[r * P + p])] = mid[r * P + p];
        Rng rng(derive_seed(opt.seed, kMaskTag, static_cast<uint64_t>(at.epoch)), static_cast<uint64_t>(s));
        MaskedLmPredictions m = create_masked_lm_predictions(tokens, opt.masked_lm_prob, static_cast<int>(P),
                                                             opt.do_whole_word_mask, *opt.vocab, rng);
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

  void producer_loop() {
    for (;;) {
      LoaderCursor at;
      {
        std::unique_lock<std::mutex> lk(mu);
        cv.wait(lk, [&] { return stop || static_cast<int64_t>(queue.size()) < opt.prefetch; });
        if (stop || error) return;
        at = producer;
      }
      try {
        PretrainingBatch b = make_batch(at);
        std::lock_guard<std::mutex> g(mu);
        producer = b.next;
        queue.push_back(std::move(b));
      } catch (...) {
        std::lock_guard<std::mutex> g(mu);
        error = std::current_exception();
        cv.notify_all();
        return;
      }
      cv.notify_all();
    }
  }
};

PretrainingLoader::PretrainingLoader(LoaderOptions options, const LoaderCursor& start)
    : impl_(std::make_unique<Impl>(std::move(options))) {
  Impl& m = *impl_;
  m.opt.validate();
  m.shards = list_training_shards(m.opt.input_dir);
  for (const auto& path : m.shards) {
    const ShardInfo info = inspect_pretraining_shard(path);
    if (m.T == 0) {
      m.T = info.max_seq_length;
      m.P = info.max_predictions_per_seq;
    }
    BERTRAIN_CHECK(info.max_seq_length == m.T && info.max_predictions_per_seq == m.P, "shard '", path,
                   "' has max_seq_length ", info.max_seq_length, " and max_predictions_per_seq ",
                   info.max_predictions_per_seq, ", the shards before it ", m.T, " and ", m.P);
    m.sizes.push_back(info.num_samples);
  }
  m.offsets = prefix_sums(m.sizes);
  m.N = m.offsets.back();
  m.G = global_batch_size();
  BERTRAIN_CHECK(m.N >= m.G, "'", m.opt.input_dir, "' holds ", m.N, " samples, fewer than one global batch of ", m.G,
                 " (world_size ", m.opt.world_size, " x grad_accum_steps ", m.opt.grad_accum_steps, " x micro_batch_size ",
                 m.opt.micro_batch_size, ")");
  m.steps = m.N / m.G;

  // Validate and normalise the start cursor.
  LoaderCursor c = start;
  BERTRAIN_CHECK(c.legacy_position < 0, "loader cursor (epoch ", c.epoch, ", position ", c.legacy_position,
                 ") was written before the streaming loader; convert it first (PretrainTrainer does)");
  const RngState fresh = epoch_rng(m.opt.seed, c.epoch).state();
  if (c.shuffle_rng == RngState{}) c.shuffle_rng = fresh;  // a default cursor: start of its epoch
  BERTRAIN_CHECK(c.shuffle_rng == fresh, "loader cursor was saved with a different seed (or is corrupt): its shuffle ",
                 "generator state does not match seed ", m.opt.seed, " at epoch ", c.epoch);
  BERTRAIN_CHECK(c.sample % m.G == 0 && c.sample <= m.steps * m.G && c.micro < m.opt.grad_accum_steps &&
                     (c.micro == 0 || c.sample < m.steps * m.G),
                 "loader cursor (epoch ", c.epoch, ", sample ", c.sample, ", micro-batch ", c.micro,
                 ") does not fit this run: an epoch here is ", m.steps, " global batches of ", m.G, " samples with ",
                 m.opt.grad_accum_steps, " micro-batches per rank (resume with the same global batch size and the same "
                 "shards)");
  if (c.sample == m.steps * m.G) c = LoaderCursor{c.epoch + 1, 0, 0, epoch_rng(m.opt.seed, c.epoch + 1).state()};
  m.consumer = m.producer = c;
  if (m.opt.prefetch > 0) m.thread = std::thread([&m] { m.producer_loop(); });
}

PretrainingLoader::~PretrainingLoader() {
  {
    std::lock_guard<std::mutex> g(impl_->mu);
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

int64_t PretrainingLoader::num_samples() const { return impl_->N; }
int64_t PretrainingLoader::num_shards() const { return static_cast<int64_t>(impl_->shards.size()); }
int64_t PretrainingLoader::max_seq_length() const { return impl_->T; }
int64_t PretrainingLoader::max_predictions_per_seq() const { return impl_->P; }
int64_t PretrainingLoader::global_batch_size() const {
  return impl_->opt.world_size * impl_->opt.grad_accum_steps * impl_->opt.micro_batch_size;
}
int64_t PretrainingLoader::steps_per_epoch() const { return impl_->steps; }
int64_t PretrainingLoader::window_bytes() const { return impl_->held_bytes.load(); }
int64_t PretrainingLoader::peak_window_bytes() const { return impl_->peak_bytes.load(); }

double PretrainingLoader::take_wait_seconds() {
  std::lock_guard<std::mutex> g(impl_->mu);
  const double w = impl_->wait_seconds;
  impl_->wait_seconds = 0;
  return w;
}

PretrainingBatch PretrainingLoader::next() {
  Impl& m = *impl_;
  const auto t0 = std::chrono::steady_clock::now();
  auto waited = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  if (m.opt.prefetch == 0) {
    PretrainingBatch b = m.make_batch(m.consumer);
    std::lock_guard<std::mutex> g(m.mu);
    m.consumer = b.next;
    m.wait_seconds += waited();
    return b;
  }
  std::unique_lock<std::mutex> lk(m.mu);
  m.cv.wait(lk, [&] { return !m.queue.empty() || m.error; });
  m.wait_seconds += waited();
  if (m.queue.empty() && m.error) std::rethrow_exception(m.error);
  PretrainingBatch b = std::move(m.queue.front());
  m.queue.pop_front();
  m.consumer = b.next;
  lk.unlock();
  m.cv.notify_all();
  return b;
}

LoaderCursor PretrainingLoader::cursor() const {
  std::lock_guard<std::mutex> g(impl_->mu);
  return impl_->consumer;
}

}  // namespace bertrain::data
