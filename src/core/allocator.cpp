// allocator.cpp: size-class free lists under one mutex. Cheap enough: a training step allocates a few
// hundred tensors, each of which is tens of kilobytes or more.
#include "bertrain/core/allocator.h"

#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "bertrain/core/error.h"

namespace bertrain {

struct CachingAllocator::Impl {
  std::mutex mu;
  std::unordered_map<size_t, std::vector<void*>> free_lists;  // size class -> blocks
  std::unordered_map<void*, size_t> live;                     // block -> size class
  AllocatorStats st;
};

CachingAllocator& CachingAllocator::instance() {
  static CachingAllocator* a = new CachingAllocator();  // never destroyed: tensors may outlive statics
  return *a;
}

CachingAllocator::~CachingAllocator() = default;

CachingAllocator::Impl* CachingAllocator::impl() {
  static Impl* i = new Impl();
  return i;
}

size_t CachingAllocator::size_class(size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (bytes <= 4096) return (bytes + 63) & ~size_t{63};
  size_t p = 4096;
  while (p * 2 < bytes) p *= 2;
  // p < bytes <= 2p: four classes p*5/4, p*6/4, p*7/4, 2p
  size_t step = p / 4;
  return ((bytes + step - 1) / step) * step;
}

void* CachingAllocator::allocate(size_t bytes) {
  Impl* m = impl();
  size_t cls = size_class(bytes);
  {
    std::lock_guard<std::mutex> g(m->mu);
    auto it = m->free_lists.find(cls);
    if (it != m->free_lists.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      m->live[p] = cls;
      m->st.bytes_cached -= static_cast<int64_t>(cls);
      m->st.bytes_in_use += static_cast<int64_t>(cls);
      m->st.cache_hits++;
      if (m->st.bytes_in_use > m->st.peak_bytes_in_use) m->st.peak_bytes_in_use = m->st.bytes_in_use;
      return p;
    }
  }
  void* p = std::aligned_alloc(64, cls);
  if (!p) {
    release_cache();
    p = std::aligned_alloc(64, cls);
  }
  BERTRAIN_CHECK(p != nullptr, "out of memory: could not allocate ", cls, " bytes");
  std::lock_guard<std::mutex> g(m->mu);
  m->live[p] = cls;
  m->st.system_allocs++;
  m->st.bytes_in_use += static_cast<int64_t>(cls);
  if (m->st.bytes_in_use > m->st.peak_bytes_in_use) m->st.peak_bytes_in_use = m->st.bytes_in_use;
  return p;
}

void CachingAllocator::deallocate(void* p) {
  if (!p) return;
  Impl* m = impl();
  std::lock_guard<std::mutex> g(m->mu);
  auto it = m->live.find(p);
  BERTRAIN_ASSERT(it != m->live.end(), "deallocate of a block this allocator does not own");
  size_t cls = it->second;
  m->live.erase(it);
  m->free_lists[cls].push_back(p);
  m->st.bytes_in_use -= static_cast<int64_t>(cls);
  m->st.bytes_cached += static_cast<int64_t>(cls);
}

AllocatorStats CachingAllocator::stats() const {
  Impl* m = const_cast<CachingAllocator*>(this)->impl();
  std::lock_guard<std::mutex> g(m->mu);
  return m->st;
}

void CachingAllocator::reset_peak() {
  Impl* m = impl();
  std::lock_guard<std::mutex> g(m->mu);
  m->st.peak_bytes_in_use = m->st.bytes_in_use;
}

void CachingAllocator::release_cache() {
  Impl* m = impl();
  std::lock_guard<std::mutex> g(m->mu);
  for (auto& [cls, blocks] : m->free_lists) {
    for (void* p : blocks) std::free(p);
    m->st.bytes_cached -= static_cast<int64_t>(cls * blocks.size());
    blocks.clear();
  }
}

}  // namespace bertrain
