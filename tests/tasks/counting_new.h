// counting_new.h: the largest single operator-new request of the test program since the last reset
// (counting_new.cpp replaces the global operator new and delete). Linked into resource_limits_test only.
#pragma once

#include <cstddef>

namespace bertrain::test {

/// Bytes of the largest single operator-new request since reset_largest_new().
size_t largest_new();
void reset_largest_new();

}  // namespace bertrain::test
