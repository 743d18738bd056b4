// cmd_version.cpp: `bertrain info`: version, threads, the oneDNN build in use, whether --bf16 is native, and the
// measured fp32 FMA and bf16 dot-product peaks (whether --bf16 can pay on this CPU at all).
#include <oneapi/dnnl/dnnl.hpp>
#include <spdlog/spdlog.h>

#include <iostream>

#include "bertrain/core/threads.h"
#include "bertrain/core/version.h"
#include "bench/bench_util.h"
#include "bertrain/ops/ops.h"
#include "commands.h"

namespace bertrain::cli {
namespace {
Registrar reg{{"info", "print the version, thread count and oneDNN version", [](CLI::App&) {
                 return std::function<int()>([] {
                   const dnnl_version_t* v = dnnl_version();
                   std::cout << "bertrain " << BERTRAIN_VERSION << "\nthreads " << num_threads() << "\noneDNN "
                             << v->major << "." << v->minor << "." << v->patch << " (cpu runtime "
                             << (v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other") << ")\nbf16 matmuls (--bf16) "
                             << (matmul_bf16_native()      ? "native (AVX512_BF16)"
                                 : matmul_bf16_supported() ? "emulated by oneDNN (slower than f32)"
                                                           : "unavailable (needs AVX-512)")
                             << "\n";
                   // A CPU whose VDPBF16PS has half the throughput of its fp32 FMAs (Intel Sapphire/Emerald Rapids
                   // without AMX, e.g. a VM that hides AMX) makes --bf16 slower, however good the kernels.
                   const double fp32 = measure_fma_peak(0.1).gflops;
                   const double bf16 = matmul_bf16_native() ? measure_bf16_dot_peak(0.1) : 0.0;
                   std::cout << "peak fp32 " << static_cast<int64_t>(fp32) << " GFLOP/s (FMA loop)";
                   if (bf16 > 0)
                     std::cout << ", bf16 " << static_cast<int64_t>(bf16) << " GFLOP/s (VDPBF16PS loop): --bf16 "
                               << (bf16 >= 1.5 * fp32 ? "can pay here" : "cannot pay here (its peak is not above fp32's)");
                   std::cout << "\n";
                   return 0;
                 });
               }}};
}  // namespace
}  // namespace bertrain::cli
