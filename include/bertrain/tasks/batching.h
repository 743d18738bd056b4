// batching.h: how finetuning tasks cut their features into batches: dynamic padding (each batch padded to its
// longest example, rounded up to a multiple the kernels like) and length-sorted batches for evaluation and
// prediction, with the outputs put back in input order. Shared by glue, squad and ner.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace bertrain::tasks {

/// Batch padding (Hugging Face's DataCollatorWithPadding / run_glue.py flags). pad_to_max_length: every batch
/// is max_seq_length long (google-research/bert's run_classifier.py, and bertrain before dynamic padding). Otherwise
/// each batch is padded to its longest example rounded up to pad_to_multiple_of (at most max_seq_length).
struct PaddingOptions {
  bool pad_to_max_length = false;
  /// 8 was measured best on this machine's oneDNN kernels (README "Dynamic padding"); 1: no rounding.
  int64_t pad_to_multiple_of = 8;
};

/// The sequence length T of a batch whose longest example has `longest` real tokens: max_seq_length when
/// options.pad_to_max_length, else longest rounded up to a multiple of options.pad_to_multiple_of, capped at
/// max_seq_length. Throws bertrain::Error when longest is outside [1, max_seq_length] or the multiple < 1.
int64_t batch_seq_length(int64_t longest, int64_t max_seq_length, const PaddingOptions& options);

/// Real tokens of one padded example: one past its last position whose input_mask is not 0 (0 for all-zero).
int32_t real_length(std::span<const int32_t> input_mask);

/// Indices 0..n-1 ordered by lengths[i], longest first, equal lengths in index order (a stable sort), so
/// evaluation and prediction batches hold examples of similar length. outputs[order[k]] = result k puts the
/// results back in input order.
std::vector<int64_t> length_sorted_order(std::span<const int32_t> lengths);

}  // namespace bertrain::tasks
