// counting_new.cpp: replaces the global operator new and delete to record the largest single request
// (counting_new.h). In a translation unit of its own: inlined beside callers of new, GCC 12 takes these
// malloc/free bodies for a mismatched pair and warns (-Wmismatched-new-delete).
#include "counting_new.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<size_t> g_largest_new{0};
}

namespace bertrain::test {
size_t largest_new() { return g_largest_new.load(); }
void reset_largest_new() { g_largest_new = 0; }
}  // namespace bertrain::test

void* operator new(size_t n) {
  size_t prev = g_largest_new.load(std::memory_order_relaxed);
  while (n > prev && !g_largest_new.compare_exchange_weak(prev, n, std::memory_order_relaxed)) {
  }
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
