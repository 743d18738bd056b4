// data_loader_test.cpp: the pretraining loader: exact resume from a saved cursor, rank/micro-batch dealing
// equivalence, loss weights (CASES.md C10), dynamic masking keyed by (seed, epoch, sample).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
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

// Two shards (50 + 37 samples). Sample s (in file order) has input_ids[1] == 100 + s (unmasked) so rows can
// be traced back; each has 2 masked positions.
struct ShardDir {
  fs::path dir;
  ShardDir() {
    dir = fs::temp_directory_path() / ("bertrain_loader_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    Rng rng(3);
    int64_t s = 0;
    for (int shard = 0; shard < 2; ++shard) {
      PretrainingFeatures f(kT, kP);
      for (int i = 0; i < (shard == 0 ? 50 : 37); ++i, ++s) {
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
      write_pretraining_shard((dir / ("part-0000" + std::to_string(shard) + "-training.hdf5")).string(), f);
    }
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
  EXPECT_EQ(c.epoch, 1);
  EXPECT_EQ(c.position, 7);
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
  far.position = 1000;
  EXPECT_THROW(PretrainingLoader(options(4, 2), far), Error);
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
  auto a = PretrainingLoader::epoch_order(5, 0, 1000);
  auto b = PretrainingLoader::epoch_order(5, 1, 1000);
  auto c = PretrainingLoader::epoch_order(6, 0, 1000);
  EXPECT_EQ(a, PretrainingLoader::epoch_order(5, 0, 1000));
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
  std::vector<int64_t> s = a;
  std::sort(s.begin(), s.end());
  for (int64_t i = 0; i < 1000; ++i) EXPECT_EQ(s[static_cast<size_t>(i)], i);
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
