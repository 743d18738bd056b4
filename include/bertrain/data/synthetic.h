// synthetic.h: synthetic pretraining batches, for timing training steps without shards (`bertrain estimate`,
// `bertrain bench train`): the shapes and statistics of create_pretraining_data's output, random content.
#pragma once

#include <cstdint>

#include "bertrain/core/rng.h"
#include "bertrain/data/loader.h"

namespace bertrain::data {

/// B rows of length T shaped like create_pretraining_data's instances in the bert-base-uncased vocab layout
/// ([CLS] 101, [SEP] 102, [MASK] 103, words from id 1000): [CLS] A [SEP] B [SEP] with random word-piece ids, a
/// length drawn uniformly from [3T/4, T] followed by a padded tail (id 0, mask 0), segment ids 0 then 1;
/// round(0.15 * length) of the real tokens (at least 1, at most P) masked at distinct random positions other than
/// [CLS] and [SEP] (replaced by [MASK], positions sorted), prediction slots beyond them padded with weight 0;
/// random next-sentence labels. sample_index is 0..B-1, the other loader fields 0.
/// Throws bertrain::Error when B < 1, T < 8, P < 1 or vocab_size <= 1000.
PretrainingBatch synthetic_pretraining_batch(int64_t B, int64_t T, int64_t P, int64_t vocab_size, Rng& rng);

}  // namespace bertrain::data
