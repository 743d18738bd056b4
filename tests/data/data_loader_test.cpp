// data_loader_test.cpp: the pretraining loader: the two-level order (shards, then samples in windows of shards),
// exact resume from a saved cursor (across window boundaries, with another rank count), rank/micro-batch dealing
// equivalence, unequal shards over ranks (CASES.md C41), bounded memory, a shard lost mid-run, loss weights (C10),
// dynamic masking keyed by (seed, epoch, sample).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "bertrain/core/error.h"
#include "bertrain/data/hdf5_shard.h"
#include "bertrain/data/loader.h"
#include "bertrain/data/synthetic.h"

using namespace bertrain;
using namespace bertrain::data;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kT = 16, kP = 4;

std::shared_ptr<PretrainingVocab> test_vocab() {
  std::vector<std::string> t = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  for (int i = 0; i < 300; ++i) t.push_back((i % 4 == 3 ? "##t" : "t") + std::to_string(i));
  return std::make_shared<PretrainingVocab>(t);
}

// Shards of the given sizes in `dir`. Sample s (dataset index, in file order) has input_ids[1] == 100 + s (unmasked)
// so rows can be traced back; each has 2 masked positions.
void write_shards(const fs::path& dir, const std::vector<int>& sizes) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  Rng rng(3);
  int64_t s = 0;
  for (size_t shard = 0; shard < sizes.size(); ++shard) {
    PretrainingFeatures f(kT, kP);
    for (int i = 0; i < sizes[shard]; ++i, ++s) {
      TrainingInstance inst;
      const int len = 8 + static_cast<int>(rng.randint(kT - 7));
      inst.tokens.push_back(2);
      inst.tokens.push_back(static_cast<int32_t>(100 + s));
      while (static_cast<int>(inst.tokens.size()) < len - 1) inst.tokens.push_back(5 + static_cast<int32_t>(rng.randint(300)));
      inst.tokens.push_back(3);
      inst.segment_ids.assign(inst.tokens.size(), 0);
      for (size_t k = inst.tokens.size() / 2; k < inst.tokens.size(); ++k) inst.segment_ids[k] = 1;
      for (int32_t p : {2, 4}) {
        inst.masked_lm_positions.push_back(p);
        inst.masked_lm_labels.push_back(inst.tokens[static_cast<size_t>(p)]);
        inst.tokens[static_cast<size_t>(p)] = 4;
      }
      inst.is_random_next = s % 3 == 0;
      f.append(inst);
    }
    char name[64];
    std::snprintf(name, sizeof name, "part-%05zu-training.hdf5", shard);
    write_pretraining_shard((dir / name).string(), f);
  }
}

// Two shards (50 + 37 samples).
struct ShardDir {
  fs::path dir;
  ShardDir() {
    dir = fs::temp_directory_path() / ("bertrain_loader_" + std::to_string(::getpid()));
    write_shards(dir, {50, 37});
  }
  ~ShardDir() { fs::remove_all(dir); }
};

ShardDir& shards() {
  static ShardDir d;
  return d;
}

LoaderOptions options(int64_t B, int64_t A, int64_t R = 1, int64_t rank = 0) {
  LoaderOptions o;
  o.input_dir = shards().dir.string();
  o.micro_batch_size = B;
  o.grad_accum_steps = A;
  o.world_size = R;
  o.rank = rank;
  o.seed = 77;
  return o;
}

void expect_same(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.shape(), b.shape());
  ASSERT_EQ(a.dtype(), b.dtype());
  EXPECT_EQ(a.to_vector(), b.to_vector());
}

void expect_same(const PretrainingBatch& a, const PretrainingBatch& b) {
  EXPECT_EQ(a.sample_index, b.sample_index);
  EXPECT_EQ(a.epoch, b.epoch);
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.micro_step, b.micro_step);
  expect_same(a.input_ids, b.input_ids);
  expect_same(a.token_type_ids, b.token_type_ids);
  expect_same(a.attention_mask, b.attention_mask);
  expect_same(a.masked_lm_positions, b.masked_lm_positions);
  expect_same(a.masked_lm_ids, b.masked_lm_ids);
  expect_same(a.masked_lm_weights, b.masked_lm_weights);
  expect_same(a.next_sentence_labels, b.next_sentence_labels);
}

}  // namespace

TEST(Loader, BatchesCarryTheRightRows) {
  PretrainingLoader L(options(4, 2));
  EXPECT_EQ(L.num_samples(), 87);
  EXPECT_EQ(L.steps_per_epoch(), 10);  // floor(87 / 8)
  PretrainingBatch b = L.next();
  EXPECT_EQ(b.input_ids.shape(), (Shape{4, kT}));
  EXPECT_EQ(b.masked_lm_weights.dtype(), DType::f32);
  EXPECT_EQ(b.next_sentence_labels.shape(), (Shape{4}));
  for (int r = 0; r < 4; ++r) {
    const int64_t s = b.sample_index[static_cast<size_t>(r)];
    EXPECT_EQ(b.input_ids.get(r * kT + 1), 100 + s);
    EXPECT_EQ(b.input_ids.get(r * kT + 2), 4);  // stored [MASK]
    EXPECT_EQ(b.next_sentence_labels.get(r), s % 3 == 0 ? 1 : 0);
    EXPECT_EQ(b.attention_mask.get(r * kT), 1);
    // C10 weights: 1 for the two real slots, 0 for padding (position 0).
    EXPECT_EQ(b.masked_lm_weights.get(r * kP + 0), 1.0);
    EXPECT_EQ(b.masked_lm_weights.get(r * kP + 1), 1.0);
    EXPECT_EQ(b.masked_lm_weights.get(r * kP + 2), 0.0);
    EXPECT_EQ(b.masked_lm_positions.get(r * kP + 3), 0);
  }
}

TEST(Loader, C10MaskedLmLossWithDerivedWeights) {
  // loss = sum(w * ce) / (sum(w) + 1e-5) with ce 1 and 3 on two real slots and 18 padded slots.
  std::vector<double> ce(20, 7.0), w(20, 0.0);
  ce[0] = 1.0;
  ce[1] = 3.0;
  std::vector<int32_t> positions(20, 0);
  positions[0] = 3;
  positions[1] = 9;
  for (int i = 0; i < 20; ++i) w[i] = positions[i] != 0 ? 1.0 : 0.0;  // the loader's rule
  double num = 0, den = 0;
  for (int i = 0; i < 20; ++i) {
    num += w[i] * ce[i];
    den += w[i];
  }
  EXPECT_NEAR(num / (den + 1e-5), 1.99999, 1e-6 * 1.99999);
}

TEST(Loader, ResumeFromSavedCursorSeesTheSameBatches) {
  const int k = 27, more = 30;  // 20 micro-batches per epoch: both runs cross an epoch boundary
  std::vector<PretrainingBatch> straight;
  {
    PretrainingLoader L(options(4, 2));
    for (int i = 0; i < k + more; ++i) straight.push_back(L.next());
  }
  std::string saved;
  {
    PretrainingLoader L(options(4, 2));
    for (int i = 0; i < k; ++i) expect_same(L.next(), straight[static_cast<size_t>(i)]);
    saved = L.cursor().to_json();  // batches are prefetched beyond k; the cursor is still k
  }
  LoaderCursor c = LoaderCursor::from_json(saved);
  EXPECT_EQ(c.epoch, 1);   // 20 micro-batches per epoch: the 28th is epoch 1's 8th, step 3's second
  EXPECT_EQ(c.sample, 24);
  EXPECT_EQ(c.micro, 1);
  PretrainingLoader R(options(4, 2), c);
  for (int i = k; i < k + more; ++i) expect_same(R.next(), straight[static_cast<size_t>(i)]);
  // No prefetch thread: same batches.
  LoaderOptions o = options(4, 2);
  o.prefetch = 0;
  PretrainingLoader N(o, c);
  for (int i = k; i < k + 5; ++i) expect_same(N.next(), straight[static_cast<size_t>(i)]);
}

TEST(Loader, CursorFromAnotherSeedOrOutsideTheEpochIsRejected) {
  PretrainingLoader L(options(4, 2));
  L.next();
  LoaderCursor c = L.cursor();
  LoaderOptions o = options(4, 2);
  o.seed = 78;
  EXPECT_THROW(PretrainingLoader(o, c), Error);
  LoaderCursor far = c;
  far.sample = 1000;
  EXPECT_THROW(PretrainingLoader(options(4, 2), far), Error);
  LoaderCursor odd = c;
  odd.sample = 4;  // not at a multiple of G = 8
  EXPECT_THROW(PretrainingLoader(options(4, 2), odd), Error);
  LoaderCursor micro = c;
  micro.micro = 2;  // A = 2
  EXPECT_THROW(PretrainingLoader(options(4, 2), micro), Error);
  // A cursor written before the streaming loader is recognised, and the loader does not take it as it is.
  LoaderCursor legacy = LoaderCursor::from_json(
      "{\"epoch\": 1, \"position\": 6, \"rng\": {\"seed\": 1, \"stream\": 1, \"counter\": 0, \"used\": 0}}");
  EXPECT_EQ(legacy.legacy_position, 6);
  EXPECT_THROW(PretrainingLoader(options(4, 2), legacy), Error);
  EXPECT_THROW(LoaderCursor::from_json("{\"epoch\": 1}"), Error);
  EXPECT_THROW(PretrainingLoader(options(100, 1)), Error);  // 87 samples: not one global batch
}

TEST(Loader, RanksTimesMicroBatchesEqualOneRankTimesRA) {
  const int64_t R = 2, A = 2, B = 3;
  PretrainingLoader single(options(B, R * A, 1, 0));
  std::vector<std::unique_ptr<PretrainingLoader>> ranks;
  for (int64_t r = 0; r < R; ++r) ranks.push_back(std::make_unique<PretrainingLoader>(options(B, A, R, r)));
  const int64_t steps = single.steps_per_epoch();
  EXPECT_EQ(steps, 87 / 12);
  for (int64_t step = 0; step < 2 * steps + 1; ++step) {  // over two epoch boundaries
    std::vector<PretrainingBatch> one;
    for (int64_t k = 0; k < R * A; ++k) one.push_back(single.next());
    std::multiset<int64_t> union_ranks, union_single;
    for (int64_t r = 0; r < R; ++r)
      for (int64_t m = 0; m < A; ++m) {
        PretrainingBatch b = ranks[static_cast<size_t>(r)]->next();
        EXPECT_EQ(b.step, one[static_cast<size_t>(r * A + m)].step);
        expect_same(b.input_ids, one[static_cast<size_t>(r * A + m)].input_ids);  // block k = r*A + m
        union_ranks.insert(b.sample_index.begin(), b.sample_index.end());
      }
    for (const auto& b : one) union_single.insert(b.sample_index.begin(), b.sample_index.end());
    EXPECT_EQ(union_ranks, union_single);
    EXPECT_EQ(std::set<int64_t>(union_single.begin(), union_single.end()).size(), 12u);  // no repeats in a step
  }
}

TEST(Loader, EpochOrdersArePermutationsKeyedBySeedAndEpoch) {
  const std::vector<int64_t> sizes = {300, 200, 0, 250, 250};
  auto a = PretrainingLoader::epoch_order(5, 0, sizes, 2);
  auto b = PretrainingLoader::epoch_order(5, 1, sizes, 2);
  auto c = PretrainingLoader::epoch_order(6, 0, sizes, 2);
  EXPECT_EQ(a, PretrainingLoader::epoch_order(5, 0, sizes, 2));
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, PretrainingLoader::epoch_order(5, 0, sizes, 1));
  std::vector<int64_t> s = a;
  std::sort(s.begin(), s.end());
  for (int64_t i = 0; i < 1000; ++i) EXPECT_EQ(s[static_cast<size_t>(i)], i);
}

TEST(Loader, TwoLevelOrderKeepsEachWindowsShardsTogether) {
  // Shards of 300, 200, 0, 250, 250 samples (dataset indices 0-299, 300-499, none, 500-749, 750-999), W = 2:
  // windows are consecutive pairs of the shard permutation, and a window's positions hold exactly its shards' samples.
  const std::vector<int64_t> sizes = {300, 200, 0, 250, 250};
  const std::vector<int64_t> first = {0, 300, 500, 500, 750};
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    const EpochPlan plan = PretrainingLoader::epoch_plan(5, epoch, sizes, 2);
    ASSERT_EQ(plan.num_windows(), 3);
    EXPECT_EQ(plan.window_begin.back(), 1000);
    std::vector<int64_t> sorted = plan.shard_order;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, (std::vector<int64_t>{0, 1, 2, 3, 4}));
    const std::vector<int64_t> order = PretrainingLoader::epoch_order(5, epoch, sizes, 2);
    for (int64_t j = 0; j < 3; ++j) {
      std::set<int64_t> want, got;
      for (int64_t i = 2 * j; i < std::min<int64_t>(5, 2 * j + 2); ++i) {
        const int64_t s = plan.shard_order[static_cast<size_t>(i)];
        for (int64_t r = 0; r < sizes[static_cast<size_t>(s)]; ++r) want.insert(first[static_cast<size_t>(s)] + r);
      }
      for (int64_t q = plan.window_begin[static_cast<size_t>(j)]; q < plan.window_begin[static_cast<size_t>(j) + 1]; ++q) {
        got.insert(order[static_cast<size_t>(q)]);
        EXPECT_EQ(plan.window_of(q), j);
      }
      EXPECT_EQ(got, want) << "epoch " << epoch << " window " << j;
    }
  }
}

TEST(Loader, DynamicMaskingIsKeyedBySampleAndEpochNotByBatching) {
  auto vocab = test_vocab();
  auto collect = [&](int64_t B, int64_t A, int64_t R, int64_t rank, int micro_batches) {
    LoaderOptions o = options(B, A, R, rank);
    o.dynamic_masking = true;
    o.vocab = vocab;
    PretrainingLoader L(o);
    std::map<std::pair<int64_t, int64_t>, std::vector<double>> rows;  // (epoch, sample) -> ids ++ positions
    for (int i = 0; i < micro_batches; ++i) {
      PretrainingBatch b = L.next();
      for (int64_t r = 0; r < B; ++r) {
        std::vector<double> v;
        for (int64_t t = 0; t < kT; ++t) v.push_back(b.input_ids.get(r * kT + t));
        for (int64_t p = 0; p < kP; ++p) {
          v.push_back(b.masked_lm_positions.get(r * kP + p));
          v.push_back(b.masked_lm_ids.get(r * kP + p));
        }
        // Invariants: unmasked originals at the masked positions; [CLS]/[SEP] never masked; weights.
        const int64_t s = b.sample_index[static_cast<size_t>(r)];
        for (int64_t p = 0; p < kP; ++p) {
          const int64_t pos = static_cast<int64_t>(b.masked_lm_positions.get(r * kP + p));
          EXPECT_EQ(b.masked_lm_weights.get(r * kP + p), pos != 0 ? 1.0 : 0.0);
          if (pos == 1) {
            EXPECT_EQ(b.masked_lm_ids.get(r * kP + p), 100 + s);
          }
          if (pos != 0) {
            EXPECT_NE(b.masked_lm_ids.get(r * kP + p), 2);
            EXPECT_NE(b.masked_lm_ids.get(r * kP + p), 3);
            EXPECT_NE(b.masked_lm_ids.get(r * kP + p), 4);  // the stored [MASK] was undone
          }
        }
        rows[{b.epoch, s}] = v;
      }
    }
    return rows;
  };
  auto one = collect(2, 4, 1, 0, 60);  // 80 samples per epoch, so 60 micro-batches cross into epoch 1
  auto r0 = collect(2, 2, 2, 0, 30);
  auto r1 = collect(2, 2, 2, 1, 30);
  int compared = 0;
  for (const auto* part : {&r0, &r1})
    for (const auto& [key, v] : *part) {
      auto it = one.find(key);
      ASSERT_NE(it, one.end());
      EXPECT_EQ(it->second, v);
      ++compared;
    }
  EXPECT_EQ(compared, 120);
  // The same sample is masked differently in another epoch (for most samples).
  int differ = 0, both = 0;
  for (const auto& [key, v] : one)
    if (key.first == 0) {
      auto it = one.find({1, key.second});
      if (it == one.end()) continue;
      ++both;
      differ += it->second != v;
    }
  ASSERT_GT(both, 10);
  EXPECT_GT(differ, both / 2);
}

// The synthetic batches of `estimate` and `bench train`: create_pretraining_data's shapes and statistics.
TEST(SyntheticBatch, ShapedLikePretrainingInstances) {
  Rng rng(1, 1);
  const int64_t B = 16, T = 64, P = 10;
  const PretrainingBatch b = synthetic_pretraining_batch(B, T, P, 30522, rng);
  EXPECT_EQ(b.input_ids.shape(), Shape({B, T}));
  EXPECT_EQ(b.masked_lm_positions.shape(), Shape({B, P}));
  EXPECT_EQ(b.next_sentence_labels.shape(), Shape({B}));
  for (int64_t i = 0; i < B; ++i) {
    int64_t len = 0, seps = 0, masked = 0;
    for (int64_t j = 0; j < T; ++j) {
      len += static_cast<int64_t>(b.attention_mask.get(i * T + j));
      seps += b.input_ids.get(i * T + j) == 102;
    }
    EXPECT_GE(len, 3 * T / 4);
    EXPECT_EQ(b.input_ids.get(i * T), 101);
    EXPECT_EQ(b.input_ids.get(i * T + len - 1), 102);
    EXPECT_EQ(seps, 2);
    for (int64_t k = 0; k < P; ++k) {
      if (b.masked_lm_weights.get(i * P + k) == 0) continue;
      ++masked;
      const int64_t pos = static_cast<int64_t>(b.masked_lm_positions.get(i * P + k));
      EXPECT_EQ(b.input_ids.get(i * T + pos), 103);
      EXPECT_GE(b.masked_lm_ids.get(i * P + k), 1000);
    }
    EXPECT_EQ(masked, std::clamp<int64_t>(std::llround(0.15 * static_cast<double>(len)), 1, P));
  }
  Rng again(1, 1);
  EXPECT_EQ(synthetic_pretraining_batch(B, T, P, 30522, again).input_ids.to_vector(), b.input_ids.to_vector());
  EXPECT_THROW(synthetic_pretraining_batch(B, 4, P, 30522, again), Error);
  EXPECT_THROW(synthetic_pretraining_batch(B, T, P, 999, again), Error);
}

namespace {

// A shard directory of its own for one test (removed at the end).
struct TempShards {
  fs::path dir;
  TempShards(const std::string& name, const std::vector<int>& sizes) {
    dir = fs::temp_directory_path() / ("bertrain_loader_" + name + "_" + std::to_string(::getpid()));
    write_shards(dir, sizes);
  }
  ~TempShards() { fs::remove_all(dir); }
  LoaderOptions options(int64_t B, int64_t A, int64_t R, int64_t rank, int64_t W) const {
    LoaderOptions o;
    o.input_dir = dir.string();
    o.micro_batch_size = B;
    o.grad_accum_steps = A;
    o.world_size = R;
    o.rank = rank;
    o.window_shards = W;
    o.seed = 77;
    return o;
  }
};

}  // namespace

// CASES.md C41: shards of 10, 7 and 4 samples; 2 ranks x micro-batch 2 x accumulation 1 (global 4); 2 epochs.
TEST(Loader, C41UnequalShardsOverTwoRanks) {
  TempShards d("c41", {10, 7, 4});
  for (int64_t W : {1, 2, 4}) {
    SCOPED_TRACE("window_shards " + std::to_string(W));
    PretrainingLoader r0(d.options(2, 1, 2, 0, W)), r1(d.options(2, 1, 2, 1, W));
    PretrainingLoader one(d.options(4, 1, 1, 0, W));   // 1 rank x micro-batch 4
    PretrainingLoader acc(d.options(2, 2, 1, 0, W));   // 1 rank x micro-batch 2 x accumulation 2
    EXPECT_EQ(r0.num_samples(), 21);
    for (auto* L : {&r0, &r1, &one, &acc}) EXPECT_EQ(L->steps_per_epoch(), 5);  // 20 used, 1 left over
    std::vector<std::vector<int64_t>> epoch_seq(2);
    for (int64_t epoch = 0; epoch < 2; ++epoch) {
      std::set<int64_t> seen0, seen1;
      for (int64_t step = 0; step < 5; ++step) {
        const PretrainingBatch a = r0.next(), b = r1.next(), c = one.next(), m0 = acc.next(), m1 = acc.next();
        for (const auto* x : {&a, &b, &c, &m0, &m1}) {
          EXPECT_EQ(x->epoch, epoch);
          EXPECT_EQ(x->step, step);
        }
        seen0.insert(a.sample_index.begin(), a.sample_index.end());
        seen1.insert(b.sample_index.begin(), b.sample_index.end());
        std::multiset<int64_t> ranks(a.sample_index.begin(), a.sample_index.end());
        ranks.insert(b.sample_index.begin(), b.sample_index.end());
        EXPECT_EQ(ranks, std::multiset<int64_t>(c.sample_index.begin(), c.sample_index.end()));
        EXPECT_EQ(a.sample_index, m0.sample_index);  // block k = r*A + m
        EXPECT_EQ(b.sample_index, m1.sample_index);
        expect_same(a.input_ids, m0.input_ids);
        for (int r = 0; r < 2; ++r) {
          EXPECT_EQ(a.input_ids.get(r * kT + 1), 100 + a.sample_index[static_cast<size_t>(r)]);
          EXPECT_EQ(b.input_ids.get(r * kT + 1), 100 + b.sample_index[static_cast<size_t>(r)]);
        }
        epoch_seq[static_cast<size_t>(epoch)].insert(epoch_seq[static_cast<size_t>(epoch)].end(), c.sample_index.begin(),
                                                     c.sample_index.end());
      }
      EXPECT_EQ(seen0.size(), 10u);
      EXPECT_EQ(seen1.size(), 10u);
      for (int64_t s : seen0) EXPECT_EQ(seen1.count(s), 0u) << "sample " << s << " read by both ranks in epoch " << epoch;
      EXPECT_EQ(std::set<int64_t>(epoch_seq[static_cast<size_t>(epoch)].begin(), epoch_seq[static_cast<size_t>(epoch)].end()).size(), 20u);
    }
    EXPECT_NE(epoch_seq[0], epoch_seq[1]);  // epoch 2 uses another order
    EXPECT_EQ(r0.next().epoch, 2);           // and both ranks roll over after 5 steps
    EXPECT_EQ(r1.next().epoch, 2);
  }
}

TEST(Loader, ResumeAcrossWindowBoundariesAndWithAnotherRankCount) {
  // 52 samples in 5 shards, one shard per window: global batch 6, 8 steps per epoch, 2.5 epochs read.
  TempShards d("resume", {13, 9, 11, 7, 12});
  const std::vector<int64_t> sizes = {13, 9, 11, 7, 12};
  const std::vector<int64_t> offsets = {0, 13, 22, 33, 40, 52};
  auto shard_of = [&](int64_t s) { return std::upper_bound(offsets.begin(), offsets.end(), s) - offsets.begin() - 1; };
  std::vector<PretrainingBatch> straight;
  std::vector<LoaderCursor> cursors;
  {
    PretrainingLoader L(d.options(3, 2, 1, 0, 1));
    for (int i = 0; i < 40; ++i) {
      cursors.push_back(L.cursor());
      straight.push_back(L.next());
    }
  }
  int straddling = 0;
  for (const auto& b : straight) straddling += shard_of(b.sample_index.front()) != shard_of(b.sample_index.back());
  EXPECT_GT(straddling, 3);  // micro-batches that take rows from two windows
  for (int k = 1; k < 40; ++k) {
    SCOPED_TRACE("resumed before micro-batch " + std::to_string(k));
    const LoaderCursor c = LoaderCursor::from_json(cursors[static_cast<size_t>(k)].to_json());
    EXPECT_EQ(c.micro, k % 2);
    PretrainingLoader same(d.options(3, 2, 1, 0, 1), c);
    for (int i = k; i < std::min(40, k + 7); ++i) expect_same(same.next(), straight[static_cast<size_t>(i)]);
    if (k % 2 != 0) continue;
    // A step boundary: the cursor means the same with 2 ranks x 1 micro-batch (same global batch).
    PretrainingLoader r0(d.options(3, 1, 2, 0, 1), c), r1(d.options(3, 1, 2, 1, 1), c);
    for (int i = k; i + 1 < std::min(40, k + 8); i += 2) {
      EXPECT_EQ(r0.next().sample_index, straight[static_cast<size_t>(i)].sample_index);
      EXPECT_EQ(r1.next().sample_index, straight[static_cast<size_t>(i) + 1].sample_index);
    }
  }
}

TEST(Loader, MemoryHoldsAFewWindowsOfThisRanksRows) {
  TempShards d("memory", std::vector<int>(12, 20));  // 240 samples, windows of 2 shards (40 samples)
  const int64_t row_bytes = 6 * kT + 8 * kP + 1, all = 240 * row_bytes;
  int64_t peak1 = 0;
  {
    PretrainingLoader L(d.options(4, 1, 1, 0, 2));
    for (int i = 0; i < 2 * 60; ++i) L.next();
    peak1 = L.peak_window_bytes();
    EXPECT_GE(peak1, 40 * row_bytes);
    EXPECT_LE(peak1, 3 * 40 * (row_bytes + 12));  // at most three windows' rows (+ their order and slot tables)
    EXPECT_LT(peak1, all / 2);
  }
  PretrainingLoader r1(d.options(2, 1, 2, 1, 2));  // 2 ranks: each keeps only its half of a window's rows
  for (int i = 0; i < 2 * 60; ++i) r1.next();
  EXPECT_LT(r1.peak_window_bytes(), peak1 * 3 / 4);
}

TEST(Loader, ShardLostMidRunIsAnErrorNamingTheFile) {
  for (const std::string how : {"missing", "truncated", "garbage"}) {
    for (int64_t prefetch : {0, 4}) {
      SCOPED_TRACE(how + " prefetch " + std::to_string(prefetch));
      TempShards d("lost_" + how, {20, 20, 20, 20});
      LoaderOptions o = d.options(4, 1, 1, 0, 1);
      o.prefetch = prefetch;
      const EpochPlan plan = PretrainingLoader::epoch_plan(o.seed, 0, {20, 20, 20, 20}, 1);
      char name[64];
      std::snprintf(name, sizeof name, "part-%05lld-training.hdf5", static_cast<long long>(plan.shard_order[3]));
      const fs::path victim = d.dir / name;
      PretrainingLoader L(o);
      L.next();  // window 0 (and, prefetching, window 1) read; window 3 is read after 15 micro-batches
      if (how == "missing") fs::remove(victim);
      if (how == "truncated") fs::resize_file(victim, fs::file_size(victim) / 2);
      if (how == "garbage") std::ofstream(victim, std::ios::binary | std::ios::trunc) << std::string(4096, 'x');
      int read = 1;
      try {
        for (; read < 20; ++read) L.next();
        ADD_FAILURE() << "no error";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(victim.string()), std::string::npos) << e.what();
        EXPECT_EQ(read, 15) << e.what();
      }
    }
  }
}
