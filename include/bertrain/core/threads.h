// threads.h: the number of threads bertrain's own kernels and oneDNN use (OpenMP underneath).
#pragma once

namespace bertrain {

/// Sets the thread count for bertrain's kernels and oneDNN (omp_set_num_threads). n >= 1, or throws.
void set_num_threads(int n);
/// The current thread count (OMP_NUM_THREADS or all cores by default).
int num_threads();

}  // namespace bertrain
