// batching.cpp: dynamic padding and length-sorted evaluation order (see batching.h).
#include "bertrain/tasks/batching.h"

#include <algorithm>
#include <numeric>

#include "bertrain/core/error.h"

namespace bertrain::tasks {

int64_t batch_seq_length(int64_t longest, int64_t max_seq_length, const PaddingOptions& o) {
  BERTRAIN_CHECK(longest >= 1 && longest <= max_seq_length, "batch padding: the longest example has ", longest,
                 " tokens, expected 1..max_seq_length (", max_seq_length, ")");
  BERTRAIN_CHECK(o.pad_to_multiple_of >= 1, "--pad_to_multiple_of must be >= 1, got ", o.pad_to_multiple_of);
  if (o.pad_to_max_length) return max_seq_length;
  const int64_t m = o.pad_to_multiple_of;
  return std::min(max_seq_length, (longest + m - 1) / m * m);
}

int32_t real_length(std::span<const int32_t> input_mask) {
  size_t n = input_mask.size();
  while (n > 0 && input_mask[n - 1] == 0) --n;
  return static_cast<int32_t>(n);
}

std::vector<int64_t> length_sorted_order(std::span<const int32_t> lengths) {
  std::vector<int64_t> order(lengths.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return lengths[a] > lengths[b]; });
  return order;
}

}  // namespace bertrain::tasks
