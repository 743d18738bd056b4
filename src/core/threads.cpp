// threads.cpp: OpenMP thread count; oneDNN (Debian's build uses OpenMP) follows it.
#include "bertrain/core/threads.h"

#include <omp.h>

#include "bertrain/core/error.h"

namespace bertrain {

void set_num_threads(int n) {
  BERTRAIN_CHECK(n >= 1, "num_threads must be at least 1, got ", n);
  omp_set_num_threads(n);
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace bertrain
