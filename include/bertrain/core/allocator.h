// allocator.h: the caching allocator behind every Tensor. Freed blocks are kept in per-size-class free
// lists and handed out again, so a steady-state training step does not call malloc for activations
// (the same idea as PyTorch's CUDACachingAllocator, on the CPU).
#pragma once

#include <cstddef>
#include <cstdint>

namespace bertrain {

/// Allocation statistics, in bytes (requested sizes rounded up to the size class).
struct AllocatorStats {
  int64_t bytes_in_use = 0;       ///< held by live tensors now
  int64_t peak_bytes_in_use = 0;  ///< maximum of bytes_in_use since start or reset_peak()
  int64_t bytes_cached = 0;       ///< freed blocks kept for reuse
  int64_t system_allocs = 0;      ///< calls that went to the system allocator
  int64_t cache_hits = 0;         ///< allocations served from the cache
};

/// Process-wide caching allocator. Thread-safe. Every block is 64-byte aligned.
class CachingAllocator {
 public:
  static CachingAllocator& instance();
  /// Returns a 64-byte aligned block of at least `bytes` bytes. Throws bertrain::Error when the
  /// system is out of memory (after releasing the cache once and retrying).
  void* allocate(size_t bytes);
  /// Returns a block from allocate() to the cache.
  void deallocate(void* p);
  AllocatorStats stats() const;
  void reset_peak();
  /// Gives every cached block back to the system.
  void release_cache();
  /// The size class a request of `bytes` is rounded up to: multiples of 64 below 4 KiB, then four
  /// classes per power of two (at most 25% waste).
  static size_t size_class(size_t bytes);

 private:
  CachingAllocator() = default;
  ~CachingAllocator();
  struct Impl;
  Impl* impl();
};

}  // namespace bertrain
