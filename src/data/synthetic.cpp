// synthetic.cpp: synthetic pretraining batches (see synthetic.h).
#include "bertrain/data/synthetic.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "bertrain/core/error.h"

namespace bertrain::data {

PretrainingBatch synthetic_pretraining_batch(int64_t B, int64_t T, int64_t P, int64_t vocab_size, Rng& rng) {
  const int32_t cls = 101, sep = 102, mask_id = 103, first_word = 1000;
  BERTRAIN_CHECK(B >= 1 && T >= 8 && P >= 1, "synthetic batch: need B >= 1, T >= 8, P >= 1, got B=", B, " T=", T,
                 " P=", P);
  BERTRAIN_CHECK(vocab_size > first_word, "synthetic batch: vocab_size must exceed ", first_word, ", got ", vocab_size);
  std::vector<int32_t> ids(B * T, 0), seg(B * T, 0), mask(B * T, 0), pos(B * P, 0), lm_ids(B * P, 0), nsp(B);
  std::vector<float> w(B * P, 0.0f);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = T - static_cast<int64_t>(rng.randint(static_cast<uint64_t>(T / 4 + 1)));
    const int64_t split = 2 + static_cast<int64_t>(rng.randint(static_cast<uint64_t>(len - 4)));  // first [SEP]
    int32_t* row = &ids[b * T];
    for (int64_t i = 0; i < len; ++i) {
      row[i] = first_word + static_cast<int32_t>(rng.randint(static_cast<uint64_t>(vocab_size - first_word)));
      mask[b * T + i] = 1;
      seg[b * T + i] = i > split ? 1 : 0;
    }
    row[0] = cls;
    row[split] = sep;
    row[len - 1] = sep;
    std::vector<int64_t> cand;
    for (int64_t i = 1; i < len - 1; ++i)
      if (i != split) cand.push_back(i);
    const int64_t n = std::clamp<int64_t>(std::llround(0.15 * static_cast<double>(len)), 1, P);
    for (int64_t k = 0; k < n; ++k) {  // partial Fisher-Yates: n distinct positions
      const int64_t j = k + static_cast<int64_t>(rng.randint(static_cast<uint64_t>(cand.size() - k)));
      std::swap(cand[k], cand[j]);
    }
    std::sort(cand.begin(), cand.begin() + n);
    for (int64_t k = 0; k < n; ++k) {
      pos[b * P + k] = static_cast<int32_t>(cand[k]);
      lm_ids[b * P + k] = row[cand[k]];
      w[b * P + k] = 1.0f;
      row[cand[k]] = mask_id;
    }
    nsp[b] = static_cast<int32_t>(rng.randint(2));
  }
  PretrainingBatch batch;
  batch.input_ids = Tensor::from_data(ids.data(), {B, T});
  batch.token_type_ids = Tensor::from_data(seg.data(), {B, T});
  batch.attention_mask = Tensor::from_data(mask.data(), {B, T});
  batch.masked_lm_positions = Tensor::from_data(pos.data(), {B, P});
  batch.masked_lm_ids = Tensor::from_data(lm_ids.data(), {B, P});
  batch.masked_lm_weights = Tensor::from_data(w.data(), {B, P});
  batch.next_sentence_labels = Tensor::from_data(nsp.data(), {B});
  batch.sample_index.resize(static_cast<size_t>(B));
  std::iota(batch.sample_index.begin(), batch.sample_index.end(), 0);
  return batch;
}

}  // namespace bertrain::data
