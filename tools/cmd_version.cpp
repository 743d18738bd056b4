// cmd_version.cpp: `bertrain info`: version, threads, the oneDNN build in use, whether --bf16 is native, and the
// measured fp32 FMA and bf16 dot-product peaks (whether --bf16 can pay on this CPU at all).
#include <oneapi/dnnl/dnnl.hpp>
#include <spdlog/spdlog.h>

#include <iostream>

#include "bertrain/core/threads.h"
#include "bertrain/core/cpu_peak.h"
#include "bertrain/ops/ops.h"
#include "commands.h"

namespace bertrain::cli {
namespace {
Registrar reg{{"info", "print the version, thread count and oneDNN version", [](CLI::App&) {
                 return std::function<int()>([] {
                   const dnnl_version_t* v = dnnl_version();
                   std::cout << version_line() << "\nthreads " << num_threads() << "\noneDNN "
                             << v->major << "." << v->minor << "." << v->patch << " (cpu runtime "
                             << (v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other") << ")\nbf16 matmuls (--bf16) "
                             << (matmul_bf16_native()      ? "native (AVX512_BF16)"
                                 : matmul_bf16_supported() ? "emulated by oneDNN (slower than f32)"
                                                           : "unavailable (needs AVX-512)")
                             << "\n";
                   // A CPU whose VDPBF16PS has half the throughput of its fp32 FMAs (Intel Sapphire/Emerald Rapids
                   // without AMX, e.g. a VM that hides AMX) makes --bf16 slower, however good the kernels.
                   const Bf16Outlook o = measure_bf16_outlook(0.1);
                   std::cout << "peak fp32 " << static_cast<int64_t>(o.fp32_gflops) << " GFLOP/s (FMA loop)";
                   if (matmul_bf16_native() && o.bf16_gflops > 0)
                     std::cout << ", bf16 " << static_cast<int64_t>(o.bf16_gflops) << " GFLOP/s (VDPBF16PS loop): --bf16 "
                               << (o.can_pay ? "can pay here" : "cannot pay here (its peak is not above fp32's)");
                   std::cout << "\n";
                   return 0;
                 });
               }}};
}  // namespace
}  // namespace bertrain::cli
